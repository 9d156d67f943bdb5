#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): the checks of libneptune_ops.so. The C
# ABI's tests (every GPU variant on device memory against fp64; the CPU suite, whose refusal of host
# memory said to be device memory takes its GPU branch there), the Python module on torch tensors
# (a torch stream included), then baselines.py --self-test --neptune for the operators given (default:
# one prefill and one decode operator), which times the AOT kernels beside PyTorch's. Logs into $OUT
# (default /tmp).
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for t in test_ops_gpu_ops test_ops_abi; do
  timeout 300 "${DEVRUN:-.devrun-aot}/$t" > "$out/$t.txt" 2>&1
  echo "== $t exit $?"; grep -E "test cases|assertions|ERROR|device:" "$out/$t.txt" | head -12
done
PYTHONPATH=python timeout 300 python3 test/ops/python_ops_test.py "${DEVRUN:-.devrun-aot}"/libneptune_ops.so > "$out/python_ops.txt" 2>&1
echo "== python_ops_test exit $?"; grep -E "^Ran|^OK|FAIL|Error|skipped" "$out/python_ops.txt" | head -12
ops=("$@")
[ ${#ops[@]} -eq 0 ] && ops=(prefill_causal decode_gqa)
for o in "${ops[@]}"; do
  timeout 400 python3 apps/neptune_bench/baselines.py --op "$o" --batch 1 --seq 8192 --self-test --neptune \
    --json "$out/baselines_$o.json" > "$out/baselines_$o.txt" 2>&1
  echo "== baselines $o (exit $?)"; grep -E "^impl|^neptune_aot|^sdpa|^flex|self-test" "$out/baselines_$o.txt" | head -8
done
