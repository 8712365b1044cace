#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, nvcc (CUDA 13), python3
# with numpy, PyTorch (CUDA), pytest and the nvidia-cublas / nvidia-curand /
# nvidia-cuda-runtime wheels, but no network and no swig, it
#   1. installs the carried swig and scipy-openblas32 wheels (from .whl/,
#      made by bench/fetch_gpu_wheels.sh on a machine with network),
#   2. builds singa with CUDA (sm_90 + PTX) in build/gpu,
#   3. smoke-tests the GPU (device query, a GEMM against NumPy) and NCCL
#      with one rank (bench/nccl_smoke.py; built when nvidia-nccl-cu13 is
#      installed),
#   3c. runs the nn-kernel test (test/cpp/build_nn_test.sh) on the machine's
#      own CPU, which may have AVX-512,
#   4. runs the whole pytest suite, which then covers the GPU (the `dev` and
#      `other` fixtures),
#   5. runs bench/gpu_bench.py (GEMMs and training steps against PyTorch CUDA),
#   6. runs bench/conv.py's layer table on the machine's CPU (1 and 2 threads),
# and ends with one summary table. Every step's log is kept in OUTDIR ($OUT
# when set, else /tmp/gpu_check), with summary.txt, failures.txt (the failed
# tests) and logs.tgz (all logs, as the device tool returns 8 files at
# most). It stops early only when the build fails, and exits non-zero when
# any step failed. Budget: under 8 minutes (about 4 on a 16-core H200
# machine, where the build takes 60-90 s).
#
#   bash bench/gpu_check.sh [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
start=$SECONDS
budget=${GPU_CHECK_BUDGET:-470}
status=0
rows=()

# step NAME CAP LOG CMD...: runs CMD (a program, or a function exported
# with export -f) with its output in LOG, under a timeout of CAP seconds or
# what is left of the budget, and records the outcome.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$((budget - (SECONDS - start)))
  # GPU_CHECK_BUDGET=3000 GPU_CHECK_NO_CAPS=1 lets a slow machine (a dry run
  # without a GPU) take what it needs.
  [[ -n "${GPU_CHECK_NO_CAPS:-}" ]] && cap=$left
  ((cap > left)) && cap=$left
  if ((cap < 10)); then
    rows+=("$(printf '%-8s %-8s %6s  %s' "$name" SKIPPED - "out of time budget")")
    status=1
    return 1
  fi
  echo "==== $name (up to ${cap}s, log $log)"
  local t0=$SECONDS rc
  if declare -F "$1" >/dev/null; then
    timeout --kill-after=10 "$cap" bash -c "$*" >"$log" 2>&1
  else
    timeout --kill-after=10 "$cap" "$@" >"$log" 2>&1
  fi
  rc=$?
  local dt=$((SECONDS - t0)) verdict=ok
  if ((rc != 0)); then
    verdict=FAILED
    ((rc == 124 || rc == 137)) && verdict=TIMEOUT
    status=1
    echo "!!!! $name $verdict (exit $rc); the end of $log:"
    tail -n 40 "$log"
  fi
  rows+=("$(printf '%-8s %-8s %6s  %s' "$name" "$verdict" "${dt}s" "${DETAIL:-}")")
  DETAIL=
  return $rc
}

