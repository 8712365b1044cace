"""Unary math: exponentials and logs, roots, trigonometric and hyperbolic
functions, erf, clip, identity, negation, reciprocal, and the
piecewise-constant sign / ceil / floor / round / not.

Each class's docstring gives its derivative. Backward keeps the input or
the output, whichever the derivative is written in (exp keeps y = e^x).
Piecewise-constant ops have a zero gradient almost everywhere, so their
backward returns None.
"""

import math
import numbers

from singa import singa_wrap as _cw
from singa.autograd import Operator

__all__ = [
    "Exp", "exp", "Log", "log", "Sqrt", "sqrt", "Abs", "abs",
    "Sin", "sin", "Cos", "cos", "Tan", "tan", "Asin", "asin", "Acos", "acos",
    "Atan", "atan", "Sinh", "sinh", "Cosh", "cosh", "Asinh", "asinh",
    "Acosh", "acosh", "Atanh", "atanh", "Erf", "erf", "Clip", "clip",
    "Identity", "identity", "Negative", "negative", "Reciprocal", "reciprocal",
    "Sign", "sign", "Ceil", "ceil", "Floor", "floor", "Round", "round",
    "Rounde", "rounde", "Not", "_not",
]


class Exp(Operator):
    """e^x (ONNX Exp); d/dx = y."""

    def forward(self, x):
        self._y = y = _cw.Exp(x)
        return y

    def backward(self, dy):
        return _cw.Mul(dy, self._y)


def exp(x):
    return Exp()(x)


class Log(Operator):
    """Natural log (ONNX Log); d/dx = 1 / x."""

    def forward(self, x):
        self._x = x
        return _cw.Log(x)

    def backward(self, dy):
        return _cw.Div(dy, self._x)


def log(x):
    return Log()(x)


class Sqrt(Operator):
    """Square root (ONNX Sqrt); d/dx = 1 / (2 y)."""

    def forward(self, x):
        self._y = y = _cw.Sqrt(x)
        return y

    def backward(self, dy):
        return _cw.MulScalar(_cw.Div(dy, self._y), 0.5)


def sqrt(x):
    return Sqrt()(x)


class Abs(Operator):
    """|x| (ONNX Abs); d/dx = sign(x), 0 at 0."""

    def forward(self, x):
        self._x = x
        return _cw.Abs(x)

    def backward(self, dy):
        return _cw.Mul(dy, _cw.Sign(self._x))


def abs(x):
    return Abs()(x)


class Sin(Operator):
    """sin x (ONNX Sin); d/dx = cos x."""

    def forward(self, x):
        self._x = x
        return _cw.Sin(x)

    def backward(self, dy):
        return _cw.Mul(dy, _cw.Cos(self._x))


def sin(x):
    return Sin()(x)


class Cos(Operator):
    """cos x (ONNX Cos); d/dx = -sin x."""

    def forward(self, x):
        self._x = x
        return _cw.Cos(x)

    def backward(self, dy):
        return _cw.Mul(dy, _cw.Neg(_cw.Sin(self._x)))


def cos(x):
    return Cos()(x)


class Tan(Operator):
    """tan x (ONNX Tan); d/dx = 1 + y^2."""

    def forward(self, x):
        self._y = y = _cw.Tan(x)
        return y

    def backward(self, dy):
        return _cw.Mul(dy, _cw.AddScalar(_cw.Square(self._y), 1.0))


def tan(x):
    return Tan()(x)


class Asin(Operator):
    """arcsin x (ONNX Asin); d/dx = 1 / sqrt(1 - x^2)."""

    def forward(self, x):
        self._x = x
        return _cw.Asin(x)

    def backward(self, dy):
        return _cw.Div(dy, _cw.Sqrt(_cw.ScalarSub(1.0, _cw.Square(self._x))))


def asin(x):
    return Asin()(x)


class Acos(Operator):
    """arccos x (ONNX Acos); d/dx = -1 / sqrt(1 - x^2)."""

    def forward(self, x):
        self._x = x
        return _cw.Acos(x)

    def backward(self, dy):
        return _cw.Neg(_cw.Div(dy, _cw.Sqrt(_cw.ScalarSub(1.0, _cw.Square(self._x)))))


def acos(x):
    return Acos()(x)


class Atan(Operator):
    """arctan x (ONNX Atan); d/dx = 1 / (1 + x^2)."""

    def forward(self, x):
        self._x = x
        return _cw.Atan(x)

    def backward(self, dy):
        return _cw.Div(dy, _cw.AddScalar(_cw.Square(self._x), 1.0))


def atan(x):
    return Atan()(x)


class Sinh(Operator):
    """sinh x (ONNX Sinh); d/dx = cosh x."""

    def forward(self, x):
        self._x = x
        return _cw.Sinh(x)

    def backward(self, dy):
        return _cw.Mul(dy, _cw.Cosh(self._x))


def sinh(x):
    return Sinh()(x)


