"""The CPU kernels' instruction-set families (singa/core/cpu_isa.h): every
family this machine runs gives the same convolution, pooling, batch-norm and
element-wise results as a float64 NumPy reference, and the family can be
named, switched and capped from the environment."""

import os
import subprocess
import sys

import numpy as np
import pytest

from singa import singa_wrap as cw
from singa import tensor

FAMILIES = ("baseline", "avx2", "avx512")


def available():
    current = cw.CpuIsa()
    found = []
    try:
        for name in FAMILIES:
            try:
                cw.SetCpuIsa(name)
                found.append(name)
            except ValueError:
                pass
    finally:
        cw.SetCpuIsa(current)
    return found


@pytest.fixture(params=available())
def isa(request):
    current = cw.CpuIsa()
    cw.SetCpuIsa(request.param)
    yield request.param
    cw.SetCpuIsa(current)


def conv_ref(x, w, stride, pad):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oc, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w.astype(np.float64))
    return y


@pytest.mark.parametrize("shape", [((3, 5, 9, 11), (7, 5, 3, 3), 1, 1),
                                   ((2, 4, 12, 13), (9, 4, 3, 3), 2, 1),
                                   ((2, 6, 10, 10), (4, 6, 5, 5), 1, 2),
                                   ((2, 6, 16, 24), (5, 6, 3, 3), 2, 1),
                                   ((3, 5, 16, 16), (7, 5, 1, 1), 2, 0),
                                   ((2, 6, 15, 13), (9, 6, 1, 1), 2, 0),
                                   ((20, 24, 12, 12), (10, 24, 5, 5), 1, 0)])
def test_conv_every_family(isa, shape):
    xs, ws, s, p = shape
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = conv_ref(x, w, s, p)
    y = cw.Conv2dForward(tensor.from_numpy(x).data, tensor.from_numpy(w).data, cw.Tensor(),
                         [s, s], [p] * 4, [1, 1], 1)
    got = tensor.to_numpy(tensor.from_raw_tensor(y))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # Backward passes: <dy, conv(x, w)> is bilinear, so its gradients are
    # the adjoints; checked through the same identity in float64.
    dy = rng.standard_normal(ref.shape).astype(np.float32)
    dx = cw.Conv2dBackwardData(tensor.from_numpy(dy).data, tensor.from_numpy(w).data,
                               list(xs), [s, s], [p] * 4, [1, 1], 1)
    dw = cw.Conv2dBackwardWeight(tensor.from_numpy(x).data, tensor.from_numpy(dy).data,
                                 list(ws), [s, s], [p] * 4, [1, 1], 1)
    dx = tensor.to_numpy(tensor.from_raw_tensor(dx)).astype(np.float64)
    dw = tensor.to_numpy(tensor.from_raw_tensor(dw)).astype(np.float64)
    for _ in range(3):
        u = rng.standard_normal(xs)
        v = rng.standard_normal(ws)
        assert np.isclose((dx * u).sum(), (conv_ref(u, w, s, p) * dy).sum(), rtol=1e-4)
        assert np.isclose((dw * v).sum(), (conv_ref(x, v, s, p) * dy).sum(), rtol=1e-4)


# The data gradient adds in place through the taps when dy has at least as
# many channels as dx and fewer than 64: a vector that spans two dy rows
# (rows of 8 floats with AVX-512, 4 with AVX2, 2 below) is added as two
# halves, each on its own dx row; with padding the border vectors take the
# separate scatter instead.
@pytest.mark.parametrize("shape", [(8, 20, 12, 12, 50, 5, 0), (8, 16, 8, 8, 24, 5, 0),
                                   (8, 16, 6, 6, 30, 5, 0), (6, 14, 8, 8, 40, 5, 2),
                                   (4, 13, 6, 9, 33, 3, 0)], ids=str)
