"""Reductions: ReduceSum, ReduceMean and GlobalAveragePool.

Backward broadcasts dy (with the reduced axes restored as size 1) back to
the input's shape; the result is a broadcast view, so no copy is made.
A reduction over every axis without keepdims gives shape (1,), as SINGA's
full reductions do.
"""

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import norm_axes, product

__all__ = ["ReduceSum", "reduce_sum", "ReduceMean", "reduce_mean",
           "GlobalAveragePool", "globalaveragepool"]


class ReduceSum(Operator):
    """Sum over axes (all axes when None); keepdims keeps them as size 1
    (ONNX ReduceSum, attributes axes and keepdims)."""

    def __init__(self, axes=None, keepdims=1, name=None):
        super().__init__(name)
        self.axes = axes
        self.keepdims = int(keepdims)

    def _reduce(self, x, fn, axes):
        n = x.nDim()
        axes = list(range(n)) if axes is None else norm_axes(
            axes, n, type(self).__name__, x.shape())
        self._in_shape = x.shape()
        self._kept = [1 if i in axes else d for i, d in enumerate(x.shape())]
        y = fn(x, axes, bool(self.keepdims))
        if y.nDim() == 0:
            y = y.Reshape([1])
        return y, axes

    def forward(self, x):
        return self._reduce(x, _cw.Sum, self.axes)[0]

    def backward(self, dy):
        return dy.Reshape(self._kept).Broadcast(self._in_shape)


def reduce_sum(x, axes=None, keepdims=1):
    return ReduceSum(axes, keepdims)(x)[0]


class ReduceMean(ReduceSum):
    """Mean over axes (ONNX ReduceMean, attributes axes and keepdims)."""

    def forward(self, x):
        return self._mean(x, self.axes)

    def _mean(self, x, axes):
        y, axes = self._reduce(x, _cw.Mean, axes)
        self._count = product(x.shape(i) for i in axes)
        return y

    def backward(self, dy):
        g = _cw.MulScalar(dy, 1.0 / self._count) if self._count else dy
        return g.Reshape(self._kept).Broadcast(self._in_shape)


def reduce_mean(x, axes=None, keepdims=1):
    return ReduceMean(axes, keepdims)(x)[0]


class GlobalAveragePool(ReduceMean):
    """Mean over the spatial axes, kept as size 1. data_format
    'channels_first' (ONNX GlobalAveragePool): (N, C, H, W) -> (N, C, 1, 1);
    'channels_last': (N, H, W, C) -> (N, 1, 1, C)."""

    def __init__(self, data_format="channels_first", name=None):
        super().__init__(None, 1, name)
        if data_format not in ("channels_first", "channels_last"):
            raise ValueError("globalaveragepool: data_format must be 'channels_first' or "
                             f"'channels_last', got {data_format!r}")
        self.data_format = data_format

    def forward(self, x):
        n = x.nDim()
        if n < 3:
            raise ValueError(f"globalaveragepool: expected (N, C, spatial...) input, "
                             f"got shape {x.shape()}")
        self.rank = n     # the exporter's channels_last form needs it
        first = self.data_format == "channels_first"
        return self._mean(x, list(range(2, n)) if first else list(range(1, n - 1)))


def globalaveragepool(x, data_format="channels_first"):
    return GlobalAveragePool(data_format)(x)[0]
