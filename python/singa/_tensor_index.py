"""Indexing of singa Tensors with ints, slices (any step), None and ``...``.

``t[key]`` follows SINGA: a contiguous copy in which an integer index keeps
its axis with size 1 (for ``t`` of shape (3, 4), ``t[0]`` has shape
(1, 4)). ``t.view[key]`` is NumPy's basic indexing: a view that shares
storage and drops integer-indexed axes (``t.view[0]`` has shape (4,)).
Assignment ``t[key] = value`` writes through either way; value may have
the shape of the NumPy view or the one SINGA's ``t[key]`` returns.
"""

import builtins
import numbers

import numpy as np


def index_view(ct, key, keep_int_axes):
    """The CTensor view of ct selected by a basic index. With keep_int_axes
    an integer index leaves its axis in place with size 1 (SINGA)."""
    if not isinstance(key, tuple):
        key = (key,)
    shape, strides, offset = ct.shape(), ct.stride(), ct.offset()
    ndim = len(shape)
    consumed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor of shape {shape}")
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    new_shape, new_strides = [], []
    dim = 0
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
        elif k is Ellipsis:
            for _ in range(ndim - consumed):
                new_shape.append(shape[dim])
                new_strides.append(strides[dim])
                dim += 1
        elif isinstance(k, slice):
            start, stop, step = k.indices(shape[dim])
            n = len(range(start, stop, step))
            if n:
                offset += start * strides[dim]
            new_shape.append(n)
            # One element needs no step; a huge one would overflow int64.
            new_strides.append(strides[dim] * step if n > 1 else strides[dim])
            dim += 1
        elif isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, (bool, np.bool_)):
            n = shape[dim]
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of range for axis {dim} "
                                 f"of size {n} in a tensor of shape {shape}")
            offset += i * strides[dim]
            if keep_int_axes:
                new_shape.append(1)
                new_strides.append(strides[dim])
            dim += 1
        else:
            raise TypeError("tensor indices must be ints, slices, None or Ellipsis, "
                            f"got {type(k).__name__}")
    for d in range(dim, ndim):
        new_shape.append(shape[d])
        new_strides.append(strides[d])
    return ct.View(new_shape, new_strides, offset)


def assign(ct, key, value, scalar, to_ctensor):
    """ct[key] = value: a number fills the region; a Tensor or array-like is
    broadcast to the NumPy view's shape, or else to SINGA's kept-axes one."""
    view = index_view(ct, key, False)
    s = scalar(value)
    if s is not None:
        view.SetValue(s)
        return
    v = to_ctensor(value, ct.device())
    try:
        src = v.Broadcast(view.shape())
    except ValueError:
        kept = index_view(ct, key, True)
        try:
            src = v.Broadcast(kept.shape())
        except ValueError:
            raise ValueError(f"cannot assign a value of shape {v.shape()} to the region of "
                             f"shape {view.shape()} selected by {key!r}") from None
        view = kept
    view.CopyData(src)


class Viewer:
    """``t.view``: ``t.view[key]`` is the view NumPy's basic indexing gives
    (shares storage); ``t.view[key] = value`` writes through it."""

    __slots__ = ("_t",)

    def __init__(self, t):
        self._t = t

    def __getitem__(self, key):
        from singa._tensor import _wrap
        return _wrap(index_view(self._t.data, key, False))

    def __setitem__(self, key, value):
        self._t[key] = value
