#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA source follows .clang-format; with --fix, formats them.
# Generated files (scripts/gen_wgmma.py's wrappers) are left as their generator writes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed: run scripts/setup.sh (Debian package clang-format)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cuh' '*.cu' | grep -v '^include/neptune/device/wgmma_ops.cuh$')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run -Werror "${files[@]}" 2> >(head -40 >&2); then
  echo "some sources are not formatted: run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "${#files[@]} sources formatted"
