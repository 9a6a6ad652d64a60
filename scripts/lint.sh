#!/usr/bin/env bash
# `make lint`: clang-tidy (.clang-tidy) and clang-format (.clang-format) on the C++ lines that
# differ from a base: LINT_BASE when set, else origin/main, else HEAD~1 (the working tree's
# changes included). A change is held to both on the lines it adds or changes (a new file: all
# of it), so code older than the two configs meets them as it is touched. Files given as
# arguments are linted whole instead.
#
# clang-tidy uses $BUILD_DIR/compile_commands.json (configured here when absent). A changed
# header is checked through its own foo.cc, and only its own diagnostics count; a file with
# no compile command (a fuzz target outside the default build) gets clang-format only.
# Exits 0 when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
CLANG_FORMAT_DIFF=${CLANG_FORMAT_DIFF:-clang-format-diff}

if [ $# -gt 0 ]; then
  mapfile -t files < <(printf '%s\n' "$@")
  what="named files"
else
  if [ -n "${LINT_BASE:-}" ]; then
    base=$LINT_BASE
  elif git rev-parse -q --verify origin/main >/dev/null; then
    base=origin/main
  elif git rev-parse -q --verify HEAD~1 >/dev/null; then
    base=HEAD~1
  else
    base=$(git hash-object -t tree /dev/null)  # a single commit: every file is new
  fi
  merge_base=$(git merge-base "$base" HEAD 2>/dev/null || git rev-parse "$base")
  mapfile -t files < <(git diff --name-only --diff-filter=ACMRT "$merge_base" -- \
    '*.cc' '*.h' '*.cpp' '*.hpp')
  what="C++ files changed since $base"
fi

if [ ${#files[@]} -eq 0 ]; then
  echo "lint: no $what"
  exit 0
fi
echo "lint: ${#files[@]} $what: ${files[*]}"
failed=0

# clang-format: the changed lines (clang-format-diff), or whole named files.
if [ -n "${merge_base:-}" ]; then
  reformat=$(git diff -U0 --no-color "$merge_base" -- "${files[@]}" | "$CLANG_FORMAT_DIFF" -p1 -style=file || true)
  if [ -n "$reformat" ]; then
    printf '%s\n' "$reformat"
    echo "lint: clang-format would change the lines above" >&2
    failed=1
  fi
elif ! "$CLANG_FORMAT" --dry-run -Werror "${files[@]}"; then
  echo "lint: clang-format would reformat the above (clang-format -i FILE)" >&2
  failed=1
fi
# clang-tidy reports only on the changed lines (all of a named file).
line_filter='[]'
if [ -n "${merge_base:-}" ]; then
  line_filter=$(python3 scripts/changed_lines.py "$merge_base" "${files[@]}")
fi

# clang-tidy: each changed source, and the source of each changed header.
db=$BUILD_DIR/compile_commands.json
if [ ! -f "$db" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
in_db() { grep -qF "\"file\": \"$PWD/$1\"" "$db"; }
units=()
headers=()
for f in "${files[@]}"; do
  case "$f" in
    *.h | *.hpp)
      headers+=("$f")
      src="${f%.*}.cc"
      if in_db "$src"; then
        units+=("$src")
      else
        echo "lint: $f: no $src in $db; clang-format only (and as included by a changed source)"
      fi
      ;;
    *)
      if in_db "$f"; then
        units+=("$f")
      else
        echo "lint: $f: not in $db; clang-format only"
      fi
      ;;
  esac
done
mapfile -t units < <(printf '%s\n' "${units[@]+"${units[@]}"}" | sed '/^$/d' | sort -u)

if [ ${#units[@]} -gt 0 ]; then
  # Diagnostics in headers count only for the changed headers: an untouched header's old
  # findings are not this change's to fix.
  header_filter='^$'
  if [ ${#headers[@]} -gt 0 ]; then
    header_filter="^$PWD/($(printf '%s\n' "${headers[@]}" | sed 's/[.+]/\\&/g' | paste -sd'|'))\$"
  fi
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
  # gcc's warning flags in the compile commands are unknown to clang.
  printf '%s\n' "${units[@]}" | xargs -P "$JOBS" -I{} sh -c '
    log="$1/$(echo "$2" | tr / _).log"
    filter=""
    [ "$6" != "[]" ] && filter="-line-filter=$6"
    if ! "$3" -quiet -p "$4" --header-filter="$5" ${filter:+"$filter"} --extra-arg=-Wno-unknown-warning-option "$2" >"$log" 2>&1; then
      echo "$2" >>"$1/failed"
    fi' _ "$logs" {} "$CLANG_TIDY" "$BUILD_DIR" "$header_filter" "$line_filter"
  for u in "${units[@]}"; do
    log="$logs/$(echo "$u" | tr / _).log"
    # clang-tidy counts the warnings it suppressed on stderr; that count is no finding.
    grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers' \
      "$log" || true
  done
  if [ -f "$logs/failed" ]; then
    echo "lint: clang-tidy found problems in: $(sort "$logs/failed" | paste -sd' ')" >&2
    failed=1
  fi
fi

if [ $failed -ne 0 ]; then
  exit 1
fi
echo "lint: ok"
