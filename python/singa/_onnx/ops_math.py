"""Importer handlers: element-wise math, activations, comparisons, logic,
reductions, Cast and Clip.

The ONNX operators of the op table (singa.opdefs) are registered from its
rows; the others have a handler each below.
"""

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from singa import opdefs, tensor
from singa._onnx import dtypes, fn as F
from singa._onnx.errors import UnsupportedError, GraphError
from singa._onnx.registry import op


def _same_dtype(ref, t):
    """t converted to ref's dtype (ONNX lets Pow's exponent differ)."""
    return t if t.dtype == ref.dtype else t.as_type(ref.dtype)


# ---- the op table (singa.opdefs): ONNX type and attributes -> row ----

def _attr_or_default(n, name):
    """The node's attribute, or the schema's default for the node's opset."""
    if name in n.attrs:
        return n.attrs[name]
    schema = onnx.defs.get_schema(n.node.op_type, n.opset)
    value = helper.get_attribute_value(schema.attributes[name].default_value)
    return value.decode() if isinstance(value, bytes) else value


# Attribute values of a table operator that no row covers, run as a
# composition of other ops: ONNX type -> handler.
COMPOSED = {}


def _row_importer(onnx_type, rows):
    fns = [(row, getattr(F, row.fn)) for row in rows]
    unary = rows[0].arity == 1

    def handler(n):
        for row, f in fns:
            if all(_attr_or_default(n, k) == v for k, v in row.attrs.items()):
                break
        else:
            if onnx_type in COMPOSED:
                return COMPOSED[onnx_type](n)
            seen = {k: _attr_or_default(n, k) for r in rows for k in r.attrs}
            raise UnsupportedError(f"attributes {seen} are not supported")
        if unary:
            return f(n.x(0))
        # Binary rows also serve ONNX's variadic Min and Max: fold the inputs.
        xs = [n.x(i) for i in range(len(n.inputs))]
        if not xs:
            raise GraphError("needs at least one input")
        acc = xs[0]
        for x in xs[1:]:
            acc = f(acc, _same_dtype(acc, x))
        return acc
    return handler


def _register_rows():
    by_type = {}
    for row in opdefs.ROWS:
        if row.onnx is not None:
            by_type.setdefault(row.onnx, []).append(row)
    for onnx_type, rows in by_type.items():
        # attributes of old operator versions that change nothing here
        legacy = ("consumed_inputs",) if rows[0].arity == 1 else \
            ("broadcast", "axis", "consumed_inputs")
        attrs = legacy + tuple({k for r in rows for k in r.attrs})
        op(onnx_type, attrs=attrs, since=min(r.opset for r in rows))(
            _row_importer(onnx_type, rows))


_register_rows()


@op("Identity")
def identity(n):
    return n.x(0)


# ---- activations with attributes, composed from singa ops ----

@op("LeakyRelu", attrs=("alpha",))
def leaky_relu(n):
    return F.leakyrelu(n.x(0), n.attr("alpha", 0.01))


def _elu(x, alpha):
    # alpha * (exp(x) - 1) below zero; relu(x) above.
    neg = F.mul(F.sub(F.exp(F.minimum(x, F.scalar_like(x, 0.0))), 1.0), alpha)
    return F.add(F.relu(x), neg)


@op("Elu", attrs=("alpha",))
def elu(n):
    return _elu(n.x(0), n.attr("alpha", 1.0))


@op("Selu", attrs=("alpha", "gamma"))
def selu(n):
    alpha = n.attr("alpha", 1.67326319217681884765625)
    gamma = n.attr("gamma", 1.05070102214813232421875)
    return F.mul(_elu(n.x(0), alpha), gamma)


@op("Celu", attrs=("alpha",))
def celu(n):
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha).
    alpha = n.attr("alpha", 1.0)
    return F.mul(_elu(F.div(n.x(0), alpha), 1.0), alpha)


@op("ThresholdedRelu", attrs=("alpha",))
def thresholded_relu(n):
    x = n.x(0)
    return F.mul(x, F.greater(x, n.attr("alpha", 1.0)))


def _hard_sigmoid(x, alpha, beta):
    return F.clip(F.add(F.mul(x, alpha), beta), 0.0, 1.0)


@op("HardSigmoid", attrs=("alpha", "beta"))
def hard_sigmoid(n):
    return _hard_sigmoid(n.x(0), n.attr("alpha", 0.2), n.attr("beta", 0.5))


@op("HardSwish")
def hard_swish(n):
    x = n.x(0)
    return F.mul(x, _hard_sigmoid(x, 1.0 / 6.0, 0.5))


@op("Mish")
def mish(n):
    x = n.x(0)
    return F.mul(x, F.tanh(F.softplus(x)))


@op("Swish", attrs=("alpha",))
def swish(n):
    x = n.x(0)
    return F.mul(x, F.sigmoid(F.mul(x, n.attr("alpha", 1.0))))


@op("PRelu")
def prelu(n):
    x, slope = n.x(0), n.x(1)
    zero = F.scalar_like(x, 0.0)
    return F.add(F.maximum(x, zero), F.mul(F.minimum(x, zero), slope))


