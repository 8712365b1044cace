"""The CPU's small-GEMM kernel (src/core/tensor/gemm_small_isa.cc) against a
float64 NumPy reference: every transpose combination, tails in M, N and K,
strided and transposed views, alpha and beta, 1 and 2 threads, every ISA
family this machine runs. SetCpuGemmPath("small") sends every float GEMM to
the kernel whatever its shape; "auto" (the default) picks by shape."""

import os
import platform
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from singa import singa_wrap as cw
from singa import tensor
from singa._tensor import _wrap

# The `isa` fixture: every ISA family this CPU can run, as the ISA tests use it.
from test_cpu_isa import isa  # noqa: F401


@pytest.fixture
def small_path():
    cw.SetCpuGemmPath("small")
    yield
    cw.SetCpuGemmPath("auto")


def _window(t, pad, shape):
    """Rows [pad, pad + shape[0]) and columns [pad, pad + shape[1]) of t, as
    a view that keeps t's row stride."""
    view = t.data.Slice(0, pad, pad + shape[0]).Slice(1, pad, pad + shape[1])
    assert view.stride()[0] == t.shape[1] and view.stride()[1] == 1
    return _wrap(view)


def _operand(rng, rows, cols, trans, pad):
    """A (rows x cols) operand as singa sees it, and its float64 values: a
    transposed view when trans, a window of a wider matrix when pad."""
    shape = (cols, rows) if trans else (rows, cols)
    big = rng.standard_normal((shape[0] + pad, shape[1] + 2 * pad)).astype(np.float32)
    t = _window(tensor.from_numpy(big), pad, shape)
    ref = big[pad:pad + shape[0], pad:pad + shape[1]].astype(np.float64)
    if trans:
        return t.T, ref.T
    return t, ref


def _check(m, n, k, ta, tb, pad=0, alpha=1.0, beta=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a, ra = _operand(rng, m, k, ta, pad)
    b, rb = _operand(rng, k, n, tb, pad)
    assert a.shape == (m, k) and b.shape == (k, n)
    expect = alpha * (ra @ rb)
    if beta == 0.0 and alpha == 1.0:
        got = tensor.to_numpy(tensor.mult(a, b))
    else:
        cbig = rng.standard_normal((m + pad, n + 2 * pad)).astype(np.float32)
        if beta == 0.0:
            cbig[...] = np.nan  # beta == 0 must not read C
        c0 = cbig[pad:pad + m, pad:pad + n].copy()
        whole = tensor.from_numpy(cbig)
        c = _window(whole, pad, (m, n))
        tensor.mult(a, b, c, alpha=alpha, beta=beta)
        got = tensor.to_numpy(c)
        # nothing outside the window is written
        outside = tensor.to_numpy(whole)
        outside[pad:pad + m, pad:pad + n] = cbig[pad:pad + m, pad:pad + n]
        np.testing.assert_array_equal(outside, cbig)
        if beta != 0.0:
            expect = expect + beta * c0.astype(np.float64)
    # float32 products summed over k terms of unit scale
    tol = 1e-5 * (np.sqrt(k) + 1) * max(1.0, abs(alpha)) * 4
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=tol)


TRANS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("ta,tb", TRANS)
@pytest.mark.parametrize("m,n,k", [
    (1, 1, 1), (16, 256, 784), (16, 10, 256), (784, 256, 16), (256, 10, 16),
    (13, 37, 5), (7, 17, 300), (25, 33, 129), (6, 16, 256), (12, 32, 512),
    (5, 9, 1100),   # more than one reduction block
    (8, 20, 33), (128, 40, 70), (14, 18, 9),   # short last row tiles shared out
    (60, 48, 600), (256, 256, 64),   # A^T's panels packed, over several blocks
    (100, 30, 600), (97, 50, 512),   # B^T from 96 rows: dot tiles past k = 512, else panels
])
def test_small_kernel_matches_float64(small_path, isa, ta, tb, m, n, k):
    _check(m, n, k, ta, tb, seed=m * 1000 + n + k)


@pytest.mark.parametrize("ta,tb", TRANS)
def test_strided_windows_alpha_beta(small_path, isa, ta, tb):
    _check(11, 27, 70, ta, tb, pad=3, alpha=0.5, beta=-1.5)
    _check(19, 41, 200, ta, tb, pad=1, alpha=2.0, beta=0.0)


