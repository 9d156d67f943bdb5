#!/usr/bin/env bash
# Sets up what is missing, builds, and runs the whole default test suite.
# Extra arguments go to `meson test` (e.g. --suite unit). Safe to repeat.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
build=${NEPTUNE_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=enabled -Dwerror=true
ninja -C "$build"
meson test -C "$build" --print-errorlogs "$@"
