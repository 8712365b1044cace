"""Tensor construction, views, dtypes, devices, random fills and NumPy I/O."""

import platform
import resource

import numpy as np
import pytest

import singa
from singa import device, tensor


def test_quickstart_runs(dev):
    a = tensor.from_numpy(np.random.rand(64, 128).astype(np.float32), dev)
    b = tensor.Tensor((128, 32), dev)
    b.gaussian(0.0, 1.0)
    c = tensor.mult(a, b)
    d = (c + 1.0).transpose((1, 0))
    np.testing.assert_allclose(tensor.to_numpy(tensor.softmax(d)).sum(axis=1), 1, rtol=1e-5)


def test_constructor_and_attributes(dev):
    t = tensor.Tensor((2, 3), dev, tensor.float32, requires_grad=False, stores_grad=True,
                      name="w")
    assert t.shape == (2, 3) and t.ndim() == 2 and t.size() == 6 and t.memsize() == 24
    assert t.dtype == tensor.float32 and not t.requires_grad and t.stores_grad
    assert t.name == "w" and t.device.id() == dev.id()
    np.testing.assert_array_equal(tensor.to_numpy(t), np.zeros((2, 3)))
    assert tensor.Tensor().shape == ()
    t2 = tensor.Tensor(data=np.ones((2, 2)))
    assert t2.dtype == tensor.float32
    np.testing.assert_array_equal(tensor.to_numpy(t2), np.ones((2, 2)))


def test_creation_helpers(dev):
    np.testing.assert_array_equal(tensor.to_numpy(tensor.ones((2, 3), dev)), np.ones((2, 3)))
    z = tensor.zeros_like(tensor.ones((3,), dev, tensor.int32))
    assert z.dtype == tensor.int32 and tensor.to_numpy(z).tolist() == [0, 0, 0]
    r = tensor.to_numpy(tensor.random((1000,), dev))
    assert r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6
    assert tensor.product((2, 3, 4)) == 24
    assert tensor.sizeof(tensor.float16) == 2 and tensor.sizeof(tensor.int32) == 4


@pytest.mark.parametrize("np_dtype,singa_dtype,back", [
    (np.float16, tensor.float16, np.float16), (np.float32, tensor.float32, np.float32),
    (np.float64, tensor.float32, np.float32), (np.int32, tensor.int32, np.int32),
    (np.int64, tensor.int32, np.int32)])
def test_from_numpy_dtypes(np_dtype, singa_dtype, back, dev):
    x = (np.arange(12).reshape(3, 4) - 5).astype(np_dtype)
    t = tensor.from_numpy(x, dev)
    assert t.dtype == singa_dtype
    y = tensor.to_numpy(t)
    assert y.dtype == back
    np.testing.assert_array_equal(y, x.astype(back))


@pytest.mark.parametrize("bad", [np.bool_, np.uint8, np.complex64, np.int16])
def test_from_numpy_rejects_other_dtypes(bad):
    with pytest.raises(TypeError, match="not supported"):
        tensor.from_numpy(np.zeros(3, dtype=bad))


def test_from_numpy_noncontiguous_source():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_numpy(x)), x)


def test_float16_storage_and_math(dev, rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    t = tensor.from_numpy(x, dev).as_type(tensor.float16)
    assert t.dtype == tensor.float16 and t.memsize() == 70
    np.testing.assert_array_equal(tensor.to_numpy(t), x.astype(np.float16))
    # ops on float16 compute in float32 and store float16
    got = tensor.to_numpy(t + t)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (x.astype(np.float16).astype(np.float32) * 2).astype(np.float16))
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum(t, 1)), x.astype(np.float16).sum(1),
                               rtol=2e-3)
    back = t.as_type(tensor.float32)
    np.testing.assert_array_equal(tensor.to_numpy(back), x.astype(np.float16).astype(np.float32))
    u = tensor.from_numpy(x, dev)
    u.to_type(tensor.int32)
    np.testing.assert_array_equal(tensor.to_numpy(u), x.astype(np.int32))


def test_float16_conversion_edge_values():
    vals = np.array([0.0, -0.0, 1.0, 65504.0, 70000.0, 6e-8, 3e-8, 1e-4, np.inf, -np.inf, np.nan,
                     0.1, 2049.0, 2051.0, 6.1e-5], np.float32)
    got = tensor.to_numpy(tensor.from_numpy(vals).as_type(tensor.float16))
    with np.errstate(over="ignore"):
        want = vals.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)],
                                  want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[10])
    back = tensor.to_numpy(tensor.from_numpy(want).as_type(tensor.float32))
    np.testing.assert_array_equal(back, want.astype(np.float32))


def test_views_share_storage(dev):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tensor.from_numpy(x, dev)
    v = t.transpose((2, 0, 1))
    assert v.shape == (4, 2, 3) and v.is_transpose() and not v.is_contiguous()
    r = t.reshape((6, -1))
    assert r.shape == (6, 4)
    s = t.view[1, :, 1:3]
    s.set_value(-1)
    x[1, :, 1:3] = -1
    np.testing.assert_array_equal(tensor.to_numpy(t), x)
    np.testing.assert_array_equal(tensor.to_numpy(v), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(tensor.to_numpy(r), x.reshape(6, 4))
    c = v.contiguous()
    assert c.is_contiguous()
    c.set_value(0)
    np.testing.assert_array_equal(tensor.to_numpy(t), x)  # a copy does not write back
    assert t.contiguous().data.Size() == t.size()


def test_reshape_of_view_copies(dev):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tensor.from_numpy(x, dev)
    np.testing.assert_array_equal(tensor.to_numpy(t.T.reshape((2, 6))), x.T.reshape(2, 6))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.reshape(t, (12,))), x.reshape(12))