@op("Shrink", attrs=("lambd", "bias"))
def shrink(n):
    x = n.x(0)
    lambd, bias = n.attr("lambd", 0.5), n.attr("bias", 0.0)
    low = F.mul(F.less(x, -lambd), F.add(x, bias))
    high = F.mul(F.greater(x, lambd), F.sub(x, bias))
    return F.add(low, high)


@op("IsNaN")
def is_nan(n):
    x = n.x(0)
    return F.logical_not(F.equal(x, x))


@op("IsInf", attrs=("detect_negative", "detect_positive"))
def is_inf(n):
    x = n.x(0)
    pos = F.equal(x, math.inf) if n.attr("detect_positive", 1) else None
    neg = F.equal(x, -math.inf) if n.attr("detect_negative", 1) else None
    if pos is None and neg is None:
        return F.mul(x, 0.0)
    if pos is None or neg is None:
        return pos if neg is None else neg
    return F.logical_or(pos, neg)


# ---- binary and variadic ops (NumPy broadcasting in singa's C++ ops) ----

@op("Mod", attrs=("fmod",))
def mod(n):
    a, b = n.x(0), n.x(1)
    if a.dtype == tensor.int32:
        # singa's integer Div truncates like C, so a - b * (a / b) is fmod.
        r = F.sub(a, F.mul(b, F.div(a, b)))
    else:
        q = F.div(a, b)
        trunc = F.mul(F.sign(q), F.floor(F.abs(q)))
        r = F.sub(a, F.mul(b, trunc))
    if n.attr("fmod", 0):
        return r
    # Python-style mod takes the divisor's sign: shift nonzero remainders
    # whose sign differs from b's.
    zero = F.scalar_like(r, 0)
    fix = F.logical_and(F.logical_not(F.equal(r, zero)),
                        F.logical_xor(F.less(r, zero), F.less(b, zero)))
    return F.add(r, F.mul(_same_dtype(r, fix), b))


def _variadic(f):
    def handler(n):
        xs = [n.x(i) for i in range(len(n.inputs))]
        if not xs:
            raise GraphError("needs at least one input")
        acc = xs[0]
        for x in xs[1:]:
            acc = f(acc, x)
        return acc
    return handler


op("Sum", since=8)(_variadic(F.add))


@op("Mean", since=8)
def mean(n):
    return F.div(_variadic(F.add)(n), float(len(n.inputs)))


@op("Where")
def where(n):
    x = n.x(1)
    return F.where(n.x(0), x, _same_dtype(x, n.x(2)))


# ---- Clip and Cast ----

@op("Clip", attrs=("min", "max"), since=6)
def clip(n):
    x = n.x(0)
    if n.opset < 11:
        lo, hi = n.attr("min", -math.inf), n.attr("max", math.inf)
    else:
        lo = n.static(1)
        hi = n.static(2)
        lo = -math.inf if lo is None else float(lo.reshape(-1)[0])
        hi = math.inf if hi is None else float(hi.reshape(-1)[0])
    return F.clip(x, lo, hi)


def cast_to(x, to, where=""):
    """x converted to ONNX element type `to` (see dtypes for the mapping)."""
    if to == TensorProto.BOOL:
        return F.logical_not(F.equal(x, F.scalar_like(x, 0))).as_type(tensor.int32)
    want = dtypes.singa_dtype(to, where)
    # The C++ conversion truncates floats toward zero, like ONNX Cast.
    y = x if x.dtype == want else x.as_type(want)
    if to in _NARROW_INTS:
        y = _wrap_int(y, *_NARROW_INTS[to])
    return y


# Integer types narrower than int32 (held in int32): (modulus, lowest value).
_NARROW_INTS = {TensorProto.UINT8: (256, 0), TensorProto.INT8: (256, -128),
                TensorProto.UINT16: (65536, 0), TensorProto.INT16: (65536, -32768)}


def _wrap_int(y, mod, low):
    """int32 values wrapped into [low, low + mod), as a C cast (and
    onnxruntime's Cast) keeps the low bits: -1 as uint8 is 255."""
    r = tensor.sub(y, tensor.mul(tensor.div(tensor.sub(y, low), mod), mod))
    # C division truncates, so r - low lies in (-mod, mod): fold the negatives.
    neg = tensor.lt(r, low)
    return tensor.add(r, tensor.mul(neg, mod))


@op("Cast", attrs=("to", "saturate", "round_mode"), since=6)
def cast(n):
    return cast_to(n.x(0), n.attr("to"))


@op("CastLike", attrs=("saturate", "round_mode"))
def cast_like(n):
    to = n.in_type(1)
    if to is None:
        to = dtypes.FROM_SINGA[n.x(1).dtype]
    return cast_to(n.x(0), to)


# ---- reductions ----

