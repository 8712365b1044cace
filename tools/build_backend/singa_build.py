"""singa's PEP 517 build backend: scikit-build-core, plus cuBLAS, cuRAND
and the CUDA runtime (the nvidia-* wheels, headers and libraries) as build
requirements when the CUDA backend is asked for with
``-Ccmake.define.USE_CUDA=ON``. A CPU build needs none of them.
"""

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403  (the other PEP 517 hooks)

# CUDA 13 (nvcc 13.x): the wheels that install into site-packages/nvidia/cu13.
CUDA_REQUIRES = ["nvidia-cublas>=13,<14", "nvidia-curand>=10.4", "nvidia-cuda-runtime>=13,<14"]


def _wants_cuda(config_settings):
    value = (config_settings or {}).get("cmake.define.USE_CUDA", "")
    return str(value).strip().upper() in ("ON", "TRUE", "YES", "1")


def get_requires_for_build_wheel(config_settings=None):
    extra = CUDA_REQUIRES if _wants_cuda(config_settings) else []
    return list(_skbuild.get_requires_for_build_wheel(config_settings)) + extra


def get_requires_for_build_editable(config_settings=None):
    extra = CUDA_REQUIRES if _wants_cuda(config_settings) else []
    return list(_skbuild.get_requires_for_build_editable(config_settings)) + extra
