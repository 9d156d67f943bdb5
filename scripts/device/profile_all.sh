#!/usr/bin/env bash
# On the H200 machine (after . scripts/device/setup_remote.sh): neptune_bench profile for each
# "OP B,S" given, with the PyTorch baselines, JSON results into $OUT (or /tmp).
out=${OUT:-/tmp}
for spec in "$@"; do
  set -- $spec
  name="$1_${2/,/x}"
  timeout 150 .devrun/neptune_bench profile "$@" --repeat 30 --baselines apps/neptune_bench/baselines.py \
      --json "$out/profile_$name.json" > "$out/profile_$name.txt" 2>&1
  echo "== $spec (exit $?)"
  grep -E "^check|^neptune |^implementation|^neptune  |^sdpa|^flex|FAIL|error" "$out/profile_$name.txt" | grep -v "median ms" | tail -9
done
