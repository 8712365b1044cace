"""Devices: where tensors live and ops run.

The CPU device is always there; CUDA GPUs exist when singa was built with
CUDA (``singa_wrap.USE_CUDA``) and a GPU is visible. Device objects expose
``id()`` (SINGA's ids: -1 for the default CPU device, -2, -3, ... for other
CPU devices, the ordinal for a GPU), ``name()`` (``cpu``, ``cpu:1``,
``cuda:0``), ``SetRandSeed(seed)``, ``Sync()``, ``host()`` and ``Reset()``;
``singa_wrap.Platform`` has SINGA's static device functions.

Every device reports ``memory_stats()`` (a dict: ``allocated`` bytes held by
live tensors, ``peak`` since ``reset_peak_memory()``, ``cached`` bytes the
allocator keeps for reuse) and has SINGA's graph methods:
``EnableGraph(flag)``, ``graph_enabled()``, ``RunGraph(serial=False)``,
``ResetGraph()``, ``SetVerbosity(level)``, ``SetSkipIteration(n)`` and
``PrintTimeProfiling()``, with singa's ``SetRecomputeBudget(share)``,
``CurrentGraph()`` and ``AttachGraph(graph)`` (see doc/graph.md).

``create_cuda_gpu_on(i)`` always returns the same device object for GPU i,
so tensors made through separate calls can be mixed. Nothing is copied
between devices implicitly: an op on tensors of two devices raises
RuntimeError naming both; move one with ``Tensor.to_device``.
"""

import contextlib

from singa import singa_wrap as _cw

Device = _cw.Device
GraphError = _cw.GraphError


@contextlib.contextmanager
def unrecorded(dev):
    """Runs the block's work at once even while dev records a graph.

    For work that must happen once, not at every replay: creating
    parameters and optimizer states, filling them with their first values.
    The recording goes on after the block.
    """
    recording = dev is not None and dev.graph_enabled()
    if recording:
        dev.EnableGraph(False)
    try:
        yield
    finally:
        if recording:
            dev.EnableGraph(True)

# SINGA's module attribute: where tensors go when no device is given (see
# set_default_device).
default_device = _cw.DefaultDevice()


def get_default_device():
    """The device used when none is given: the CPU, unless changed by
    set_default_device or create_cuda_gpu(set_default=True)."""
    return default_device


def set_default_device(dev):
    """Makes dev the device of tensors created without one."""
    global default_device
    if not isinstance(dev, Device):
        raise TypeError(f"set_default_device: expected a singa device, got {type(dev).__name__}")
    default_device = dev


def create_cpu_device():
    """The default CPU device (as in SINGA, CPU tensors share one device)."""
    return _cw.DefaultDevice()


def create_separate_cpu_device():
    """A new CPU device of its own; tensors on it cannot mix with others."""
    return _cw.CppCPU()


def get_num_gpus():
    """Number of CUDA GPUs visible to this build (0 without CUDA, or
    without a GPU and driver)."""
    return _cw.GetNumGPUs()


def get_gpu_ids():
    """Ordinals of the visible CUDA GPUs."""
    return list(range(get_num_gpus()))


def _check_gpu_id(device_id, where):
    if not isinstance(device_id, int) or isinstance(device_id, bool):
        raise TypeError(f"{where}: GPU id must be an int, got {type(device_id).__name__}")
    if device_id < 0:
        raise ValueError(f"{where}: GPU id must be >= 0, got {device_id}")


def get_gpu_mem_size(id):
    """(free, total) bytes of the memory of the GPU with this id."""
    _check_gpu_id(id, "get_gpu_mem_size")
    free, total = _cw.GetGPUMemSize(id)
    return int(free), int(total)


def create_cuda_gpu(set_default=False):
    """The first CUDA GPU (raises RuntimeError when none is visible)."""
    return create_cuda_gpu_on(0, set_default)


def create_cuda_gpu_on(device_id, set_default=False):
    """The CUDA GPU with this ordinal; set_default makes it the default
    device for new tensors."""
    _check_gpu_id(device_id, "create_cuda_gpu_on")
    dev = _cw.CreateCudaGPU(device_id)
    if set_default:
        set_default_device(dev)
    return dev


def create_cuda_gpus(num):
    """CUDA GPUs 0 to num-1."""
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise ValueError(f"create_cuda_gpus: need a positive count, got {num!r}")
    return create_cuda_gpus_on(list(range(num)))


def create_cuda_gpus_on(device_ids):
    """The CUDA GPUs with these ordinals."""
    ids = list(device_ids)
    if not ids:
        raise ValueError("create_cuda_gpus_on: need at least one GPU id")
    return [create_cuda_gpu_on(i) for i in ids]


def device_query(id, verbose=False):
    """A text describing the CUDA GPU with this id (printed when verbose)."""
    _check_gpu_id(id, "device_query")
    text = _cw.DeviceQuery(id)
    if verbose:
        print(text)
    return text


def set_allow_tf32(dev, allow):
    """Lets float32 GEMMs on the CUDA device dev use TF32 tensor cores
    (faster, about 3 decimal digits; off by default so results match the
    CPU)."""
    _cw.SetAllowTF32(dev, bool(allow))


def get_allow_tf32(dev):
    """Whether float32 GEMMs on dev may use TF32."""
    return _cw.GetAllowTF32(dev)


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
