#!/usr/bin/env bash
# The main job: sets up what is missing, builds, and runs the benchmark on its default operator and
# shape. With a GPU: Neptune's kernels and their timings; without one: the CPU path and its check.
# Usage: scripts/bench.sh [OP] [B,S]   (default: prefill_global 1,8192). Safe to repeat.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
op=${1:-prefill_global}
shape=${2:-1,8192}
scripts/setup.sh
build=${NEPTUNE_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=enabled -Dwerror=true
ninja -C "$build" apps/neptune_bench/neptune_bench
bench="$build/apps/neptune_bench/neptune_bench"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  "$bench" profile "$op" "$shape"
else
  echo "No GPU here: running the CPU path and its check."
  "$bench" check "$op" "$shape"
fi
