#!/usr/bin/env bash
# On the H200 machine: Neptune's kernels alone (no baselines) under several tile configurations.
# Usage: scripts/device/variants.sh "OP B,S [flags]" ...   (after . scripts/device/setup_remote.sh)
for spec in "$@"; do
  printf '%-60s ' "$spec"
  out=$(timeout 100 .devrun/neptune_bench profile $spec --no-baselines --repeat 20 2>&1)
  echo "$out" | grep -E "^neptune|FAIL|error" | head -3 | tr '\n' ' '
  echo
done
