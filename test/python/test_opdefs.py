"""The element-wise op table (singa.opdefs) against ops.def, NumPy, finite
differences and ONNX.

REFERENCE holds one row per op: the NumPy function that defines it and the
ranges its inputs are drawn from. Every test below is derived from the op
table and these rows, so a new op is tested by adding its row here.
"""

import math

import numpy as np
import pytest

from singa import autograd, opdefs, tensor
from singa import singa_wrap as _cw
from gradcheck import LAYOUTS, analytic_grads, check_grad


class Dom:
    """Where an op's inputs come from: uniform in [lo, hi], at least margin
    away from the point avoid (a kink or a pole), as integers when ints,
    with the given points placed first (ties, halves, zeros)."""

    def __init__(self, lo, hi, avoid=None, margin=0.1, ints=False, points=()):
        self.lo, self.hi, self.avoid, self.margin = lo, hi, avoid, margin
        self.ints, self.points = ints, points

    def draw(self, shape, rng):
        if self.ints:
            x = rng.integers(self.lo, self.hi + 1, size=shape).astype(np.float64)
        else:
            x = rng.uniform(self.lo, self.hi, size=shape)
        if self.avoid is not None:
            d = x - self.avoid
            near = np.abs(d) < self.margin
            x[near] = self.avoid + np.where(d[near] < 0, -self.margin, self.margin)
        flat = x.reshape(-1)
        n = min(len(self.points), flat.size)
        flat[:n] = self.points[:n]
        return x.astype(np.float32)


_erf = np.vectorize(math.erf, otypes=[np.float64])
HALVES = (-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5)
INTS = Dom(-3, 3, ints=True)

# op: (NumPy reference, input domain)
UNARY_REF = {
    "Abs": (np.abs, Dom(-2, 2, avoid=0)),
    "Neg": (np.negative, Dom(-2, 2)),
    "Exp": (np.exp, Dom(-2, 2)),
    "Log": (np.log, Dom(0.5, 3)),
    "Sqrt": (np.sqrt, Dom(0.5, 3)),
    "Square": (np.square, Dom(-2, 2)),
    "Sign": (np.sign, Dom(-3, 3, points=HALVES)),
    "Ceil": (np.ceil, Dom(-3, 3, points=HALVES)),
    "Floor": (np.floor, Dom(-3, 3, points=HALVES)),
    "Round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), Dom(-3, 3, points=HALVES)),
    "RoundE": (np.round, Dom(-3, 3, points=HALVES)),
    "Reciprocal": (np.reciprocal, Dom(-3, 3, avoid=0, margin=0.5)),
    "ReLU": (lambda x: np.maximum(x, 0), Dom(-2, 2, avoid=0)),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), Dom(-6, 6)),
    "Tanh": (np.tanh, Dom(-3, 3)),
    "SoftPlus": (lambda x: np.log1p(np.exp(x)), Dom(-6, 6)),
    "SoftSign": (lambda x: x / (1 + np.abs(x)), Dom(-3, 3)),
    "Erf": (_erf, Dom(-2, 2)),
    "Gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), Dom(-3, 3)),
    "GeluTanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                  (x + 0.044715 * x ** 3))), Dom(-3, 3)),
    "Sin": (np.sin, Dom(-3, 3)),
    "Cos": (np.cos, Dom(-3, 3)),
    "Tan": (np.tan, Dom(-1.2, 1.2)),
    "Asin": (np.arcsin, Dom(-0.8, 0.8)),
    "Acos": (np.arccos, Dom(-0.8, 0.8)),
    "Atan": (np.arctan, Dom(-3, 3)),
    "Sinh": (np.sinh, Dom(-2, 2)),
    "Cosh": (np.cosh, Dom(-2, 2)),
    "Asinh": (np.arcsinh, Dom(-3, 3)),
    "Acosh": (np.arccosh, Dom(1.3, 3)),
    "Atanh": (np.arctanh, Dom(-0.8, 0.8)),
    "Not": (lambda x: (x == 0).astype(np.float64), Dom(-2, 2, ints=True, points=(0, 0))),
}

