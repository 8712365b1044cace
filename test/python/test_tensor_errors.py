"""Every user mistake is a Python exception naming what went wrong."""

import numpy as np
import pytest

from singa import device, singa_wrap, tensor


def t(*shape, dtype=np.float32):
    return tensor.from_numpy(np.ones(shape, dtype=dtype))


@pytest.mark.parametrize("fn", [tensor.add, tensor.mul, tensor.pow, tensor.maximum, tensor.lt])
def test_broadcast_mismatch_is_value_error(fn):
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        fn(t(2, 3), t(4))


def test_inplace_result_must_fit():
    a = t(3)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        a += t(2, 3)


@pytest.mark.parametrize("a,b", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3, 4), (5, 6))])
def test_matmul_mismatch_is_value_error(a, b):
    with pytest.raises(ValueError, match="cannot be multiplied"):
        tensor.matmul(t(*a), t(*b))


def test_mult_needs_matrices():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        tensor.mult(t(2, 3, 4), t(4, 2))
    with pytest.raises(ValueError, match="output of shape"):
        tensor.mult(t(2, 3), t(3, 4), tensor.Tensor((3, 3)))


def test_reshape_to_another_size():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        t(2, 3).reshape((4,))
    with pytest.raises(ValueError, match="more than one -1"):
        t(2, 3).reshape((-1, -1))
    with pytest.raises(ValueError, match="cannot reshape"):
        t(2, 3).reshape((4, -1))


def test_dtype_mismatch_is_type_error():
    with pytest.raises(TypeError, match="float32 and int32"):
        t(2) + t(2, dtype=np.int32)
    with pytest.raises(TypeError, match="float32"):
        tensor.softmax(t(2, dtype=np.int32))
    with pytest.raises(TypeError, match="dtype"):
        tensor.Tensor((2,), dtype=99)
    with pytest.raises(TypeError, match="float32"):
        tensor.mean(t(2, dtype=np.int32))


@pytest.mark.parametrize("call", [
    lambda: tensor.sum(t(2, 3), 2), lambda: tensor.softmax(t(2, 3), -3),
    lambda: tensor.argmax(t(2, 3), 5), lambda: tensor.concatenate([t(2), t(2)], 1),
    lambda: t(2, 3).transpose((0, 2)), lambda: t(2, 3)[2], lambda: t(2, 3)[0, -4],
    lambda: t(2, 3)[0, 0, 0], lambda: tensor.repeat(t(2, 3), 2, 3)])
def test_axis_or_index_out_of_range_is_index_error(call):
    with pytest.raises(IndexError, match="out of range|too many"):
        call()


def test_bad_index_types():
    with pytest.raises(TypeError, match="indices"):
        t(3)["a"]
    with pytest.raises(TypeError, match="indices"):
        t(3)[[0, 1]]


def test_view_outside_storage_is_index_error():
    with pytest.raises(IndexError, match="outside storage"):
        t(2, 3).data.View((4, 3), (3, 1), 0)
    with pytest.raises(IndexError, match="outside storage"):
        t(6).data.View((2,), (-1,), 0)


def test_different_devices_is_runtime_error():
    other = device.create_separate_cpu_device()
    b = tensor.from_numpy(np.ones(3, np.float32), other)
    with pytest.raises(RuntimeError, match=r"different devices, cpu and cpu:\d+"):
        t(3) + b
    with pytest.raises(RuntimeError, match="different devices"):
        tensor.mult(t(3, 3), tensor.from_numpy(np.ones((3, 3), np.float32), other))
    b.to_host()
    np.testing.assert_array_equal(tensor.to_numpy(t(3) + b), [2, 2, 2])


def test_allocation_failure_is_memory_error():
    with pytest.raises(MemoryError):
        tensor.Tensor((1 << 40, 1 << 30))
    with pytest.raises(MemoryError, match="bytes"):
        tensor.Tensor((1 << 30, 1 << 30, 2))


def test_cuda_in_cpu_build_is_runtime_error():
    if device.get_num_gpus() > 0:
        pytest.skip("this build has CUDA")
    with pytest.raises(RuntimeError, match="no CUDA"):
        device.create_cuda_gpu()
    with pytest.raises(RuntimeError, match="no CUDA"):
        device.device_query(0)


