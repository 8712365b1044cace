"""Operators generated from the rows of ``singa.opdefs``: one class per row,
named as the op (``Exp``, ``ReLU``, ``Less``), with the row's aliases
(``Negative`` is ``Neg``), and one function per row (``exp``, ``relu``,
``less``) with its aliases.

A unary class runs the ops.def kernel and keeps for backward only what the
row's gradient formula names (``x`` or ``y``). A binary class broadcasts
as NumPy, accepts a number for either operand (see ``ops.operands``),
computes only the gradients the engine will use and sums each back to its
input's shape.
"""

import inspect

from singa import opdefs
from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import operands, unbroadcast

__all__ = ["Elementwise"]


class Elementwise(Operator):
    """Base of the generated operators; ``row`` is their opdefs row. Their
    forward keeps its inputs or output only when ``self.saved``."""

    row = None
    saves_only_when_told = True


def _params(f, allowed, row):
    names = tuple(inspect.signature(f).parameters)
    bad = [n for n in names if n not in allowed]
    if bad or "dy" not in names:
        raise ValueError(f"opdefs row {row.op}: gradient parameters {names} must include "
                         f"dy and otherwise be among {sorted(allowed)}")
    return names


def _docstring(row):
    onnx = f" (ONNX {row.onnx})" if row.onnx else ""
    return f"{row.doc}{onnx}" if row.doc else f"{row.op}{onnx}."


def _unary_class(row):
    kernel = getattr(_cw, row.op)
    grad = row.grad
    if grad is None:
        def forward(self, x):
            return kernel(x)

        def backward(self, dy):
            return None
    else:
        names = _params(grad, {"x", "y", "dy"}, row)
        keep_x, keep_y = "x" in names, "y" in names

        def forward(self, x):
            y = kernel(x)
            if self.saved:
                if keep_x:
                    self._x = x
                if keep_y:
                    self._y = y
            return y

        def backward(self, dy):
            kw = {"dy": dy}
            if keep_x:
                kw["x"] = self._x
            if keep_y:
                kw["y"] = self._y
            return grad(**kw)
    return forward, backward


def _binary_class(row):
    kernel = getattr(_cw, row.op)
    grads = row.grad
    names = [_params(g, {"a", "b", "y", "dy"}, row) if g else () for g in grads]
    keep = {n for ns in names for n in ns} - {"dy"}
    any_grad = any(grads)

    def forward(self, a, b):
        y = kernel(a, b)
        if any_grad and self.saved:
            self._shapes = (a.shape(), b.shape())
            if "a" in keep:
                self._a = a
            if "b" in keep:
                self._b = b
            if "y" in keep:
                self._y = y
        return y

    def backward(self, dy):
        out = []
        for i, (g, ns) in enumerate(zip(grads, names)):
            if g is None or not self.needs_grad(i):
                out.append(None)
                continue
            kw = {n: dy if n == "dy" else getattr(self, "_" + n) for n in ns}
            out.append(unbroadcast(g(**kw), self._shapes[i]))
        return tuple(out)
    return forward, backward


def _unary_x(cls, where):
    def fn(x):
        return cls()(x)[0]
    return fn


def _unary_a(cls, where):
    def fn(a):
        return cls()(a)[0]
    return fn


def _binary_ab(cls, where):
    def fn(a, b):
        return cls()(*operands(where, a, b))[0]
    return fn


def _binary_xy(cls, where):
    def fn(x, y):
        return cls()(*operands(where, x, y))[0]
    return fn


# The function forms by parameter names (the rows' args, SINGA's names).
_FUNCTIONS = {("x",): _unary_x, ("a",): _unary_a, ("a", "b"): _binary_ab,
              ("x", "y"): _binary_xy}


def _make(row):
    forward, backward = (_unary_class if row.arity == 1 else _binary_class)(row)
    cls = type(row.op, (Elementwise,), {
        "__doc__": _docstring(row), "__module__": __name__, "__qualname__": row.op,
        "row": row, "forward": forward, "backward": backward})
    fn = _FUNCTIONS[row.args](cls, row.fn)
    fn.__name__ = fn.__qualname__ = row.fn
    fn.__module__ = __name__
    fn.__doc__ = f"{_docstring(row)} Records {row.op} for autograd."
    return cls, fn


OPERATORS = {}
for _row in opdefs.ROWS:
    _cls, _fn = _make(_row)
    OPERATORS[_row.op] = _cls
    for _name in (_row.op,) + _row.class_aliases:
        globals()[_name] = _cls
        __all__.append(_name)
    for _name in (_row.fn,) + _row.fn_aliases:
        globals()[_name] = _fn
        __all__.append(_name)
del _row, _cls, _fn, _name
