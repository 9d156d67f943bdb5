#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): the row-chain checks, results into DIR.
#   rowchain_check.sh DIR [PART...]   PARTs (default all, in this order):
#   jit       DIR/gpu-tests.txt: the JIT row-chain suite (users' chains, split rows, the ladder) and the
#             fuzzer's row chains on the GPU, timed
#   split     DIR/split.json: neptune_bench profile of few long rows (split over a cluster) against the
#             copy and torch, and DIR/unsplit.json: the same rows with --row-cluster 1
#   stats     DIR/row-stats.json: prefill_causal 1,8192 and attention_row_stats (with its row
#             statistics) alternately
#   lse       DIR/lse.json: prefill_causal 1,8192 and prefill_causal_lse (out and its log-sum-exp)
#             alternately, three rounds, with the AOT library's checks (gpu_aot, also the bf16 row
#             chains) into DIR/gpu-tests.txt
#   shapes    DIR/shapes.json: the row shapes below 90 % of the copy with each alternative kernel
#             shape (--row-threads, --row-cluster) beside the default, each against the copy
#   suites    DIR/gpu-tests.txt: the other GPU suites that run row chains (extern stages, AOT libraries)
#   memcheck  DIR/memcheck.txt: compute-sanitizer memcheck over users' chains and split rows
out=${1:?usage: rowchain_check.sh DIR [jit split stats suites memcheck]}
shift
parts=${*:-jit split stats lse shapes suites memcheck}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/gpu-tests.txt"
suite() {
  echo "== $1" | tee -a "$out/gpu-tests.txt"
  local start
  start=$(date +%s)
  timeout 300 "$1" -d 2>&1 | grep -E "^[0-9.]+ s:|test cases|assertions|ERROR|FAIL|SKIP" | tee -a "$out/gpu-tests.txt"
  echo "wall $(( $(date +%s) - start )) s" | tee -a "$out/gpu-tests.txt"
}
for part in $parts; do
  case $part in
  jit) suite .devrun/test_correctness_gpu_jit_rowchain; suite .devrun/test_correctness_gpu_jit_first_use; suite .devrun/test_correctness_gpu_fuzz_rowchain ;;
  split)
    for point in "logsumexp 8,262144" "cross_entropy 8,262144" "logsumexp 64,131072" "softmax 8,524288" \
                 "layernorm 8,524288"; do
      set -- $point
      timeout 200 .devrun/neptune_bench profile "$1" "$2" --impl copy,torch_eager,torch_compile --repeat 10 \
          --baselines apps/neptune_bench/baselines.py --json "$out/split.json" --append 2>&1 | tail -12 >> "$out/split.txt"
      timeout 100 .devrun/neptune_bench profile "$1" "$2" --impl copy --repeat 10 --row-cluster 1 \
          --json "$out/unsplit.json" --append 2>&1 | tail -8 >> "$out/split.txt"
    done ;;
  stats)
    for round in 1 2; do
      for op in prefill_causal attention_row_stats; do
        timeout 120 .devrun/neptune_bench profile "$op" 1,8192 --impl none --repeat 30 \
            --json "$out/row-stats.json" --append 2>&1 | tail -4 >> "$out/row-stats.txt"
      done
    done ;;
  lse)
    for round in 1 2 3; do
      for op in prefill_causal prefill_causal_lse; do
        timeout 120 .devrun/neptune_bench profile "$op" 1,8192 --impl none --repeat 30 \
            --json "$out/lse.json" --append 2>&1 | tail -4 >> "$out/lse.txt"
      done
    done
    echo "== .devrun-aot/test_generator_gpu_aot (log-sum-exp, bf16)" | tee -a "$out/gpu-tests.txt"
    timeout 300 .devrun-aot/test_generator_gpu_aot -tc="*log-sum-exp from one kernel*,*in bf16*" 2>&1 |
        grep -E "test cases|assertions|ERROR|FAIL" | tee -a "$out/gpu-tests.txt" ;;
  shapes)
    shape() {  # shape OP ROWS,COLS [OVERRIDES...]
      local op=$1 at=$2
      shift 2
      echo "== $op $at ${*:-default}" >> "$out/shapes.txt"
      timeout 120 .devrun/neptune_bench profile "$op" "$at" --impl copy --repeat 10 "$@" \
          --json "$out/shapes.json" --append 2>&1 | tail -5 >> "$out/shapes.txt"
    }
    for op in softmax layernorm rmsnorm; do
      shape $op 4096,131072
      shape $op 4096,131072 --row-cluster 8 --row-threads 256
      shape $op 4096,131072 --row-cluster 8 --row-threads 512
      shape $op 4096,131072 --row-cluster 4 --row-threads 1024
      shape $op 4096,131072 --row-cluster 2 --row-threads 1024
    done
    for op in logsumexp cross_entropy layernorm rmsnorm; do
      shape $op 65536,1024
      shape $op 65536,1024 --row-threads 64
      shape $op 65536,1024 --row-threads 128
    done
    shape rmsnorm 8192,32768
    shape rmsnorm 8192,32768 --row-threads 1024
    shape rmsnorm 8192,32768 --row-cluster 2 --row-threads 512 ;;
  suites)
    for t in .devrun/test_correctness_gpu_rowchain .devrun/test_correctness_gpu_jit_extern \
             .devrun-aot/test_generator_gpu_aot .devrun-aot/test_generator_aot_extern; do suite "$t"; done ;;
  memcheck)
    timeout 300 compute-sanitizer --tool memcheck .devrun/test_correctness_gpu_jit_rowchain \
        -tc="*middle*,*several*,*softmax and log-sum-exp*" 2>&1 | tail -6 | tee "$out/memcheck.txt" ;;
  esac
done