@pytest.mark.parametrize("call,exc", [
    (lambda: tensor.Tensor((2, -1)), ValueError), (lambda: tensor.Tensor("ab"), TypeError),
    (lambda: tensor.Tensor((2.5,)), TypeError), (lambda: t(2).set_value("x"), TypeError),
    (lambda: t(2).gaussian(0, -1), ValueError), (lambda: t(2).uniform(2, 1), ValueError),
    (lambda: t(2).bernoulli(1.5), ValueError), (lambda: tensor.max(t(0, 3), 0), ValueError),
    (lambda: tensor.clip(t(2), 1, 0), ValueError),
    (lambda: t(2, 3).copy_from_numpy(np.ones(7, np.float32)), ValueError),
    (lambda: t(2).copy_data(t(3)), ValueError), (lambda: tensor.sum(t(2, 3), (0, 0)), ValueError),
    (lambda: tensor.concatenate([t(2, 3), t(3, 3)], 1), ValueError),
    (lambda: tensor.concatenate([], 0), ValueError),
    (lambda: tensor.einsum("ij,jk", t(2, 3), t(3, 4)), ValueError),
    (lambda: tensor.einsum("ij,jk->ik", t(2, 3), t(4, 4)), ValueError),
    (lambda: tensor.tensordot(t(2, 3), t(4, 5), 1), ValueError),
    (lambda: t(2) + "a", TypeError), (lambda: tensor.add(t(2), "a"), TypeError),
    (lambda: tensor.exp(np.ones(2)), TypeError),
    (lambda: tensor.from_numpy(np.array([2**40])), ValueError),
    (lambda: tensor.broadcast_to(t(3), (2, 4)), ValueError),
    (lambda: tensor.repeat(t(3), [1, 2], 0), ValueError),
    (lambda: singa_wrap.SetNumThreads(0), ValueError),
])
def test_other_bad_input(call, exc):
    with pytest.raises(exc):
        call()


@pytest.mark.parametrize("name,args", [
    ("reshape", ((2,),)), ("transpose", ()), ("contiguous", ()), ("broadcast_to", ((2, 3),)),
    ("zeros_like", ()), ("ones_like", ()), ("to_host", ()), ("to_numpy", ()),
])
def test_module_functions_name_a_non_tensor(name, args):
    # a list or an array where a Tensor belongs: TypeError naming the
    # function and the type, not an AttributeError from inside it
    for bad in ([1.0, 2.0], np.ones(2, np.float32)):
        with pytest.raises(TypeError, match=rf"{name}: expected a Tensor, got "
                                            rf"{type(bad).__name__}"):
            getattr(tensor, name)(bad, *args)


def test_axpy_and_copy_need_tensors():
    y = t(2)
    with pytest.raises(TypeError, match="axpy: expected a Tensor, got list"):
        tensor.axpy(2.0, [1.0, 1.0], y)
    with pytest.raises(TypeError, match=r"copy_data_to_from \(src\): expected a Tensor"):
        tensor.copy_data_to_from(y, np.ones(2, np.float32))
    np.testing.assert_array_equal(tensor.to_numpy(y), [1.0, 1.0])


def test_copy_from_numpy_value_outside_dtype():
    x = t(2, dtype=np.int32)
    with pytest.raises(ValueError, match="int32"):
        x.copy_from_numpy([2**40, 1])
    np.testing.assert_array_equal(tensor.to_numpy(x), [1, 1])


def test_bad_buffers_from_raw_api():
    c = singa_wrap.Tensor((4,))
    with pytest.raises(TypeError):
        c.CopyDataFromHostPtr(12345)
    with pytest.raises(ValueError, match="bytes"):
        c.CopyDataToHostPtr(bytearray(3))
    with pytest.raises(ValueError, match="writable"):
        c.CopyDataToHostPtr(b"readonly-16bytes")
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        c.CopyDataToHostPtr(ro)
    with pytest.raises(ValueError, match="C-contiguous"):
        c.CopyDataFromHostPtr(np.zeros((4, 2), np.float32)[:, 0])
