"""Reductions: ReduceSum, ReduceMean and GlobalAveragePool.

Backward broadcasts dy (with the reduced axes restored as size 1) back to
the input's shape; the result is a broadcast view, so no copy is made.
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
        return fn(x, axes, bool(self.keepdims)), axes

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
    """Mean over every axis after the first two, kept as size 1: (N, C, H,
    W) -> (N, C, 1, 1) (ONNX GlobalAveragePool)."""

    def __init__(self, name=None):
        super().__init__(None, 1, name)

    def forward(self, x):
        if x.nDim() < 3:
            raise ValueError(f"globalaveragepool: expected (N, C, spatial...) input, "
                             f"got shape {x.shape()}")
        return self._mean(x, list(range(2, x.nDim())))


def globalaveragepool(x):
    return GlobalAveragePool()(x)[0]