@pytest.mark.parametrize("ta,tb", TRANS)
def test_threads_split_rows_and_columns(small_path, threads, ta, tb):
    # wide (split by column panels) and tall (split by rows), both large
    # enough to use two threads
    _check(16, 520, 300, ta, tb, seed=1)
    _check(300, 7, 400, ta, tb, pad=2, alpha=1.5, beta=0.5, seed=2)
    _check(784, 250, 16, ta, tb, seed=3)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 300),
       ta=st.booleans(), tb=st.booleans(), pad=st.integers(0, 2),
       alpha=st.sampled_from([1.0, -0.75, 3.0]), beta=st.sampled_from([0.0, 1.0, -0.5]))
def test_small_kernel_random_shapes(m, n, k, ta, tb, pad, alpha, beta):
    cw.SetCpuGemmPath("small")
    try:
        _check(m, n, k, ta, tb, pad=pad, alpha=alpha, beta=beta, seed=m + 41 * n + 977 * k)
    finally:
        cw.SetCpuGemmPath("auto")


@pytest.mark.parametrize("path", ["auto", "blas", "small"])
def test_paths_agree_on_the_mlp_step_shapes(path):
    cw.SetCpuGemmPath(path)
    try:
        assert cw.CpuGemmPath() == path
        for m, n, k, ta, tb in [(16, 256, 784, False, False), (16, 256, 256, False, True),
                                (784, 256, 16, True, False), (16, 256, 10, False, True)]:
            _check(m, n, k, ta, tb, seed=7)
    finally:
        cw.SetCpuGemmPath("auto")


@pytest.mark.parametrize("path", ["auto", "small"])
def test_batch_128_linear_shapes(path, threads):
    """The batch-128 MLP of bench/train_step.py, which the shape rule sends
    to the kernel: forward (beta 1 as LinearForward runs it), weight and
    data gradients, 256 and 10 wide; on two threads also the 256-wide data
    gradient and products of up to 256 rows with wider B."""
    cw.SetCpuGemmPath(path)
    try:
        for m, n, k, ta, tb, beta in [(128, 256, 784, False, False, 1.0),
                                      (128, 10, 256, False, False, 1.0),
                                      (256, 256, 128, True, False, 0.0),
                                      (256, 10, 128, True, False, 0.0),
                                      (128, 256, 10, False, True, 0.0),
                                      (200, 96, 130, True, False, 0.0),
                                      (128, 256, 256, False, True, 0.0),
                                      (256, 500, 256, False, False, 1.0),
                                      (96, 784, 512, False, True, 0.0)]:
            _check(m, n, k, ta, tb, beta=beta, seed=m + n + k)
    finally:
        cw.SetCpuGemmPath("auto")


def test_unknown_path_is_a_value_error():
    with pytest.raises(ValueError, match="unknown GEMM path 'fast'"):
        cw.SetCpuGemmPath("fast")
    assert cw.CpuGemmPath() == "auto"


CPP_TEST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpp",
                        "test_gemm_small.cc")


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(l for l in f if l.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration):
        return set()


def _families():
    """(family, level, compiler flags) for each copy this CPU can run; the
    AVX-512 copy is compiled for AVX2 where AVX-512 is missing, as
    test/cpp/build_nn_test.sh does, so its 12-row tiles and tails run."""
    out = [("baseline", 0, [])]
    if platform.machine() in ("x86_64", "AMD64"):
        flags = _cpu_flags()
        avx2 = ["-mavx2", "-mfma", "-mf16c"]
        if {"avx2", "fma"} <= flags:
            out.append(("avx2", 1, avx2))
            if "avx512bw" in flags:
                out.append(("avx512", 2, ["-mavx512f", "-mavx512bw", "-mavx512dq",
                                           "-mavx512vl"] + avx2))
            else:
                out.append(("avx512", 2, avx2))
    return out


@pytest.mark.skipif(shutil.which("g++") is None or not os.path.exists(CPP_TEST),
                    reason="needs g++ and the source tree")
@pytest.mark.parametrize("family,level,flags", _families(), ids=lambda v: str(v))
def test_small_kernel_cpp_every_family(tmp_path, family, level, flags):
    root = os.path.dirname(os.path.dirname(os.path.dirname(CPP_TEST)))
    exe = str(tmp_path / f"test_gemm_small_{family}")
    cmd = ["g++", "-O2", "-std=c++17", "-ffast-math", "-fno-finite-math-only", "-Wno-psabi",
           *flags, f"-DSINGA_ISA_NS=isa_{family}", f"-DSINGA_ISA_LEVEL={level}",
           "-I", os.path.join(root, "src", "core", "tensor"), "-I", os.path.join(root, "include"),
           os.path.join(root, "src", "core", "tensor", "gemm_small_isa.cc"), CPP_TEST, "-o", exe]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([exe], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and " 0 failed" in run.stdout, (run.stdout + run.stderr)[-3000:]