@pytest.mark.parametrize("key", [
    1, -1, (slice(None), 2), (Ellipsis, 1), (None, 1), (slice(1, None, 2), slice(None, None, -1)),
    (slice(None, None, -2), Ellipsis, None), (0, 1, slice(1, 3)), (slice(5, 9),), np.int64(2),
    (slice(None), None, slice(3, 1, -1))])
def test_getitem_matches_numpy(key, dev):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = tensor.from_numpy(x, dev)
    view = t.view[key]                       # NumPy's basic indexing, a view
    assert view.shape == x[key].shape
    np.testing.assert_array_equal(tensor.to_numpy(view), x[key])
    # SINGA's t[key]: a copy in which an int index keeps its axis (size 1)
    keys = key if isinstance(key, tuple) else (key,)
    kept = tuple(slice(int(k), int(k) + 1 or None) if isinstance(k, (int, np.integer)) else k
                 for k in keys)
    got = t[key]
    assert got.shape == x[kept].shape
    np.testing.assert_array_equal(tensor.to_numpy(got), x[kept])
    got.set_value(-1)
    np.testing.assert_array_equal(tensor.to_numpy(t), x)


def test_setitem(dev):
    x = np.zeros((3, 4), np.float32)
    t = tensor.from_numpy(x, dev)
    t[1] = 5
    t[:, 2] = tensor.from_numpy(np.array([7, 8, 9], np.float32), dev)
    t[0, ::2] = np.array([1.5, 2.5], np.float32)
    x[1] = 5
    x[:, 2] = [7, 8, 9]
    x[0, ::2] = [1.5, 2.5]
    np.testing.assert_array_equal(tensor.to_numpy(t), x)


def test_copy_from_numpy_clone_copy_data(dev):
    t = tensor.Tensor((2, 3), dev)
    t.copy_from_numpy(np.array([1, 2, 3], np.float32), offset=2)
    np.testing.assert_array_equal(tensor.to_numpy(t).ravel(), [0, 0, 1, 2, 3, 0])
    c = t.clone()
    c.set_value(4)
    assert tensor.to_numpy(t).sum() == 6
    u = tensor.Tensor((3, 2), dev)
    u.copy_data(t.T)
    np.testing.assert_array_equal(tensor.to_numpy(u), tensor.to_numpy(t).T)


def test_random_seed_reproducible(dev):
    def draw(seed):
        dev.SetRandSeed(seed)
        a = tensor.Tensor((1000,), dev).gaussian(1.0, 2.0)
        b = tensor.Tensor((1000,), dev).uniform(-1, 3)
        c = tensor.Tensor((1000,), dev).bernoulli(0.3)
        return [tensor.to_numpy(x) for x in (a, b, c)]
    first, again, other = draw(7), draw(7), draw(8)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], other[0])
    g, u, b = first
    assert abs(g.mean() - 1) < 0.2 and abs(g.std() - 2) < 0.2
    assert u.min() >= -1 and u.max() <= 3 and abs(u.mean() - 1) < 0.15
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.05


def test_random_fill_of_a_view_and_int(dev):
    t = tensor.zeros((4, 6), dev)
    t.view[:, ::2].uniform(1, 2)
    x = tensor.to_numpy(t)
    assert (x[:, 1::2] == 0).all() and (x[:, ::2] >= 1).all()
    i = tensor.Tensor((100,), dev, tensor.int32).uniform(0, 5)
    assert tensor.to_numpy(i).max() <= 5


def test_repr_shows_values():
    r = repr(tensor.from_numpy(np.array([[1.5, 2]], np.float32)))
    assert "1.5" in r and "float32" in r


def test_device_module():
    d = device.get_default_device()
    assert device.create_cpu_device().id() == d.id()
    d.Sync()
    assert device.get_num_gpus() == 0 or device.create_cuda_gpu() is not None


def test_threads_setting():
    n = singa.get_num_threads()
    singa.set_num_threads(1)
    assert singa.get_num_threads() == 1
    x = np.random.rand(1 << 16).astype(np.float32)
    np.testing.assert_allclose(tensor.to_numpy(tensor.exp(tensor.from_numpy(x))), np.exp(x),
                               rtol=1e-6)
    singa.set_num_threads(n)


def test_item_float_len():
    t = tensor.from_numpy(np.array([[3.5]], np.float32))
    assert t.item() == 3.5 and float(t) == 3.5 and len(t) == 1


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="the heap policy is glibc's")
def test_mid_size_buffers_are_reused_without_page_faults():
    # Buffers under the device's 4 MiB cache come from malloc; a step that
    # frees and reallocates them must not fault their pages in again (the
    # device fixes glibc's mmap and trim thresholds when it is created).
    dev = device.get_default_device()
    a = tensor.Tensor((3 << 18,), dev)   # 3 MiB
    a.set_value(1.0)

    def cycle():
        for _ in range(4):
            b = a + 1.0
            c = b * 2.0
            del b, c

    cycle()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        cycle()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    # each fresh 3 MiB buffer would fault in 768 pages: 80 buffers, 61440
    assert faults < 2000, faults
