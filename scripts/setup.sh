#!/usr/bin/env bash
# Installs what Neptune needs to build and test, and nothing that is already there.
# Safe to repeat: each step checks first. Usage: scripts/setup.sh [--no-apt]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
halide_version=21.0.0
halide_dir="$root/deps/halide-$halide_version"

say() { printf '[setup] %s\n' "$*"; }

# 1. Debian packages: build tools, doctest, clang-format (the format test), and the small libraries the
#    apps use.
packages=(meson ninja-build pkg-config ccache doctest-dev libcli11-dev nlohmann-json3-dev libfmt-dev clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && [ "${1:-}" != "--no-apt" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. Halide's C++ SDK from its PyPI wheel, into a project-local folder (docs/design/halide.md).
if [ ! -f "$halide_dir/halide/include/Halide.h" ]; then
  say "installing Halide $halide_version into deps/"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$halide_dir" "halide==$halide_version"
fi

# 3. matplotlib for the benchmark's plots (scripts/plot_sweep.py), into a project-local folder that
#    the script finds by itself; the GPU machine's Python has its own.
if ! python3 -c "import sys; sys.path.append('$root/deps/python'); import matplotlib" 2>/dev/null; then
  say "installing matplotlib into deps/python"
  python3 -m pip install -q --disable-pip-version-check --target "$root/deps/python" matplotlib
fi

# 4. The CUDA toolkit is optional for building; say what is missing rather than fail.
cuda=${CUDA_PATH:-/usr/local/cuda}
if [ -x "$cuda/bin/nvcc" ]; then
  say "CUDA toolkit: $cuda ($("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1))"
else
  say "CUDA toolkit not found at $cuda (set CUDA_PATH): GPU kernels will not be compiled"
fi
# 4. cuobjdump, which this toolkit lacks: NVIDIA's PyPI package, into deps/ (the generator suite
#    reads the fatbins of AOT libraries with it; that test is skipped without it).
if [ ! -x "$cuda/bin/cuobjdump" ] && [ ! -x "$root/deps/cuda-tools/nvidia/cu13/bin/cuobjdump" ]; then
  say "installing cuobjdump into deps/cuda-tools"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$root/deps/cuda-tools" \
    "nvidia-cuda-cuobjdump==13.2.86" || say "cuobjdump not installed: generator/fatbin_archs will be skipped"
fi
say "ready"
