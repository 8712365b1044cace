#!/usr/bin/env bash
# Builds and runs the standalone nn-kernel test against the scipy-openblas32
# wheel. Usage: test/cpp/build_nn_test.sh [output-binary]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# PYTHON: the interpreter whose scipy-openblas32 to link (pytest passes its own).
py="${PYTHON:-python3}"
inc="$("$py" -c 'import scipy_openblas32 as s; print(s.get_include_dir())')"
lib="$("$py" -c 'import scipy_openblas32 as s; print(s.get_lib_dir())')"
out="${1:-${TMPDIR:-/tmp}/test_nn_kernels}"
g++ -O3 -march=native -fopenmp -std=c++17 -Wall -Wextra \
  -I"$root/include" -I"$inc" \
  "$root/test/cpp/test_nn_kernels.cc" \
  "$root/src/core/nn/conv_cpp.cc" \
  "$root/src/core/nn/pool_cpp.cc" \
  "$root/src/core/nn/batchnorm_cpp.cc" \
  "$root/src/core/device/blas_threads.cc" \
  -L"$lib" -lscipy_openblas -Wl,-rpath,"$lib" -o "$out"
"$out"
