"""conv2d and pooling against direct-loop NumPy references (small shapes),
gradients against central differences, and batch / layer norm."""

import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor
from gradcheck import LAYOUTS, check_grad, make_tensor

rng = np.random.default_rng(3)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def distinct(*shape):
    """Values at least 0.05 apart, so finite differences never swap a max."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.05 - n * 0.025).astype(np.float32).reshape(shape)


def out_len(n, k, s, p0, p1, d, ceil_mode=False):
    span = n + p0 + p1 - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p0:
        out -= 1
    return out


def conv_ref(x, w, b, stride, pads, dil, group):
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, pads, dil
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = out_len(h, kh, sh, pt, pb, dh), out_len(wd, kw, sw, pl, pr, dw)
    y = np.zeros((n, oc, oh, ow))
    ocg = oc // group
    for o in range(oc):
        g = o // ocg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return y if b is None else y + b[None, :, None, None]


CONV_CASES = [
    dict(x=(2, 3, 5, 5), w=(4, 3, 3, 3), stride=1, pad=1, dil=1, group=1, bias=True),
    dict(x=(1, 2, 6, 5), w=(2, 2, 2, 3), stride=(2, 1), pad=(0, 1, 1, 0), dil=1, group=1,
         bias=False),
    dict(x=(1, 4, 5, 6), w=(4, 2, 2, 2), stride=1, pad=0, dil=(2, 1), group=2, bias=True),
    dict(x=(2, 2, 4, 4), w=(2, 1, 3, 3), stride=2, pad=1, dil=1, group=2, bias=False),
]


def _geometry(case):
    s = case["stride"]
    s = (s, s) if isinstance(s, int) else s
    p = case["pad"]
    p = (p,) * 4 if isinstance(p, int) else p
    d = case["dil"]
    d = (d, d) if isinstance(d, int) else d
    return s, p, d


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d(case, layout, dev):
    x, w = randn(*case["x"]), randn(*case["w"]) * 0.5
    s, p, d = _geometry(case)
    kw = dict(stride=case["stride"], padding=case["pad"], dilation=case["dil"],
              group=case["group"])
    if case["bias"]:
        b = randn(case["w"][0])
        y = check_grad(lambda a, u, v: ag.conv2d(a, u, v, **kw), [x, w, b], layout,
                       atol=5e-3, dev=dev)
    else:
        b = None
        y = check_grad(lambda a, u: ag.conv2d(a, u, None, **kw), [x, w], layout, atol=5e-3,
                       dev=dev)
    np.testing.assert_allclose(y, conv_ref(x, w, b, s, p, d, case["group"]),
                               rtol=1e-4, atol=1e-4)


def test_conv2d_bad_shapes():
    x = make_tensor(randn(1, 3, 5, 5))
    with pytest.raises(ValueError, match=r"\(1, 3, 5, 5\).*\(4, 2, 3, 3\)"):
        ag.conv2d(x, make_tensor(randn(4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"\(1, 3, 5, 5\)"):
        ag.conv2d(x, make_tensor(randn(4, 3, 7, 7)))
    with pytest.raises(ValueError, match="bias"):
        ag.conv2d(x, make_tensor(randn(4, 3, 3, 3)), make_tensor(randn(3)))
    with pytest.raises(ValueError, match=r"\(3, 5, 5\)"):
        ag.conv2d(make_tensor(randn(3, 5, 5)), make_tensor(randn(4, 3, 3, 3)))


def pool_ref(x, k, s, p, is_max, ceil_mode=False, include_pad=False, dil=(1, 1)):
    n, c, h, w = x.shape
    oh = out_len(h, k[0], s[0], p[0], p[2], dil[0], ceil_mode)
    ow = out_len(w, k[1], s[1], p[1], p[3], dil[1], ceil_mode)
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = [i * s[0] - p[0] + a * dil[0] for a in range(k[0])]
            cols = [j * s[1] - p[1] + b * dil[1] for b in range(k[1])]
            inside = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
            vals = np.stack([x[:, :, r, q] for r, q in inside], -1).astype(np.float64)
            if is_max:
                y[:, :, i, j] = vals.max(-1)
            else:
                if include_pad:
                    cnt = sum(1 for r in rows for q in cols
                              if -p[0] <= r < h + p[2] and -p[1] <= q < w + p[3])
                else:
                    cnt = len(inside)
                y[:, :, i, j] = vals.sum(-1) / cnt
    return y


POOL_CASES = [
    dict(k=2, s=None, p=0, ceil=False),
    dict(k=3, s=2, p=1, ceil=False),
    dict(k=(3, 2), s=(1, 2), p=(1, 0, 0, 1), ceil=True),
    dict(k=3, s=2, p=0, ceil=True),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_and_avg_pool2d(case, layout, dev):
    x = distinct(2, 2, 5, 6)
    k = (case["k"],) * 2 if isinstance(case["k"], int) else case["k"]
    s = k if case["s"] is None else ((case["s"],) * 2 if isinstance(case["s"], int) else case["s"])
    p = (case["p"],) * 4 if isinstance(case["p"], int) else case["p"]
    y = check_grad(lambda t: ag.max_pool2d(t, case["k"], case["s"], case["p"],
                                           ceil_mode=case["ceil"]), [x], layout, dev=dev)
    np.testing.assert_allclose(y, pool_ref(x, k, s, p, True, case["ceil"]), rtol=1e-6)
    for include in (False, True):
        y = check_grad(lambda t: ag.avg_pool2d(t, case["k"], case["s"], case["p"],
                                               case["ceil"], include), [x], layout, dev=dev)
        np.testing.assert_allclose(y, pool_ref(x, k, s, p, False, case["ceil"], include),
                                   rtol=1e-5, atol=1e-6)


def test_max_pool2d_dilation():
    x = distinct(1, 2, 6, 6)
    y = check_grad(lambda t: ag.max_pool2d(t, 2, 1, 0, dilation=2), [x], "transposed")
    np.testing.assert_allclose(y, pool_ref(x, (2, 2), (1, 1), (0,) * 4, True, dil=(2, 2)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pool1d(layout):
    x = distinct(2, 3, 7)
    x4 = x[:, :, None, :]
    y = check_grad(lambda t: ag.max_pool1d(t, 3, 2, 1), [x], layout)
    np.testing.assert_allclose(y, pool_ref(x4, (1, 3), (1, 2), (0, 1, 0, 1), True)[:, :, 0])
    # Averages of values up to 1 in magnitude can cancel to near zero, where
    # float32 sums are off by about 1e-7 absolute whatever their order: the
    # same atol as the 2-D average pooling test.
    y = check_grad(lambda t: ag.avg_pool1d(t, 2), [x], layout)
    np.testing.assert_allclose(y, pool_ref(x4, (1, 2), (1, 2), (0,) * 4, False)[:, :, 0],
                               rtol=1e-6, atol=1e-6)
    y = check_grad(lambda t: ag.pooling_1d(t, 3, 1, 0, is_max=False), [x], layout)
    np.testing.assert_allclose(y, pool_ref(x4, (1, 3), (1, 1), (0,) * 4, False)[:, :, 0],
                               rtol=1e-6, atol=1e-6)


def test_pooling_bad_arguments():
    x = make_tensor(randn(1, 1, 4, 4))
    with pytest.raises(ValueError, match="half"):
        ag.max_pool2d(x, 2, 1, 2)
    with pytest.raises(ValueError, match=r"\(1, 1, 4, 4\)"):
        ag.max_pool2d(x, 5)
    with pytest.raises(ValueError, match=r"\(1, 4, 4\)"):
        ag.max_pool2d(make_tensor(randn(1, 4, 4)), 2)
    with pytest.raises(ValueError, match=r"\(1, 1, 4, 4\)"):
        ag.max_pool1d(x, 2)


# ---- normalisation ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (5, 3)], ids=str)
def test_batchnorm_training(shape, layout):
    x = randn(*shape) * 2 + 1
    scale, bias = rng.uniform(0.5, 1.5, 3).astype(np.float32), randn(3)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)

    def bn(t, s, b):
        # fresh running statistics each call: forward updates them in place
        return ag.batchnorm_2d(t, s, b, make_tensor(rm), make_tensor(rv), 0.9, 1e-5)

    y = check_grad(bn, [x, scale, bias], layout, atol=5e-3, train=True)
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = (1, 3) + (1,) * (len(shape) - 2)
    mean, var = x.mean(axes), x.var(axes)
    ref = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-5) * \
        scale.reshape(bshape) + bias.reshape(bshape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # running statistics: momentum * running + (1 - momentum) * batch
    rmt, rvt = make_tensor(rm), make_tensor(rv)
    with ag.train_mode(True):
        ag.batchnorm_2d(make_tensor(x, layout), make_tensor(scale), make_tensor(bias), rmt, rvt)
    np.testing.assert_allclose(tensor.to_numpy(rmt), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(rvt), 0.9 + 0.1 * var, rtol=1e-5)


def test_batchnorm_inference_uses_running_statistics():
    x = randn(4, 3, 2, 2)
    scale, bias = randn(3), randn(3)
    rm, rv = randn(3), rng.uniform(0.5, 2, 3).astype(np.float32)
    with ag.no_grad():
        y = ag.batchnorm_2d(make_tensor(x), make_tensor(scale), make_tensor(bias),
                            make_tensor(rm), make_tensor(rv))
    b = (1, 3, 1, 1)
    ref = (x - rm.reshape(b)) / np.sqrt(rv.reshape(b) + 1e-5) * scale.reshape(b) + bias.reshape(b)
    np.testing.assert_allclose(tensor.to_numpy(y), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"\(4,\).*\(4, 3, 2, 2\)"):
        ag.batchnorm_2d(make_tensor(x), make_tensor(randn(4)), make_tensor(bias),
                        make_tensor(rm), make_tensor(rv))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis, layout):
    x = randn(2, 3, 4) * 2 + 1
    norm_shape = x.shape[axis % 3:]
    scale = rng.uniform(0.5, 1.5, norm_shape).astype(np.float32)
    bias = randn(*norm_shape)
    y = check_grad(lambda t, s, b: ag.layer_norm(t, s, b, axis), [x, scale, bias], layout,
                   atol=5e-3)
    axes = tuple(range(axis % 3, 3))
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5) * scale + bias,
                               rtol=1e-4, atol=1e-4)


# Stride-1 layers with a reduction of at most 64 (c * kh * kw), outputs in at
# least 4/5 of the padded row width and a batch that splits evenly over the
# threads run the "flat-shift" forward on the CPU (doc/design.md,
# "Convolution"): LeNet's first layer, an RGB 3x3 stem, asymmetric pads with a
# non-square kernel, a 1x1 kernel, odd widths and a last tile partly filled.
SHIFT_CASES = [
    dict(x=(4, 1, 28, 28), w=(20, 1, 5, 5), pad=0),
    dict(x=(2, 3, 16, 17), w=(16, 3, 3, 3), pad=1),
    dict(x=(4, 2, 9, 7), w=(5, 2, 4, 2), pad=(1, 0, 2, 1)),
    dict(x=(2, 4, 6, 5), w=(7, 4, 1, 1), pad=0),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", SHIFT_CASES, ids=str)
def test_conv2d_flat_shift_forward(case, threads):
    import singa

    x, w, b = randn(*case["x"]), randn(*case["w"]), randn(case["w"][0])
    p = case["pad"]
    p = (p,) * 4 if isinstance(p, int) else p
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        y = ag.conv2d(make_tensor(x), make_tensor(w), make_tensor(b), stride=1,
                      padding=case["pad"])
    finally:
        singa.set_num_threads(saved)
    np.testing.assert_allclose(tensor.to_numpy(y), conv_ref(x, w, b, (1, 1), p, (1, 1), 1),
                               rtol=1e-4, atol=1e-4)


def conv_dw_ref(x, dy, wshape, pads):
    """Stride-1 weight gradient in float64: dw[m, c, i, j] = sum over images
    and outputs of dy * the input window shifted by (i, j)."""
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    _, _, kh, kw = wshape
    oh, ow = dy.shape[2:]
    dw = np.zeros(wshape)
    for i in range(kh):
        for j in range(kw):
            dw[:, :, i, j] = np.einsum("nmyx,ncyx->mc", dy.astype(np.float64),
                                       xp[:, :, i:i + oh, j:j + ow])
    return dw


# The same layers' weight gradient runs the flat-shift form too.
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", SHIFT_CASES, ids=str)
def test_conv2d_flat_shift_weight_gradient(case, threads):
    import singa
    from singa import autograd, singa_wrap

    x = randn(*case["x"])
    p = case["pad"]
    p = (p,) * 4 if isinstance(p, int) else p
    oh = x.shape[2] + p[0] + p[2] - case["w"][2] + 1
    ow = x.shape[3] + p[1] + p[3] - case["w"][3] + 1
    dy = randn(x.shape[0], case["w"][0], oh, ow)
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        dw = singa_wrap.Conv2dBackwardWeight(
            tensor.from_numpy(x).data, tensor.from_numpy(dy).data, list(case["w"]),
            [1, 1], list(p), [1, 1], 1)
    finally:
        singa.set_num_threads(saved)
    np.testing.assert_allclose(autograd.ctensor2numpy(dw),
                               conv_dw_ref(x, dy, case["w"], p), rtol=1e-4, atol=1e-3)


# Strided weight gradients whose dy planes are read in place (16x16 outputs,
# more than 1024 pixels in all): the next image's input and dy are fetched
# ahead while one image is summed; with at most 128 taps a block takes up
# to four whole images, each tile summing them in one call.
STRIDED_DW_CASES = [
    dict(x=(5, 8, 32, 32), w=(6, 8, 1, 1), pad=0),
    dict(x=(5, 4, 32, 32), w=(5, 4, 3, 3), pad=1),
    dict(x=(9, 16, 32, 32), w=(13, 16, 1, 1), pad=0),
    # 576 columns: 5 blocks of 128, 6 of 96 at two threads
    dict(x=(5, 64, 32, 32), w=(24, 64, 3, 3), pad=1),
]


def conv_dw_strided_ref(x, dy, wshape, s, p):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = dy.shape[2:]
    dw = np.zeros(wshape)
    for i in range(wshape[2]):
        for j in range(wshape[3]):
            dw[:, :, i, j] = np.einsum("nmyx,ncyx->mc", dy.astype(np.float64),
                                       xp[:, :, i:i + s * oh:s, j:j + s * ow:s])
    return dw


@pytest.mark.parametrize("case", STRIDED_DW_CASES, ids=str)
def test_conv2d_strided_weight_gradient_in_place(case, threads):
    from singa import autograd, singa_wrap

    x, p, ws = randn(*case["x"]), case["pad"], case["w"]
    oh = (x.shape[2] + 2 * p - ws[2]) // 2 + 1
    ow = (x.shape[3] + 2 * p - ws[3]) // 2 + 1
    dy = randn(x.shape[0], ws[0], oh, ow)
    dw = singa_wrap.Conv2dBackwardWeight(tensor.from_numpy(x).data, tensor.from_numpy(dy).data,
                                         list(ws), [2, 2], [p] * 4, [1, 1], 1)
    np.testing.assert_allclose(autograd.ctensor2numpy(dw), conv_dw_strided_ref(x, dy, ws, 2, p),
                               rtol=1e-4, atol=1e-3)


# Few pixels (one slab of the product) and a long reduction: at 2 threads
# the forward is split by input channels, whose partial outputs are added.
ONE_SLAB_CASES = [
    dict(x=(1, 256, 4, 4), w=(40, 256, 3, 3), stride=1, pad=1),
    dict(x=(2, 256, 2, 3), w=(17, 256, 3, 3), stride=1, pad=1),
    dict(x=(1, 240, 7, 7), w=(24, 240, 3, 3), stride=2, pad=1),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", ONE_SLAB_CASES, ids=str)
def test_conv2d_one_slab_long_reduction(case, threads):
    import singa

    x, w, b = randn(*case["x"]), randn(*case["w"]), randn(case["w"][0])
    s, p = case["stride"], case["pad"]
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        y = ag.conv2d(make_tensor(x), make_tensor(w), make_tensor(b), stride=s, padding=p)
    finally:
        singa.set_num_threads(saved)
    np.testing.assert_allclose(tensor.to_numpy(y),
                               conv_ref(x, w, b, (s, s), (p,) * 4, (1, 1), 1),
                               rtol=1e-4, atol=1e-3)


# 3x3 stride-1 weight gradients on the Winograd path: shapes whose batch
# has many tiles take 4x4 dy tiles (F(3x3, 4x4)), the small ones 2x2
# (src/core/nn/winograd_weight.h), with partial tiles at odd edges.
WINOGRAD_DW_CASES = [
    dict(x=(4, 32, 8, 8), w=(24, 32, 3, 3), pad=1),
    dict(x=(3, 20, 13, 11), w=(16, 20, 3, 3), pad=(0, 1, 2, 0)),
    dict(x=(2, 64, 6, 6), w=(64, 64, 3, 3), pad=0),
    dict(x=(2, 16, 2, 3), w=(8, 16, 3, 3), pad=1),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", WINOGRAD_DW_CASES, ids=str)
def test_conv2d_winograd_weight_gradient(case, threads):
    import singa

    x, w, b = randn(*case["x"]), randn(*case["w"]), randn(case["w"][0])
    p = case["pad"]
    p = (p,) * 4 if isinstance(p, int) else p
    xt, wt, bt = make_tensor(x), make_tensor(w), make_tensor(b)
    for t in (xt, wt, bt):
        t.requires_grad = t.stores_grad = True
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        with ag.train_mode(True):
            y = ag.conv2d(xt, wt, bt, padding=p)
            dy = randn(*y.shape)
            grads = {id(t): g for t, g in ag.backward(y, tensor.from_numpy(dy))}
    finally:
        singa.set_num_threads(saved)
    np.testing.assert_allclose(tensor.to_numpy(grads[id(wt)]),
                               conv_dw_ref(x, dy, case["w"], p), rtol=1e-4, atol=1e-3)


def conv_dx_ref(dy, w, xshape, pad):
    """x's gradient of a stride-1 convolution, in float64: each output's
    gradient spread back over the window it read."""
    n, c, h, wd = xshape
    k, _, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    dxp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, i:i + oh, j:j + ow] += np.einsum(
                "nkhw,kc->nchw", dy.astype(np.float64), w[:, :, i, j].astype(np.float64))
    return dxp[:, :, pad:pad + h, pad:pad + wd]


# The data gradient of layers with one to four input channels (the tap-
# scatter form, conv_taps_dx.h): dx summed in place (no padding, rows of
# whole vectors) or in padded planes, rows ending in a short vector, kernels
# of 2 to 7 rows, a last group of fewer spots than a tile holds.
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(3, 1, 28, 28, 20, 5, 5, 0), (2, 3, 32, 32, 16, 3, 3, 1),
                                   (2, 2, 13, 29, 7, 5, 5, 2), (2, 4, 9, 10, 5, 7, 7, 3),
                                   (3, 1, 6, 7, 3, 2, 2, 1), (1, 3, 5, 21, 9, 3, 3, 0)],
                         ids=str)
def test_conv2d_few_input_channels_data_gradient(shape, threads):
    import singa
    from singa import autograd, singa_wrap

    n, c, h, wd, k, kh, kw, pad = shape
    w = randn(k, c, kh, kw)
    dy = randn(n, k, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1)
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        dx = singa_wrap.Conv2dBackwardData(tensor.from_numpy(dy).data, tensor.from_numpy(w).data,
                                           [n, c, h, wd], [1, 1], [pad] * 4, [1, 1], 1)
    finally:
        singa.set_num_threads(saved)
    np.testing.assert_allclose(autograd.ctensor2numpy(dx), conv_dx_ref(dy, w, (n, c, h, wd), pad),
                               rtol=1e-4, atol=1e-4)


# 3x3 stride-1 layers with 8x8 outputs at batch 1: with AVX2 the forward
# (and, with padding 1, the data gradient) take Winograd's 2x2 output tiles
# (src/core/nn/winograd.h); the second call finds the weights' transform
# in the cache, and a write to the weights makes it transform them again.
# With AVX-512 the 8x8 planes and the 16x16 and 14x14 ones (4x4 tiles)
# fill one vector of a panel, and take the narrow product over row blocks
# of the cached transform (more than 64 channels: summed in chunks).
# On a 4x4 plane the data gradient runs as a forward pass (conv_few.h).
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 96, 8, 80, 1), (1, 64, 8, 48, 1), (1, 32, 10, 24, 0),
                                   (1, 64, 4, 72, 1), (1, 40, 16, 56, 1), (1, 24, 14, 30, 1),
                                   (1, 150, 8, 20, 1)], ids=str)
def test_conv2d_small_planes_forward_and_data_gradient(shape, threads):
    import singa

    n, c, hw, k, pad = shape
    x, w = randn(n, c, hw, hw), randn(k, c, 3, 3)
    xt, wt = make_tensor(x), make_tensor(w)
    xt.requires_grad = xt.stores_grad = True
    saved = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        for scale in (1.0, 1.0, -2.0):
            if scale != 1.0:
                wt *= scale
                w = w * scale
            with ag.train_mode(True):
                y = ag.conv2d(xt, wt, padding=pad)
                dy = randn(*y.shape)
                grads = {id(t): g for t, g in ag.backward(y, tensor.from_numpy(dy))}
            np.testing.assert_allclose(tensor.to_numpy(y),
                                       conv_ref(x, w, None, (1, 1), (pad,) * 4, (1, 1), 1),
                                       rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(tensor.to_numpy(grads[id(xt)]),
                                       conv_dx_ref(dy, w, x.shape, pad), rtol=1e-4, atol=1e-3)
    finally:
        singa.set_num_threads(saved)


# Gradients of few-channel layers with dy of 8 MiB and more, which fetch
# the dy they read next while they compute: the data gradient's tap-scatter
# form (conv_taps_dx.h; LeNet-like, summed in dx's own planes, and an RGB
# stem, summed in padded planes) and the flat-shift weight gradient
# (conv_shift.h).
@pytest.mark.parametrize("shape", [(64, 1, 28, 64, 5, 0), (33, 3, 32, 64, 3, 1)], ids=str)
def test_conv2d_few_channel_gradients_fetched_ahead(shape, threads):
    from singa import autograd, singa_wrap

    n, c, hw, k, kk, pad = shape
    x, w = randn(n, c, hw, hw), randn(k, c, kk, kk)
    oh = hw + 2 * pad - kk + 1
    dy = randn(n, k, oh, oh)
    dx = singa_wrap.Conv2dBackwardData(tensor.from_numpy(dy).data, tensor.from_numpy(w).data,
                                       list(x.shape), [1, 1], [pad] * 4, [1, 1], 1)
    np.testing.assert_allclose(autograd.ctensor2numpy(dx), conv_dx_ref(dy, w, x.shape, pad),
                               rtol=1e-4, atol=1e-3)
    dw = singa_wrap.Conv2dBackwardWeight(tensor.from_numpy(x).data, tensor.from_numpy(dy).data,
                                         list(w.shape), [1, 1], [pad] * 4, [1, 1], 1)
    np.testing.assert_allclose(autograd.ctensor2numpy(dw), conv_dw_ref(x, dy, w.shape, (pad,) * 4),
                               rtol=1e-4, atol=1e-3)