# op: (NumPy reference, domain of a, domain of b)
BINARY_REF = {
    "Add": (np.add, Dom(-2, 2), Dom(-2, 2)),
    "Sub": (np.subtract, Dom(-2, 2), Dom(-2, 2)),
    "Mul": (np.multiply, Dom(-2, 2), Dom(-2, 2)),
    "Div": (np.divide, Dom(-2, 2), Dom(-2, 2, avoid=0, margin=0.7)),
    "Pow": (np.power, Dom(0.5, 2), Dom(-1.5, 1.5)),
    "Minimum": (np.minimum, Dom(-2, 2), Dom(-2, 2)),
    "Maximum": (np.maximum, Dom(-2, 2), Dom(-2, 2)),
    "Less": (np.less, INTS, INTS),
    "LessEqual": (np.less_equal, INTS, INTS),
    "Greater": (np.greater, INTS, INTS),
    "GreaterEqual": (np.greater_equal, INTS, INTS),
    "Equal": (np.equal, INTS, INTS),
    "And": (np.logical_and, Dom(-1, 1, ints=True), Dom(-1, 1, ints=True)),
    "Or": (np.logical_or, Dom(-1, 1, ints=True), Dom(-1, 1, ints=True)),
    "Xor": (np.logical_xor, Dom(-1, 1, ints=True), Dom(-1, 1, ints=True)),
    "ReLUGrad": (lambda a, b: a * (b > 0), Dom(-2, 2), Dom(-2, 2, avoid=0)),
}

UNARY = {r.op: r for r in opdefs.UNARY}
BINARY = {r.op: r for r in opdefs.BINARY}


def _has_grad(row):
    return row.grad is not None if row.arity == 1 else any(row.grad)


# ---- the table, ops.def and the names each layer derives ----

def test_table_matches_ops_def():
    assert [r.op for r in opdefs.UNARY] == _cw.UnaryOpNames().split()
    assert [r.op for r in opdefs.BINARY] == _cw.BinaryOpNames().split()


def test_every_row_has_a_reference_row():
    assert set(UNARY_REF) == set(UNARY)
    assert set(BINARY_REF) == set(BINARY)


@pytest.mark.parametrize("op", [r.op for r in opdefs.ROWS])
def test_every_layer_has_the_op(op):
    pytest.importorskip("onnx")
    from singa._onnx.export_ops import EXPORTERS, FALLBACKS
    from singa._onnx.registry import OPS
    from singa._onnx import fn as F
    row = opdefs.by_op(op)
    cls = getattr(autograd, row.op)
    assert issubclass(cls, autograd.Operator) and cls.row is row
    for alias in row.class_aliases:
        assert getattr(autograd, alias) is cls
    for name in (row.fn,) + row.fn_aliases:
        assert getattr(autograd, name) is getattr(autograd, row.fn)
        if not name.startswith("_"):
            assert getattr(tensor, name) is getattr(tensor, row.fn)
    assert callable(getattr(F, row.fn))
    assert EXPORTERS[row.op] is not None
    # an ONNX mapping both ways, a composition for export, or a reason
    if row.onnx is not None:
        assert row.onnx in OPS
    else:
        assert row.op in FALLBACKS or row.why


# ---- forward against NumPy ----

@pytest.mark.parametrize("op", sorted(UNARY_REF))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_unary_forward(op, layout, dev, rng):
    ref, dom = UNARY_REF[op]
    x = dom.draw((37, 53), rng)
    t = tensor.from_numpy(x, dev)
    if layout == "transposed":
        t, x = t.T, x.T
    elif layout == "sliced":
        t, x = t[1:30:2, 3:], x[1:30:2, 3:]
    got = tensor.to_numpy(getattr(tensor, UNARY[op].fn)(t))
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


BROADCASTS = [((4, 5), (4, 5)), ((4, 5), (5,)), ((4, 1), (1, 5)), ((2, 3, 4), (3, 1)),
              ((1,), (3, 2)), ((), (2, 3)), ((2, 0, 3), (1, 3))]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("op", sorted(BINARY_REF))
@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_binary_forward(op, sa, sb, dev, rng):
    ref, da, db = BINARY_REF[op]
    a, b = da.draw(sa, rng), db.draw(sb, rng)
    fn = getattr(tensor, BINARY[op].fn)
    ta, tb = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
    want = ref(a.astype(np.float64), b.astype(np.float64))
    got = tensor.to_numpy(fn(ta, tb))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if op != "Pow":   # and with the operands swapped
        np.testing.assert_allclose(tensor.to_numpy(fn(tb, ta)),
                                   ref(b.astype(np.float64), a.astype(np.float64)),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", sorted(BINARY_REF))
def test_binary_number_either_side_and_ret(op, dev, rng):
    ref, da, db = BINARY_REF[op]
    a = da.draw((3, 7), rng)
    s = 1.5 if op != "Div" else -1.25
    fn = getattr(tensor, BINARY[op].fn)
    t = tensor.from_numpy(a, dev)
    np.testing.assert_allclose(tensor.to_numpy(fn(t, s)), ref(a, np.float32(s)), rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(fn(s, t)), ref(np.float32(s), a), rtol=1e-5)
    out = tensor.zeros((3, 7), dev)
    assert fn(t, t, out) is out
    np.testing.assert_allclose(tensor.to_numpy(out), ref(a, a), rtol=1e-5)


# ---- gradients against finite differences ----

@pytest.mark.parametrize("op", sorted(UNARY_REF))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_unary_gradient(op, layout, dev):
    ref, dom = UNARY_REF[op]
    row = UNARY[op]
    x = dom.draw((3, 4), np.random.default_rng(7))
    fn = getattr(autograd, row.fn)
    if _has_grad(row):
        y = check_grad(fn, [x], layout, dev=dev)
    else:
        # piecewise constant: zero gradient almost everywhere
        y, grads = analytic_grads(fn, [x], layout, dev=dev)
        np.testing.assert_array_equal(grads[0], np.zeros_like(x))
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


GRAD_BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1))]


