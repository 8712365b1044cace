"""singa.tensor as a SINGA script uses it (SINGA_API.md, SINGA_COMPAT.md):
every SINGA name, SINGA's call forms and semantics, values against NumPy."""

import warnings

import numpy as np
import pytest

from singa import singa_wrap as sw
from singa import tensor

SINGA_METHODS = """__init__ __getitem__ is_dummy ndim is_empty is_transpose transpose size memsize
contiguous reshape reset_like as_type to_type to_device to_host l2 l1 set_value copy_from_numpy
copy_data copy_from clone repeat T copy deepcopy bernoulli gaussian uniform add_column add_row
div_column div_row mult_column mult_row __repr__""".split()

SINGA_FUNCTIONS = """from_raw_tensor from_raw_tensors zeros_like ones_like product sizeof contiguous
reshape transpose copy_data_to_from from_numpy to_host to_numpy abs exp ceil log sigmoid sign sqrt
square tanh sum pow average softmax lt le gt ge eq add sub eltwise_mult mult einsum repeat tensordot
div axpy bernoulli gaussian uniform add_column add_row sum_columns sum_rows copy_from_numpy
concatenate random zeros ones int32 float16 float32 CTensor PlaceHolder""".split()


def t_(x, dev=None):
    return tensor.from_numpy(np.asarray(x, np.float32), dev)


def arr(t):
    return tensor.to_numpy(t)


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_every_singa_name_exists():
    assert [m for m in SINGA_METHODS if not hasattr(tensor.Tensor, m)] == []
    assert [f for f in SINGA_FUNCTIONS if not hasattr(tensor, f)] == []
    assert tensor.CTensor is sw.Tensor
    assert (tensor.float32, tensor.float16, tensor.int32) == (sw.kFloat32, sw.kFloat16, sw.kInt)


def test_attributes_and_dummy_names(dev):
    t = tensor.Tensor((2, 3), dev)
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.device.id() == dev.id() and t.dtype == tensor.float32
    assert t.requires_grad and not t.stores_grad and t.creator is None
    u = tensor.Tensor((2,), dev)
    assert t.name.startswith("Dummy#") and u.name.startswith("Dummy#") and t.name != u.name
    assert t.name == t.name and t.is_dummy()
    w = tensor.Tensor((2,), dev, name="w")
    assert w.name == "w" and not w.is_dummy() and w.clone().name == "w"
    assert t.clone().name != t.name
    p = tensor.PlaceHolder((4, 1), dev)
    assert isinstance(p, tensor.Tensor) and p.shape == (4, 1)
    np.testing.assert_array_equal(arr(p), np.zeros((4, 1)))


def test_data_follows_the_dtype_argument():
    t = tensor.Tensor(data=np.array([1, 2, 3]))            # SINGA: float32 by default
    assert t.dtype == tensor.float32 and arr(t).tolist() == [1.0, 2.0, 3.0]
    i = tensor.Tensor(data=np.array([1.7, -2.2]), dtype=tensor.int32)
    assert i.dtype == tensor.int32 and arr(i).tolist() == [1, -2]


def test_T_is_a_method_and_a_view_property(dev):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = t_(x, dev)
    for v in (t.T(), t.T):
        assert v.shape == (3, 2)
        np.testing.assert_array_equal(arr(v), x.T)
    t.T()[2, 1] = 100.0                   # both are views: writes reach t
    t.T[0, 0] = -1.0
    x[1, 2], x[0, 0] = 100.0, -1.0
    np.testing.assert_array_equal(arr(t), x)
    assert type(t.T()) is tensor.Tensor and (t.T @ t).shape == (3, 3)


