"""The element-wise op table: the Python half of ``include/singa/core/ops.def``.

ops.def gives each element-wise op its C++ kernel; one row here gives the
rest, and every other layer is derived from the rows:

* ``singa.tensor``: a function ``fn`` per row that runs the kernel
  (no autograd), built in ``tensor_ops``.
* ``singa.autograd``: an Operator class named ``op`` whose backward is
  ``grad``, and a function ``fn`` that applies it (``ops/generated.py``).
* ONNX: the exporter writes the class as a node of type ``onnx`` with
  ``attrs`` (``_onnx/export_ops.py``); the importer runs nodes of that type
  and those attribute values as ``fn`` (``_onnx/ops_math.py``, through
  ``_onnx/fn.py``).
* ``test/python/test_opdefs.py``: forward against NumPy, gradients against
  finite differences and ONNX round trips for every row, from one reference
  row per op; and the check that ops.def, these rows and the reference rows
  name the same ops.

Row fields (``Unary`` and ``Binary`` take the same keywords):

``op``
    The op's one name: the ops.def entry, the ``singa_wrap`` function
    (``singa_wrap.Exp``) and the autograd class (``autograd.Exp``).
``grad``
    The backward formula on ``singa_wrap`` tensors. Unary: a function of
    ``dy`` and the input ``x`` or the output ``y``; the parameter names say
    which one the operator keeps for backward. ``None`` for an op that is
    piecewise constant (its gradient is zero almost everywhere, so backward
    returns None). Binary: a pair (gradient for ``a``, for ``b``), each a
    function of ``dy`` and any of ``a``, ``b``, ``y``, or None for an
    input with no gradient; the result is summed back over broadcast axes.
``fn``
    The function name in ``singa.tensor`` and ``singa.autograd``; the op
    name in lower case by default.
``onnx``
    The ONNX operator type, or None when ONNX has none (then ``why`` says
    why, or ``_onnx/export_ops.FALLBACKS`` writes it with other operators).
``attrs``
    ONNX attributes the exported node carries; an imported node of type
    ``onnx`` runs this row when its attributes have these values.
``opset``
    The oldest ai.onnx opset with this form of the operator: export needs
    it (older opsets use a fallback when ``FALLBACKS`` has one) and import
    accepts nodes from it on.
``aliases``
    Other names, SINGA's above all: capitalised ones name the class
    (``Negative``), the others the function (``negative``, ``lt``).
``args``
    The parameter names of the autograd function, SINGA's: ``("x",)`` for
    a unary op and ``("a", "b")`` for a binary one unless given
    (``autograd.exp(a)``, ``autograd.mul(x, y)``).
``doc``
    What the op computes and its derivative, for the docstrings.
"""

import math

from singa import singa_wrap as _cw

__all__ = ["Unary", "Binary", "UNARY", "BINARY", "ROWS", "by_op"]


class _Row:
    arity = 0

    def __init__(self, op, grad, fn=None, onnx=None, attrs=None, opset=1, aliases=(),
                 doc="", why=None, args=None):
        self.op = op
        self.args = tuple(args) if args else (("x",) if self.arity == 1 else ("a", "b"))
        self.grad = grad
        self.fn = fn or op.lower()
        self.onnx = onnx
        self.attrs = dict(attrs or {})
        self.opset = opset
        self.aliases = tuple(aliases)
        self.doc = doc
        self.why = why

    @property
    def class_aliases(self):
        return tuple(a for a in self.aliases if a[0].isupper())

    @property
    def fn_aliases(self):
        return tuple(a for a in self.aliases if not a[0].isupper())

    def __repr__(self):
        return f"{type(self).__name__}({self.op!r})"


class Unary(_Row):
    arity = 1


class Binary(_Row):
    arity = 2

    def __init__(self, op, grad=(None, None), opset=7, **kw):
        super().__init__(op, tuple(grad), opset=opset, **kw)