finish() {
  {
    echo
    echo "==================== gpu_check summary ===================="
    printf '%-8s %-8s %6s  %s\n' step result time detail
    for r in "${rows[@]}"; do echo "$r"; done
    if [[ -s "$out/junit.xml" ]]; then
      "$py" - "$out/junit.xml" >"$out/failures.txt" 2>&1 <<'EOF'
import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    for bad in list(case.findall("failure")) + list(case.findall("error")):
        msg = (bad.get("message") or "").splitlines()[:1]
        print(f"{case.get('classname')}::{case.get('name')}: {msg[0][:200] if msg else ''}")
EOF
      echo "failed tests listed in failures.txt: $(wc -l <"$out/failures.txt")"
    fi
    if [[ -s "$out/bench.log" ]]; then
      echo
      sed -n '/^case /,$p' "$out/bench.log"
    fi
    echo "total $((SECONDS - start))s; logs in $out; $([[ $status == 0 ]] && echo ALL OK || echo SOME STEPS FAILED)"
  } | tee -a "$summary"
  # The device tool returns at most 8 files: every log in one archive.
  (cd "$out" && tar czf logs.tgz --exclude=logs.tgz ./*.log ./*.xml 2>/dev/null)
}
trap finish EXIT

# ---- 0. what the machine has ----
export PYTHONUNBUFFERED=1
py=$(command -v python3)
nvcc=$(command -v nvcc || true)
for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-13*/bin/nvcc; do
  [[ -z "$nvcc" && -x "$c" ]] && nvcc=$c
done
{
  echo "python3: $py ($("$py" --version 2>&1))"
  echo "nvcc: ${nvcc:-NOT FOUND} $([[ -n "$nvcc" ]] && "$nvcc" --version | tail -1)"
  echo "C++ compiler: ${CXX:-c++} ($("${CXX:-c++}" --version 2>&1 | head -1))"
  nvidia-smi -L 2>&1 | head -4
  "$py" - <<'EOF'
import importlib.util, sysconfig, os
for m in ("numpy", "torch", "pytest", "cmake", "ninja", "xdist", "onnx", "onnxruntime", "sklearn"):
    print(f"  {m}: {'yes' if importlib.util.find_spec(m) else 'NO'}")
inc = sysconfig.get_paths()["include"]
print(f"  Python.h: {'yes' if os.path.exists(os.path.join(inc, 'Python.h')) else 'NO'} ({inc})")
try:
    import torch
    print(f"  torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {torch.cuda.is_available()}")
except Exception as e:
    print(f"  torch: {e}")
EOF
} 2>&1 | tee -a "$summary"
if [[ -z "$nvcc" ]]; then
  rows+=("$(printf '%-8s %-8s %6s  %s' nvcc FAILED - "no nvcc on the PATH or in /usr/local/cuda*/bin")")
  status=1
  exit 1
fi

# ---- 1. carried wheels ----
site=/tmp/singa-gpu-site
DETAIL="swig and scipy-openblas32 from .whl/"
install_wheels() {
  ls "$root"/.whl/swig-*.whl "$root"/.whl/scipy_openblas32-*.whl &&
    "$py" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$site" \
      "$root"/.whl/swig-*.whl "$root"/.whl/scipy_openblas32-*.whl
}
export -f install_wheels
export py root site out
step wheels 60 "$out/build.log" install_wheels || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export SWIG_LIB
SWIG_LIB=$(ls -d "$site"/swig/data/share/swig/* | head -1)

# ---- 2. build ----
jobs=$(nproc)
export nvcc jobs
build() {
  cmake -S "$root" -B "$root/build/gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$py" -DUSE_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DSWIG_EXECUTABLE="$site/swig/data/bin/swig" &&
    cmake --build "$root/build/gpu" -j "$jobs"
}
export -f build
DETAIL="cmake + ninja -j$jobs, USE_CUDA=ON"
step build 300 "$out/build_cmake.log" build || exit 1
grep -E "singa: (CUDA|USE_CUDA|NCCL)" "$out/build_cmake.log"
export PYTHONPATH="$root/python:$PYTHONPATH"

# ---- 3. smoke test ----
smoke() {
  "$py" - <<'EOF'
import numpy as np
from singa import device, singa_wrap, tensor
assert singa_wrap.USE_CUDA, "built without CUDA"
n = device.get_num_gpus()
assert n > 0, "the CUDA build sees no GPU"
print(device.device_query(0))
print("memory (free, total):", device.get_gpu_mem_size(0))
dev = device.create_cuda_gpu()
a = np.random.default_rng(0).standard_normal((257, 129)).astype(np.float32)
t = tensor.from_numpy(a, dev)
np.testing.assert_allclose(tensor.to_numpy(tensor.matmul(t, t.T)), a @ a.T, rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(tensor.to_numpy(tensor.exp(t).sum(1)), np.exp(a).sum(1), rtol=1e-4)
print("smoke test passed")
EOF
}
export -f smoke
DETAIL="device query, GEMM and exp/sum against NumPy"
step smoke 60 "$out/smoke.log" smoke && sed -n '1,3p' "$out/smoke.log"

# ---- 3b. NCCL, one rank ----
# bench/nccl_smoke.py: the Communicator's collectives against NumPy and one
# DistOpt step on the GPU against the CPU, bootstrapped from an NcclIdHolder
# and, where mpiexec is found, over MPI. A build without NCCL (no
# nvidia-nccl-cu13 wheel on this machine) is reported, not run.
if "$py" -c "import sys; from singa import singa_wrap; sys.exit(0 if singa_wrap.USE_DIST else 1)" \
  2>/dev/null; then
  mpiexec_bin=$(command -v mpiexec || true)
  [[ -x "$(dirname "$py")/mpiexec" ]] && mpiexec_bin="$(dirname "$py")/mpiexec"
  export mpiexec_bin
  # Open MPI refuses to start as root unless told twice; the GPU machine
  # runs commands as root.
  if ((EUID == 0)); then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  nccl() {
    "$py" "$root/bench/nccl_smoke.py" || return 1
    if [[ -n "$mpiexec_bin" ]] && "$py" -c "import mpi4py" 2>/dev/null; then
      "$mpiexec_bin" -n 1 "$py" "$root/bench/nccl_smoke.py" --mpi
    else
      echo "MPI bootstrap not run: no mpiexec or mpi4py"
    fi
  }
  export -f nccl
  DETAIL="bench/nccl_smoke.py: collectives and a DistOpt step, world_size 1"
  step nccl 60 "$out/nccl.log" nccl && grep -E "passed|not run" "$out/nccl.log"
else
  rows+=("$(printf '%-8s %-8s %6s  %s' nccl SKIPPED - "built without NCCL (no nvidia-nccl-cu13 for $py)")")
fi

# ---- 3c. the CPU's own ISA: the nn-kernel test natively ----
# The GPU machine's CPU may have AVX-512, which this project's development
# machines lack (they run the AVX-512 kernels only compiled for AVX2).
cpu_nn() {
  grep -m1 "model name" /proc/cpuinfo
  echo "avx512: $(grep -o -m1 -w 'avx512f\|avx512bw\|avx512dq\|avx512vl' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  OMP_NUM_THREADS=4 bash "$root/test/cpp/build_nn_test.sh" /tmp/test_nn_kernels
}
export -f cpu_nn
DETAIL="test/cpp/build_nn_test.sh on this machine's CPU"
step cpu_nn 150 "$out/cpu_nn.log" cpu_nn
DETAIL="$(head -2 "$out/cpu_nn.log" | tr '\n' ';') $(tail -1 "$out/cpu_nn.log")"
rows[-1]="${rows[-1]}$DETAIL"
DETAIL=

# ---- 4. the test suite ----
# Eight workers of two CPU threads each (the CPU side of the tests would
# otherwise start 8 x nproc threads).
xdist=
"$py" -c "import xdist" 2>/dev/null && xdist="-n 8 --dist loadfile"
# test_dist.py needs mpiexec once mpi4py is importable; an image with
# mpi4py but no MPI launcher cannot run it (said in the summary).
skip_dist=
if "$py" -c "import mpi4py" 2>/dev/null && ! command -v mpiexec >/dev/null &&
  [[ ! -x "$(dirname "$py")/mpiexec" ]]; then
  skip_dist="--ignore=$root/test/python/test_dist.py"
fi
export xdist skip_dist
tests() {
  [[ -n "$xdist" ]] && export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
  # shellcheck disable=SC2086
  "$py" -m pytest "$root/test/python" -q -p no:cacheprovider -rfE $xdist $skip_dist \
    --junitxml="$out/junit.xml"
}
export -f tests
step tests 240 "$out/tests.log" tests
DETAIL=$(grep -E "passed|failed|error" "$out/tests.log" | tail -1)
[[ -n "$skip_dist" ]] && DETAIL="$DETAIL (test_dist.py left out: mpi4py without mpiexec)"
rows[-1]="${rows[-1]}$DETAIL"
DETAIL=

# ---- 5. benchmarks against PyTorch CUDA ----
DETAIL="bench/gpu_bench.py (table below)"
step bench 150 "$out/bench.log" "$py" "$root/bench/gpu_bench.py" --timeout 60

# ---- 6. CPU convolution layers on this machine's CPU (issue 12's table) ----
# One and two threads, as on the 2-core development machines: at batch 64
# the small layers do not split 16 ways, so more threads say nothing.
DETAIL="bench/conv.py layers, 1 and 2 threads (log cpu_conv.log)"
step cpu_conv 120 "$out/cpu_conv.log" "$py" "$root/bench/conv.py" --skip steps inference \
  --threads 1 2 --rounds 2
exit $status
