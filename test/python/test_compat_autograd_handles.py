"""SINGA's layer kernels in singa_wrap (ConvHandle, PoolingHandle,
BatchNormHandle and the Cpu* functions, SINGA_API.md model_operation.i)
and autograd's handle forms conv2d(handle, x, W, b), pooling_2d(handle, x)
and batchnorm_2d(handle, ...), against loops in NumPy (float64)."""

import numpy as np
import pytest

from singa import autograd, singa_wrap, tensor
from gradcheck import check_grad

rng = np.random.default_rng(21)


def T(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def N(ct):
    return autograd.ctensor2numpy(ct).astype(np.float64)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- NumPy references ----

def np_conv(x, w, b, stride, pads, groups=1):
    """y, and a function giving (dx, dw, db) for an output gradient; pads
    are (top, left, bottom, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    (sh, sw), (pt, pl, pb, pr) = stride, pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        ws = w[g * og:(g + 1) * og]
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + kh, j * sw:j * sw + kw]
                y[:, g * og:(g + 1) * og, i, j] = np.einsum("nchw,ochw->no", patch, ws)
    if b is not None:
        y += np.asarray(b, np.float64).reshape(1, -1, 1, 1)

    def grads(dy):
        dy = dy.astype(np.float64)
        dxp, dw = np.zeros_like(xp), np.zeros_like(w)
        for g in range(groups):
            sl = slice(g * og, (g + 1) * og)
            for i in range(oh):
                for j in range(ow):
                    win = (slice(None), slice(g * cg, (g + 1) * cg),
                           slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw))
                    dw[sl] += np.einsum("no,nchw->ochw", dy[:, sl, i, j], xp[win])
                    dxp[win] += np.einsum("no,ochw->nchw", dy[:, sl, i, j], w[sl])
        dx = dxp[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]]
        return dx, dw, dy.sum((0, 2, 3))
    return y, grads


def np_pool(x, k, s, p, is_max):
    """Pooling with symmetric pads p = (ph, pw); padding never wins a max
    and is not counted by an average."""
    x = x.astype(np.float64)
    (kh, kw), (sh, sw), (ph, pw) = k, s, p
    n, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - ph, j * sw - pw
            win = x[:, :, max(r0, 0):min(r0 + kh, h), max(c0, 0):min(c0 + kw, w)]
            y[:, :, i, j] = win.max((2, 3)) if is_max else win.mean((2, 3))
    return y


def np_bn_train(x, scale, bias, eps=1e-5):
    x = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axes), x.var(axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    y = xhat * scale.reshape(shape) + bias.reshape(shape)

    def grads(dy):
        m = x.size / x.shape[1]
        dy = dy.astype(np.float64)
        dbias, dscale = dy.sum(axes), (dy * xhat).sum(axes)
        inv = 1 / np.sqrt(var + eps)
        dx = (scale * inv).reshape(shape) / m * (
            m * dy - dbias.reshape(shape) - xhat * dscale.reshape(shape))
        return dx, dscale, dbias
    return y, mean, var, grads


# ---- ConvHandle and the Cpu conv kernels ----

@pytest.mark.parametrize("case", [
    dict(k=(3, 3), s=(1, 1), p=(1, 1), g=1, bias=True),
    dict(k=(3, 2), s=(2, 1), p=(0, 1), g=1, bias=False),
    dict(k=(1, 1), s=(1, 2), p=(0, 0), g=2, bias=True),
])
def test_conv_handle_kernels(case):
    x, w = randn(2, 4, 6, 5), randn(6, 4 // case["g"], *case["k"])
    b = randn(6)
    h = singa_wrap.ConvHandle(T(x).data, list(case["k"]), list(case["s"]), list(case["p"]),
                              4, 6, case["bias"], case["g"])
    pads = (case["p"][0], case["p"][1], case["p"][0], case["p"][1])
    want, grads = np_conv(x, w, b if case["bias"] else None, case["s"], pads, case["g"])
    assert (h.batchsize, h.channels, h.num_filters, h.group, h.bias_term) == \
        (2, 4, 6, case["g"], case["bias"])
    assert (h.kernel_h, h.kernel_w, h.stride_h, h.stride_w, h.pad_h, h.pad_w) == \
        case["k"] + case["s"] + case["p"]
    assert (h.conv_height, h.conv_width) == want.shape[2:]
    assert (h.height, h.width, h.col_height, h.col_width) == \
        (6, 5, 4 * case["k"][0] * case["k"][1], want.shape[2] * want.shape[3])
    xt, wt, bt = T(x), T(w), T(b)
    y = singa_wrap.CpuConvForward(xt.data, wt.data, bt.data, h)
    np.testing.assert_allclose(N(y), want, rtol=1e-4, atol=1e-4)
    dy = randn(*want.shape)
    dx, dw, db = grads(dy)
    dyt = T(dy)
    np.testing.assert_allclose(N(singa_wrap.CpuConvBackwardx(dyt.data, wt.data, xt.data, h)),
                               dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(singa_wrap.CpuConvBackwardW(dyt.data, xt.data, wt.data, h)),
                               dw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(singa_wrap.CpuConvBackwardb(dyt.data, bt.data, h)), db,
                               rtol=1e-4, atol=1e-4)


def test_conv_handle_errors():
    x = T(randn(2, 3, 5, 5)).data
    with pytest.raises(ValueError, match=r"in_channels 4 .*\(2, 3, 5, 5\)"):
        singa_wrap.ConvHandle(x, [3, 3], [1, 1], [0, 0], 4, 2, True, 1)
    with pytest.raises(ValueError, match="groups"):
        singa_wrap.ConvHandle(x, [3, 3], [1, 1], [0, 0], 3, 2, True, 2)
    with pytest.raises(ValueError, match="kernel_size"):
        singa_wrap.ConvHandle(x, [3], [1, 1], [0, 0], 3, 2, True, 1)
    with pytest.raises(ValueError, match="does not fit"):
        singa_wrap.ConvHandle(x, [7, 7], [1, 1], [0, 0], 3, 2, True, 1)
    with pytest.raises(ValueError, match="4-D"):
        singa_wrap.ConvHandle(T(randn(3, 5, 5)).data, [3, 3], [1, 1], [0, 0], 3, 2, True, 1)
    with pytest.raises(ValueError, match="must fit an int"):
        singa_wrap.ConvHandle(x, [3, 3], [1, 1], [2 ** 62, 0], 3, 2, True, 1)
    h = singa_wrap.ConvHandle(x, [3, 3], [1, 1], [0, 0], 3, 2, True, 1)
    with pytest.raises(AttributeError):
        h.group = 0                        # handles describe one geometry: read-only
    w, b = T(randn(2, 3, 3, 3)).data, T(randn(2)).data
    with pytest.raises(ValueError, match=r"\(2, 3, 6, 5\).*handle"):
        singa_wrap.CpuConvForward(T(randn(2, 3, 6, 5)).data, w, b, h)
    with pytest.raises(ValueError, match=r"weight of shape \(2, 3, 2, 2\)"):
        singa_wrap.CpuConvForward(x, T(randn(2, 3, 2, 2)).data, b, h)
    with pytest.raises(ValueError, match=r"bias of shape \(3,\)"):
        singa_wrap.CpuConvForward(x, w, T(randn(3)).data, h)
    with pytest.raises(ValueError, match=r"gradient of shape \(2, 2, 4, 4\)"):
        singa_wrap.CpuConvBackwardx(T(randn(2, 2, 4, 4)).data, w, x, h)
    with pytest.raises(TypeError, match="float32"):
        singa_wrap.CpuConvForward(tensor.from_numpy(np.zeros((2, 3, 5, 5), np.int32)).data,
                                  w, b, h)


# ---- PoolingHandle ----

@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("k,s,p", [((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 1), (1, 1))])
def test_pooling_handle_kernels(is_max, k, s, p):
    x = randn(2, 3, 7, 6)
    h = singa_wrap.PoolingHandle(T(x).data, list(k), list(s), list(p), is_max)
    want = np_pool(x, k, s, p, is_max)
    assert (h.pooled_height, h.pooled_width) == want.shape[2:]
    assert h.is_max_pooling is is_max and (h.kernel_h, h.stride_w, h.pad_h) == (k[0], s[1], p[0])
    xt = T(x)
    y = singa_wrap.CpuPoolingForward(h, xt.data)
    np.testing.assert_allclose(N(y), want, rtol=1e-5, atol=1e-6)
    # backward: the gradient of sum(r * y) by central differences of the
    # NumPy forward (float64)
    r = randn(*want.shape)
    dx = N(singa_wrap.CpuPoolingBackward(h, T(r).data, xt.data, y))
    num = np.zeros(x.shape)
    x64 = x.astype(np.float64)
    for idx in np.ndindex(*x.shape):
        up, down = x64.copy(), x64.copy()
        up[idx] += 1e-4
        down[idx] -= 1e-4
        num[idx] = ((np_pool(up, k, s, p, is_max) - np_pool(down, k, s, p, is_max)) * r).sum() \
            / 2e-4
    np.testing.assert_allclose(dx, num, rtol=1e-3, atol=1e-3)


def test_pooling_handle_errors():
    x = T(randn(1, 2, 4, 4)).data
    with pytest.raises(ValueError, match="must be positive"):
        singa_wrap.PoolingHandle(x, [0, 2], [1, 1], [0, 0])
    with pytest.raises(ValueError, match="does not fit"):
        singa_wrap.PoolingHandle(x, [5, 5], [1, 1], [0, 0])
    with pytest.raises(ValueError, match="too large"):
        singa_wrap.PoolingHandle(x, [2, 2], [1, 1], [2 ** 31 - 1, 0])
    h = singa_wrap.PoolingHandle(x, [2, 2], [2, 2], [0, 0])
    with pytest.raises(ValueError, match=r"\(1, 3, 4, 4\)"):
        singa_wrap.CpuPoolingForward(h, T(randn(1, 3, 4, 4)).data)
    with pytest.raises(ValueError, match=r"gradient of shape \(1, 2, 3, 3\)"):
        singa_wrap.CpuPoolingBackward(h, T(randn(1, 2, 3, 3)).data, x, x)


# ---- BatchNormHandle ----

@pytest.mark.parametrize("shape", [(4, 3, 2, 5), (6, 3)])
def test_batchnorm_handle_kernels(shape):
    x, scale, bias = randn(*shape), randn(3), randn(3)
    rm, rv = randn(3), rng.uniform(0.5, 2, 3).astype(np.float32)
    h = singa_wrap.BatchNormHandle(0.8, T(x).data)
    assert h.factor == pytest.approx(0.8) and h.channels == 3 and h.batchsize == shape[0]
    assert h.is_2d is (len(shape) == 2)
    want, mean, var, grads = np_bn_train(x, scale, bias)
    rmt, rvt = T(rm), T(rv)
    y, bm, bv = singa_wrap.CpuBatchNormForwardTraining(h, T(x).data, T(scale).data,
                                                       T(bias).data, rmt.data, rvt.data)
    np.testing.assert_allclose(N(y), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(N(bm), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(bv), var, rtol=1e-5, atol=1e-6)
    # the running statistics moved in place: factor * running + (1 - factor) * batch
    np.testing.assert_allclose(rmt.numpy(), 0.8 * rm + 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rvt.numpy(), 0.8 * rv + 0.2 * var, rtol=1e-5, atol=1e-6)
    dy = randn(*shape)
    dx, ds, db = singa_wrap.CpuBatchNormBackwardx(h, y, T(dy).data, T(x).data, T(scale).data,
                                                  T(bias).data, bm, bv)
    for got, ref in zip((dx, ds, db), grads(dy)):
        np.testing.assert_allclose(N(got), ref, rtol=1e-3, atol=1e-4)
    inf = singa_wrap.CpuBatchNormForwardInference(h, T(x).data, T(scale).data, T(bias).data,
                                                  T(rm).data, T(rv).data)
    sh = (1, -1) + (1,) * (len(shape) - 2)
    ref = (x - rm.reshape(sh)) / np.sqrt(rv.reshape(sh) + 1e-5) * scale.reshape(sh) + \
        bias.reshape(sh)
    np.testing.assert_allclose(N(inf), ref, rtol=1e-4, atol=1e-5)


def test_batchnorm_handle_errors_leave_running_statistics():
    x = T(randn(4, 3, 2, 2)).data
    h = singa_wrap.BatchNormHandle(0.9, x)
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    with pytest.raises(ValueError, match=r"running var of shape \(4,\)"):
        singa_wrap.CpuBatchNormForwardTraining(h, x, T(np.ones(3)).data, T(np.zeros(3)).data,
                                               rm.data, T(np.ones(4)).data)
    np.testing.assert_array_equal(rm.numpy(), np.zeros(3))
    with pytest.raises(ValueError, match="channels"):
        singa_wrap.CpuBatchNormForwardInference(h, T(randn(4, 5)).data, T(np.ones(3)).data,
                                                T(np.zeros(3)).data, rm.data, rv.data)
    with pytest.raises(ValueError, match="2-D"):
        singa_wrap.BatchNormHandle(0.9, T(randn(4)).data)


# ---- autograd's handle forms ----

def test_conv2d_handle_form_and_gradients():
    x, w, b = randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4)
    h = singa_wrap.ConvHandle(T(x).data, [3, 3], [2, 2], [1, 1], 3, 4, True, 1)
    want, _ = np_conv(x, w, b, (2, 2), (1, 1, 1, 1))
    y = autograd.conv2d(h, T(x), T(w), T(b))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    assert isinstance(y.creator, autograd._Conv2d) and y.creator.handle is h
    check_grad(lambda a, u, v: autograd.conv2d(h, a, u, v), [x, w, b], atol=5e-3)
    # a handle without bias ignores b, as SINGA's
    h0 = singa_wrap.ConvHandle(T(x).data, [3, 3], [2, 2], [1, 1], 3, 4, False, 1)
    want0, _ = np_conv(x, w, None, (2, 2), (1, 1, 1, 1))
    np.testing.assert_allclose(autograd.conv2d(h0, T(x), T(w), T(b)).numpy(), want0,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(autograd._Conv2d(h0)(T(x), T(w))[0].numpy(), want0,
                               rtol=1e-4, atol=1e-4)


def test_conv2d_odd_padding():
    # SINGA's "SAME" padding: the handle is made for the padded input and
    # odd_padding (top, bottom, left, right) pads x on one side more
    x, w = randn(1, 2, 4, 4), randn(3, 2, 2, 2)
    padded = T(np.zeros((1, 2, 5, 5)))
    h = singa_wrap.ConvHandle(padded.data, [2, 2], [1, 1], [0, 0], 2, 3, False, 1)
    want, _ = np_conv(x, w, None, (1, 1), (0, 0, 1, 1))
    y = autograd.conv2d(h, T(x), T(w), None, (0, 1, 0, 1))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    check_grad(lambda a, u: autograd.conv2d(h, a, u, None, (0, 1, 0, 1)), [x, w], atol=5e-3)
    with pytest.raises(ValueError, match=r"\(1, 2, 4, 4\) does not match the handle, made "
                                         r"for \(N, 2, 5, 5\)"):
        autograd.conv2d(h, T(x), T(w))      # without the odd padding x does not fit


def test_pooling_2d_handle_form():
    x = randn(2, 3, 6, 6)
    for is_max in (True, False):
        h = singa_wrap.PoolingHandle(T(x).data, [3, 3], [2, 2], [1, 1], is_max)
        y = autograd.pooling_2d(h, T(x))
        np.testing.assert_allclose(y.numpy(), np_pool(x, (3, 3), (2, 2), (1, 1), is_max),
                                   rtol=1e-5, atol=1e-6)
        check_grad(lambda a: autograd.pooling_2d(h, a), [x], atol=5e-3)
    # odd padding: one more row and column after
    h = singa_wrap.PoolingHandle(T(np.zeros((1, 1, 5, 5))).data, [2, 2], [2, 2], [0, 0], True)
    x1 = randn(1, 1, 4, 4)
    y = autograd.pooling_2d(h, T(x1), (0, 1, 0, 1))
    np.testing.assert_allclose(y.numpy(), np_pool(x1, (2, 2), (2, 2), (0, 0), True))


def test_batchnorm_2d_handle_form():
    x, scale, bias = randn(4, 3, 2, 2), randn(3), randn(3)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    h = singa_wrap.BatchNormHandle(0.9, T(x).data)
    rmt, rvt = T(rm), T(rv)
    autograd.training = True
    y = autograd.batchnorm_2d(h, T(x), T(scale), T(bias), rmt, rvt)
    want, mean, var, _ = np_bn_train(x, scale, bias)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rmt.numpy(), 0.1 * mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(rvt.numpy(), 0.9 + 0.1 * var, rtol=1e-4, atol=1e-6)
    op = y.creator
    assert isinstance(op, autograd._BatchNorm2d) and len(op.src) == 3
    assert op.running_mean is rmt and op.running_var is rvt
    autograd.training = False
    y = autograd._BatchNorm2d(h, rmt, rvt)(T(x), T(scale), T(bias))[0]
    sh = (1, 3, 1, 1)
    ref = (x - rmt.numpy().reshape(sh)) / np.sqrt(rvt.numpy().reshape(sh) + 1e-5) * \
        scale.reshape(sh) + bias.reshape(sh)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_handle_forms_check_their_arguments():
    x = T(randn(1, 2, 4, 4))
    with pytest.raises(TypeError, match="ConvHandle"):
        autograd.conv2d("handle", x, x)
    ph = singa_wrap.PoolingHandle(x.data, [2, 2], [2, 2], [0, 0])
    with pytest.raises(TypeError, match="handle must be a singa_wrap.ConvHandle"):
        autograd._Conv2d(ph)
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 3\).*handle"):
        autograd.pooling_2d(ph, T(randn(1, 2, 3, 3)))
    # singa's own forms still work beside SINGA's
    y = autograd.conv2d(x, T(randn(3, 2, 1, 1)), None, stride=2)
    assert y.shape == (1, 3, 2, 2)
    assert autograd.pooling_2d(x, 2).shape == (1, 2, 2, 2)


def test_direct_backward_calls_as_in_singas_tests():
    # SINGA's tests call the creator's backward on a CTensor gradient and
    # unpack one gradient per learnable input
    autograd.training = True
    x = tensor.Tensor((2, 3, 3, 3))
    x.gaussian(0.0, 1.0)
    dy = singa_wrap.Tensor((2, 3, 3, 3))
    dy.Gaussian(0.0, 1.0)
    bn = autograd.BatchNorm2d(3)
    y = bn(x)
    dx, ds, db = y.creator.backward(dy)
    assert dx.shape() == (2, 3, 3, 3) and ds.shape() == (3,) and db.shape() == (3,)
    _, _, _, grads = np_bn_train(x.numpy(), np.ones(3), np.zeros(3))
    for got, ref in zip((dx, ds, db), grads(N(dy))):
        np.testing.assert_allclose(N(got), ref, rtol=1e-3, atol=1e-4)
    conv = autograd.Conv2d(3, 2, 2, stride=1, padding=0, bias=False)
    y = conv(x)
    dyc = singa_wrap.Tensor(y.shape)
    dyc.Gaussian(0.0, 1.0)
    dx, dW = y.creator.backward(dyc)
    _, grads = np_conv(x.numpy(), conv.W.numpy(), None, (1, 1), (0, 0, 0, 0))
    rx, rw, _ = grads(N(dyc))
    np.testing.assert_allclose(N(dx), rx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(dW), rw, rtol=1e-4, atol=1e-4)
