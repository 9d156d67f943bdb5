#!/usr/bin/env python3
"""The kernels embedded in AOT libraries hold the architectures they promise: for every extern stage
in each manifest (<library>.neptune.json), the sm_80 set's fatbin has an sm_80 cubin and compute_90
PTX, the sm_90a set's an sm_90a cubin, and the library itself embeds the descriptor that lists them.
Usage: fatbin_archs.py CUOBJDUMP MANIFEST...   (exit 77, skipped, without cuobjdump)"""
import json
import os
import re
import subprocess
import sys

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 else 2)
cuobjdump, manifests = sys.argv[1], sys.argv[2:]
if not os.access(cuobjdump, os.X_OK):
    print("[SKIP] no cuobjdump (scripts/setup.sh installs it)")
    sys.exit(77)

expected = {"sm_80": ({"sm_80"}, {"sm_90"}), "sm_90a": ({"sm_90a"}, set())}
failures = 0


def listing(flag, path):
    out = subprocess.run([cuobjdump, flag, path], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\.(sm_\d+a?)\.(?:cubin|ptx)", out))


for manifest in manifests:
    folder = os.path.dirname(manifest)
    m = json.load(open(manifest))
    archive = open(os.path.join(folder, m["library"] + ".a"), "rb").read()
    if not m["stages"]:
        failures += 1
        print(f"FAIL {manifest}: no extern stage")
    for stage in m["stages"]:
        if ('"id":"%s"' % stage["descriptor_id"]).encode() not in archive:
            failures += 1
            print(f"FAIL {m['library']}: the library does not embed descriptor {stage['descriptor_id']}")
        for s in stage["sets"]:
            path = os.path.join(folder, s["fatbin"])
            elf, ptx = listing("--list-elf", path), listing("--list-ptx", path)
            want_elf, want_ptx = expected[s["arch"]]
            ok = elf == want_elf and ptx == want_ptx
            failures += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {m['library']} {stage['name']} {s['arch']}: cubins {sorted(elf)}, "
                  f"ptx {sorted(ptx)} (want {sorted(want_elf)}, {sorted(want_ptx)})")
            for k in s["kernels"]:
                if k["registers"] <= 0:
                    failures += 1
                    print(f"FAIL {m['library']} {k['name']} {s['arch']}: no register count in the ptxas report")
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
