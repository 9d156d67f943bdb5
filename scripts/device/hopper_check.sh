#!/usr/bin/env bash
# On the H200 machine (after . scripts/device/setup_remote.sh): the Hopper path's checks and timings in
# one call. The device library's wgmma/TMA tests, Neptune's prefill kernels timed alone (sm_90a
# default, then sm_80 for comparison), compute-sanitizer on a small wgmma kernel, the GPU correctness
# suite. Logs into $OUT.
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
