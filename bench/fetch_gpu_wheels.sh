#!/usr/bin/env bash
# Downloads, on a machine with network, the wheels that bench/gpu_check.sh
# installs on the GPU machine (which has no network and no swig): swig and
# scipy-openblas32, into .whl/ at the repository root (git-ignored).
#
#   bash bench/fetch_gpu_wheels.sh
#
# Both are pure "py3-none" wheels, so the GPU machine's Python version does
# not matter; the versions are the ones this checkout is built with here.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
ver() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }
swig_v=$(ver swig)
ob_v=$(ver scipy-openblas32)
mkdir -p .whl
rm -f .whl/swig-*.whl .whl/scipy_openblas32-*.whl
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
  -d .whl "swig${swig_v:+==$swig_v}" "scipy-openblas32${ob_v:+==$ob_v}"
ls -l .whl
