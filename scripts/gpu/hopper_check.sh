#!/usr/bin/env bash
# On an sm_90 GPU machine (after . scripts/gpu/setup_remote.sh): the Hopper path's checks and timings.
# The device library's wgmma/TMA tests, then Neptune's kernels timed alone for each "OP B,S [flags]"
# given (e.g. the sm_90a default, then --arch sm_80 for comparison). Logs into $OUT (default /tmp).
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 120 .devrun-aot/test_device_gpu_hopper_ops > "$out/hopper_ops.txt" 2>&1
echo "== hopper_ops exit $?"; tail -n 24 "$out/hopper_ops.txt"
for spec in "$@"; do
  name=$(echo "$spec" | tr ' ,' '__')
  timeout 100 .devrun/neptune_bench profile $spec --no-baselines --repeat 20 > "$out/p_$name.txt" 2>&1
  echo "== $spec (exit $?)"
  grep -E "^check|^neptune|FAIL|rror" "$out/p_$name.txt" | head -6
done
