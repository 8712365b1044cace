"""Tensor ops on another device against the default CPU device, on the same
inputs (contiguous, transposed, broadcast and sliced).

`other` is a separate CPU device (always: it catches any op that puts a
result on the default device instead of its inputs' device) and every
visible GPU. float32 results agree to rtol 1e-5 (atol 1e-5 of the largest
magnitude, for sums whose order differs on the GPU); float16 ones to 1e-3.
"""

import numpy as np
import pytest

from singa import device, opdefs, singa_wrap, tensor

rng = np.random.default_rng(7)


def close(got, want, rtol=1e-5):
    want = np.asarray(want)
    finite = np.abs(want[np.isfinite(want)])
    scale = float(finite.max()) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1.0))


def on(arr, dev, layout):
    """arr as a tensor on dev, laid out as asked (same values)."""
    arr = np.asarray(arr)
    if layout == "transposed" and arr.ndim >= 2:
        return tensor.from_numpy(np.ascontiguousarray(np.swapaxes(arr, -1, -2)),
                                 dev).transpose(tuple(range(arr.ndim - 2)) + (arr.ndim - 1,
                                                                             arr.ndim - 2))
    if layout == "sliced" and arr.ndim >= 1:
        wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1] + 1,), arr.dtype)
        wide[..., 1::2] = arr
        return tensor.from_numpy(wide, dev).view[..., 1::2]
    if layout == "broadcast" and arr.ndim >= 1:
        # The first row broadcast along axis 0: the values are arr[:1] repeated.
        return tensor.from_numpy(arr[:1], dev).broadcast_to(arr.shape)
    return tensor.from_numpy(arr, dev)


def values(arr, layout):
    """What on(arr, ., layout) holds."""
    if layout == "broadcast" and np.ndim(arr) >= 1:
        return np.broadcast_to(np.asarray(arr)[:1], np.shape(arr))
    return arr


LAYOUTS = ("contiguous", "transposed", "sliced", "broadcast")
CPU = singa_wrap.DefaultDevice()


def both(fn, arrays, other, layout="contiguous"):
    """fn on CPU tensors and on `other` tensors of the same values."""
    arrays = [values(a, layout) for a in arrays]
    a = fn(*[on(x, CPU, layout) for x in arrays])
    b = fn(*[on(x, other, layout) for x in arrays])
    assert b.device.name() == other.name(), f"result on {b.device.name()}, not {other.name()}"
    return tensor.to_numpy(a), tensor.to_numpy(b)


def uniform(lo, hi, shape=(6, 7)):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _reference():
    import test_opdefs as ref  # one reference row (NumPy function, input ranges) per op
    return ref


# Every element-wise op of the op table (singa.opdefs), inputs drawn from
# test_opdefs' reference rows.
UNARY = sorted(r.op for r in opdefs.UNARY)
BINARY = sorted(r.op for r in opdefs.BINARY)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, layout, other):
    x = _reference().UNARY_REF[op][1].draw((6, 7), rng)
    fn = getattr(tensor, opdefs.by_op(op).fn)
    close(*both(fn, [x], other, layout)[::-1])


@pytest.mark.parametrize("name", ["abs", "neg", "square", "sign", "relu", "logical_not"])
def test_unary_int32(name, other):
    x = rng.integers(-5, 6, (5, 9)).astype(np.int32)
    want, got = both(getattr(tensor, name), [x], other, "transposed")
    np.testing.assert_array_equal(got, want)


SHAPES = [((6, 7), (6, 7)), ((6, 7), (7,)), ((6, 1), (1, 7)), ((2, 6, 7), (6, 1)), ((), (6, 7))]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", BINARY)
def test_binary(op, layout, other):
    _, da, db = _reference().BINARY_REF[op]
    fn = getattr(tensor, opdefs.by_op(op).fn)
    for sa, sb in SHAPES:
        a, b = da.draw(sa, rng), db.draw(sb, rng)
        lay = layout if len(sa) >= 1 else "contiguous"
        close(*both(fn, [a, b], other, lay)[::-1])
        # a number on either side
        close(*both(lambda t: fn(t, 1.5), [a], other, lay)[::-1])
        close(*both(lambda t: fn(1.5, t), [a], other, lay)[::-1])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "minimum", "maximum", "eq"])