class Cosh(Operator):
    """cosh x (ONNX Cosh); d/dx = sinh x."""

    def forward(self, x):
        self._x = x
        return _cw.Cosh(x)

    def backward(self, dy):
        return _cw.Mul(dy, _cw.Sinh(self._x))


def cosh(x):
    return Cosh()(x)


class Asinh(Operator):
    """arsinh x (ONNX Asinh); d/dx = 1 / sqrt(x^2 + 1)."""

    def forward(self, x):
        self._x = x
        return _cw.Asinh(x)

    def backward(self, dy):
        return _cw.Div(dy, _cw.Sqrt(_cw.AddScalar(_cw.Square(self._x), 1.0)))


def asinh(x):
    return Asinh()(x)


class Acosh(Operator):
    """arcosh x (ONNX Acosh); d/dx = 1 / sqrt(x^2 - 1)."""

    def forward(self, x):
        self._x = x
        return _cw.Acosh(x)

    def backward(self, dy):
        return _cw.Div(dy, _cw.Sqrt(_cw.AddScalar(_cw.Square(self._x), -1.0)))


def acosh(x):
    return Acosh()(x)


class Atanh(Operator):
    """artanh x (ONNX Atanh); d/dx = 1 / (1 - x^2)."""

    def forward(self, x):
        self._x = x
        return _cw.Atanh(x)

    def backward(self, dy):
        return _cw.Div(dy, _cw.ScalarSub(1.0, _cw.Square(self._x)))


def atanh(x):
    return Atanh()(x)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class Erf(Operator):
    """The error function (ONNX Erf); d/dx = 2 / sqrt(pi) e^(-x^2)."""

    def forward(self, x):
        self._x = x
        return _cw.Erf(x)

    def backward(self, dy):
        g = _cw.MulScalar(_cw.Exp(_cw.Neg(_cw.Square(self._x))), _TWO_OVER_SQRT_PI)
        return _cw.Mul(dy, g)


def erf(x):
    return Erf()(x)


class Clip(Operator):
    """Limits x to [min, max]; either bound may be None (ONNX Clip, whose
    min / max inputs are kept here as attributes). The gradient passes
    where min <= x <= max."""

    def __init__(self, min=None, max=None, name=None):
        super().__init__(name)
        for v in (min, max):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real)):
                raise TypeError(f"clip: bounds must be numbers or None, got {v!r}")
        self.min = None if min is None else float(min)
        self.max = None if max is None else float(max)

    def forward(self, x):
        lo = -math.inf if self.min is None else self.min
        hi = math.inf if self.max is None else self.max
        self._inside = _cw.Mul(_cw.GreaterEqualScalar(x, lo), _cw.LessEqualScalar(x, hi))
        return _cw.Clip(x, lo, hi)

    def backward(self, dy):
        return _cw.Mul(dy, self._inside)


def clip(x, min=None, max=None):
    return Clip(min, max)(x)


class Identity(Operator):
    """y = x (ONNX Identity). The output shares x's storage."""

    def forward(self, x):
        return x

    def backward(self, dy):
        return dy


def identity(x):
    return Identity()(x)


class Negative(Operator):
    """-x (ONNX Neg)."""

    def forward(self, x):
        return _cw.Neg(x)

    def backward(self, dy):
        return _cw.Neg(dy)


def negative(x):
    return Negative()(x)


class Reciprocal(Operator):
    """1 / x (ONNX Reciprocal); d/dx = -y^2."""

    def forward(self, x):
        self._y = y = _cw.Reciprocal(x)
        return y

    def backward(self, dy):
        return _cw.Neg(_cw.Mul(dy, _cw.Square(self._y)))


def reciprocal(x):
    return Reciprocal()(x)


class _Flat(Operator):
    """A piecewise-constant function: the gradient is zero almost
    everywhere, so backward hands back None."""

    fn = None

    def forward(self, x):
        return type(self).fn(x)

    def backward(self, dy):
        return None


class Sign(_Flat):
    """-1, 0 or 1 (ONNX Sign)."""
    fn = _cw.Sign


class Ceil(_Flat):
    """Smallest integer >= x (ONNX Ceil)."""
    fn = _cw.Ceil


class Floor(_Flat):
    """Largest integer <= x (ONNX Floor)."""
    fn = _cw.Floor


class Round(_Flat):
    """Rounds halves away from zero (SINGA's round; C round())."""
    fn = _cw.Round


class Rounde(_Flat):
    """Rounds halves to even (ONNX Round)."""
    fn = _cw.RoundE


def sign(x):
    return Sign()(x)


def ceil(x):
    return Ceil()(x)


def floor(x):
    return Floor()(x)


def round(x):
    return Round()(x)


def rounde(x):
    return Rounde()(x)


class Not(_Flat):
    """1 where x == 0, else 0 (ONNX Not)."""
    fn = _cw.Not


def _not(x):
    return Not()(x)
