"""Tensor math against NumPy: element-wise, reductions, linear algebra."""


import numpy as np
import pytest

from singa import tensor


# The element-wise functions of the op table (exp, add, less, ...) are
# tested against NumPy in test_opdefs.py.


def test_unary_large_uses_threads_consistently(dev, rng):
    x = rng.standard_normal(1 << 20).astype(np.float32)
    got = tensor.to_numpy(tensor.exp(tensor.from_numpy(x, dev)))
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=2e-6)


def test_operators_and_reflected(dev, rng):
    a = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2, (4,)).astype(np.float32)
    ta, tb = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
    cases = [
        (ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta / tb, a / b),
        (ta ** tb, a ** b), (2 + ta, 2 + a), (2 - ta, 2 - a), (2 * ta, 2 * a),
        (2 / ta, 2 / a), (2 ** ta, 2 ** a), (ta ** 2, a ** 2), (-ta, -a), (abs(-ta), a),
        (ta < 1, a < 1), (ta <= tb, a <= b), (ta > tb, a > b), (ta >= 1, a >= 1),
        (ta == ta, a == a), (ta != tb, a != b),
    ]
    for got, want in cases:
        np.testing.assert_allclose(tensor.to_numpy(got), want.astype(np.float32), rtol=1e-5)


def test_inplace_operators_write_through_views(dev):
    base = tensor.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), dev)
    ref = np.arange(12, dtype=np.float32).reshape(3, 4)
    col = base.view[:, 1]
    col += 10
    ref[:, 1] += 10
    view = base.T
    view *= 2
    ref *= 2
    base -= tensor.from_numpy(np.ones(4, np.float32), dev)
    ref -= 1
    base /= 2
    ref /= 2
    np.testing.assert_allclose(tensor.to_numpy(base), ref)


def test_inplace_with_overlapping_view(dev):
    x = np.arange(10, dtype=np.float32)
    t = tensor.from_numpy(x, dev)
    dst = t.view[1:]
    dst += t.view[:-1]
    x[1:] += x[:-1].copy()
    np.testing.assert_allclose(tensor.to_numpy(t), x)


REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, axis, keepdims, dev, rng):
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    want = REDUCE[name](x.astype(np.float64), axis=axis, keepdims=keepdims)
    if axis is None and not keepdims:
        want = np.reshape(want, (1,))   # SINGA: a reduction over all axes has shape (1,)
    t = tensor.from_numpy(x, dev)
    got = tensor.to_numpy(getattr(tensor, name)(t, axis, keepdims=keepdims))
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the same on a transposed view
    got = tensor.to_numpy(getattr(tensor, name)(t.transpose((2, 0, 1)), axis, keepdims=keepdims))
    want = REDUCE[name](x.transpose(2, 0, 1).astype(np.float64), axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,axis", [((2048, 2048), 0), ((2048, 2048), 1),
                                         ((3, 100000), 1), ((100000, 3), 0)])
def test_large_sums_are_accurate(shape, axis, dev, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    got = tensor.to_numpy(tensor.sum(tensor.from_numpy(x, dev), axis))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_arg_reductions(name, axis, dev, rng):
    x = rng.permutation(60).reshape(5, 12).astype(np.float32)
    got = tensor.to_numpy(getattr(tensor, name)(tensor.from_numpy(x, dev), axis))
    want = getattr(np, name)(x, axis=axis)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32


def test_sum_rows_columns_average(dev, rng):
    m = rng.standard_normal((7, 9)).astype(np.float32)
    t = tensor.from_numpy(m, dev)
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum_rows(t)), m.sum(0), rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum_columns(t)), m.sum(1), rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.average(t, 1)), m.mean(1), rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_stable(axis, dev, rng):
    x = (rng.standard_normal((4, 5, 6)) * 30 + 500).astype(np.float32)
    t = tensor.from_numpy(x, dev)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis, keepdims=True))
    want = e / e.sum(axis, keepdims=True)
    np.testing.assert_allclose(tensor.to_numpy(tensor.softmax(t, axis)), want, rtol=1e-4, atol=1e-7)
    logwant = x64 - x64.max(axis, keepdims=True) - np.log(e.sum(axis, keepdims=True))
    np.testing.assert_allclose(tensor.to_numpy(tensor.log_softmax(t, axis)), logwant,
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_mult_transposed_views_alpha_beta(ta, tb, dev, rng):
    a = rng.standard_normal((6, 5) if ta else (5, 6)).astype(np.float32)
    b = rng.standard_normal((7, 6) if tb else (6, 7)).astype(np.float32)
    c = rng.standard_normal((5, 7)).astype(np.float32)
    A, B = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
    A = A.T if ta else A
    B = B.T if tb else B
    an, bn = (a.T if ta else a), (b.T if tb else b)
    np.testing.assert_allclose(tensor.to_numpy(tensor.mult(A, B)), an @ bn, rtol=1e-4, atol=1e-5)
    C = tensor.from_numpy(c, dev)
    tensor.mult(A, B, C, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(tensor.to_numpy(C), 0.5 * an @ bn + 2 * c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(A @ B), an @ bn, rtol=1e-4, atol=1e-5)


def test_mult_on_sliced_views_and_vectors(dev, rng):
    a = rng.standard_normal((8, 10)).astype(np.float32)
    v = rng.standard_normal(10).astype(np.float32)
    A = tensor.from_numpy(a, dev)
    np.testing.assert_allclose(tensor.to_numpy(tensor.mult(A[1:6, 2:9], A[0:7, 3:5])),
                               a[1:6, 2:9] @ a[0:7, 3:5], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.mult(A, tensor.from_numpy(v, dev))),
                               a @ v, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.mult(tensor.from_numpy(v[:8], dev), A)),
                               v[:8] @ a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 5))])
