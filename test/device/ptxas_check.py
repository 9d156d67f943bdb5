#!/usr/bin/env python3
"""Compiles compile_check.cu with nvcc for sm_80, sm_90 and sm_90a with `ptxas -v` and fails unless
every kernel has no spill stores or loads and no stack frame (fragments indexed at run time, or
too many live registers, would put tiles in local memory). Prints the register report.

Usage: ptxas_check.py NVCC SOURCE INCLUDE_DIR"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ARCHS = ['80', '90', '90a']
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
FRAME = re.compile(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads')
REGS = re.compile(r'Used (\d+) registers')


def demangle(names, nvcc):
    """Readable kernel names through cu++filt (next to nvcc) or binutils' c++filt, when either is there."""
    filt = shutil.which('cu++filt', path=os.path.dirname(nvcc)) or shutil.which('c++filt')
    if not filt:
        return {n: n for n in names}
    out = subprocess.run([filt], input='\n'.join(names), capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(names):
        return {n: n for n in names}
    return {n: d.split('(')[0].replace('neptune::device_test::', '').replace('neptune::device::', '')
            for n, d in zip(names, out)}


def main():
    nvcc, source, include = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, '-std=c++17', '-I', include, '-fatbin', '-Werror', 'all-warnings', '-Xptxas', '-v',
               *[f'-gencode=arch=compute_{a},code=sm_{a}' for a in ARCHS],
               source, '-o', os.path.join(tmp, 'out.fatbin')]
        run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(' '.join(cmd))
        print(run.stdout + run.stderr)
        return 1

    kernels = []  # [name, arch, registers, stack, spill stores, spill loads]
    for line in run.stderr.splitlines():
        if m := ENTRY.search(line):
            kernels.append([m.group(1), m.group(2), None, None, None, None])
        elif kernels and (m := FRAME.search(line)):
            kernels[-1][3:6] = [int(g) for g in m.groups()]
        elif kernels and (m := REGS.search(line)):
            kernels[-1][2] = int(m.group(1))

    names = demangle(sorted({k[0] for k in kernels}), nvcc)
    failures = 0
    print(f'{"arch":7} {"regs":>4} {"stack":>5} {"spill st":>8} {"spill ld":>8}  kernel')
    for name, arch, regs, stack, stores, loads in sorted(kernels, key=lambda k: (names[k[0]], k[1])):
        bad = None in (regs, stack) or stack or stores or loads
        failures += bool(bad)
        mark = '  <- FAIL' if bad else ''
        print(f'{arch:7} {regs!s:>4} {stack!s:>5} {stores!s:>8} {loads!s:>8}  {names[name]}{mark}')
    found = {k[1] for k in kernels if 'attention_fwd' in names[k[0]]}
    if found != {f'sm_{a}' for a in ARCHS}:
        print(f'FAIL: attention_fwd reported for {sorted(found)}, expected every one of {ARCHS}')
        failures += 1
    print(f'{len(kernels)} kernel compilations, {failures} with spills, stack frames or missing reports')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
