"""Tensors: n-dimensional arrays on a device, backed by the C++ core.

A ``Tensor`` wraps the SWIG ``CTensor`` (``t.data``). Reshape, transpose,
``T`` (also SINGA's ``T()``), broadcast and ``t.view[...]`` (NumPy's basic
indexing) return views that share storage; writes through a view are
visible in its base. ``t[...]`` is SINGA's indexing: a copy that keeps an
integer-indexed axis with size 1. Full reductions have shape (1,), as in
SINGA. Arithmetic follows NumPy's broadcasting rules. Errors name the
shapes, dtypes or devices involved (doc/compat.md: SINGA's names here).

The class and the creation functions live in ``singa._tensor``, the math
functions (``tensor.exp``, ``tensor.mult``, ...) in ``singa.tensor_ops``;
this module is the one to import. ``from singa.tensor import *`` leaves out
the names that would shadow Python builtins (``abs``, ``round``, ``sum``,
``max``, ``min``, ``pow``): call them as ``tensor.sum(t)``.
"""

import builtins as _builtins

from singa import _tensor, tensor_ops
from singa._tensor import *  # noqa: F401,F403
from singa._tensor import _wrap, _scalar, _check_shape, _check_dtype, _TO_NUMPY  # noqa: F401
from singa.tensor_ops import *  # noqa: F401,F403

__all__ = [n for n in _tensor.__all__ + tensor_ops.__all__ if not hasattr(_builtins, n)]

Tensor.__module__ = __name__
