"""Initialiser statistics and fan rules."""

import math

import numpy as np
import pytest

from singa import initializer as init
from singa import tensor


def _fill(fn, shape, **kw):
    return fn(tensor.Tensor(shape), **kw).numpy()


def test_fans_follow_singa_layouts():
    # SINGA's rule for ranks other than 2 to 5: sqrt of the size.
    assert init.calculate_fans((49,)) == (7, 7)
    # Linear weights are (in_features, out_features): y = x @ W.
    assert init.calculate_fans((300, 100)) == (300, 100)
    # Conv weights are OIHW: receptive field 5 * 5.
    assert init.calculate_fans((20, 3, 5, 5)) == (3 * 25, 20 * 25)
    assert init.calculate_fans((8, 4, 3)) == (12, 24)
    with pytest.raises(ValueError):
        init.calculate_fans(())


# (initialiser, shape, expected std, distribution)
def _cases():
    conv = (64, 32, 3, 3)
    fi, fo = 32 * 9, 64 * 9
    lin = (400, 200)
    return [
        (init.glorot_uniform, conv, math.sqrt(2.0 / (fi + fo)), "uniform"),
        (init.glorot_normal, conv, math.sqrt(2.0 / (fi + fo)), "normal"),
        (init.xavier_uniform, lin, math.sqrt(2.0 / 600), "uniform"),
        (init.he_uniform, conv, math.sqrt(2.0 / fi), "uniform"),
        (init.he_normal, conv, math.sqrt(2.0 / fi), "normal"),
        (init.msra_normal, lin, math.sqrt(2.0 / 400), "normal"),
        (init.lecun_uniform, conv, math.sqrt(1.0 / fi), "uniform"),
        (init.lecun_normal, lin, math.sqrt(1.0 / 400), "normal"),
    ]


@pytest.mark.parametrize("fn,shape,std,dist", _cases(), ids=lambda v: getattr(v, "__name__", None))
def test_variance_scaling_statistics(fn, shape, std, dist):
    a = _fill(fn, shape)
    assert abs(a.mean()) < 0.03 * std
    assert a.std() == pytest.approx(std, rel=0.03)
    if dist == "uniform":
        bound = math.sqrt(3.0) * std
        assert a.max() <= bound * (1 + 1e-6) and a.min() >= -bound * (1 + 1e-6)
        assert a.max() > 0.95 * bound
    else:
        # A normal puts about 68% of its mass within one std.
        assert np.mean(np.abs(a) < std) == pytest.approx(0.6827, abs=0.02)


def test_he_fan_out_mode():
    a = _fill(init.he_normal, (64, 16, 3, 3), mode="fan_out")
    assert a.std() == pytest.approx(math.sqrt(2.0 / (64 * 9)), rel=0.03)
    with pytest.raises(ValueError, match="mode"):
        _fill(init.he_normal, (4, 4), mode="fan_sideways")


def test_gaussian_and_uniform():
    g = _fill(init.gaussian, (200, 200), mean=1.0, std=0.5)
    assert g.mean() == pytest.approx(1.0, abs=0.01)
    assert g.std() == pytest.approx(0.5, rel=0.02)
    u = _fill(init.uniform, (200, 200), low=-2.0, high=3.0)
    assert u.min() >= -2.0 and u.max() <= 3.0
    assert u.mean() == pytest.approx(0.5, abs=0.03)
    with pytest.raises(ValueError):
        _fill(init.uniform, (3,), low=1.0, high=0.0)


@pytest.mark.parametrize("shape", [(30, 50), (50, 30), (16, 4, 3, 3)])
def test_orthogonal(shape):
    a = _fill(init.orthogonal, shape, gain=2.0).reshape(shape[0], -1)
    if a.shape[0] <= a.shape[1]:
        np.testing.assert_allclose(a @ a.T, 4.0 * np.eye(a.shape[0]), atol=1e-4)
    else:
        np.testing.assert_allclose(a.T @ a, 4.0 * np.eye(a.shape[1]), atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 5)])
def test_eye(shape):
    np.testing.assert_array_equal(_fill(init.eye, shape), np.eye(*shape))


def test_eye_on_a_transposed_view():
    t = tensor.Tensor((5, 3)).T
    init.eye(t)
    np.testing.assert_array_equal(t.numpy(), np.eye(3, 5))


def test_errors():
    with pytest.raises(TypeError, match="Tensor"):
        init.he_normal(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        init.eye(tensor.Tensor((3,)))
    with pytest.raises(ValueError, match="zero fan"):
        init.he_normal(tensor.Tensor((0, 3)))
    with pytest.raises(TypeError, match="int32"):
        init.gaussian(tensor.Tensor((3,), dtype=tensor.int32))