def _reduce_axes(n, axes_input_since):
    """(axes or None for all, keepdims); None axes with noop means identity."""
    keep = bool(n.attr("keepdims", 1))
    if n.opset >= axes_input_since:
        axes = n.static_ints(1)
    else:
        axes = n.attr("axes")
    if not axes:
        if n.attr("noop_with_empty_axes", 0):
            return "noop", keep
        return None, keep
    rank = n.x(0).ndim()
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise GraphError(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return sorted(set(out)), keep


_REDUCE_ATTRS = ("axes", "keepdims", "noop_with_empty_axes")


def _reduction(axes_input_since, compute):
    def handler(n):
        axes, keep = _reduce_axes(n, axes_input_since)
        x = n.x(0)
        if axes == "noop":
            return x
        if axes is None:
            axes = list(range(x.ndim()))
        if not axes:
            return x
        return compute(x, axes, keep)
    return handler


def _sum(x, axes, keep):
    return F.reduce_sum(x, tuple(axes), keep)


def _empty_reduce(x, axes, keep, fill):
    """The reduction of an empty axis: fill, in the reduced shape."""
    shape = [1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes]
    t = tensor.Tensor(tuple(shape), x.device, x.dtype, requires_grad=False)
    return t.set_value(fill)


def _max(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):
        return _empty_reduce(x, axes, keep, -math.inf if x.dtype != tensor.int32
                             else np.iinfo(np.int32).min)
    return F.reduce_max(x, tuple(axes), keep)


def _min(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):
        return _empty_reduce(x, axes, keep, math.inf if x.dtype != tensor.int32
                             else np.iinfo(np.int32).max)
    return F.reduce_min(x, tuple(axes), keep)


def _mean(x, axes, keep):
    return F.reduce_mean(x, tuple(axes), keep)


def _prod(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):
        return _empty_reduce(x, axes, keep, 1)
    # singa has no product reduction: multiply the slices along each axis
    # (exact, and valid for integers, unlike exp(sum(log))).
    for a in sorted(axes, reverse=True):
        acc = F.slice(x, [0], [1], [a], None)
        for i in range(1, x.shape[a]):
            acc = F.mul(acc, F.slice(x, [i], [i + 1], [a], None))
        x = acc
    if not keep:
        x = F.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return x


def _l1(x, axes, keep):
    return F.reduce_sum(F.abs(x), tuple(axes), keep)


def _l2(x, axes, keep):
    return F.sqrt(F.reduce_sum(F.mul(x, x), tuple(axes), keep))


def _sum_square(x, axes, keep):
    return F.reduce_sum(F.mul(x, x), tuple(axes), keep)


def _log_sum(x, axes, keep):
    return F.log(F.reduce_sum(x, tuple(axes), keep))


def _log_sum_exp(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):
        return _empty_reduce(x, axes, keep, -math.inf)
    # Shifting by the max keeps exp from overflowing.
    m = F.reduce_max(x, tuple(axes), True)
    s = F.log(F.reduce_sum(F.exp(F.sub(x, m)), tuple(axes), True))
    r = F.add(s, m)
    if not keep:
        r = F.reshape(r, tuple(d for i, d in enumerate(r.shape) if i not in axes))
    return r


op("ReduceSum", attrs=_REDUCE_ATTRS)(_reduction(13, _sum))
op("ReduceMean", attrs=_REDUCE_ATTRS)(_reduction(18, _mean))
op("ReduceMax", attrs=_REDUCE_ATTRS)(_reduction(18, _max))
op("ReduceMin", attrs=_REDUCE_ATTRS)(_reduction(18, _min))
op("ReduceProd", attrs=_REDUCE_ATTRS)(_reduction(18, _prod))
op("ReduceL1", attrs=_REDUCE_ATTRS)(_reduction(18, _l1))
op("ReduceL2", attrs=_REDUCE_ATTRS)(_reduction(18, _l2))
op("ReduceSumSquare", attrs=_REDUCE_ATTRS)(_reduction(18, _sum_square))
op("ReduceLogSum", attrs=_REDUCE_ATTRS)(_reduction(18, _log_sum))
op("ReduceLogSumExp", attrs=_REDUCE_ATTRS)(_reduction(18, _log_sum_exp))


def _arg(f):
    def handler(n):
        x = n.x(0)
        rank = x.ndim()
        axis = n.attr("axis", 0)
        if not -rank <= axis < rank:
            raise GraphError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        keep = bool(n.attr("keepdims", 1))
        if not n.attr("select_last_index", 0):
            return f(x, axis, keep)
        # The last extreme is the first one in the reversed axis.
        size = x.shape[axis]
        rev = _reverse(x, axis)
        idx = f(rev, axis, keep)
        return F.sub(F.scalar_like(idx, size - 1), idx)
    return handler


def _reverse(x, axis):
    """A view of x reversed along axis (a negative stride)."""
    shape, strides, off = x.data.shape(), list(x.data.stride()), x.data.offset()
    if shape[axis] > 0:
        off += (shape[axis] - 1) * strides[axis]
    strides[axis] = -strides[axis]
    return tensor.from_raw_tensor(x.data.View(shape, strides, off))


op("ArgMax", attrs=("axis", "keepdims", "select_last_index"))(_arg(F.argmax))
op("ArgMin", attrs=("axis", "keepdims", "select_last_index"))(_arg(F.argmin))
