"""singa: a deep learning framework with a C++ core and a Python API.

    from singa import tensor, device, autograd, layer, model, opt, sonnx
"""

try:
    from singa import singa_wrap as _cw
except ImportError as _e:
    if "libcu" not in str(_e):
        raise
    raise ImportError(f"{_e}. This singa was built with CUDA and loads cuBLAS, cuRAND and the "
                      "CUDA runtime from their wheels: pip install nvidia-cublas "
                      "nvidia-curand nvidia-cuda-runtime (the [cuda] extra)") from _e

__version__ = "0.1.0"


def set_num_threads(n):
    """Sets the threads used by the CPU kernels and BLAS.

    n is capped at the processors this process may use; n < 1 or n > 4096
    raises ValueError.
    """
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"set_num_threads: expected an int, got {type(n).__name__}")
    _cw.SetNumThreads(n)


def get_num_threads():
    """Returns the threads used by the CPU kernels."""
    return _cw.GetNumThreads()
