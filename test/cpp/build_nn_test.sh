#!/usr/bin/env bash
# Builds and runs the standalone nn-kernel test. Usage:
#   test/cpp/build_nn_test.sh [output-binary] [test arguments]
# The *_isa.cc kernels are compiled once per ISA family, as CMakeLists.txt
# does (keep the flags in step). On x86-64 without AVX-512 the AVX-512 copy
# is compiled for AVX2 instead (SINGA_ISA_EMULATE_AVX512), so its tile
# shapes and tail handling are still run; the test runs every family.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-${TMPDIR:-/tmp}/test_nn_kernels}"
shift || true
obj="$(mktemp -d)"
trap 'rm -rf "$obj"' EXIT
cxx="${CXX:-g++}"
common=(-O3 -fopenmp -std=c++17 -Wall -Wextra -Wno-psabi -I"$root/include"
        -I"$root/src/core/nn" -I"$root/src/core/tensor")
fast=(-ffast-math -fno-finite-math-only)
defs=()
families=(baseline)
declare -A flags level
flags[baseline]=""
level[baseline]=0
if [ "$(uname -m)" = x86_64 ]; then
  families+=(avx2 avx512)
  flags[avx2]="-mavx2 -mfma -mf16c"
  level[avx2]=1
  level[avx512]=2
  defs+=(-DSINGA_HAVE_ISA_AVX2 -DSINGA_HAVE_ISA_AVX512)
  if grep -q avx512bw /proc/cpuinfo 2>/dev/null; then
    flags[avx512]="-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c"
  else
    flags[avx512]="-mavx2 -mfma -mf16c"
    defs+=(-DSINGA_ISA_EMULATE_AVX512)
  fi
fi
pids=()
for f in "${families[@]}"; do
  for src in "$root"/src/core/nn/*_isa.cc "$root"/src/core/tensor/fma_probe_isa.cc \
             "$root"/src/core/tensor/gemm_small_isa.cc; do
    # shellcheck disable=SC2086
    "$cxx" "${common[@]}" "${fast[@]}" ${flags[$f]} -DSINGA_ISA_NS="isa_$f" \
      -DSINGA_ISA_LEVEL="${level[$f]}" -c "$src" \
      -o "$obj/$(basename "$src" .cc)_$f.o" &
    pids+=($!)
  done
done
for src in conv_cpp.cc conv_dx_cpp.cc conv_few_cpp.cc conv_shift_cpp.cc winograd_cpp.cc weight_cache.cc im2col_cpp.cc pool_cpp.cc batchnorm_cpp.cc; do
  "$cxx" "${common[@]}" "${fast[@]}" "${defs[@]}" -c "$root/src/core/nn/$src" \
    -o "$obj/${src%.cc}.o" &
  pids+=($!)
done
"$cxx" "${common[@]}" "${defs[@]}" -c "$root/src/core/tensor/isa_choice.cc" \
  -o "$obj/isa_choice.o" &
pids+=($!)
"$cxx" "${common[@]}" "${defs[@]}" -c "$root/src/core/tensor/gemm_small_cpp.cc" \
  -o "$obj/gemm_small_cpp.o" &
pids+=($!)
for src in "$root"/test/cpp/test_nn_*.cc; do
  "$cxx" "${common[@]}" "${defs[@]}" -I"$root/test/cpp" -c "$src" \
    -o "$obj/$(basename "$src" .cc).o" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$cxx" -fopenmp "$obj"/*.o -o "$out"
"$out" "$@"
