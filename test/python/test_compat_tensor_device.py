"""singa.device as a SINGA script uses it (SINGA_API.md, SINGA_COMPAT.md):
SINGA's device ids, the module attribute default_device, host(), Reset(),
the OpenCL entry points and enable_lazy_alloc."""

import numpy as np
import pytest

from singa import device, tensor
from singa import singa_wrap as sw

SINGA_DEVICE_NAMES = """get_num_gpus get_gpu_ids get_gpu_mem_size get_num_opencl_platforms
get_num_opencl_devices device_query create_cpu_device create_cuda_gpus create_cuda_gpu
create_cuda_gpus_on create_cuda_gpu_on create_opencl_device get_default_device enable_lazy_alloc
default_device""".split()


def test_names_exist():
    assert [n for n in SINGA_DEVICE_NAMES if not hasattr(device, n)] == []


def test_singa_device_ids():
    d = device.default_device
    assert isinstance(d, device.Device)
    assert d.id() == -1 and d.name() == "cpu"
    assert device.get_default_device().id() == -1 and device.create_cpu_device().id() == -1
    assert tensor.Tensor((2,)).device.id() == -1
    a, b = device.create_separate_cpu_device(), device.create_separate_cpu_device()
    assert a.id() <= -2 and b.id() == a.id() - 1
    assert a.name() == f"cpu:{-1 - a.id()}" and b.name() == f"cpu:{-1 - b.id()}"
    x = tensor.Tensor((2,), a)
    y = tensor.Tensor((2,), b)
    with pytest.raises(RuntimeError, match=f"{a.name()} and {b.name()}|{b.name()} and {a.name()}"):
        x + y


def test_host_and_reset():
    d = device.get_default_device()
    assert d.host().id() == -1
    other = device.create_separate_cpu_device()
    assert other.host().id() == other.id()
    t = tensor.from_numpy(np.arange(3, dtype=np.float32))
    d.Reset()                    # waits for work; tensors stay valid
    np.testing.assert_array_equal(tensor.to_numpy(t + 1), [1, 2, 3])


def test_opencl_is_absent():
    assert device.get_num_opencl_platforms() == 0
    assert device.get_num_opencl_devices() == 0
    with pytest.raises(RuntimeError, match="no OpenCL support"):
        device.create_opencl_device()


def test_enable_lazy_alloc_is_accepted():
    device.enable_lazy_alloc(True)
    t = tensor.Tensor((4,)).set_value(2.0)
    device.enable_lazy_alloc(False)
    np.testing.assert_array_equal(tensor.to_numpy(t * 2), [4, 4, 4, 4])
    with pytest.raises(TypeError, match="expected a bool"):
        device.enable_lazy_alloc("yes")


def test_gpu_entry_points_without_cuda():
    if sw.USE_CUDA:
        pytest.skip("this build has CUDA")
    assert device.get_num_gpus() == 0
    assert device.get_gpu_ids() == []
    for call in (device.create_cuda_gpu, lambda: device.create_cuda_gpu_on(0),
                 lambda: device.create_cuda_gpus(1), lambda: device.device_query(0),
                 lambda: device.create_cuda_gpus_on([0]), lambda: device.get_gpu_mem_size(0)):
        with pytest.raises(RuntimeError, match="no CUDA support"):
            call()
