"""Element-wise autograd ops: forward against NumPy, backward against
central differences, on contiguous and strided inputs, with broadcasting."""


import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor
from gradcheck import LAYOUTS, check_grad, make_tensor, analytic_grads

rng = np.random.default_rng(1234)


def uniform(lo, hi, shape=(3, 4)):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def signed(lo, hi, shape=(3, 4)):
    """Values with lo <= |x| <= hi and random signs: away from a kink at 0."""
    return uniform(lo, hi, shape) * np.where(rng.random(shape) < 0.5, -1, 1).astype(np.float32)


# The ops of the op table (exp, sign, add, less, ...) are checked in
# test_opdefs.py; these are the element-wise operators written by hand.
# name: (function, NumPy reference, input)
UNARY = {
    "identity": (ag.identity, lambda x: x, uniform(-2, 2)),
    "clip": (lambda x: ag.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7),
             np.concatenate([signed(0.1, 0.4, (2, 4)), signed(0.8, 2, (1, 4))])),
    "clip_low_only": (lambda x: ag.clip(x, min=0.3), lambda x: np.maximum(x, 0.3),
                      np.concatenate([uniform(-2, 0.2, (2, 4)), uniform(0.4, 2, (1, 4))])),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, layout, dev):
    fn, ref, x = UNARY[name]
    y = check_grad(fn, [x], layout, dev=dev)
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_where(layout):
    cond = (rng.random((3, 4)) < 0.5).astype(np.float32)
    x, y = uniform(-2, 2, (3, 4)), uniform(-2, 2, (4,))
    # SINGA's order: where(x, y, condition)
    out = check_grad(ag.where, [x, y, cond], layout, wrt=[0, 1])
    np.testing.assert_allclose(out, np.where(cond != 0, x, y))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_variadic_sum_and_mean(layout):
    a, b, c = uniform(-1, 1, (3, 4)), uniform(-1, 1, (4,)), uniform(-1, 1, (3, 1))
    y = check_grad(ag.sum, [a, b, c], layout)
    np.testing.assert_allclose(y, a + b + c, rtol=1e-6)
    y = check_grad(ag.mean, [a, b, c], layout)
    np.testing.assert_allclose(y, (a + b + c) / 3, rtol=1e-6)
    y = check_grad(ag.sum, [a], layout)
    np.testing.assert_allclose(y, a)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_variadic_min_max(layout):
    # distinct values at least 0.05 apart, so eps=1e-3 never swaps a winner
    vals = rng.permutation(np.arange(36)).astype(np.float32) * 0.05
    a, b, c = vals[:12].reshape(3, 4), vals[12:16], vals[16:19].reshape(3, 1)
    y = check_grad(ag.max, [a, b, c], layout)
    np.testing.assert_allclose(y, np.maximum(np.maximum(a, b), c))
    y = check_grad(ag.min, [a, b, c], layout)
    np.testing.assert_allclose(y, np.minimum(np.minimum(a, b), c))


def test_min_max_ties_give_the_gradient_once():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    _, grads = analytic_grads(ag.max, [a, a.copy()], "contiguous")
    np.testing.assert_array_equal(grads[0] + grads[1], np.ones(3))


def test_cast():
    x = uniform(-2, 2)
    y = check_grad(lambda t: ag.cast(t, tensor.float32), [x], "transposed")
    np.testing.assert_array_equal(y, x)
    xi = make_tensor(np.array([1.7, -2.2], np.float32))
    out = ag.cast(xi, tensor.int32)
    assert out.dtype == tensor.int32
    np.testing.assert_array_equal(tensor.to_numpy(out), np.array([1, -2]))
    with pytest.raises(TypeError):
        ag.cast(xi, "float32")


def test_shape_mismatch_names_shapes():
    a, b = make_tensor(uniform(0, 1, (3, 4))), make_tensor(uniform(0, 1, (5,)))
    with pytest.raises(ValueError, match=r"3, 4.*5|5.*3, 4"):
        ag.add(a, b)
    with pytest.raises(ValueError):
        ag.where(make_tensor(np.ones((2,), np.float32)), a, a)
    with pytest.raises(ValueError):
        ag.sum()
