"""Matrix products, bias, gemm, cosine similarity and reductions."""

import numpy as np
import pytest

from singa import autograd as ag
from gradcheck import LAYOUTS, check_grad, make_tensor

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


MATMUL_SHAPES = [
    ((3, 4), (4, 2)),
    ((2, 3, 4), (4, 2)),       # batch on the left
    ((3, 4), (2, 4, 2)),       # batch on the right
    ((2, 1, 2, 3), (3, 3, 2)),  # batch dimensions broadcast
    ((4,), (4, 3)),            # 1-D on the left
    ((2, 3, 4), (4,)),         # 1-D on the right
    ((4,), (4,)),              # dot product
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, layout, dev):
    a, b = randn(*shapes[0]), randn(*shapes[1])
    y = check_grad(ag.matmul, [a, b], layout, dev=dev)
    np.testing.assert_allclose(y, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_matmul_shape_error():
    with pytest.raises(ValueError, match=r"3, 4.*3, 2"):
        ag.matmul(make_tensor(randn(3, 4)), make_tensor(randn(3, 2)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", [0, 1])
def test_add_bias(axis, layout):
    x = randn(3, 4)
    b = randn(4 if axis == 0 else 3)
    y = check_grad(lambda t, u: ag.add_bias(t, u, axis), [x, b], layout)
    np.testing.assert_allclose(y, x + (b if axis == 0 else b[:, None]), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        ag.add_bias(make_tensor(x), make_tensor(randn(5)), axis)


GEMM_CASES = [
    dict(alpha=1.0, beta=1.0, transA=0, transB=0, c=(2,)),
    dict(alpha=0.5, beta=2.0, transA=1, transB=0, c=(3, 2)),
    dict(alpha=-1.5, beta=0.5, transA=0, transB=1, c=(3, 1)),
    dict(alpha=2.0, beta=1.0, transA=1, transB=1, c=None),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm(case, layout):
    A = randn(4, 3) if case["transA"] else randn(3, 4)
    B = randn(2, 4) if case["transB"] else randn(4, 2)
    a = A.T if case["transA"] else A
    b = B.T if case["transB"] else B
    kw = {k: case[k] for k in ("alpha", "beta", "transA", "transB")}
    if case["c"] is None:
        y = check_grad(lambda p, q: ag.gemm(p, q, None, **kw), [A, B], layout)
        np.testing.assert_allclose(y, case["alpha"] * a @ b, rtol=1e-5, atol=1e-5)
    else:
        C = randn(*case["c"])
        y = check_grad(lambda p, q, r: ag.gemm(p, q, r, **kw), [A, B, C], layout)
        np.testing.assert_allclose(y, case["alpha"] * a @ b + case["beta"] * C,
                                   rtol=1e-5, atol=1e-5)


def test_gemm_shape_error():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 2\)"):
        ag.gemm(make_tensor(randn(3, 4)), make_tensor(randn(3, 2)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cossim(layout):
    a, b = randn(3, 4), randn(3, 4)
    y = check_grad(ag.cossim, [a, b], layout)
    ref = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(y, ref, rtol=1e-5)


REDUCE_CASES = [(None, 1), ([1], 1), ([0, 2], 0), (-1, 0), ((0,), 1)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axes,keepdims", REDUCE_CASES, ids=str)
def test_reduce_sum_and_mean(axes, keepdims, layout):
    x = randn(2, 3, 4)
    np_axes = None if axes is None else tuple(np.atleast_1d(axes))
    y = check_grad(lambda t: ag.reduce_sum(t, axes, keepdims), [x], layout)
    np.testing.assert_allclose(y, x.sum(axis=np_axes, keepdims=bool(keepdims)), rtol=1e-5,
                               atol=1e-6)
    y = check_grad(lambda t: ag.reduce_mean(t, axes, keepdims), [x], layout)
    np.testing.assert_allclose(y, x.mean(axis=np_axes, keepdims=bool(keepdims)), rtol=1e-5,
                               atol=1e-6)


def test_reduce_bad_axis():
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        ag.reduce_sum(make_tensor(randn(2, 3)), [2])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_globalaveragepool(layout):
    x = randn(2, 3, 2, 3)
    y = check_grad(ag.globalaveragepool, [x], layout)
    np.testing.assert_allclose(y, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        ag.globalaveragepool(make_tensor(randn(2, 3)))


# ---- layer.Linear's fused operator (LinearForward: rows start as b) ----

LINEAR_SHAPES = [(1, 1, 1), (3, 4, 2), (7, 13, 5), (16, 784, 256), (33, 65, 17), (128, 256, 10)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", LINEAR_SHAPES, ids=str)
def test_linear_op_against_float64(shape, threads):
    """Forward and every gradient of the fused x W + b against float64, on
    the shapes that reach the small-GEMM kernel and OpenBLAS alike."""
    import singa
    from singa import tensor
    from singa.ops.linalg import _linear
    m, k, n = shape
    x, w, b = randn(m, k), randn(k, n), randn(n)
    old = singa.get_num_threads()
    singa.set_num_threads(threads)
    try:
        xt, wt, bt = make_tensor(x), make_tensor(w), make_tensor(b)
        for t in (xt, wt, bt):
            t.requires_grad = t.stores_grad = True
        with ag.train_mode(True):
            y = _linear(xt, wt, bt)
            dy = randn(m, n)
            grads = dict((id(p), tensor.to_numpy(g))
                         for p, g in ag.backward(y, make_tensor(dy)))
    finally:
        singa.set_num_threads(old)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    tol = dict(rtol=1e-4, atol=1e-4 * np.sqrt(k))
    np.testing.assert_allclose(tensor.to_numpy(y), x64 @ w64 + b, **tol)
    np.testing.assert_allclose(grads[id(xt)], dy64 @ w64.T, rtol=1e-4, atol=1e-4 * np.sqrt(n))
    np.testing.assert_allclose(grads[id(wt)], x64.T @ dy64, rtol=1e-4, atol=1e-4 * np.sqrt(m))
    np.testing.assert_allclose(grads[id(bt)], dy64.sum(0), rtol=1e-4, atol=1e-4 * np.sqrt(m))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linear_op_gradcheck(layout):
    from singa.ops.linalg import _linear
    x, w, b = randn(5, 3), randn(3, 4), randn(4)
    y = check_grad(_linear, [x, w, b], layout)
    np.testing.assert_allclose(y, x @ w + b, rtol=1e-5, atol=1e-6)


def test_linear_op_errors_and_half():
    from singa import singa_wrap as cw
    from singa import tensor
    x, w = make_tensor(randn(3, 4)).data, make_tensor(randn(4, 2)).data
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 2\).*\(3,\)"):
        cw.LinearForward(x, w, make_tensor(randn(3)).data)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 2\)"):
        cw.LinearForward(x, make_tensor(randn(3, 2)).data, make_tensor(randn(2)).data)
    # float16 is computed in float32 and rounded once
    xh, wh, bh = (a.astype(np.float16) for a in (randn(5, 6), randn(6, 3), randn(3)))
    y = cw.LinearForward(*(tensor.from_numpy(a).data for a in (xh, wh, bh)))
    ref = xh.astype(np.float64) @ wh.astype(np.float64) + bh
    np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(y)).astype(np.float64), ref,
                               rtol=2e-3, atol=2e-3)
