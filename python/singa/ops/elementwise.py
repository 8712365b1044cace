"""Element-wise operators beyond the op table: where, the variadic sum /
mean / min / max (ONNX Sum, Mean, Min, Max), and cast.

They broadcast as NumPy (ONNX multidirectional broadcasting) and reduce
each gradient back to its input's shape. The binary arithmetic,
comparisons and logic (add, less, logical_and, ...) are rows of
singa.opdefs, made into operators in ops/generated.py.
"""

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import unbroadcast, constant

__all__ = [
    "Where", "where", "Sum", "sum", "Mean", "mean", "Min", "min", "Max", "max", "Cast", "cast",
]


class Where(Operator):
    """x where condition is nonzero, else y, all broadcast together
    (ONNX Where(condition, X, Y)); the condition has no gradient."""

    def forward(self, condition, x, y):
        self._cond = condition
        self._shapes = (x.shape(), y.shape())
        return _cw.Where(condition, x, y)

    def backward(self, dy):
        sx, sy = self._shapes
        zero = constant(0.0, dy)
        dx = _cw.Where(self._cond, dy, zero)
        dyy = _cw.Where(self._cond, zero, dy)
        return None, unbroadcast(dx, sx), unbroadcast(dyy, sy)


def where(condition, x, y):
    return Where()(condition, x, y)


# ---- variadic (ONNX Sum, Mean, Min, Max: any number of inputs) ----

class Sum(Operator):
    """Element-wise sum of one or more tensors, broadcast (ONNX Sum)."""

    def forward(self, *xs):
        _need_inputs("sum", xs)
        self._shapes = [x.shape() for x in xs]
        y = xs[0]
        for x in xs[1:]:
            y = _cw.Add(y, x)
        return y

    def backward(self, dy):
        return tuple(unbroadcast(dy, s) for s in self._shapes)


def sum(*xs):
    return Sum()(*xs)


class Mean(Operator):
    """Element-wise mean of one or more tensors, broadcast (ONNX Mean)."""

    def forward(self, *xs):
        _need_inputs("mean", xs)
        self._shapes = [x.shape() for x in xs]
        y = xs[0]
        for x in xs[1:]:
            y = _cw.Add(y, x)
        return _cw.MulScalar(y, 1.0 / len(xs))

    def backward(self, dy):
        g = _cw.MulScalar(dy, 1.0 / len(self._shapes))
        return tuple(unbroadcast(g, s) for s in self._shapes)


def mean(*xs):
    return Mean()(*xs)


class _Extremum(Operator):
    """Shared by Min and Max: the gradient goes to the first input that
    attains the result at each element."""

    pick = None

    def forward(self, *xs):
        _need_inputs(type(self).__name__.lower(), xs)
        y = xs[0]
        for x in xs[1:]:
            y = type(self).pick(y, x)
        self._xs, self._y = xs, y
        return y

    def backward(self, dy):
        y = self._y
        taken = None
        grads = []
        for x in self._xs:
            hit = _cw.Equal(x, y)
            if taken is not None:
                hit = _cw.Mul(hit, _cw.ScalarSub(1.0, taken))
                taken = _cw.Add(taken, hit)
            else:
                taken = hit
            grads.append(unbroadcast(_cw.Mul(dy, hit), x.shape()))
        return tuple(grads)


class Min(_Extremum):
    """Element-wise minimum of one or more tensors, broadcast (ONNX Min)."""
    pick = _cw.Minimum


class Max(_Extremum):
    """Element-wise maximum of one or more tensors, broadcast (ONNX Max)."""
    pick = _cw.Maximum


def min(*xs):
    return Min()(*xs)


def max(*xs):
    return Max()(*xs)


def _need_inputs(where, xs):
    if not xs:
        raise ValueError(f"{where}: needs at least one input tensor")


class Cast(Operator):
    """Converts to dtype ``to`` (tensor.float32, tensor.int32, ...; ONNX
    Cast). Gradients flow back (cast to the input's dtype) between float
    types; integer inputs get none."""

    def __init__(self, to, name=None):
        super().__init__(name)
        if to not in (_cw.kFloat16, _cw.kFloat32, _cw.kInt):
            raise TypeError(f"cast: unknown dtype {to!r}; use tensor.float16, "
                            "tensor.float32 or tensor.int32")
        self.to = to

    def forward(self, x):
        self._from = x.data_type()
        return x.AsType(self.to)

    def backward(self, dy):
        if self._from == _cw.kInt or self.to == _cw.kInt:
            return None
        return dy.AsType(self._from)


def cast(x, to):
    return Cast(to)(x)
