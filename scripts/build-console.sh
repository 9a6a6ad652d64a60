#!/bin/sh
# Bundles the web console: web/console's npm packages (from its lockfile, installed when
# missing or older than the lockfile) and esbuild write index.html, app.js and app.css to OUT.
# Called by the build (src/console/CMakeLists.txt).
set -eu
src=$1
out=$2
cd "$src"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node build.mjs "$out"
