"""Element-wise arithmetic with broadcasting, comparisons and logic,
where, variadic sum / mean / min / max, and cast.

Binary ops broadcast as NumPy (ONNX multidirectional broadcasting) and
reduce each gradient back to its input's shape. Comparisons and logic have
no gradient (backward returns None for their inputs). A number given to
add / sub / mul / div / pow / comparisons becomes a 0-d constant tensor.
"""

import numbers

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.tensor import Tensor, _wrap
from singa.ops import unbroadcast, constant

__all__ = [
    "Add", "add", "Sub", "sub", "Mul", "mul", "Div", "div", "Pow", "pow",
    "Less", "less", "Greater", "greater", "Equal", "equal",
    "And", "_and", "Or", "_or", "Xor", "_xor", "Where", "where",
    "Sum", "sum", "Mean", "mean", "Min", "min", "Max", "max", "Cast", "cast",
]


# ---- binary arithmetic with broadcasting ----

def _operands(where, a, b):
    """a and b as Tensors; a number becomes a 0-d constant (no gradient)
    with the other operand's dtype and device, so the graph stays made of
    tensors."""
    a_t, b_t = isinstance(a, Tensor), isinstance(b, Tensor)
    if a_t and b_t:
        return a, b
    if a_t and _is_number(b):
        return a, _const_tensor(b, a)
    if b_t and _is_number(a):
        return _const_tensor(a, b), b
    raise TypeError(f"{where}: expected Tensors or numbers, got "
                    f"{type(a).__name__} and {type(b).__name__}")


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _const_tensor(value, like):
    t = _wrap(constant(value, like.data))
    t.requires_grad = False
    return t


class Add(Operator):
    """a + b with broadcasting (ONNX Add)."""

    def forward(self, a, b):
        self._shapes = (a.shape(), b.shape())
        return _cw.Add(a, b)

    def backward(self, dy):
        sa, sb = self._shapes
        return unbroadcast(dy, sa), unbroadcast(dy, sb)


def add(a, b):
    return Add()(*_operands("add", a, b))


class Sub(Operator):
    """a - b with broadcasting (ONNX Sub)."""

    def forward(self, a, b):
        self._shapes = (a.shape(), b.shape())
        return _cw.Sub(a, b)

    def backward(self, dy):
        sa, sb = self._shapes
        return unbroadcast(dy, sa), unbroadcast(_cw.Neg(dy), sb)


def sub(a, b):
    return Sub()(*_operands("sub", a, b))


class Mul(Operator):
    """a * b with broadcasting (ONNX Mul)."""

    def forward(self, a, b):
        self._a, self._b = a, b
        return _cw.Mul(a, b)

    def backward(self, dy):
        a, b = self._a, self._b
        return unbroadcast(_cw.Mul(dy, b), a.shape()), unbroadcast(_cw.Mul(dy, a), b.shape())


def mul(a, b):
    return Mul()(*_operands("mul", a, b))


class Div(Operator):
    """a / b with broadcasting (ONNX Div); d/db = -y / b."""

    def forward(self, a, b):
        self._a, self._b = a, b
        self._y = y = _cw.Div(a, b)
        return y

    def backward(self, dy):
        a, b = self._a, self._b
        da = _cw.Div(dy, b)
        db = _cw.Neg(_cw.Mul(da, self._y))
        return unbroadcast(da, a.shape()), unbroadcast(db, b.shape())


def div(a, b):
    return Div()(*_operands("div", a, b))


class Pow(Operator):
    """a ** b with broadcasting (ONNX Pow).

    d/da = b a^(b-1); d/db = y ln(a), defined for a > 0.
    """

    def forward(self, a, b):
        self._a, self._b = a, b
        self._y = y = _cw.Pow(a, b)
        return y

    def backward(self, dy):
        a, b = self._a, self._b
        da = db = None
        if self.needs_grad(0):
            da = unbroadcast(_cw.Mul(dy, _cw.Mul(b, _cw.Pow(a, _cw.AddScalar(b, -1.0)))),
                             a.shape())
        # skipped for a constant exponent, where ln(a) may be undefined
        if self.needs_grad(1):
            db = unbroadcast(_cw.Mul(dy, _cw.Mul(self._y, _cw.Log(a))), b.shape())
        return da, db


def pow(a, b):
    return Pow()(*_operands("pow", a, b))


# ---- comparisons and logic: 0 / 1 outputs in the inputs' dtype ----

class _NoGrad2(Operator):
    fn = None

    def forward(self, a, b):
        return type(self).fn(a, b)

    def backward(self, dy):
        return None, None


class Less(_NoGrad2):
    """a < b (ONNX Less)."""
    fn = _cw.Less


class Greater(_NoGrad2):
    """a > b (ONNX Greater)."""
    fn = _cw.Greater


class Equal(_NoGrad2):
    """a == b (ONNX Equal)."""
    fn = _cw.Equal


class And(_NoGrad2):
    """Logical and of nonzero tests (ONNX And)."""
    fn = _cw.And


class Or(_NoGrad2):
    """Logical or (ONNX Or)."""
    fn = _cw.Or


class Xor(_NoGrad2):
    """Logical xor (ONNX Xor)."""
    fn = _cw.Xor


def less(a, b):
    return Less()(*_operands("less", a, b))


def greater(a, b):
    return Greater()(*_operands("greater", a, b))


def equal(a, b):
    return Equal()(*_operands("equal", a, b))


def _and(a, b):
    return And()(*_operands("_and", a, b))


def _or(a, b):
    return Or()(*_operands("_or", a, b))


def _xor(a, b):
    return Xor()(*_operands("_xor", a, b))


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
