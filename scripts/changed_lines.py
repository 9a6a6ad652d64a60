#!/usr/bin/env python3
"""Prints clang-tidy's -line-filter JSON for the lines `git diff -U0 BASE -- FILES` adds or
changes: [{"name": "/abs/path", "lines": [[first, last], ...]}, ...]. Used by lint.sh so that
a change is held to the checks on the lines it touches, not on the code around them."""
import json
import os
import re
import subprocess
import sys


def main():
    base, files = sys.argv[1], sys.argv[2:]
    diff = subprocess.run(["git", "diff", "-U0", "--no-color", base, "--", *files],
                          check=True, capture_output=True, text=True).stdout
    ranges, name = {}, None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:]
            name = os.path.abspath(path[2:]) if path.startswith("b/") else None
        elif line.startswith("@@") and name:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            first, count = int(m.group(1)), int(m.group(2) or "1")
            if count > 0:
                ranges.setdefault(name, []).append([first, first + count - 1])
    # A file with no added line (only removals) still needs an entry, or clang-tidy would
    # check all of it: a line past any file's end matches nothing (clang-tidy refuses line 0).
    for f in files:
        ranges.setdefault(os.path.abspath(f), [[1 << 30, 1 << 30]])
    print(json.dumps([{"name": n, "lines": r} for n, r in sorted(ranges.items())]))


if __name__ == "__main__":
    main()