def test_conv_data_gradient_in_halves_every_family(isa, threads, shape):
    n, c, h, wd, oc, k, pad = shape
    rng = np.random.default_rng(9)
    w = rng.standard_normal((oc, c, k, k)).astype(np.float32)
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    dy = rng.standard_normal((n, oc, oh, ow)).astype(np.float32)
    ref = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    for i in range(k):
        for j in range(k):
            ref[:, :, i:i + oh, j:j + ow] += np.einsum(
                "nmyx,mc->ncyx", dy.astype(np.float64), w[:, :, i, j].astype(np.float64))
    ref = ref[:, :, pad:pad + h, pad:pad + wd]
    dx = cw.Conv2dBackwardData(tensor.from_numpy(dy).data, tensor.from_numpy(w).data,
                               [n, c, h, wd], [1, 1], [pad] * 4, [1, 1], 1)
    np.testing.assert_allclose(tensor.to_numpy(tensor.from_raw_tensor(dx)), ref,
                               rtol=1e-4, atol=1e-4 * np.abs(ref).max())


# Products with at most 16 output pixels (a 4x4 plane at batch 1) take a
# one-vector register tile with AVX-512: output channels not a multiple of
# its rows, reductions longer than one block, fewer pixels than a vector,
# with a bias, and split over two threads by the reduction.
@pytest.mark.parametrize("shape", [(1, 256, 4, 4, 60, 3, 1), (1, 20, 3, 5, 45, 3, 1),
                                   (2, 8, 2, 2, 33, 3, 1), (1, 600, 4, 4, 29, 1, 1),
                                   (1, 64, 8, 8, 57, 3, 2)], ids=str)
def test_conv_forward_few_pixels_every_family(isa, threads, shape):
    n, c, h, wd, oc, k, s = shape
    rng = np.random.default_rng(10)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c, k, k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    pad = k // 2
    ref = conv_ref(x, w, s, pad) + b[:, None, None]
    y = cw.Conv2dForward(tensor.from_numpy(x).data, tensor.from_numpy(w).data,
                         tensor.from_numpy(b).data, [s, s], [pad] * 4, [1, 1], 1)
    np.testing.assert_allclose(tensor.to_numpy(tensor.from_raw_tensor(y)), ref, rtol=1e-4,
                               atol=1e-4 * np.abs(ref).max())


def test_pool_norm_and_elementwise_every_family(isa):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 10, 34)).astype(np.float32)
    y, _ = cw.MaxPool2dForward(tensor.from_numpy(x).data, [2, 2], [2, 2], [0] * 4, [1, 1],
                               False)
    ref = x.reshape(2, 3, 5, 2, 17, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_raw_tensor(y)), ref)
    scale = rng.standard_normal(3).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    out = cw.BatchNormForwardTraining(tensor.from_numpy(x).data, tensor.from_numpy(scale).data,
                                      tensor.from_numpy(bias).data, 1e-5)
    xd = x.astype(np.float64)
    mean, var = xd.mean(axis=(0, 2, 3)), xd.var(axis=(0, 2, 3))
    bn = (xd - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * \
        scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(tensor.to_numpy(tensor.from_raw_tensor(out[0])), bn, atol=1e-4)
    t = tensor.from_numpy(x)
    np.testing.assert_allclose(tensor.to_numpy(tensor.exp(t) + t * t),
                               np.exp(xd) + xd * xd, rtol=1e-5)
    m = rng.standard_normal((67, 45)).astype(np.float32)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_numpy(m).T.contiguous()), m.T)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,offset", [((13, 41, 8, 8), -30.0), ((9, 7, 1, 1031), 50.0),
                                          ((7, 5, 3, 23), 0.0), ((6, 3, 50, 60), 1000.0),
                                          ((64, 64, 32, 32), 3.0)])