def test_matmul_broadcast_batches(sa, sb, dev, rng):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    got = tensor.to_numpy(tensor.matmul(tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)))
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-4, atol=1e-5)


def test_int32_math(dev):
    a = np.array([[7, -7, 3], [0, 5, -2]], np.int32)
    b = np.array([2, -3, 0], np.int32)
    ta, tb = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
    assert ta.dtype == tensor.int32
    np.testing.assert_array_equal(tensor.to_numpy(ta + tb), a + b)
    np.testing.assert_array_equal(tensor.to_numpy(ta * tb), a * b)
    # integer division by zero gives 0 instead of trapping
    np.testing.assert_array_equal(tensor.to_numpy(ta / tb), [[3, 2, 0], [0, -1, 0]])
    np.testing.assert_array_equal(tensor.to_numpy(tensor.sum(ta, 0)), a.sum(0))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.mult(ta, ta.T)), a @ a.T)


def test_einsum_and_tensordot(dev, rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c = rng.standard_normal((2, 4, 6)).astype(np.float32)
    ta, tb, tc = (tensor.from_numpy(x, dev) for x in (a, b, c))
    for spec, xs, ts in [("bij,jk->bik", (a, b), (ta, tb)), ("bij,bjk->bki", (a, c), (ta, tc)),
                         ("bij->jb", (a,), (ta,)), ("bij,jk->k", (a, b), (ta, tb)),
                         ("bij,bkl->ijkl", (a, c), (ta, tc))]:
        np.testing.assert_allclose(tensor.to_numpy(tensor.einsum(spec, *ts)),
                                   np.einsum(spec, *xs), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.tensordot(ta, tb, 1)),
                               np.tensordot(a, b, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.tensordot(ta, tc, ([0, 2], [0, 1]))),
                               np.tensordot(a, c, ([0, 2], [0, 1])), rtol=1e-4, atol=1e-5)


def test_concat_repeat_tile_broadcast(dev, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((2, 5)).astype(np.float32)
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.concatenate([tx, ty], 1)),
                                  np.concatenate([x, y], 1))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.concatenate([tx.T, ty.T], 0)),
                                  np.concatenate([x.T, y.T], 0))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.repeat(tx, 3, 1)), np.repeat(x, 3, 1))
    np.testing.assert_array_equal(tensor.to_numpy(tx.repeat([1, 0, 2], 1)),
                                  np.repeat(x, [1, 0, 2], 1))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.repeat(tx, 2)), np.repeat(x, 2))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.tile(tx, (2, 1, 3))),
                                  np.tile(x, (2, 1, 3)))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.broadcast_to(tx[:, :1], (4, 2, 6))),
                                  np.broadcast_to(x[:, :1], (4, 2, 6)))


def test_add_row_column_axpy(dev, rng):
    m = rng.standard_normal((3, 4)).astype(np.float32)
    r = rng.standard_normal(4).astype(np.float32)
    c = rng.standard_normal(3).astype(np.float32)
    M = tensor.from_numpy(m, dev)
    tensor.add_row(tensor.from_numpy(r, dev), M)
    tensor.add_column(tensor.from_numpy(c, dev), M)
    np.testing.assert_allclose(tensor.to_numpy(M), m + r + c[:, None], rtol=1e-6)
    y = tensor.from_numpy(m, dev)
    tensor.axpy(0.5, tensor.from_numpy(2 * m, dev), y)
    np.testing.assert_allclose(tensor.to_numpy(y), 2 * m, rtol=1e-6)


def test_where_clip(dev, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    cond = (x > 0).astype(np.float32)
    t = tensor.from_numpy(x, dev)
    got = tensor.where(tensor.from_numpy(cond, dev), t, tensor.from_numpy(np.zeros(5, np.float32), dev))
    np.testing.assert_array_equal(tensor.to_numpy(got), np.where(cond != 0, x, 0))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.clip(t, -0.5, 0.5)), np.clip(x, -0.5, 0.5))


def test_norms(dev, rng):
    x = rng.standard_normal((6, 7)).astype(np.float32)
    t = tensor.from_numpy(x, dev)
    assert t.l1() == pytest.approx(np.abs(x).sum() / x.size, rel=1e-5)
    assert t.l2() == pytest.approx(np.sqrt((x.astype(np.float64) ** 2).sum()) / x.size, rel=1e-5)
