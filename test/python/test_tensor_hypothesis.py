"""Property tests: random shapes, broadcasts, axes and views through the ops.

Each case either matches NumPy or raises a clean Python exception where
NumPy raises too.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from singa import tensor

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def viewed(draw, shape=None):
    """An array and the same view taken on both sides: slices (any step
    sign) and a permutation of the axes."""
    shape = draw(shapes) if shape is None else shape
    x = draw(st.integers(0, 2**31 - 1).map(
        lambda s: np.random.default_rng(s).uniform(-3, 3, shape).astype(np.float32)))
    key = []
    for d in shape:
        start = draw(st.integers(-d - 1, d + 1)) if d else None
        step = draw(st.sampled_from([None, 1, 2, -1, -2]))
        key.append(slice(start, None, step))
    perm = draw(st.permutations(range(len(shape))))
    t = tensor.from_numpy(x).view[tuple(key)].transpose(perm)
    return x[tuple(key)].transpose(perm), t


def _same_outcome(np_fn, singa_fn, rtol=1e-5, atol=1e-5):
    try:
        want = np_fn()
    except (ValueError, IndexError) as e:
        with pytest.raises(type(e) if isinstance(e, IndexError) else (ValueError, IndexError)):
            singa_fn()
        return
    got = tensor.to_numpy(singa_fn())
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


BINOPS = [(np.add, tensor.add), (np.multiply, tensor.mul), (np.maximum, tensor.maximum),
          (np.subtract, tensor.sub), (np.greater, tensor.gt)]


@SETTINGS
@given(viewed(), viewed(), st.sampled_from(BINOPS))
def test_binary_broadcast_on_views(a, b, ops):
    (xa, ta), (xb, tb) = a, b
    np_fn, singa_fn = ops
    _same_outcome(lambda: np_fn(xa, xb).astype(np.float32), lambda: singa_fn(ta, tb))


@SETTINGS
@given(viewed(), st.sampled_from([np.exp, np.tanh, np.abs, np.negative]))
def test_unary_on_views(a, np_fn):
    x, t = a
    singa_fn = {np.exp: tensor.exp, np.tanh: tensor.tanh, np.abs: tensor.abs,
                np.negative: tensor.neg}[np_fn]
    _same_outcome(lambda: np_fn(x), lambda: singa_fn(t))


@SETTINGS
@given(viewed(), st.one_of(st.none(), st.integers(-5, 4),
                           st.lists(st.integers(-4, 3), min_size=1, max_size=3).map(tuple)),
       st.booleans(), st.sampled_from(["sum", "max", "min", "mean"]))
def test_reductions_on_views(a, axis, keepdims, name):
    x, t = a
    np_fn = getattr(np, name)
    if x.ndim == 0 and axis is not None:
        return  # NumPy lets 0-d reductions take axis 0 or -1; singa rejects it

    def ref():
        if name in ("max", "min") and x.size == 0 and axis is None:
            raise ValueError("empty")
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = np_fn(x.astype(np.float64), axis=axis, keepdims=keepdims)
                # SINGA: a reduction over all axes has shape (1,)
                return np.reshape(r, (1,)) if axis is None and not keepdims else r

    try:
        ref()
    except np.exceptions.AxisError:
        with pytest.raises(IndexError):
            getattr(tensor, name)(t, axis, keepdims=keepdims)
        return
    except ValueError:
        with pytest.raises((ValueError, IndexError)):
            getattr(tensor, name)(t, axis, keepdims=keepdims)
        return
    if name == "mean" and x.size == 0:
        return  # NumPy warns and gives NaN; singa gives NaN too, nothing to compare
    _same_outcome(ref, lambda: getattr(tensor, name)(t, axis, keepdims=keepdims), rtol=1e-4)


@SETTINGS
@given(viewed(), st.integers(-4, 3))
def test_softmax_on_views(a, axis):
    x, t = a
    if x.ndim == 0:
        return

    def ref():
        if not -x.ndim <= axis < x.ndim:
            raise IndexError(axis)
        e = np.exp(x - x.max(axis, keepdims=True, initial=-np.inf))
        return e / e.sum(axis, keepdims=True)

    if x.size == 0:
        return
    _same_outcome(ref, lambda: tensor.softmax(t, axis))


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
       st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple), st.data())
def test_matmul_random_shapes(sa, sb, data):
    xa, ta = data.draw(viewed(sa))
    xb, tb = data.draw(viewed(sb))
    _same_outcome(lambda: np.matmul(xa, xb), lambda: tensor.matmul(ta, tb), rtol=1e-4, atol=1e-4)


@SETTINGS
@given(viewed(), st.data())
def test_reshape_and_contiguous(a, data):
    x, t = a
    shape = data.draw(st.permutations(list(x.shape)))
    _same_outcome(lambda: x.reshape(shape), lambda: t.reshape(shape))
    _same_outcome(lambda: np.array(x, order="C"), lambda: t.contiguous())


@SETTINGS
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), st.data())
def test_concatenate_random(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(data.draw(viewed(tuple(s))))
    _same_outcome(lambda: np.concatenate([p[0] for p in parts], axis),
                  lambda: tensor.concatenate([p[1] for p in parts], axis))
