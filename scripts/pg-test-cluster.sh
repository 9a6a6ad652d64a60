#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, from Debian's postgresql package.
#
#   pg-test-cluster.sh start          creates and starts one; prints SPACE_TEST_PG_DIR=... and
#                                     SPACE_TEST_PG_URL=... lines (eval-able)
#   pg-test-cluster.sh stop DIR       stops it and removes DIR
#   pg-test-cluster.sh run -- CMD...  start, run CMD with both variables exported, stop (also on
#                                     failure or Ctrl-C); exits with CMD's status
#
# The cluster lives in a fresh temp dir and listens only on a unix socket inside it (no TCP
# port, so nothing to collide with and nothing reachable from outside). fsync is off: the data
# is thrown away. PostgreSQL refuses to run as root, so as root it runs as the `postgres` user.
set -euo pipefail

die() { echo "pg-test-cluster: $*" >&2; exit 1; }

pg_bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] || die "no /usr/lib/postgresql/<version>/bin/initdb (apt-get install postgresql)"
  echo "$dir"
}

# Runs a PostgreSQL program as the cluster's owner, from a directory that owner can read.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

cmd_start() {
  local bin dir
  bin=$(pg_bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/space-pg.XXXXXX")
  # The socket path must stay under the kernel's 107-byte sun_path limit.
  [ ${#dir} -lt 80 ] || die "temp dir path too long for a unix socket: $dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "no postgres user (apt-get install postgresql)"
    chown postgres: "$dir"
  fi
  # Others may reach the socket inside (not list the dir): `space server`, started as root,
  # serves as nobody and connects after dropping root.
  chmod 711 "$dir"
  if ! as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N \
      >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    rm -rf "$dir"
    die "initdb failed"
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses='' -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null; then
    cat "$dir/server.log" >&2 || true
    rm -rf "$dir"
    die "pg_ctl start failed"
  fi
  # The test database sorts text linguistically (ICU en-US, as many production databases do),
  # so a query that relies on bytewise order, as SQLite's is, fails the tests here too.
  if ! "$bin/psql" -q -X -h "$dir" -U postgres -d postgres -v ON_ERROR_STOP=1 -c \
      "CREATE DATABASE space_test TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'" \
      >"$dir/createdb.log" 2>&1; then
    cat "$dir/createdb.log" >&2
    cmd_stop "$dir"
    die "create database failed"
  fi
  echo "SPACE_TEST_PG_DIR=$dir"
  echo "SPACE_TEST_PG_URL=postgresql://postgres@/space_test?host=$dir"
}

cmd_stop() {
  local dir=${1:-}
  [ -n "$dir" ] || die "usage: $0 stop DIR"
  [ -d "$dir/data" ] || { rm -rf "$dir"; return 0; }
  # immediate: the data is thrown away, so there is nothing to checkpoint.
  as_owner "$(pg_bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

cmd_run() {
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "usage: $0 run -- CMD..."
  local out
  out=$(cmd_start)
  export SPACE_TEST_PG_DIR SPACE_TEST_PG_URL
  SPACE_TEST_PG_DIR=$(sed -n 's/^SPACE_TEST_PG_DIR=//p' <<<"$out")
  SPACE_TEST_PG_URL=$(sed -n 's/^SPACE_TEST_PG_URL=//p' <<<"$out")
  trap 'cmd_stop "$SPACE_TEST_PG_DIR"' EXIT
  trap 'exit 130' INT TERM
  local rc=0
  "$@" || rc=$?
  exit "$rc"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) shift; cmd_stop "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) die "usage: $0 start | stop DIR | run -- CMD..." ;;
esac
