#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): neptune_bench profile for each
# "OP B,S" given, with every baseline (unfused cuBLAS, PyTorch's), JSON results into $OUT (or /tmp);
# prints each point's table with its ratios.
out=${OUT:-/tmp}
for spec in "$@"; do
  set -- $spec
  name="$1_${2/,/x}"
  timeout 150 .devrun/neptune_bench profile "$@" --repeat 30 --baselines apps/neptune_bench/baselines.py \
      --json "$out/profile_$name.json" > "$out/profile_$name.txt" 2>&1
  echo "== $spec (exit $?)"
  sed -n '/^implementation/,/^Neptune.s speedup/p' "$out/profile_$name.txt"
  grep -E "^check|FAIL|rror" "$out/profile_$name.txt" | tail -4
done