def test_binary_int32(name, other):
    a = rng.integers(-9, 10, (4, 5)).astype(np.int32)
    b = rng.integers(-3, 4, (5,)).astype(np.int32)
    want, got = both(getattr(tensor, name), [a, b], other, "sliced")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inplace_and_where(layout, other):
    a, b = uniform(-2, 2), uniform(-2, 2, (7,))

    def inplace(x, y):
        x = x.contiguous() if layout == "broadcast" else x
        x += y
        x *= 2.0
        x -= 0.5
        return x
    close(*both(inplace, [a, b], other, layout)[::-1])
    cond = (rng.random((6, 7)) < 0.5).astype(np.float32)
    close(*both(tensor.where, [cond, a, b], other, layout)[::-1])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reductions(name, layout, other):
    x = uniform(-3, 3, (5, 6, 7))
    for axis in (None, 0, 1, 2, (0, 2), (1, 2)):
        for keep in (False, True):
            close(*both(lambda t: getattr(tensor, name)(t, axis, keepdims=keep), [x], other, layout)[::-1])


def test_long_reductions(other):
    # Long axes with few outputs take the GPU's two-pass path.
    for shape, axis in (((1, 300000), 1), ((300000, 2), 0), ((3, 50000, 3), 1), ((7,), 0)):
        x = uniform(-1, 1, shape)
        for name in ("sum", "max", "min"):
            want, got = both(lambda t: getattr(tensor, name)(t, axis), [x], other)
            close(got, want, rtol=1e-4 if name == "sum" else 0)


