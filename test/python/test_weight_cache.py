"""Convolutions keep rearranged weights between calls (the weight cache,
src/core/nn/weight_cache.cc) for as long as nothing has written them.
Every way of writing the weights in place between two forward calls must
give the new weights' result, checked against a float64 reference.

Two layers at batch 1, 3x3, stride 1: 16 channels on a 16x16 plane take
the Winograd path with a kept transform at every ISA family; 40 -> 61
channels on a 4x4 plane take the one-vector tile, whose weight panels are
kept from the second call where the family has that tile (AVX-512)."""

import numpy as np
import pytest

from singa import autograd, device, layer, opt, tensor
from singa import singa_wrap as cw

from test_autograd_conv import conv_ref

rng = np.random.default_rng(12)
C, K, HW = 16, 24, 16
# in channels, out channels, plane side
SHAPES = {"winograd": (C, K, HW), "panels": (40, 61, 4)}


def _ref(x, w, b=None):
    return conv_ref(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _conv(x, w, b=None):
    return autograd.conv2d(x, w, b, stride=1, padding=1)


@pytest.fixture(params=sorted(SHAPES))
def setup(request):
    c, k, hw = SHAPES[request.param]
    xn = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    wn = (rng.standard_normal((k, c, 3, 3)) * 0.2).astype(np.float32)
    x, w = tensor.from_numpy(xn), tensor.from_numpy(wn)
    with autograd.train_mode(False):
        ys = [_conv(x, w).numpy() for _ in range(3)]
    # Later calls reuse what the first (Winograd) or second (panels) kept;
    # all equal the reference.
    _close(ys[0], _ref(xn, wn))
    for y in ys[1:]:
        np.testing.assert_array_equal(y, ys[0])
    return x, w, xn


def _after(x, w, xn):
    # Three calls: the first after a write must not use what was kept, the
    # second may keep the new weights' form, the third uses it.
    with autograd.train_mode(False):
        ys = [_conv(x, w).numpy() for _ in range(3)]
    _close(ys[0], _ref(xn, w.numpy()))
    for y in ys[1:]:
        np.testing.assert_array_equal(y, ys[0])
    return ys[0]


def test_copy_from_numpy(setup):
    x, w, xn = setup
    w.copy_from_numpy((rng.standard_normal(w.shape) * 0.2).astype(np.float32))
    _after(x, w, xn)


def test_in_place_ops(setup):
    x, w, xn = setup
    before = w.numpy()
    w += 0.25
    np.testing.assert_allclose(w.numpy(), before + 0.25)
    _after(x, w, xn)
    w *= -2.0
    _after(x, w, xn)
    w.set_value(0.125)
    _after(x, w, xn)


def test_copy_data_to_from(setup):
    x, w, xn = setup
    src = tensor.from_numpy((rng.standard_normal(w.shape)).astype(np.float32))
    # Only part of the weights: the rest keep their values.
    tensor.copy_data_to_from(w, src, w.size() // 2, 0, 0)
    _after(x, w, xn)


def test_host_buffer_writes(setup):
    # A buffer exported to Python is written behind the block's back: from
    # then on nothing is kept for it.
    x, w, xn = setup
    view = np.asarray(cw.HostBuffer(w.data))
    _after(x, w, xn)
    view[:] = rng.standard_normal(view.shape).astype(np.float32)
    _after(x, w, xn)
    view *= 3.0
    _after(x, w, xn)


def test_a_view_of_the_weights(setup):
    # The conv reads a weight tensor that shares its block with another
    # tensor; writing through the other one changes the weights.
    x, w, xn = setup
    flat = w.reshape((w.size(),))
    flat += 1.0
    _after(x, w, xn)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_optimizer_steps(momentum, shape):
    c, k, hw = SHAPES[shape]
    xn = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    x = tensor.from_numpy(xn)
    conv = layer.Conv2d(k, 3, padding=1)
    sgd = opt.SGD(lr=0.05, momentum=momentum)
    with autograd.train_mode(False):
        conv(x)
    for _ in range(3):
        with autograd.train_mode(True):
            out = conv(x)
            loss = autograd.reduce_mean(autograd.mul(out, out))
            sgd(loss)
        with autograd.train_mode(False):
            y, y2, y3 = (conv(x).numpy() for _ in range(3))
        _close(y, _ref(xn, conv.W.numpy(), conv.b.numpy()))
        np.testing.assert_array_equal(y, y2)
        np.testing.assert_array_equal(y, y3)


def test_data_gradient_after_a_weight_change():
    xn = rng.standard_normal((1, C, HW, HW)).astype(np.float32)
    wn = (rng.standard_normal((K, C, 3, 3)) * 0.2).astype(np.float32)
    dyn = rng.standard_normal((1, K, HW, HW)).astype(np.float32)
    w, dy = tensor.from_numpy(wn), tensor.from_numpy(dyn)
    shape = list(xn.shape)

    def dx():
        return tensor.from_raw_tensor(cw.Conv2dBackwardData(
            dy.data, w.data, shape, [1, 1], [1, 1, 1, 1], [1, 1], 1)).numpy()

    def ref():
        # dx[c] = sum_k dy[k] correlated with the flipped w[k, c].
        wf = np.ascontiguousarray(w.numpy().transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
        return _ref(dyn, wf)

    first = dx()
    _close(first, ref())
    np.testing.assert_array_equal(first, dx())
    w -= 0.5
    _close(dx(), ref())


def _graph_inputs(shape, dev):
    """x (as NumPy and on dev) and w (on dev) for one of SHAPES."""
    c, k, hw = SHAPES[shape]
    xn = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    wn = (rng.standard_normal((k, c, 3, 3)) * 0.2).astype(np.float32)
    return xn, tensor.from_numpy(xn, dev), tensor.from_numpy(wn, dev)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_graph_replays_see_in_graph_weight_updates(shape, graph_dev):
    dev = graph_dev
    xn, x, w = _graph_inputs(shape, dev)
    with autograd.train_mode(False):
        dev.EnableGraph(True)
        y1 = _conv(x, w)
        w *= 0.5
        y2 = _conv(x, w)
        dev.EnableGraph(False)
    for _ in range(3):
        w0 = w.numpy()
        dev.RunGraph(True)
        _close(y1.numpy(), _ref(xn, w0))
        _close(y2.numpy(), _ref(xn, w0 * 0.5))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_graph_replays_see_weights_written_between_replays(shape, graph_dev):
    # An inference graph replayed with unchanged weights keeps their
    # rearranged form from the first or second replay; weights written
    # between replays must give the new result at the next one.
    dev = graph_dev
    xn, x, w = _graph_inputs(shape, dev)
    with autograd.train_mode(False):
        dev.EnableGraph(True)
        y = _conv(x, w)
        dev.EnableGraph(False)
    for _ in range(2):
        w0 = w.numpy()
        outs = []
        for _ in range(3):
            dev.RunGraph(True)
            outs.append(y.numpy())
        _close(outs[0], _ref(xn, w0))
        for o in outs[1:]:
            np.testing.assert_array_equal(o, outs[0])
        w.copy_from_numpy((rng.standard_normal(w.shape) * 0.2).astype(np.float32))
