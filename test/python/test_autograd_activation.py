"""Activations, softmax and dropout: forward against NumPy, backward
against central differences on contiguous and strided inputs."""


import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor
from gradcheck import LAYOUTS, check_grad, make_tensor, analytic_grads

rng = np.random.default_rng(99)


def signed(lo, hi, shape=(3, 4)):
    """lo <= |x| <= hi with random signs: no value within lo of the kink at 0."""
    mag = rng.uniform(lo, hi, size=shape)
    return (mag * np.where(rng.random(shape) < 0.5, -1, 1)).astype(np.float32)


# relu, sigmoid, tanh, gelu, softplus and softsign are rows of the op table,
# checked in test_opdefs.py.
# name: (function, NumPy reference, input)
CASES = {
    "leakyrelu": (lambda x: ag.leakyrelu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
                  signed(0.05, 2)),
    "elu": (lambda x: ag.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)),
            signed(0.05, 2)),
    "selu": (ag.selu, lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1)),
             signed(0.05, 2)),
    "hardsigmoid": (ag.hardsigmoid, lambda x: np.clip(0.2 * x + 0.5, 0, 1),
                    np.concatenate([signed(0.1, 2.4, (2, 4)), signed(2.6, 4, (1, 4))])),
    "softmax_last": (ag.softmax, lambda x: _np_softmax(x, -1), signed(0, 3)),
    "softmax_axis0": (lambda x: ag.softmax(x, 0), lambda x: _np_softmax(x, 0), signed(0, 3)),
    "log_softmax": (ag.log_softmax, lambda x: np.log(_np_softmax(x, -1)), signed(0, 3)),
    "log_softmax_3d": (lambda x: ag.log_softmax(x, 1), lambda x: np.log(_np_softmax(x, 1)),
                       signed(0, 3, (2, 3, 2))),
}


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_activation(name, layout, dev):
    fn, ref, x = CASES[name]
    y = check_grad(fn, [x], layout, dev=dev)
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_prelu_broadcast_slope(layout):
    x = signed(0.05, 2, (2, 3, 2))
    slope = rng.uniform(0.1, 0.5, size=(3, 1)).astype(np.float32)
    y = check_grad(ag.prelu, [x, slope], layout)
    np.testing.assert_allclose(y, np.where(x > 0, x, slope * x), rtol=1e-6)


def test_softmax_large_logits_are_stable():
    x = make_tensor(np.array([[1000.0, 0.0], [-1000.0, 0.0]], np.float32))
    y = tensor.to_numpy(ag.softmax(x))
    np.testing.assert_allclose(y, [[1, 0], [0, 1]], atol=1e-6)
    assert np.isfinite(tensor.to_numpy(ag.log_softmax(x))).all()


def test_softmax_bad_axis():
    with pytest.raises(IndexError, match=r"\(3, 4\)"):
        ag.softmax(make_tensor(signed(0, 1)), 2)


def test_dropout_training_and_inference():
    x = np.ones((100, 50), np.float32)
    with ag.train_mode(False):
        y = tensor.to_numpy(ag.dropout(make_tensor(x), ratio=0.3))
    np.testing.assert_array_equal(y, x)
    y, grads = analytic_grads(lambda t: ag.dropout(t, ratio=0.3), [x], "transposed")
    kept = y != 0
    # survivors are scaled by 1 / (1 - ratio); about 70% survive
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    assert 0.6 < kept.mean() < 0.8
    # the gradient is the same mask and scale
    np.testing.assert_allclose(grads[0], y, rtol=1e-6)
    with pytest.raises(ValueError):
        ag.dropout(make_tensor(x), ratio=1.0)


def test_relu_backward_is_one_pass_dy_times_positive_mask():
    # ReLU's backward runs ReLUGrad (dy * (x > 0) in one pass): zero at
    # x == 0, -0 and NaN, dy itself where x > 0, as the two-op form gave
    x = np.array([[-1.5, -0.0, 0.0, 1e-30, 2.0, np.nan, -np.inf, np.inf]], np.float32)
    dy = np.array([[3.0, 4.0, 5.0, -6.0, 7.0, 8.0, 9.0, -10.0]], np.float32)
    with ag.train_mode(True):
        y = ag.relu(tensor.from_numpy(x))
    dx = y.creator.backward(tensor.from_numpy(dy).data)
    got = tensor.to_numpy(tensor.from_raw_tensor(dx))
    want = dy * (x > 0)
    np.testing.assert_array_equal(got, want)
