"""Element-wise operators beyond the op table: where, the variadic sum /
mean / min / max (ONNX Sum, Mean, Min, Max), and cast.

They broadcast as NumPy (ONNX multidirectional broadcasting) and reduce
each gradient back to its input's shape. The binary arithmetic,
comparisons and logic (add, less, logical_and, ...) are rows of
singa.opdefs, made into operators in ops/generated.py.
"""

import numpy as np

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import unbroadcast, constant
from singa.tensor import Tensor, from_numpy, _wrap

__all__ = [
    "Where", "where", "Sum", "sum", "Mean", "mean", "Min", "min", "Max", "max", "Cast", "cast",
]


class Where(Operator):
    """a where condition is nonzero, else b, all broadcast together, with
    SINGA's form ``Where(condition)(a, b)`` (ONNX Where(condition, X, Y)).
    condition is a Tensor (recorded as the op's third input, with no
    gradient) or a NumPy array / list (made a constant on a's device)."""

    def __init__(self, condition, name=None):
        super().__init__(name)
        self.condition = condition

    def __call__(self, a, b):
        c = self.condition
        if not isinstance(c, Tensor):
            if not isinstance(a, Tensor):
                raise TypeError(f"Where: inputs must be singa Tensors, got {type(a).__name__}")
            c = _condition(c, a)
        return super().__call__(a, b, c)

    def forward(self, a, b, condition=None):
        if condition is None:   # called directly, SINGA style: forward(a, b)
            c = self.condition
            condition = c.data if isinstance(c, Tensor) else _condition(
                c, _wrap(a)).data
        self._cond = condition
        self._shapes = (a.shape(), b.shape())
        return _cw.Where(condition, a, b)

    def backward(self, dy):
        sa, sb = self._shapes
        zero = constant(0.0, dy)
        da = _cw.Where(self._cond, dy, zero)
        db = _cw.Where(self._cond, zero, dy)
        return unbroadcast(da, sa), unbroadcast(db, sb), None


def _condition(c, like):
    """A NumPy / list condition as a constant Tensor on like's device."""
    try:
        arr = np.asarray(c)
    except Exception:
        arr = None
    if arr is None or arr.dtype.kind not in "biuf":
        raise TypeError(f"where: condition must be a Tensor or a NumPy array of numbers or "
                        f"bools, got {type(c).__name__}")
    t = from_numpy(arr.astype(np.float32), like.device)
    t.requires_grad = False
    return t


def where(x, y, condition):
    """x where condition is nonzero, else y (SINGA's argument order)."""
    return Where(condition)(x, y)[0]


# ---- variadic (ONNX Sum, Mean, Min, Max: any number of inputs) ----

class Sum(Operator):
    """Element-wise sum of one or more tensors, broadcast (ONNX Sum)."""

    def forward(self, *l):
        _need_inputs("sum", l)
        self._shapes = [x.shape() for x in l]
        y = l[0]
        for x in l[1:]:
            y = _cw.Add(y, x)
        return y

    def backward(self, dy):
        return tuple(unbroadcast(dy, s) for s in self._shapes)


def sum(*l):
    return Sum()(*l)[0]


class Mean(Operator):
    """Element-wise mean of one or more tensors, broadcast (ONNX Mean)."""

    def forward(self, *l):
        _need_inputs("mean", l)
        self._shapes = [x.shape() for x in l]
        y = l[0]
        for x in l[1:]:
            y = _cw.Add(y, x)
        return _cw.MulScalar(y, 1.0 / len(l))

    def backward(self, dy):
        g = _cw.MulScalar(dy, 1.0 / len(self._shapes))
        return tuple(unbroadcast(g, s) for s in self._shapes)


def mean(*l):
    return Mean()(*l)[0]


class _Extremum(Operator):
    """Shared by Min and Max: the gradient goes to the first input that
    attains the result at each element."""

    pick = None

    def forward(self, *x):
        _need_inputs(type(self).__name__.lower(), x)
        y = x[0]
        for t in x[1:]:
            y = type(self).pick(y, t)
        self._xs, self._y = x, y
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


def min(*l):
    return Min()(*l)[0]


def max(*l):
    return Max()(*l)[0]


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
    return Cast(to)(x)[0]
