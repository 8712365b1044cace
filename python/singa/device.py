"""Devices: where tensors live and ops run.

The CPU device is always there; CUDA GPUs exist when singa was built with
CUDA. Device objects expose ``id()``, ``SetRandSeed(seed)`` and ``Sync()``,
``memory_stats()`` (a dict: ``allocated`` bytes held by live tensors,
``peak`` since ``reset_peak_memory()``, ``cached`` bytes the allocator
keeps for reuse) and SINGA's graph methods: ``EnableGraph(flag)``,
``graph_enabled()``, ``RunGraph(serial=False)``, ``ResetGraph()``,
``SetVerbosity(level)``, ``SetSkipIteration(n)`` and
``PrintTimeProfiling()``, with singa's ``SetRecomputeBudget(share)``,
``CurrentGraph()`` and ``AttachGraph(graph)`` (see doc/graph.md).
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


def get_default_device():
    """The default CPU device, used when no device is given."""
    return _cw.DefaultDevice()


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