def test_batchnorm_training_and_backward_every_family(isa, threads, shape, offset):
    # Batches that are no multiple of the statistics pass's sample group,
    # planes with vector tails, large means, and work enough for threads to
    # split the channels: forward statistics and output and all three
    # gradients against float64. The last shape's x, dy and dx reach 48 MiB,
    # where the backward writes dx with non-temporal stores.
    import singa
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        rng = np.random.default_rng(7)
        x = (rng.standard_normal(shape) * 2 + offset).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        c = shape[1]
        scale = rng.standard_normal(c).astype(np.float32)
        bias = rng.standard_normal(c).astype(np.float32)
        y, mean, var = cw.BatchNormForwardTraining(
            tensor.from_numpy(x).data, tensor.from_numpy(scale).data,
            tensor.from_numpy(bias).data, 1e-5)
        dx, ds, db = cw.BatchNormBackward(
            tensor.from_numpy(x).data, tensor.from_numpy(dy).data,
            tensor.from_numpy(scale).data, mean, var, 1e-5)
    finally:
        singa.set_num_threads(saved)
    got = [tensor.to_numpy(tensor.from_raw_tensor(t)).astype(np.float64)
           for t in (y, mean, var, dx, ds, db)]
    xd, g = x.astype(np.float64), dy.astype(np.float64)
    axes = (0, 2, 3)
    m, v = xd.mean(axis=axes), xd.var(axis=axes)
    inv = 1 / np.sqrt(v + 1e-5)
    xh = (xd - m[:, None, None]) * inv[:, None, None]
    ref_db = g.sum(axis=axes)
    ref_ds = (g * xh).sum(axis=axes)
    cnt = x.size / c
    ref_dx = (scale * inv)[:, None, None] * (g - (ref_db / cnt)[:, None, None]
                                             - xh * (ref_ds / cnt)[:, None, None])
    ref = [xh * scale[:, None, None] + bias[:, None, None], m, v, ref_dx, ref_ds, ref_db]
    for name, a, r in zip(("y", "mean", "var", "dx", "dscale", "dbias"), got, ref):
        # The output and gradients use x - mean with the mean rounded to
        # float32, off by up to an ulp of the offset: allowed for on top.
        shift = 1e-6 * abs(offset) * inv.max()
        tol = 1e-4 * np.abs(r).max()
        if name in ("y", "dx"):
            tol += shift * np.abs(scale).max()
        if name == "dscale":
            tol += shift * np.abs(g).sum(axis=axes).max()
        np.testing.assert_allclose(a, r, rtol=0, atol=tol, err_msg=name)


def test_family_names_and_errors():
    assert cw.CpuIsa() in FAMILIES
    assert "baseline" in available()
    with pytest.raises(ValueError, match="unknown cpu ISA 'sse9'"):
        cw.SetCpuIsa("sse9")
    assert cw.CpuFmaPeak(1, 0.01) > 0
    with pytest.raises(ValueError, match="threads >= 1"):
        cw.CpuFmaPeak(0, 0.01)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs this process may pin threads to")
def test_core_to_core_probe():
    cpus = sorted(os.sched_getaffinity(0))
    ns = cw.CpuCoreToCoreNs(cpus[0], cpus[1], 0.01)
    # a cache line between two cores: tens to hundreds of nanoseconds, far
    # more if the host preempts a vCPU, never nothing
    assert 1.0 < ns < 1e6
    assert sorted(os.sched_getaffinity(0)) == cpus  # the caller's CPU set is back
    with pytest.raises(ValueError, match="two different CPUs"):
        cw.CpuCoreToCoreNs(cpus[0], cpus[0], 0.01)
    with pytest.raises(ValueError, match=f"CPU {max(cpus) + 1} is not available"):
        cw.CpuCoreToCoreNs(cpus[0], max(cpus) + 1, 0.01)
    with pytest.raises(ValueError, match="seconds must be in"):
        cw.CpuCoreToCoreNs(cpus[0], cpus[1], 0.0)


def test_environment_caps_the_family():
    code = "from singa import singa_wrap as w; print(w.CpuIsa())"
    env = dict(os.environ, SINGA_CPU_ISA="baseline")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out == "baseline"
    # An unknown name leaves the choice to the CPU rather than failing.
    env["SINGA_CPU_ISA"] = "bogus"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out in FAMILIES
