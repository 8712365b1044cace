"""Shape and layout ops: forward against NumPy, backward against central
differences on contiguous and strided inputs; bad arguments raise."""

import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor
from gradcheck import LAYOUTS, check_grad, make_tensor, analytic_grads

rng = np.random.default_rng(5)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X = randn(2, 3, 4)

# name: (function of x, NumPy reference of x)
UNARY = {
    "reshape": (lambda t: ag.reshape(t, (4, -1)), lambda a: a.reshape(4, -1)),
    "reshape_zero": (lambda t: ag.reshape(t, (0, 12)), lambda a: a.reshape(2, 12)),
    "flatten": (lambda t: ag.flatten(t, 2), lambda a: a.reshape(6, 4)),
    "flatten_0": (lambda t: ag.flatten(t, 0), lambda a: a.reshape(1, 24)),
    "transpose": (lambda t: ag.transpose(t, (1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    "transpose_none": (ag.transpose, lambda a: a.transpose()),
    "unsqueeze": (lambda t: ag.unsqueeze(t, [0, 3]), lambda a: a[None, :, :, None]),
    "squeeze": (lambda t: ag.squeeze(ag.unsqueeze(t, [1]), [1]), lambda a: a),
    "slice": (lambda t: ag.slice(t, [1, 0], [3, -1], [1, 2]), lambda a: a[:, 1:3, 0:-1]),
    "slice_step": (lambda t: ag.slice(t, [3, 0], [0, 100], [2, 0], [-2, 1]),
                   lambda a: a[:, :, 3:0:-2]),
    "gather": (lambda t: ag.gather(t, 2, [3, 0, 3]), lambda a: a[:, :, [3, 0, 3]]),
    "gather_2d": (lambda t: ag.gather(t, 1, [[0, 2], [-1, 1]]),
                  lambda a: a[:, [[0, 2], [2, 1]]]),
    "gather_scalar": (lambda t: ag.gather(t, 0, 1), lambda a: a[1]),
    "tile": (lambda t: ag.tile(t, [2, 1, 2]), lambda a: np.tile(a, (2, 1, 2))),
    "expand": (lambda t: ag.expand(t, [2, 2, 3, 4]),
               lambda a: np.broadcast_to(a, (2, 2, 3, 4))),
    "pad_constant": (lambda t: ag.pad(t, "constant", [0, 1, 2, 1, 0, 1], 0.5),
                     lambda a: np.pad(a, ((0, 1), (1, 0), (2, 1)), constant_values=0.5)),
    "pad_reflect": (lambda t: ag.pad(t, "reflect", [1, 2, 3, 0, 0, 2]),
                    lambda a: np.pad(a, ((1, 0), (2, 0), (3, 2)), mode="reflect")),
    "pad_edge": (lambda t: ag.pad(t, "edge", [0, 2, 1, 1, 1, 3]),
                 lambda a: np.pad(a, ((0, 1), (2, 1), (1, 3)), mode="edge")),
    "upsample": (lambda t: ag.upsample(t, "nearest", [1, 2, 3]),
                 lambda a: a.repeat(2, axis=1).repeat(3, axis=2)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_layout_op(name, layout, dev):
    fn, ref = UNARY[name]
    y = check_grad(fn, [X], layout, dev=dev)
    np.testing.assert_allclose(y, ref(X), rtol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cat(layout):
    a, b, c = randn(2, 3), randn(2, 1), randn(2, 2)
    y = check_grad(lambda *ts: ag.cat(ts, 1), [a, b, c], layout)
    np.testing.assert_array_equal(y, np.concatenate([a, b, c], 1))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 3\)|\(3, 3\).*\(2, 3\)"):
        ag.cat([make_tensor(a), make_tensor(randn(3, 3))], 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_split(layout):
    x = randn(5, 3)

    def two_used(t):
        p, q, r = ag.split(t, 0, [2, 1, 2])
        return ag.add(ag.mul(p, r), p)   # q unused: its gradient is zero

    y = check_grad(two_used, [x], layout)
    np.testing.assert_allclose(y, x[:2] * x[3:] + x[:2], rtol=1e-6)
    parts = ag.split(make_tensor(randn(4, 6), layout), 1, None, num_output=3)
    assert [p.shape for p in parts] == [(4, 2)] * 3
    with pytest.raises(ValueError, match=r"\(5, 3\)"):
        ag.split(make_tensor(x), 0, [2, 2])


def test_multi_output_creator_index():
    with ag.train_mode(True):
        parts = ag.split(make_tensor(randn(4, 2)), 0, [1, 3])
        assert [getattr(p, "creator_index", 0) for p in parts] == [0, 1]
        y = ag.relu(parts[1])
        assert y.creator.src[0][0] is parts[1].creator and y.creator.src[0][1] == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_depth_to_space_and_back(layout):
    x = randn(1, 8, 2, 3)
    n, c, h, w = x.shape
    b = 2
    dcr = x.reshape(n, b, b, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, 2, h * b, w * b)
    crd = x.reshape(n, c // 4, b, b, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, 2, h * b, w * b)
    y = check_grad(lambda t: ag.depth_to_space(t, 2, "DCR"), [x], layout)
    np.testing.assert_array_equal(y, dcr)
    y = check_grad(lambda t: ag.depth_to_space(t, 2, "CRD"), [x], layout)
    np.testing.assert_array_equal(y, crd)
    y = check_grad(lambda t: ag.space_to_depth(t, 2), [dcr], layout)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(ValueError, match=r"\(1, 8, 2, 3\)"):
        ag.space_to_depth(make_tensor(x), 2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_elements(layout):
    x, upd = randn(3, 4), randn(2, 4)
    idx = np.array([[0, 2, 1, 2], [1, 0, 2, 0]])
    y = check_grad(lambda t, u: ag.scatter_elements(t, idx, u, 0), [x, upd], layout)
    ref = x.copy()
    np.put_along_axis(ref, idx, upd, 0)
    np.testing.assert_array_equal(y, ref)
    with pytest.raises(IndexError, match=r"\(3, 4\)"):
        ag.scatter_elements(make_tensor(x), idx + 3, make_tensor(upd), 0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_embedding(layout):
    w = randn(5, 3)
    idx = np.array([[4, 0], [4, 2]], np.int32)
    y = check_grad(ag.embedding, [idx, w], layout, wrt=[1])
    np.testing.assert_array_equal(y, w[idx])
    with pytest.raises(IndexError, match=r"\(5, 3\)"):
        ag.embedding(make_tensor(np.array([5], np.int32)), make_tensor(w))


def test_shape_constant_of_shape_nonzero_onehot():
    x = make_tensor(randn(2, 3, 4), "transposed")
    s = ag.shape(x)
    assert s.dtype == tensor.int32
    np.testing.assert_array_equal(tensor.to_numpy(s), [2, 3, 4])
    c = ag.constant_of_shape(s, 1.5)
    np.testing.assert_array_equal(tensor.to_numpy(c), np.full((2, 3, 4), 1.5))
    m = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    nz = ag.nonzero(make_tensor(m, "transposed"))
    np.testing.assert_array_equal(tensor.to_numpy(nz), np.array(np.nonzero(m)))
    idx = np.array([[1, -1], [0, 2]], np.int32)
    for axis in (-1, 0, 1):
        oh = tensor.to_numpy(ag.onehot(axis, make_tensor(idx), 3, (-1.0, 2.0)))
        ref = np.where(np.eye(3)[idx % 3] == 1, 2.0, -1.0)
        np.testing.assert_array_equal(oh, np.moveaxis(ref, -1, axis))


def test_no_gradient_through_index_ops():
    x = randn(2, 3)
    _, grads = analytic_grads(lambda t: ag.mul(ag.cast(ag.shape(t), tensor.float32),
                                               ag.reduce_sum(t)), [x], "contiguous")
    # shape() contributes nothing; reduce_sum gets sum(dy) = 2 + 3
    np.testing.assert_allclose(grads[0], np.full((2, 3), 5.0))


BAD = [
    (lambda t: ag.reshape(t, (5, -1)), ValueError),
    (lambda t: ag.reshape(t, (-1, -1)), ValueError),
    (lambda t: ag.transpose(t, (0, 0, 1)), ValueError),
    (lambda t: ag.transpose(t, (0, 1, 5)), ValueError),
    (lambda t: ag.cat([t, t], 3), IndexError),
    (lambda t: ag.squeeze(t, [0]), ValueError),
    (lambda t: ag.unsqueeze(t, [5]), IndexError),
    (lambda t: ag.gather(t, 1, [3]), IndexError),
    (lambda t: ag.gather(t, 3, [0]), IndexError),
    (lambda t: ag.tile(t, [2, 2]), ValueError),
    (lambda t: ag.expand(t, [5, 4]), ValueError),
    (lambda t: ag.pad(t, "reflect", [0, 3, 0, 0, 0, 0]), ValueError),
    (lambda t: ag.pad(t, "constant", [1, 1]), ValueError),
    (lambda t: ag.pad(t, "wrap", [0] * 6), ValueError),
    (lambda t: ag.upsample(t, "nearest", [1, 1.5, 1]), ValueError),
    (lambda t: ag.slice(t, [0], [1], [3]), IndexError),
    (lambda t: ag.flatten(t, 4), IndexError),
]


@pytest.mark.parametrize("fn,exc", BAD)
def test_bad_arguments_raise(fn, exc):
    with pytest.raises(exc, match=r"\(2, 3, 4\)|\[|mode|scales"):
        fn(make_tensor(X))
