#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): the evaluation's sweeps, in pieces of
# bounded time. A piece resumes from .devrun/sweep.json when that file is there (copy the previous
# piece's $OUT/sweep.json there first), stops starting points after $BUDGET seconds (default 480),
# and leaves sweep.json, the log and the plots in $OUT (default /tmp). Run pieces until it exits 0.
# Usage: scripts/gpu/sweep.sh [neptune_bench sweep options, e.g. --ops prefill_causal,decode_gqa]
# Exit status: neptune_bench sweep's (0 complete, 4 points left for another piece, 1 a point failed).
out=${OUT:-/tmp}
json=.devrun/sweep.json
budget=${BUDGET:-480}
# A hard stop a little after the budget, for a point that hangs.
timeout "$((budget + 110))" .devrun/neptune_bench sweep --json "$json" --budget "$budget" \
    --baselines apps/neptune_bench/baselines.py --plots "$out/plots" "$@" 2>&1 | tee "$out/sweep.log" |
  grep -E "^\[ *[0-9]+/|^sweep:|FAIL|rror"
rc=${PIPESTATUS[0]}
cp "$json" "$out/sweep.json" 2>/dev/null
exit "$rc"
