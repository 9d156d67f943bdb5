#!/usr/bin/env bash
# On the GPU machine: Neptune's kernels alone (no baselines) under several tile configurations.
# Usage: scripts/gpu/variants.sh "OP B,S [flags]" ...   (after . scripts/gpu/setup_remote.sh)
for spec in "$@"; do
  printf '%-60s ' "$spec"
  out=$(timeout 100 .devrun/neptune_bench profile $spec --no-baselines --repeat 20 2>&1)
  echo "$out" | grep -E "^neptune|FAIL|error" | head -3 | tr '\n' ' '
  echo
done
