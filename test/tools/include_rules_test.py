#!/usr/bin/env python3
"""The include rules per layer (docs/design/architecture.md, the layers).

Every C++/CUDA file under a layer's directory may include only what its row of RULES allows: a
row names the directory, the include prefixes it must not use and why. Includes are read from the
sources ('#include "x"' and '#include <x>'). Usage: include_rules_test.py SOURCE_ROOT; exit 0 when
every file keeps its rules, 1 (listing each violation) otherwise.

The tile IR includes Halide.h on purpose: its elementwise maps ARE Halide Exprs (tir/IR.h), so the
dependency is inherent and not a rule of this table.
"""
import os
import re
import sys

# Internal directories of src/ (a header path "tir/IR.h" means src/tir/IR.h).
COMPILER = ['tir/', 'lower/', 'codegen/', 'frontend/', 'suite/', 'gpu/', 'api/', 'extern/', 'cpu/', 'algorithms/']
INTERNAL = COMPILER + ['core/', 'runtime/', 'toolchain/', 'interop/', 'reference/', 'ops/']

# (directory, forbidden include prefixes, reason)
RULES = [
    ('src/runtime', COMPILER + ['toolchain/', 'Halide.h', 'neptune/GpuPipeline.h', 'neptune/Inspect.h'],
     'the runtime is the driver ABI: no compiler, no CUDA compilers, no libHalide'),
    ('include/neptune/device', COMPILER + ['runtime/', 'toolchain/', 'Halide.h'],
     'the device library is compiled into kernels by NVRTC: no host compiler headers'),
    ('src/tir', ['lower/', 'codegen/', 'frontend/', 'suite/', 'gpu/', 'api/', 'extern/', 'neptune/Operators.h'],
     'the tile IR is below the passes that build, lower and emit it, and knows no operator suite'),
    ('src/codegen', ['lower/', 'frontend/', 'suite/', 'gpu/', 'api/', 'extern/'],
     'the emitter reads the tile IR only (shared layouts live in tir/SharedLayout.h)'),
    ('src/frontend', ['lower/', 'codegen/', 'suite/', 'gpu/', 'api/', 'extern/'],
     'the frontend (plans, repairs) is below the tile lowering and the emitter'),
    ('src/lower', ['codegen/', 'suite/', 'gpu/', 'api/', 'extern/', 'neptune/algorithms/'],
     'the lowering lowers fused plans; the operator suite sits above it (src/suite)'),
    ('include/neptune', INTERNAL,
     'public headers include only public headers'),
    ('apps', INTERNAL, 'apps use the public headers (include/neptune/) only'),
    ('generators', INTERNAL, 'generators use the public headers (include/neptune/) only'),
    ('tutorials', INTERNAL,
     'lessons use the public headers only; those that show internals use neptune/Inspect.h'),
]

EXTENSIONS = ('.h', '.hpp', '.cpp', '.cc', '.cu', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def violations(root):
    found = []
    for directory, forbidden, why in RULES:
        base = os.path.join(root, directory)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8', errors='replace') as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        for prefix in forbidden:
                            if header == prefix or header.startswith(prefix):
                                rel = os.path.relpath(path, root)
                                found.append(f'{rel}:{number}: includes {header} ({directory}: {why})')
                                break
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found = violations(sys.argv[1])
    for v in found:
        print(v)
    if found:
        print(f'{len(found)} include rule violation(s)')
        return 1
    print('include rules hold in', ', '.join(d for d, _, _ in RULES))
    return 0


if __name__ == '__main__':
    sys.exit(main())
