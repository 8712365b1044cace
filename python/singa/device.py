"""Devices: where tensors live and ops run.

The CPU device is always there; CUDA GPUs exist when singa was built with
CUDA. Device objects expose ``id()`` (SINGA's ids: -1 for the default CPU
device, -2, -3, ... for other CPU devices, the ordinal for a GPU),
``name()``, ``SetRandSeed(seed)``, ``Sync()``, ``host()`` and ``Reset()``;
``singa_wrap.Platform`` has SINGA's static device functions.
"""

from singa import singa_wrap as _cw

Device = _cw.Device

# SINGA's module attribute: the device of tensors made without one.
default_device = _cw.DefaultDevice()


def get_default_device():
    """The device used when none is given: SINGA's default host device
    (id -1)."""
    return default_device


def create_cpu_device():
    """The default CPU device (as in SINGA, CPU tensors share one device)."""
    return _cw.DefaultDevice()


def create_separate_cpu_device():
    """A new CPU device of its own; tensors on it cannot mix with others."""
    return _cw.CppCPU()


def get_num_gpus():
    """Number of CUDA GPUs visible to this build (0 without CUDA)."""
    return _cw.GetNumGPUs()


def _check_gpu_id(device_id):
    if not isinstance(device_id, int) or isinstance(device_id, bool):
        raise TypeError(f"GPU id must be an int, got {type(device_id).__name__}")
    if device_id < 0:
        raise ValueError(f"GPU id must be >= 0, got {device_id}")


def create_cuda_gpu(set_default=False):
    """Creates the first CUDA GPU device."""
    return create_cuda_gpu_on(0, set_default)


def create_cuda_gpu_on(device_id, set_default=False):
    """Creates the CUDA GPU device with this id."""
    _check_gpu_id(device_id)
    return _cw.CreateCudaGPU(device_id)


def create_cuda_gpus(num):
    """Creates num CUDA GPU devices, ids 0 to num-1."""
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"create_cuda_gpus: need a positive count, got {num!r}")
    return [create_cuda_gpu_on(i) for i in range(num)]


def device_query(device_id, verbose=False):
    """A text describing the CUDA GPU with this id."""
    _check_gpu_id(device_id)
    text = _cw.DeviceQuery(device_id)
    if verbose:
        print(text)
    return text


def get_num_opencl_platforms():
    """0: singa has no OpenCL backend."""
    return _cw.Platform.GetNumOpenclPlatforms()


def get_num_opencl_devices():
    """0: singa has no OpenCL backend."""
    return _cw.Platform.GetNumOpenclDevices()


def create_opencl_device():
    """Raises RuntimeError: singa has no OpenCL backend (use the CPU or CUDA)."""
    return _cw.Platform.GetDefaultOpenclDevice()


def enable_lazy_alloc(enable):
    """SINGA's switch for taking memory at first use. Accepted for SINGA
    scripts; it changes nothing, because when a tensor's memory is taken
    is the device's decision in singa (doc/design.md, "Blocks and memory")."""
    if not isinstance(enable, (bool, int)):
        raise TypeError(f"enable_lazy_alloc: expected a bool, got {type(enable).__name__}")
    _cw.Device.EnableLazyAlloc(bool(enable))
