#!/usr/bin/env bash
# Build on a machine with the toolchain, run the GPU suites on a GPU machine that lacks it (no Halide
# SDK, no compiler). Run here, after the build, this packs what the GPU machine needs into git-ignored
# folders of the checkout; copy the checkout with them to the GPU machine and source
# scripts/gpu/setup_remote.sh there before the check scripts:
#   prepare.sh      .devrun/: the programs that link libHalide (neptune_bench, the GPU correctness
#                   tests, lessons 6 to 8) with libHalide.so compressed by xz (165 MB -> 46 MB), and
#                   libneptune_ops.so for baselines.py --neptune;
#   prepare.sh aot  .devrun-aot/: the programs without libHalide (the AOT libraries' tests, apps and
#                   lessons 9 and 10, the C ABI's tests and libneptune_ops.so, the device library's and
#                   the runtime's tests) and the C ABI's compiler library, libneptune_ops_jit.so (which
#                   links libHalide): a few MB, no unpacking;
#   prepare.sh all  both, then .devrun-all/: libHalide.so.xz and one xz tarball of both folders' programs
#                   (about 55 MB): one compact folder to copy for the JIT and the AOT checks alike.
# scripts/gpu/setup_remote.sh unpacks .devrun-all/ and puts both folders on LD_LIBRARY_PATH; the
# check scripts find their programs in the folder they need.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${NEPTUNE_BUILD_DIR:-build}
aot=("$build"/test/generator/test_generator_gpu_* "$build"/test/generator/test_generator_aot_extern
     "$build"/tutorials/lesson_09_generator "$build"/tutorials/lesson_10_custom_score_modifier
     "$build"/apps/attention "$build"/apps/softmax "$build"/apps/layernorm
     "$build"/test/ops/test_ops_gpu_* "$build"/test/ops/test_ops_abi
     "$build"/test/runtime/test_runtime_gpu_* "$build"/test/device/test_device_gpu_*)
pack() {  # pack FOLDER BINARY...
  local dir=$1
  shift
  for t in "$@"; do
    if [ -f "$t" ] && [ -x "$t" ]; then cp "$t" "$dir/" && strip "$dir/$(basename "$t")"; fi
  done
}
if [ "${1:-}" = all ]; then
  bash "$0" aot >/dev/null
  bash "$0" >/dev/null
  mkdir -p .devrun-all
  cp .devrun/libHalide.so.xz .devrun-all/
  tar -cf - --exclude=libHalide.so.xz --exclude=libHalide.so --exclude=sweep.json --exclude='*.sh' .devrun .devrun-aot |
    xz -T2 -6 > .devrun-all/programs.tar.xz
  du -sh .devrun-all
  exit 0
fi
if [ "${1:-}" = aot ]; then
  mkdir -p .devrun-aot
  pack .devrun-aot "${aot[@]}"
  cp "$build/src/ops/libneptune_ops.so" .devrun-aot/ && strip --strip-unneeded .devrun-aot/libneptune_ops.so
  # The compiler it opens for variants compiled on first use (needs libHalide.so from .devrun/).
  if [ -f "$build/src/ops/libneptune_ops_jit.so" ]; then
    cp "$build/src/ops/libneptune_ops_jit.so" .devrun-aot/ && strip --strip-unneeded .devrun-aot/libneptune_ops_jit.so
  fi
  du -sh .devrun-aot
  exit 0
fi
mkdir -p .devrun
cp "$build/apps/neptune_bench/neptune_bench" .devrun/ && strip .devrun/neptune_bench
pack .devrun "$build"/test/test_correctness_gpu_* "$build"/tutorials/lesson_06_* "$build"/tutorials/lesson_07_* \
     "$build"/tutorials/lesson_08_*
# baselines.py --neptune finds it through LD_LIBRARY_PATH, and it finds its compiler beside itself.
cp "$build/src/ops/libneptune_ops.so" .devrun/ && strip --strip-unneeded .devrun/libneptune_ops.so
if [ -f "$build/src/ops/libneptune_ops_jit.so" ]; then
  cp "$build/src/ops/libneptune_ops_jit.so" .devrun/ && strip --strip-unneeded .devrun/libneptune_ops_jit.so
fi
lib=deps/halide-21.0.0/halide/lib64/libHalide.so
if [ ! -f .devrun/libHalide.so.xz ] || [ "$lib" -nt .devrun/libHalide.so.xz ]; then
  xz -T2 -6 -c "$lib" > .devrun/libHalide.so.xz
fi
du -sh .devrun