def _apart(a, b, rng, da, db):
    """Redraws until a and b differ by 0.05 or more everywhere, so a finite
    difference step never crosses a tie of minimum / maximum."""
    while np.min(np.abs(a - b), initial=1.0) < 0.05:
        a, b = da.draw(a.shape, rng), db.draw(b.shape, rng)
    return a, b


@pytest.mark.parametrize("op", sorted(BINARY_REF))
@pytest.mark.parametrize("sa,sb", GRAD_BROADCASTS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_gradient(op, sa, sb, layout, dev):
    ref, da, db = BINARY_REF[op]
    row = BINARY[op]
    rng = np.random.default_rng(11)
    a, b = _apart(da.draw(sa, rng), db.draw(sb, rng), rng, da, db)
    fn = getattr(autograd, row.fn)
    if _has_grad(row):
        y = check_grad(fn, [a, b], layout, dev=dev)
    else:
        y, grads = analytic_grads(fn, [a, b], layout, dev=dev)
        assert not grads[0].any() and not grads[1].any()
    np.testing.assert_allclose(y, ref(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-5, atol=1e-6)


def _away(dom, s, rng, shape=(3, 4)):
    x = dom.draw(shape, rng)
    while np.min(np.abs(x - s)) < 0.05:
        x = dom.draw(shape, rng)
    return x


@pytest.mark.parametrize("op", [op for op, r in BINARY.items() if _has_grad(r)])
def test_binary_gradient_with_a_number(op):
    ref, da, db = BINARY_REF[op]
    rng = np.random.default_rng(3)
    s = 1.75
    fn = getattr(autograd, BINARY[op].fn)
    a = _away(da, s, rng)
    y = check_grad(lambda t: fn(t, s), [a], "sliced")
    np.testing.assert_allclose(y, ref(a.astype(np.float64), s), rtol=1e-5, atol=1e-6)
    b = _away(db, s, rng)
    y = check_grad(lambda t: fn(s, t), [b], "transposed")
    np.testing.assert_allclose(y, ref(s, b.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_binary_rejects_other_operands():
    with pytest.raises(TypeError, match="str"):
        autograd.add(tensor.ones((2,)), "2")


# ---- ONNX: export, onnxruntime, import ----

def _onnx_inputs(op, rng):
    if op in UNARY_REF:
        return [UNARY_REF[op][1].draw((3, 4), rng)]
    _, da, db = BINARY_REF[op]
    return list(_apart(da.draw((3, 4), rng), db.draw((4,), rng), rng, da, db))


@pytest.mark.parametrize("op", [r.op for r in opdefs.ROWS])
def test_onnx_round_trip(op):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from singa import sonnx
    from singa._onnx.export_ops import FALLBACKS
    row = opdefs.by_op(op)
    xs = [tensor.from_numpy(x) for x in _onnx_inputs(op, np.random.default_rng(5))]
    with autograd.train_mode(True):
        y = getattr(autograd, row.fn)(*xs)
    opsets = sorted({17, max(row.opset, 17)})
    for opset in opsets:
        if not ((row.onnx is not None and opset >= row.opset) or op in FALLBACKS):
            with pytest.raises(sonnx.UnsupportedError, match=op):
                sonnx.to_onnx(xs, [y], opset_version=opset)
            continue
        m = sonnx.to_onnx(xs, [y], opset_version=opset)
        onnx.checker.check_model(m, full_check=True)
        types = [n.op_type for n in m.graph.node]
        if row.onnx is not None and opset >= row.opset:
            assert row.onnx in types
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {i.name: x.numpy() for i, x in zip(m.graph.input, xs)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], y.numpy(), rtol=1e-5, atol=1e-6)
        got = sonnx.prepare(m).run(xs)[0]
        np.testing.assert_allclose(tensor.to_numpy(got), y.numpy(), rtol=1e-5, atol=1e-6)
