#!/usr/bin/env bash
# On the H200 machine (after . scripts/device/setup_remote.sh): one piece of the evaluation's sweeps.
# It resumes from .devrun/sweep.json when that file was carried in (copy the previous piece's
# $OUT/sweep.json there first), stops starting points after $BUDGET seconds (default 480, inside the
# 10 minutes of a call), and leaves sweep.json, the log and the plots in $OUT.
# Usage: scripts/device/sweep.sh [neptune_bench sweep options, e.g. --ops prefill_causal,decode_gqa]
# Exit status: neptune_bench sweep's (0 complete, 4 points left for another piece, 1 a point failed).
out=${OUT:-/tmp}
json=.devrun/sweep.json
timeout 590 .devrun/neptune_bench sweep --json "$json" --budget "${BUDGET:-480}" \
    --baselines apps/neptune_bench/baselines.py --plots "$out/plots" "$@" 2>&1 | tee "$out/sweep.log" |
  grep -E "^\[ *[0-9]+/|^sweep:|FAIL|rror"
rc=${PIPESTATUS[0]}
cp "$json" "$out/sweep.json" 2>/dev/null
exit "$rc"
