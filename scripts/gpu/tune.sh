#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): Neptune's kernels alone, one line per
# variant ("OP B,S [flags]"), median of 20 after the fp64 check. Full outputs into $OUT/tune.txt.
out=${OUT:-/tmp}
for spec in "$@"; do
  printf '%-52s ' "$spec"
  timeout 90 .devrun/neptune_bench profile $spec --no-baselines --repeat 20 > "$out/tune_one.txt" 2>&1
  rc=$?
  cat "$out/tune_one.txt" >> "$out/tune.txt"
  grep -E "^neptune |FAIL|rror" "$out/tune_one.txt" | head -2 | sed 's/ (min.*L2 flushed)//' | tr '\n' ' '
  echo "(exit $rc)"
done
