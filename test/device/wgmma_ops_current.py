#!/usr/bin/env python3
"""include/neptune/device/wgmma_ops.cuh is what scripts/gen_wgmma.py writes: the generated wrappers
were not edited by hand and the generator's list of N is the one committed.

Usage: wgmma_ops_current.py GEN_WGMMA_PY COMMITTED_HEADER"""
import difflib
import os
import subprocess
import sys
import tempfile


def main():
    script, committed = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "wgmma_ops.cuh")
        subprocess.run([sys.executable, script, fresh], check=True)
        want, have = open(fresh).read().splitlines(), open(committed).read().splitlines()
    if want == have:
        print(f"{committed}: current ({len(have)} lines)")
        return 0
    print(f"{committed} differs from what {script} writes; rerun the script:")
    for line in list(difflib.unified_diff(have, want, "committed", "generated", lineterm=""))[:40]:
        print(line)
    return 1


if __name__ == "__main__":
    sys.exit(main())