def test_full_reductions_have_shape_one(dev, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = t_(x, dev)
    for name, ref in [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
                      ("average", np.mean)]:
        r = getattr(tensor, name)(t)
        assert r.shape == (1,), name
        np.testing.assert_allclose(tensor.to_numpy(r)[0], ref(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r.data.GetFloatValue(1)[0], ref(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(r), ref(x), rtol=1e-5, atol=1e-6)
    assert tensor.sum(t, keepdims=True).shape == (1, 1)
    assert tensor.sum(t, 0).shape == (4,)
    np.testing.assert_allclose(tensor.average(t, 1).numpy(), x.mean(1), rtol=1e-5)
    # l1 and l2 stay Python floats, SINGA's norms over the element count
    assert isinstance(t.l1(), float) and isinstance(t.l2(), float)
    np.testing.assert_allclose(t.l1(), np.abs(x).sum() / x.size, rtol=1e-5)
    np.testing.assert_allclose(t.l2(), np.sqrt((x * x).sum()) / x.size, rtol=1e-5)


def test_out_forms_write_into_the_given_tensor(dev, rng):
    x = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    t = t_(x, dev)
    out = tensor.Tensor((4,), dev)
    assert tensor.sum(t, 0, out) is out
    np.testing.assert_allclose(arr(out), x.sum(0), rtol=1e-5)
    one = tensor.Tensor((1,), dev)
    tensor.sum(t, None, one)
    np.testing.assert_allclose(arr(one), [x.sum()], rtol=1e-5)
    with pytest.raises(ValueError, match=r"result of shape \(4,\) does not fit out of shape"):
        tensor.sum(t, 0, tensor.Tensor((3,), dev))
    sm = tensor.Tensor((3, 4), dev)
    assert tensor.softmax(t, sm) is sm
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(arr(sm), e / e.sum(1, keepdims=True), rtol=1e-5)
    e0 = np.exp(x - x.max(0))
    np.testing.assert_allclose(arr(tensor.softmax(t, 0)), e0 / e0.sum(0), rtol=1e-5)
    p = tensor.Tensor((3, 4), dev)
    assert tensor.pow(t, 2.0, out=p) is p
    np.testing.assert_allclose(arr(p), x ** 2, rtol=1e-5)
    tensor.pow(t, t, p)
    np.testing.assert_allclose(arr(p), x ** x, rtol=1e-5)
    r = tensor.Tensor((3, 4), dev)
    for fn, ref in [(tensor.add, x + 2), (tensor.sub, x - 2), (tensor.eltwise_mult, x * 2),
                    (tensor.div, x / 2)]:
        assert fn(t, 2.0, r) is r
        np.testing.assert_allclose(arr(r), ref, rtol=1e-6)
    tensor.sub(1.0, t, r)
    np.testing.assert_allclose(arr(r), 1 - x, rtol=1e-6)


def test_as_type_spellings(dev):
    t = t_([1.5, -2.5, 3.0], dev)
    for dt in (tensor.int32, "int", sw.kInt, np.int32):
        i = t.as_type(dt)
        assert i.dtype == tensor.int32 and arr(i).tolist() == [1, -2, 3]
    for dt in ("float", tensor.float32, "float32"):
        assert i.as_type(dt).dtype == tensor.float32
    assert t.as_type("float16").dtype == tensor.float16
    for bad in ("double", sw.kDouble, sw.kChar, 7, None):
        with pytest.raises(TypeError, match="unknown dtype"):
            t.as_type(bad)
    assert t.to_type("int") is t and t.dtype == tensor.int32


def test_getitem_is_singa_copy_keeping_axes(dev):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = t_(x, dev)
    assert t[0].shape == (1, 4) and t[-1].shape == (1, 4)
    assert t[1:3, 2].shape == (2, 1) and t[1, 2].shape == (1, 1)
    np.testing.assert_array_equal(arr(t[1:3, 2]), x[1:3, 2:3])
    c = t[0]
    c.set_value(7)
    np.testing.assert_array_equal(arr(t), x)            # a copy
    v = t.view[0]                                        # NumPy's view
    assert v.shape == (4,)
    v.set_value(7)
    x[0] = 7
    np.testing.assert_array_equal(arr(t), x)
    t[2] = t[1]                                          # SINGA's shape (1, 4) assigns
    t.view[0] = t.view[1] * 2
    x[2], x[0] = x[1], 2 * x[1]
    np.testing.assert_array_equal(arr(t), x)
    with pytest.raises(ValueError, match=r"cannot assign a value of shape \(3,\)"):
        t[0] = t_([1, 2, 3], dev)


def test_copies_and_fills(dev, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    t = tensor.Tensor((2, 3), dev)
    t.copy_from(x)
    np.testing.assert_array_equal(arr(t), x)
    t.copy_from(t_([9, 8], dev), 4)
    t.copy_from(np.array([5.0], np.float32), 1)
    want = x.ravel().copy()
    want[4:6], want[1] = [9, 8], 5
    np.testing.assert_array_equal(arr(t).ravel(), want)
    with pytest.raises(TypeError, match="Tensor or a NumPy array"):
        t.copy_from([1, 2])
    s = t.copy()                                         # shares storage
    s.set_value(1)
    np.testing.assert_array_equal(arr(t), np.ones((2, 3)))
    d = t.deepcopy()
    d.set_value(2)
    np.testing.assert_array_equal(arr(t), np.ones((2, 3)))
    n = t.set_value(3, inplace=False)
    assert arr(n).tolist() == [[3] * 3] * 2 and arr(t)[0, 0] == 1
    g = t.gaussian(0.0, 1.0, inplace=False)
    assert arr(t)[0, 0] == 1 and g.shape == (2, 3) and np.std(arr(g)) > 0
    assert t.uniform(2, 3, inplace=False).numpy().min() >= 2
    assert set(arr(t.bernoulli(0.5, inplace=False)).ravel()) <= {0.0, 1.0}
    assert t.gaussian(0.0, 1.0) is t and arr(t)[0, 0] != 1
    r = tensor.Tensor((1,), dev)
    r.reset_like(tensor.Tensor((4, 5), dev, tensor.int32))
    assert r.shape == (4, 5) and r.dtype == tensor.int32 and arr(r).sum() == 0
    assert tensor.Tensor(()).is_empty() and tensor.Tensor((0, 3)).is_empty()
    assert not t.is_empty()


def test_module_fills_and_copies(dev):
    t = tensor.Tensor((10000,), dev)
    assert tensor.uniform(-2, -1, t) is t and arr(t).max() <= -1 and arr(t).min() >= -2
    tensor.gaussian(5.0, 0.5, t)
    assert abs(arr(t).mean() - 5) < 0.05
    tensor.bernoulli(0.25, t)
    assert abs(arr(t).mean() - 0.25) < 0.03
    c = tensor.Tensor((3,), dev)
    tensor.copy_from_numpy(c.data, np.array([1.0, 2.0, 3.0], np.float32))   # a CTensor
    tensor.copy_from_numpy(c, np.array([4.0], np.float32))
    np.testing.assert_array_equal(arr(c), [4, 2, 3])
    d = tensor.zeros((5,), dev)
    tensor.copy_data_to_from(d, c, 2, 3, 1)
    np.testing.assert_array_equal(arr(d), [0, 0, 0, 2, 3])
    with pytest.raises(ValueError, match="reach past the end"):
        tensor.copy_data_to_from(d, c, 3, 3)


def test_row_and_column_helpers(dev, rng):
    M = rng.uniform(1, 2, (3, 4)).astype(np.float32)
    col = rng.uniform(1, 2, 3).astype(np.float32)
    row = rng.uniform(1, 2, 4).astype(np.float32)
    m = t_(M, dev)
    assert tensor.add_column(2.0, t_(col, dev), 0.5, m) is m
    np.testing.assert_allclose(arr(m), 2 * col[:, None] + 0.5 * M, rtol=1e-6)
    m = t_(M, dev)
    tensor.add_row(-1.0, t_(row, dev), 1.0, m)
    np.testing.assert_allclose(arr(m), M - row, rtol=1e-6)
    m = t_(M, dev)
    tensor.add_row(t_(row, dev), m)
    tensor.add_column(t_(col, dev), m)
    np.testing.assert_allclose(arr(m), M + row + col[:, None], rtol=1e-6)
    with pytest.raises(TypeError, match=r"takes \(alpha, v, beta, M\)"):
        tensor.add_row(1.0, t_(row, dev), m)
    for name, v, ref in [("add_column", col, M + col[:, None]), ("add_row", row, M + row),
                         ("div_column", col, M / col[:, None]), ("div_row", row, M / row),
                         ("mult_column", col, M * col[:, None]), ("mult_row", row, M * row)]:
        m = t_(M, dev)
        with pytest.warns(DeprecationWarning, match="broadcasting"):
            assert getattr(m, name)(t_(v, dev)) is m
        np.testing.assert_allclose(arr(m), ref, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(arr(tensor.sum_rows(t_(M, dev))), M.sum(0), rtol=1e-6)
    np.testing.assert_allclose(arr(tensor.sum_columns(t_(M, dev))), M.sum(1), rtol=1e-6)


def test_reflected_operators_with_python_and_numpy_scalars(dev):
    x = np.array([0.5, 1.0, 2.0], np.float32)
    t = t_(x, dev)
    cases = [(1 + t, 1 + x), (2 * t, 2 * x), (1 - t, 1 - x), (1 / t, 1 / x), (2 ** t, 2 ** x),
             (np.float32(2) * t, 2 * x), (np.float64(3) - t, 3 - x), (np.int64(2) / t, 2 / x),
             (np.float32(1) + t, 1 + x), (t * np.float64(2), 2 * x)]
    for got, want in cases:
        assert isinstance(got, tensor.Tensor)
        np.testing.assert_allclose(arr(got), want, rtol=1e-6)


def test_singa_math_functions(dev, rng):
    x = rng.uniform(0.2, 2, (3, 4)).astype(np.float32)
    y = rng.uniform(0.2, 2, (3, 4)).astype(np.float32)
    a, b = t_(x, dev), t_(y, dev)
    for name, ref in [("abs", np.abs), ("exp", np.exp), ("ceil", np.ceil), ("log", np.log),
                      ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("sign", np.sign),
                      ("sqrt", np.sqrt), ("square", np.square), ("tanh", np.tanh)]:
        np.testing.assert_allclose(arr(getattr(tensor, name)(a)), ref(x), rtol=1e-5, err_msg=name)
    for name, ref in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal)]:
        np.testing.assert_array_equal(arr(getattr(tensor, name)(a, b)), ref(x, y))
        np.testing.assert_array_equal(arr(getattr(tensor, name)(a, 1.0)), ref(x, 1.0))
    C = t_(np.ones((3, 3)), dev)
    assert tensor.mult(a, b.T(), C, 2.0, 1.0) is C
    np.testing.assert_allclose(arr(C), 2 * x @ y.T + 1, rtol=1e-5)
    cv = t_(np.ones(3), dev)                                # matrix-vector into C
    tensor.mult(a, t_(y[0], dev), cv, 1.0, 2.0)
    np.testing.assert_allclose(arr(cv), x @ y[0] + 2, rtol=1e-5)
    yy = t_(y, dev)
    tensor.axpy(3.0, a, yy)
    np.testing.assert_allclose(arr(yy), y + 3 * x, rtol=1e-6)
    np.testing.assert_array_equal(arr(tensor.repeat(a, 2)), np.repeat(x, 2))
    np.testing.assert_array_equal(arr(a.repeat([1, 2, 3], 0)), np.repeat(x, [1, 2, 3], 0))
    np.testing.assert_allclose(arr(tensor.tensordot(a, b, ([1], [1]))),
                               np.tensordot(x, y, ([1], [1])), rtol=1e-5)
    np.testing.assert_allclose(arr(tensor.einsum("ij,kj->ik", a, b)), x @ y.T, rtol=1e-5)
    np.testing.assert_array_equal(arr(tensor.concatenate([a, b], 1)), np.concatenate([x, y], 1))
    np.testing.assert_array_equal(arr(tensor.transpose(tensor.reshape(a, (4, 3)), (1, 0))),
                                  x.reshape(4, 3).T)
    assert tensor.contiguous(a.T()).is_contiguous()
    assert tensor.product((2, 3, 4)) == 24
    assert [tensor.sizeof(c) for c in (tensor.float32, tensor.float16, tensor.int32, sw.kChar,
                                       sw.kDouble)] == [4, 2, 4, 1, 8]
    assert [t.shape for t in tensor.from_raw_tensors([a.data, b.data])] == [(3, 4), (3, 4)]
    assert tensor.from_raw_tensor(a.data).data is a.data
    r = tensor.random((50,), dev)
    assert r.shape == (50,) and 0 <= arr(r).min() and arr(r).max() < 1
    assert arr(tensor.ones((2,), dev)).tolist() == [1, 1]
    assert arr(tensor.zeros_like(a)).sum() == 0 and arr(tensor.ones_like(a)).sum() == 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tensor.to_host(a).device.id() == -1
