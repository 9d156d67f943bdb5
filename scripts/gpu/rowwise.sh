#!/usr/bin/env bash
# On the GPU machine (after . scripts/gpu/setup_remote.sh): neptune_bench profile for the row-wise
# operators at the shapes docs/performance.md reports, every point appended to one JSON file.
#   rowwise.sh FILE IMPLS [OP...]     e.g. rowwise.sh $OUT/rowwise.json copy,torch_eager,torch_compile
# Prints one line per point: Neptune's time, its fraction of the copy bandwidth, and each baseline.
file=$1
impls=$2
shift 2
ops=${*:-softmax logsumexp cross_entropy layernorm rmsnorm}
shapes=${ROWWISE_SHAPES:-4096,4096 32768,4096 8192,32768 65536,1024 4096,131072}
for op in $ops; do
  for shape in $shapes; do
    log=$(mktemp)
    timeout 300 .devrun/neptune_bench profile "$op" "$shape" --impl "$impls" --repeat "${ROWWISE_REPEAT:-10}" \
        --baselines apps/neptune_bench/baselines.py --json "$file" --append > "$log" 2>&1
    rc=$?
    python3 - "$file" "$op" "$shape" "$rc" <<'PY'
import json, sys
f, op, shape, rc = sys.argv[1:]
b, s = (int(x) for x in shape.split(","))
pts = [p for p in json.load(open(f))["points"] if p["op"] == op and p["batch"] == b and p["seq"] == s]
if not pts:
    print(f"{op} {shape}: no result (exit {rc})")
    sys.exit()
p = pts[-1]
cells = [f'{r["impl"]} {r["median_ms"] * 1e3:.1f}us' + ("" if r["correct"] else " WRONG")
         for r in p["results"] if r.get("supported") and r.get("median_ms")]
print(f'{op} {shape}: copy fraction {p.get("fraction_of_copy") or 0:.3f}; ' + ", ".join(cells))
PY
    [ "$rc" = 0 ] || tail -5 "$log"
    rm -f "$log"
  done
done