def test_max_min_propagate_nan_and_keep_infinities(other):
    x = uniform(-1, 1, (4, 70))
    x[1, 33] = np.nan
    x[2, :] = -np.inf
    for axis in (0, 1, None):
        want, got = both(lambda t: tensor.max(t, axis), [x], other)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(want, np.max(x, axis))
        np.testing.assert_array_equal(tensor.to_numpy(tensor.min(on(-x, other, "contiguous"),
                                                                 axis)), np.min(-x, axis))


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_arg_reductions_and_softmax(layout, other):
    x = rng.permutation(420).reshape(6, 70).astype(np.float32) / 10
    x[3, 5] = x[3, 6] = 100.0  # a tie: the first index wins
    for axis in (0, 1, -1):
        for fn in (tensor.argmax, tensor.argmin):
            want, got = both(lambda t: fn(t, axis), [x], other, layout)
            np.testing.assert_array_equal(got, want)
        close(*both(lambda t: tensor.softmax(t, axis), [x], other, layout)[::-1])
        close(*both(lambda t: tensor.log_softmax(t, axis), [x], other, layout)[::-1])


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_matmul(layout, other):
    for sa, sb in (((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((2, 5, 7), (7, 4)),
                   ((2, 1, 5, 7), (3, 7, 4)), ((3, 5, 7), (3, 7, 4)), ((64, 96), (96, 80))):
        a, b = uniform(-1, 1, sa), uniform(-1, 1, sb)
        close(*both(tensor.matmul, [a, b], other, layout)[::-1])
    a, b, c = uniform(-1, 1, (5, 7)), uniform(-1, 1, (7, 3)), uniform(-1, 1, (5, 3))

    def gemm(x, y, z):
        z = z.contiguous()
        tensor.mult(x, y, z, 0.5, 2.0)  # z = 0.5 x @ y + 2 z
        return z
    close(*both(gemm, [a, b, c], other, layout)[::-1])


def test_int32_matmul(other):
    a = rng.integers(-5, 6, (4, 6)).astype(np.int32)
    b = rng.integers(-5, 6, (6, 3)).astype(np.int32)
    want, got = both(tensor.matmul, [a, b], other, "transposed")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, a @ b)


@pytest.mark.parametrize("src,dst", [(tensor.float32, tensor.float16),
                                     (tensor.float16, tensor.float32),
                                     (tensor.float32, tensor.int32),
                                     (tensor.int32, tensor.float32),
                                     (tensor.float16, tensor.int32),
                                     (tensor.int32, tensor.float16)])
def test_casts(src, dst, other):
    np_src = {tensor.float32: np.float32, tensor.float16: np.float16, tensor.int32: np.int32}
    x = (uniform(-300, 300, (5, 8)) if src != tensor.int32 else
         rng.integers(-3000, 3000, (5, 8))).astype(np_src[src])
    x.flat[:4] = [2.5, -2.5, 65519, -0.0] if src != tensor.int32 else [2049, -2049, 65519, 0]
    want, got = both(lambda t: t.as_type(dst), [x], other, "transposed")
    np.testing.assert_array_equal(got, want)


def test_float16_ops_and_matmul(other):
    a, b = uniform(-2, 2, (16, 24)), uniform(-2, 2, (24, 8))
    h = [x.astype(np.float16) for x in (a, b)]
    close(*both(lambda x, y: tensor.matmul(x, y), h, other)[::-1], rtol=1e-3)
    close(*both(lambda x: tensor.exp(x) + x * 2.0, h[:1], other, "transposed")[::-1], rtol=1e-3)
    close(*both(lambda x: tensor.sum(x, 0), h[:1], other)[::-1], rtol=1e-3)
    want, got = both(tensor.matmul, h, other)
    close(got.astype(np.float32), a.astype(np.float16).astype(np.float32)
          @ b.astype(np.float16).astype(np.float32), rtol=1e-2)


def test_joins_and_copies(other):
    a, b = uniform(-1, 1, (3, 4)), uniform(-1, 1, (2, 4))
    close(*both(lambda x, y: tensor.concatenate([x, y], 0), [a, b], other)[::-1])
    close(*both(lambda x: tensor.repeat(x, 3, 1), [a], other, "transposed")[::-1])
    close(*both(lambda x: tensor.repeat(x, [1, 0, 2], 0), [a], other)[::-1])
    close(*both(lambda x: tensor.tile(x, (2, 1, 3)), [a], other, "sliced")[::-1])
    close(*both(lambda x: x.transpose().contiguous(), [a], other)[::-1])

    def setitem(x):
        x = x.contiguous()
        x[1:, ::2] = 7.0
        x[0] = tensor.from_numpy(np.arange(4, dtype=np.float32), x.device)
        return x
    close(*both(setitem, [a], other)[::-1])


def test_index_select_and_add(other):
    x = uniform(-1, 1, (4, 5, 3))
    idx = np.array([[3, -1], [0, 3]], np.int32)

    def sel(t):
        i = tensor.from_numpy(idx, t.device)
        return tensor.from_raw_tensor(singa_wrap.IndexSelect(t.data, i.data, 1))
    close(*both(sel, [x], other, "transposed")[::-1])

    def add(t):
        d = tensor.zeros((4, 5, 3), t.device)
        i = tensor.from_numpy(idx.reshape(-1), t.device)
        singa_wrap.IndexAdd(d.data, i.data, t.contiguous().data, 1)
        return d
    close(*both(add, [uniform(-1, 1, (4, 4, 3))], other)[::-1])
    with pytest.raises(IndexError, match="out of range"):
        singa_wrap.IndexSelect(on(x, other, "contiguous").data,
                               tensor.from_numpy(np.array([5], np.int32), other).data, 1)


def test_moves_between_devices(other):
    x = uniform(-1, 1, (3, 5))
    t = tensor.from_numpy(x, other)
    assert t.device.name() == other.name()
    np.testing.assert_array_equal(tensor.to_numpy(tensor.to_host(t)), x)
    h = tensor.from_numpy(x).transpose()
    h.to_device(other)
    assert h.device.name() == other.name()
    np.testing.assert_array_equal(tensor.to_numpy(h), x.T)
    h.to_host()
    assert h.device.name() == "cpu"
    v = tensor.from_numpy(np.zeros((5, 3), np.float32), other).transpose()
    v.copy_data(tensor.from_numpy(x))  # host values into a strided view on other
    np.testing.assert_array_equal(tensor.to_numpy(v), x)
    i = tensor.from_numpy(x.astype(np.float16), other).as_type(tensor.int32)
    np.testing.assert_array_equal(tensor.to_numpy(i), x.astype(np.float16).astype(np.int32))


def test_mixing_devices_raises_naming_both(other):
    a = tensor.from_numpy(uniform(-1, 1, (2, 3)))
    b = tensor.from_numpy(uniform(-1, 1, (2, 3)), other)
    for fn in (lambda: a + b, lambda: tensor.matmul(a, b.T), lambda: tensor.where(a, a, b)):
        with pytest.raises(RuntimeError, match=f"cpu and {other.name()}|{other.name()} and cpu"):
            fn()


def test_random_fills_follow_the_seed(other):
    def draw():
        other.SetRandSeed(42)
        g = tensor.Tensor((1001,), other).gaussian(1.0, 2.0)
        u = tensor.Tensor((3, 333), other).uniform(-1.0, 3.0)
        b = tensor.Tensor((1000,), other).bernoulli(0.25)
        return [tensor.to_numpy(t) for t in (g, u, b)]
    first, second = draw(), draw()
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    g, u, b = first
    assert abs(g.mean() - 1.0) < 0.25 and abs(g.std() - 2.0) < 0.25
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.2
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.06
    t = tensor.Tensor((4, 6), other).view[:, ::2]  # a strided view is filled through a copy
    t.gaussian(0.0, 1.0)
    assert np.isfinite(tensor.to_numpy(t)).all()
    for n in (7, 8):  # contiguous views that start one float in, odd and even lengths
        base = tensor.Tensor((n + 1,), other)
        base.set_value(-5.0)
        v = base.view[1:]
        v.gaussian(0.0, 1.0)
        v.uniform(2.0, 3.0)
        got = tensor.to_numpy(base)
        assert got[0] == -5.0 and (got[1:] >= 2.0).all() and (got[1:] < 3.0).all()
        v.bernoulli(1.0)
        np.testing.assert_array_equal(tensor.to_numpy(base), [-5.0] + [1.0] * n)


def test_device_ids_follow_singa(other):
    assert device.get_default_device().id() == -1
    assert device.get_default_device().name() == "cpu"
    sep = device.create_separate_cpu_device()
    assert sep.id() < -1 and sep.name() == f"cpu:{-1 - sep.id()}"
    if not other.is_host():
        assert other.id() >= 0 and other.name() == f"cuda:{other.id()}"
        assert device.create_cuda_gpu_on(other.id()) is not None
        assert device.create_cuda_gpu_on(other.id()).name() == other.name()


def test_cuda_entry_points_without_a_gpu():
    if device.get_num_gpus() > 0:
        pytest.skip("a GPU is visible")
    why = "no CUDA device is visible" if singa_wrap.USE_CUDA else "no CUDA support"
    for fn in (device.create_cuda_gpu, lambda: device.create_cuda_gpu_on(1),
               lambda: device.create_cuda_gpus(2), lambda: device.device_query(0),
               lambda: device.get_gpu_mem_size(0)):
        with pytest.raises(RuntimeError, match=why):
            fn()
    assert device.get_gpu_ids() == []
    with pytest.raises(RuntimeError, match="cpu is not a CUDA device"):
        device.set_allow_tf32(device.get_default_device(), True)
    assert device.get_allow_tf32(device.get_default_device()) is False


def test_gpu_queries_memory_and_tf32(other):
    if other.is_host():
        pytest.skip("a GPU property")
    free, total = device.get_gpu_mem_size(other.id())
    assert 0 < free <= total
    assert device.device_query(other.id()).startswith(f"cuda:{other.id()}: ")
    assert device.get_gpu_ids() == list(range(device.get_num_gpus()))
    a = tensor.from_numpy(uniform(-1, 1, (64, 64)), other)
    exact = tensor.to_numpy(tensor.matmul(a, a))
    try:
        device.set_allow_tf32(other, True)
        assert device.get_allow_tf32(other)
        close(tensor.to_numpy(tensor.matmul(a, a)), exact, rtol=1e-2)
    finally:
        device.set_allow_tf32(other, False)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.matmul(a, a)), exact)
    with pytest.raises(MemoryError, match=r"cannot allocate \d+ bytes on cuda:\d+ \(\d+ bytes free"):
        tensor.Tensor((1 << 40,), other)
