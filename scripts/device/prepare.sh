#!/usr/bin/env bash
# Packs what a run on the H200 machine needs into .devrun/ (git-ignored; carried by the device tool):
# the built binaries (the generator tests' AOT libraries are linked in) and libHalide.so, xz-compressed (165 MB does not fit a call's 64 MiB; 46 MB does).
# `prepare.sh aot` packs into .devrun-aot/ only the programs that link AOT libraries and no libHalide
# (the family apps, lessons 9 and 10, the generator tests: a few MB); scripts/device/apps_check.sh
# runs the apps and lessons from either folder (DEVRUN=.devrun-aot).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${NEPTUNE_BUILD_DIR:-build}
aot=("$build"/test/generator/test_generator_gpu_* "$build"/test/generator/test_generator_aot_extern
     "$build"/tutorials/lesson_09_generator "$build"/tutorials/lesson_10_custom_score_modifier
     "$build"/apps/attention "$build"/apps/softmax "$build"/apps/layernorm)
pack() {  # pack FOLDER BINARY...
  local dir=$1
  shift
  for t in "$@"; do
    if [ -f "$t" ] && [ -x "$t" ]; then cp "$t" "$dir/" && strip "$dir/$(basename "$t")"; fi
  done
}
if [ "${1:-}" = aot ]; then
  mkdir -p .devrun-aot
  pack .devrun-aot "${aot[@]}"
  du -sh .devrun-aot
  exit 0
fi
mkdir -p .devrun
cp "$build/apps/neptune_bench/neptune_bench" .devrun/ && strip .devrun/neptune_bench
# GPU tests, the lessons that run kernels when a GPU is there (6 to 8 link libHalide, shipped below),
# the C ABI's tests and the AOT programs.
pack .devrun "$build"/test/test_correctness_gpu_* "$build"/test/runtime/test_runtime_gpu_* "$build"/test/device/test_device_gpu_* \
     "$build"/test/ops/test_ops_gpu_* "$build"/test/ops/test_ops_abi \
     "$build"/tutorials/lesson_06_* "$build"/tutorials/lesson_07_* "$build"/tutorials/lesson_08_* "${aot[@]}"
# The C ABI library (test_ops_* find it next to them; python/neptune_ops.py and baselines.py --neptune
# through LD_LIBRARY_PATH, which scripts/device/setup_remote.sh points at .devrun/).
cp "$build/src/ops/libneptune_ops.so" .devrun/ && strip --strip-unneeded .devrun/libneptune_ops.so
lib=deps/halide-21.0.0/halide/lib64/libHalide.so
if [ ! -f .devrun/libHalide.so.xz ] || [ "$lib" -nt .devrun/libHalide.so.xz ]; then
  xz -T2 -6 -c "$lib" > .devrun/libHalide.so.xz
fi
du -sh .devrun
