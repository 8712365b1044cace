"""SINGA's cuDNN-named handles and Gpu* functions: present exactly in CUDA
builds (as in SINGA); they refuse host tensors, and on a GPU they give the
Cpu* functions' results on the CPU (which test_compat_autograd_handles.py
checks against NumPy)."""

import numpy as np
import pytest

from singa import device, singa_wrap, tensor

HAS_CUDA = bool(singa_wrap.USE_CUDA)
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="the Gpu* names exist in CUDA builds")
needs_gpu = pytest.mark.skipif(not HAS_CUDA or device.get_num_gpus() == 0,
                               reason="needs a GPU and a CUDA build")
NAMES = ["CudnnConvHandle", "GpuConvForward", "GpuConvBackwardx", "GpuConvBackwardW",
         "GpuConvBackwardb", "CudnnPoolingHandle", "GpuPoolingForward", "GpuPoolingBackward",
         "CudnnBatchNormHandle", "GpuBatchNormForwardInference", "GpuBatchNormForwardTraining",
         "GpuBatchNormBackward"]
rng = np.random.default_rng(5)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_present_exactly_in_cuda_builds(name):
    assert hasattr(singa_wrap, name) == HAS_CUDA


@needs_cuda
def test_host_tensors_are_refused():
    x = tensor.from_numpy(randn(2, 3, 5, 5)).data
    w = tensor.from_numpy(randn(4, 3, 3, 3)).data
    b = tensor.from_numpy(randn(4)).data
    h = singa_wrap.CudnnConvHandle(x, [3, 3], [1, 1], [0, 0], 3, 4, True)
    assert (h.workspace_byte_limit, h.prefer) == (1024 ** 3, "fastest")
    with pytest.raises(RuntimeError, match=r"GpuConvForward: the input is on cpu.*CUDA device"):
        singa_wrap.GpuConvForward(x, w, b, h)
    ph = singa_wrap.CudnnPoolingHandle(x, [2, 2], [2, 2], [0, 0], True)
    with pytest.raises(RuntimeError, match="GpuPoolingForward"):
        singa_wrap.GpuPoolingForward(ph, x)
    bh = singa_wrap.CudnnBatchNormHandle(0.9, x)
    s = tensor.from_numpy(np.ones(3, np.float32)).data
    with pytest.raises(RuntimeError, match="GpuBatchNormForwardInference"):
        singa_wrap.GpuBatchNormForwardInference(bh, x, s, s, s, s)
    with pytest.raises(ValueError, match="prefer"):
        singa_wrap.CudnnConvHandle(x, [3, 3], [1, 1], [0, 0], 3, 4, True, 1, 1024, "best")


@needs_gpu
def test_gpu_functions_match_the_cpu_ones():
    gpu = device.create_cuda_gpu()
    x, w, b = randn(2, 3, 6, 6), randn(4, 3, 3, 3), randn(4)
    on = lambda a, d=None: tensor.from_numpy(a, d).data                      # noqa: E731
    back = lambda ct: tensor.to_numpy(tensor.from_raw_tensor(ct))            # noqa: E731
    hc = singa_wrap.ConvHandle(on(x), [3, 3], [1, 1], [1, 1], 3, 4, True)
    hg = singa_wrap.CudnnConvHandle(on(x, gpu), [3, 3], [1, 1], [1, 1], 3, 4, True)
    y = singa_wrap.CpuConvForward(on(x), on(w), on(b), hc)
    np.testing.assert_allclose(
        back(singa_wrap.GpuConvForward(on(x, gpu), on(w, gpu), on(b, gpu), hg)), back(y),
        rtol=1e-4, atol=1e-4)
    dy = randn(*back(y).shape)
    for gfn, cfn, args in (("GpuConvBackwardx", "CpuConvBackwardx", (dy, w, x)),
                           ("GpuConvBackwardW", "CpuConvBackwardW", (dy, x, w)),
                           ("GpuConvBackwardb", "CpuConvBackwardb", (dy, b))):
        want = back(getattr(singa_wrap, cfn)(*[on(a) for a in args], hc))
        got = back(getattr(singa_wrap, gfn)(*[on(a, gpu) for a in args], hg))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=gfn)
    pc = singa_wrap.PoolingHandle(on(x), [2, 2], [2, 2], [0, 0], True)
    pg = singa_wrap.CudnnPoolingHandle(on(x, gpu), [2, 2], [2, 2], [0, 0], True)
    py = singa_wrap.CpuPoolingForward(pc, on(x))
    gy = singa_wrap.GpuPoolingForward(pg, on(x, gpu))
    np.testing.assert_allclose(back(gy), back(py), rtol=1e-6)
    pdy = randn(*back(py).shape)
    np.testing.assert_allclose(
        back(singa_wrap.GpuPoolingBackward(pg, on(pdy, gpu), on(x, gpu), gy)),
        back(singa_wrap.CpuPoolingBackward(pc, on(pdy), on(x), py)), rtol=1e-6)
    scale, bias = randn(3), randn(3)
    bc = singa_wrap.BatchNormHandle(0.9, on(x))
    bg = singa_wrap.CudnnBatchNormHandle(0.9, on(x, gpu))
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    rmc, rvc, rmg, rvg = on(rm), on(rv), on(rm, gpu), on(rv, gpu)
    oc = singa_wrap.CpuBatchNormForwardTraining(bc, on(x), on(scale), on(bias), rmc, rvc)
    og = singa_wrap.GpuBatchNormForwardTraining(bg, on(x, gpu), on(scale, gpu), on(bias, gpu),
                                                rmg, rvg)
    for k in range(3):
        np.testing.assert_allclose(back(og[k]), back(oc[k]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(back(rmg), back(rmc), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        back(singa_wrap.GpuBatchNormForwardInference(bg, on(x, gpu), on(scale, gpu),
                                                     on(bias, gpu), rmg, rvg)),
        back(singa_wrap.CpuBatchNormForwardInference(bc, on(x), on(scale), on(bias), rmc,
                                                     rvc)), rtol=1e-4, atol=1e-5)
    gc = singa_wrap.CpuBatchNormBackwardx(bc, oc[0], on(x), on(x), on(scale), on(bias), oc[1],
                                          oc[2])
    gg = singa_wrap.GpuBatchNormBackward(bg, on(x, gpu), on(x, gpu), on(scale, gpu), og[1], og[2])
    for k in range(3):
        np.testing.assert_allclose(back(gg[k]), back(gc[k]), rtol=1e-4, atol=1e-4)
