#!/usr/bin/env bash
# On the GPU machine, from the repository root (copied there with the folders scripts/gpu/prepare.sh
# packs): unpacks libHalide.so next to the binaries (when .devrun/ is there) and puts .devrun/ and
# .devrun-aot/ on the loader's path. Source it: . scripts/gpu/setup_remote.sh
# .devrun-all/ (prepare.sh all) unpacks into both folders first.
if [ -f .devrun-all/programs.tar.xz ] && [ ! -f .devrun/neptune_bench ]; then
  xz -d -T4 -c .devrun-all/programs.tar.xz | tar -xf -
  cp .devrun-all/libHalide.so.xz .devrun/
fi
[ -f .devrun/libHalide.so.xz ] && { [ -f .devrun/libHalide.so ] || xz -d -k -T4 .devrun/libHalide.so.xz; }
export LD_LIBRARY_PATH=$PWD/.devrun:$PWD/.devrun-aot:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