def _gelu_grad(x, dy):
    # Phi(x) + x phi(x), Phi and phi the standard normal CDF and density
    cdf = _cw.MulScalar(_cw.AddScalar(_cw.Erf(_cw.MulScalar(x, 1 / math.sqrt(2))), 1.0), 0.5)
    pdf = _cw.MulScalar(_cw.Exp(_cw.MulScalar(_cw.Square(x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return _cw.Mul(dy, _cw.Add(cdf, _cw.Mul(x, pdf)))


def _gelu_tanh_grad(x, dy):
    # y = x (1 + t) / 2 with t = tanh(c x (1 + k x^2)):
    # dy/dx = (1 + t) / 2 + x (1 - t^2) c (1 + 3 k x^2) / 2
    c, k = math.sqrt(2 / math.pi), 0.044715
    x2 = _cw.Square(x)
    t = _cw.Tanh(_cw.MulScalar(_cw.Mul(x, _cw.AddScalar(_cw.MulScalar(x2, k), 1.0)), c))
    dt = _cw.Mul(_cw.ScalarSub(1.0, _cw.Square(t)), _cw.AddScalar(_cw.MulScalar(x2, 3 * k), 1.0))
    slope = _cw.Add(_cw.AddScalar(t, 1.0), _cw.MulScalar(_cw.Mul(x, dt), c))
    return _cw.Mul(dy, _cw.MulScalar(slope, 0.5))


def _one_minus_x2(x):
    return _cw.ScalarSub(1.0, _cw.Square(x))


UNARY = [
    Unary("Abs", lambda x, dy: _cw.Mul(dy, _cw.Sign(x)), onnx="Abs", args=("a",),
          doc="|x|; d/dx = sign(x), 0 at 0."),
    Unary("Neg", lambda dy: _cw.Neg(dy), onnx="Neg", aliases=("Negative", "negative"),
          doc="-x."),
    Unary("Exp", lambda y, dy: _cw.Mul(dy, y), onnx="Exp", args=("a",), doc="e^x; d/dx = y."),
    Unary("Log", lambda x, dy: _cw.Div(dy, x), onnx="Log", doc="Natural log; d/dx = 1 / x."),
    Unary("Sqrt", lambda y, dy: _cw.MulScalar(_cw.Div(dy, y), 0.5), onnx="Sqrt",
          doc="Square root; d/dx = 1 / (2 y)."),
    Unary("Square", lambda x, dy: _cw.Mul(dy, _cw.MulScalar(x, 2.0)),
          doc="x^2; d/dx = 2 x. ONNX has no Square: exported as Mul(x, x)."),
    Unary("Sign", None, onnx="Sign", args=("a",), doc="-1, 0 or 1."),
    Unary("Ceil", None, onnx="Ceil", doc="Smallest integer >= x."),
    Unary("Floor", None, onnx="Floor", doc="Largest integer <= x."),
    Unary("Round", None, doc="Rounds halves away from zero (SINGA's round, C round()).",
          why="it rounds halves away from zero, which no ONNX operator does; rounde "
              "rounds halves to even, as ONNX Round does"),
    Unary("RoundE", None, fn="rounde", onnx="Round", aliases=("Rounde",),
          doc="Rounds halves to even (ONNX Round)."),
    Unary("Reciprocal", lambda y, dy: _cw.Neg(_cw.Mul(dy, _cw.Square(y))), onnx="Reciprocal",
          doc="1 / x; d/dx = -y^2."),
    Unary("ReLU", lambda x, dy: _cw.ReLUGrad(dy, x), onnx="Relu",
          doc="max(x, 0); d/dx = [x > 0]."),
    Unary("Sigmoid", lambda y, dy: _cw.Mul(dy, _cw.Mul(y, _cw.ScalarSub(1.0, y))),
          onnx="Sigmoid", doc="1 / (1 + e^-x); d/dx = y (1 - y)."),
    Unary("Tanh", lambda y, dy: _cw.Mul(dy, _one_minus_x2(y)), onnx="Tanh",
          doc="tanh x; d/dx = 1 - y^2."),
    Unary("SoftPlus", lambda x, dy: _cw.Mul(dy, _cw.Sigmoid(x)), onnx="Softplus",
          doc="log(1 + e^x); d/dx = sigmoid(x)."),
    Unary("SoftSign", lambda x, dy: _cw.Div(dy, _cw.Square(_cw.AddScalar(_cw.Abs(x), 1.0))),
          onnx="Softsign", doc="x / (1 + |x|); d/dx = 1 / (1 + |x|)^2."),
    Unary("Erf", lambda x, dy: _cw.Mul(dy, _cw.MulScalar(_cw.Exp(_cw.Neg(_cw.Square(x))),
                                                      2 / math.sqrt(math.pi))),
          onnx="Erf", doc="The error function; d/dx = 2 / sqrt(pi) e^(-x^2)."),
    Unary("Gelu", _gelu_grad, onnx="Gelu", attrs={"approximate": "none"}, opset=20,
          doc="x Phi(x), Phi the standard normal CDF; d/dx = Phi(x) + x phi(x)."),
    Unary("GeluTanh", _gelu_tanh_grad, fn="gelu_tanh", onnx="Gelu",
          attrs={"approximate": "tanh"}, opset=20,
          doc="x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2, Gelu's tanh form."),
    Unary("Sin", lambda x, dy: _cw.Mul(dy, _cw.Cos(x)), onnx="Sin", doc="sin x; d/dx = cos x."),
    Unary("Cos", lambda x, dy: _cw.Mul(dy, _cw.Neg(_cw.Sin(x))), onnx="Cos",
          doc="cos x; d/dx = -sin x."),
    Unary("Tan", lambda y, dy: _cw.Mul(dy, _cw.AddScalar(_cw.Square(y), 1.0)), onnx="Tan",
          doc="tan x; d/dx = 1 + y^2."),
    Unary("Asin", lambda x, dy: _cw.Div(dy, _cw.Sqrt(_one_minus_x2(x))), onnx="Asin",
          doc="arcsin x; d/dx = 1 / sqrt(1 - x^2)."),
    Unary("Acos", lambda x, dy: _cw.Neg(_cw.Div(dy, _cw.Sqrt(_one_minus_x2(x)))), onnx="Acos",
          doc="arccos x; d/dx = -1 / sqrt(1 - x^2)."),
    Unary("Atan", lambda x, dy: _cw.Div(dy, _cw.AddScalar(_cw.Square(x), 1.0)), onnx="Atan",
          doc="arctan x; d/dx = 1 / (1 + x^2)."),
    Unary("Sinh", lambda x, dy: _cw.Mul(dy, _cw.Cosh(x)), onnx="Sinh",
          doc="sinh x; d/dx = cosh x."),
    Unary("Cosh", lambda x, dy: _cw.Mul(dy, _cw.Sinh(x)), onnx="Cosh",
          doc="cosh x; d/dx = sinh x."),
    Unary("Asinh", lambda x, dy: _cw.Div(dy, _cw.Sqrt(_cw.AddScalar(_cw.Square(x), 1.0))),
          onnx="Asinh", doc="arsinh x; d/dx = 1 / sqrt(x^2 + 1)."),
    Unary("Acosh", lambda x, dy: _cw.Div(dy, _cw.Sqrt(_cw.AddScalar(_cw.Square(x), -1.0))),
          onnx="Acosh", doc="arcosh x; d/dx = 1 / sqrt(x^2 - 1)."),
    Unary("Atanh", lambda x, dy: _cw.Div(dy, _one_minus_x2(x)), onnx="Atanh",
          doc="artanh x; d/dx = 1 / (1 - x^2)."),
    Unary("Not", None, fn="logical_not", onnx="Not", aliases=("_not",),
          doc="1 where x == 0, else 0."),
]

BINARY = [
    Binary("Add", (lambda dy: dy, lambda dy: dy), onnx="Add", doc="a + b."),
    Binary("Sub", (lambda dy: dy, lambda dy: _cw.Neg(dy)), onnx="Sub", doc="a - b."),
    Binary("Mul", (lambda b, dy: _cw.Mul(dy, b), lambda a, dy: _cw.Mul(dy, a)), onnx="Mul",
           args=("x", "y"), doc="a * b."),
    Binary("Div", (lambda b, dy: _cw.Div(dy, b),
                   lambda b, y, dy: _cw.Neg(_cw.Div(_cw.Mul(dy, y), b))),
           onnx="Div", doc="a / b; d/db = -y / b. Integer division truncates; by 0 gives 0."),
    Binary("Pow", (lambda a, b, dy: _cw.Mul(dy, _cw.Mul(b, _cw.Pow(a, _cw.AddScalar(b, -1.0)))),
                   lambda a, y, dy: _cw.Mul(dy, _cw.Mul(y, _cw.Log(a)))),
           onnx="Pow", doc="a ** b; d/da = b a^(b-1), d/db = y ln(a) (for a > 0)."),
    Binary("Minimum", (lambda a, b, dy: _cw.Mul(dy, _cw.LessEqual(a, b)),
                       lambda a, b, dy: _cw.Mul(dy, _cw.Less(b, a))),
           onnx="Min", opset=8, doc="The smaller of a and b; ties give a the gradient."),
    Binary("Maximum", (lambda a, b, dy: _cw.Mul(dy, _cw.GreaterEqual(a, b)),
                       lambda a, b, dy: _cw.Mul(dy, _cw.Greater(b, a))),
           onnx="Max", opset=8, doc="The larger of a and b; ties give a the gradient."),
    Binary("Less", onnx="Less", aliases=("lt",), args=("x", "y"), doc="1 where a < b, else 0."),
    Binary("LessEqual", fn="less_equal", onnx="LessOrEqual", opset=12, aliases=("le",),
           doc="1 where a <= b, else 0."),
    Binary("Greater", onnx="Greater", aliases=("gt",), args=("x", "y"),
           doc="1 where a > b, else 0."),
    Binary("GreaterEqual", fn="greater_equal", onnx="GreaterOrEqual", opset=12,
           aliases=("ge",), doc="1 where a >= b, else 0."),
    Binary("Equal", onnx="Equal", aliases=("eq",), args=("x", "y"),
           doc="1 where a == b, else 0."),
    Binary("And", fn="logical_and", onnx="And", aliases=("_and",),
           doc="1 where a and b are both nonzero, else 0."),
    Binary("Or", fn="logical_or", onnx="Or", aliases=("_or",),
           doc="1 where a or b is nonzero, else 0."),
    Binary("Xor", fn="logical_xor", onnx="Xor", aliases=("_xor",),
           doc="1 where exactly one of a and b is nonzero, else 0."),
    Binary("ReLUGrad", (lambda b, dy: _cw.ReLUGrad(dy, b), None), fn="relu_grad",
           doc="ReLU's gradient dy * (x > 0) in one pass: a (dy) where b (x) > 0, else 0."),
]

ROWS = UNARY + BINARY
_BY_OP = {r.op: r for r in ROWS}


def by_op(op):
    """The row of op (its ops.def name); KeyError when there is none."""
    return _BY_OP[op]
