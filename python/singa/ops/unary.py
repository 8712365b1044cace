"""Unary operators with attributes or no kernel of their own: clip and
identity. The plain element-wise functions (exp, sin, sign, ...) are rows
of singa.opdefs, made into operators in ops/generated.py.
"""

import math
import numbers

from singa import singa_wrap as _cw
from singa.autograd import Operator

__all__ = ["Clip", "clip", "Identity", "identity"]


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
    return Clip(min, max)(x)[0]


class Identity(Operator):
    """y = x (ONNX Identity). The output shares x's storage."""

    def forward(self, x):
        return x

    def backward(self, dy):
        return dy


def identity(x):
    return Identity()(x)[0]
