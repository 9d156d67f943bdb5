#!/usr/bin/env bash
# On the H200 machine, from the repository root: unpacks libHalide.so next to the binaries.
# Source it: . scripts/device/setup_remote.sh
cd .devrun && { [ -f libHalide.so ] || xz -d -k -T4 libHalide.so.xz; } && cd ..
export LD_LIBRARY_PATH=$PWD/.devrun:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
