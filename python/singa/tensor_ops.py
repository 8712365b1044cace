"""Tensor math by name: element-wise, reductions, linear algebra, joining.

These are re-exported by singa.tensor (``tensor.exp(t)``, ``tensor.mult``).
They do not record autograd history; singa.autograd does. The element-wise
functions are made from the rows of the op table, singa.opdefs.
"""

import builtins
import numbers

from singa import opdefs
from singa import singa_wrap as _cw
from singa._tensor import Tensor, _wrap, _scalar, _check_shape, _check_tensor

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _make_unary(name, cfn, doc=""):
    def fn(t):
        _check_tensor(t, name)
        return _wrap(cfn(t.data))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name}. {doc}"
    return fn


def _into(where, out, r):
    """Writes CTensor r into the Tensor out (same shape); returns out."""
    _check_tensor(out, where)
    if tuple(out.shape) != tuple(r.shape()):
        raise ValueError(f"{where}: the result of shape {r.shape()} does not fit out of "
                         f"shape {out.shape}")
    out.data.CopyData(r)
    return out


def _make_binary(name, cfn, cfn_scalar, cfn_rscalar, cfn_into, cfn_scalar_into, doc=""):
    def fn(lhs, rhs, ret=None, out=None):
        if out is not None:
            if ret is not None:
                raise TypeError(f"{name}: give ret or out, not both")
            ret = out
        if ret is not None:
            _check_tensor(ret, name)
        if isinstance(lhs, Tensor) and isinstance(rhs, Tensor):
            if ret is not None:
                cfn_into(lhs.data, rhs.data, ret.data)
                return ret
            return _wrap(cfn(lhs.data, rhs.data))
        if isinstance(lhs, Tensor):
            s = _scalar(rhs)
            if s is not None:
                if ret is not None:
                    cfn_scalar_into(lhs.data, s, ret.data)
                    return ret
                return _wrap(cfn_scalar(lhs.data, s))
        elif isinstance(rhs, Tensor):
            s = _scalar(lhs)
            if s is not None:
                r = cfn_rscalar(s, rhs.data)
                return _wrap(r) if ret is None else _into(name, ret, r)
        raise TypeError(f"{name}: expected tensors or numbers, got "
                        f"{type(lhs).__name__} and {type(rhs).__name__}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Element-wise {name} with NumPy broadcasting: {doc} Either side "
                  "may be a number. With ret (or out), writes into that tensor.")
    return fn


def _export_row(row, fn):
    # underscore aliases (_not, _and) are autograd's only
    for name in (row.fn,) + tuple(a for a in row.fn_aliases if not a.startswith("_")):
        globals()[name] = fn
        __all__.append(name)


def _t_x(fn):
    """fn under the parameter names SINGA gives tensor.lt and tensor.pow:
    (t, x), then out (or singa's ret)."""
    def named(t, x, out=None, ret=None):
        return fn(t, x, ret=ret, out=out)
    named.__name__ = named.__qualname__ = fn.__name__
    named.__doc__ = fn.__doc__
    return named


# SINGA's lt, le, gt, ge, eq and pow name their operands (t, x); its add,
# sub, eltwise_mult and div (lhs, rhs), as the rows' functions do.
_T_X_ROWS = ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "Pow")

# One function per row of the op table (singa.opdefs), named as the row says.
for _row in opdefs.UNARY:
    _export_row(_row, _make_unary(_row.fn, getattr(_cw, _row.op), _row.doc))
for _row in opdefs.BINARY:
    _c = _row.op
    _fn = _make_binary(_row.fn, getattr(_cw, _c), getattr(_cw, _c + "Scalar"),
                       getattr(_cw, "Scalar" + _c), getattr(_cw, _c + "Into"),
                       getattr(_cw, _c + "ScalarInto"), _row.doc)
    _export_row(_row, _t_x(_fn) if _c in _T_X_ROWS else _fn)
del _row, _c, _fn
eltwise_mult = mul  # noqa: F821  (SINGA's name)
__all__.append("eltwise_mult")



@_export
def clip(t, min=None, max=None):
    """Limits values to [min, max]; either bound may be None."""
    _check_tensor(t, "clip")
    lo = -float("inf") if min is None else float(min)
    hi = float("inf") if max is None else float(max)
    return _wrap(_cw.Clip(t.data, lo, hi))


@_export
def leakyrelu(t, alpha=0.01):
    _check_tensor(t, "leakyrelu")
    return _wrap(_cw.LeakyReLU(t.data, float(alpha)))


@_export
def where(condition, x, y):
    """x where condition is nonzero, else y (broadcast together)."""
    for v, n in ((condition, "condition"), (x, "x"), (y, "y")):
        _check_tensor(v, f"where ({n})")
    return _wrap(_cw.Where(condition.data, x.data, y.data))


# ---- reductions ----

def _axes(axis, t, where):
    if axis is None:
        return []
    if isinstance(axis, numbers.Integral):
        return [int(axis)]
    try:
        axes = [int(a) for a in axis]
    except TypeError:
        raise TypeError(f"{where}: axis must be an int or a tuple of ints, got {axis!r}") from None
    if not axes:
        raise ValueError(f"{where}: empty axis tuple")
    return axes


def _reduce(name, cfn, t, axis, keepdims):
    _check_tensor(t, name)
    r = cfn(t.data, _axes(axis, t, name), bool(keepdims))
    if axis is None and not keepdims:
        r = r.Reshape([1])     # SINGA: a full reduction has shape (1,)
    return r


def _make_reduce(name, cfn):
    def fn(t, axis=None, keepdims=False):
        return _wrap(_reduce(name, cfn, t, axis, keepdims))
    fn.__name__ = name
    fn.__doc__ = (f"{name} over axis (an int, a tuple, or None for all axes). Over all "
                  "axes the result has shape (1,), as in SINGA (keepdims keeps every axis).")
    return fn


@_export
def sum(t, axis=None, out=None, keepdims=False):
    """Sum over axis (an int, a tuple, or None for all axes: then the result
    has shape (1,), as in SINGA). With out, writes into that tensor."""
    r = _reduce("sum", _cw.Sum, t, axis, keepdims)
    return _wrap(r) if out is None else _into("sum", out, r)


mean = _export(_make_reduce("mean", _cw.Mean))
max = _export(_make_reduce("max", _cw.Max))
min = _export(_make_reduce("min", _cw.Min))


@_export
def average(t, axis=None):
    """Mean over axis (all axes when None: shape (1,))."""
    return mean(t, axis)


def _make_arg(name, cfn):
    def fn(t, axis=None, keepdims=False):
        _check_tensor(t, name)
        if axis is None:
            r = _wrap(cfn(t.data.Reshape([t.data.Size()]), 0, False))
            # NumPy keeps every axis, as size 1, when keepdims is set.
            return r.reshape((1,) * t.ndim()) if keepdims else r
        return _wrap(cfn(t.data, int(axis), bool(keepdims)))
    fn.__name__ = name
    fn.__doc__ = f"Indices (int32) of the {name[3:]} along axis (flattened when None)."
    return fn


argmax = _export(_make_arg("argmax", _cw.Argmax))
argmin = _export(_make_arg("argmin", _cw.Argmin))


@_export
def sum_rows(M):
    """Sum of M's rows (a vector of M's column count), as in SINGA."""
    _check_tensor(M, "sum_rows")
    return _wrap(_cw.SumRows(M.data))


@_export
def sum_columns(M):
    """Sum of M's columns (a vector of M's row count), as in SINGA."""
    _check_tensor(M, "sum_columns")
    return _wrap(_cw.SumColumns(M.data))


@_export
def softmax(t, out=None, axis=-1):
    """Numerically stable softmax along axis (the last by default, which is
    SINGA's for its 1-D and 2-D inputs). With out, writes into that tensor;
    an int in out's place is taken as the axis (``softmax(t, 1)``)."""
    _check_tensor(t, "softmax")
    if isinstance(out, numbers.Integral) and not isinstance(out, bool):
        out, axis = None, out
    r = _cw.SoftMax(t.data, int(axis))
    return _wrap(r) if out is None else _into("softmax", out, r)


@_export
def log_softmax(t, axis=-1):
    """Numerically stable log-softmax along axis."""
    _check_tensor(t, "log_softmax")
    return _wrap(_cw.LogSoftMax(t.data, int(axis)))


# ---- linear algebra ----

@_export
def mult(A, B, C=None, alpha=1.0, beta=0.0):
    """Matrix product of 1-D or 2-D tensors. With C: C = alpha*A@B + beta*C
    (in place; returns C)."""
    _check_tensor(A, "mult")
    _check_tensor(B, "mult")
    if C is None:
        if alpha == 1.0:
            return _wrap(_cw.Mult(A.data, B.data))
        return _wrap(_cw.MulScalar(_cw.Mult(A.data, B.data), float(alpha)))
    _check_tensor(C, "mult")
    _cw.MultWithScale(float(alpha), A.data, B.data, float(beta), C.data)
    return C


@_export
def matmul(A, B):
    """NumPy matmul: batch dimensions broadcast."""
    _check_tensor(A, "matmul")
    _check_tensor(B, "matmul")
    return _wrap(_cw.Matmul(A.data, B.data))


@_export
def axpy(alpha, x, y):
    """y += alpha * x; returns y."""
    _check_tensor(x, "axpy")
    _check_tensor(y, "axpy")
    _cw.Axpy(float(alpha), x.data, y.data)
    return y


def _row_col(name, plain, scaled, args):
    if len(args) == 2:
        v, M = args
        alpha = beta = 1.0
    elif len(args) == 4:
        alpha, v, beta, M = args
    else:
        raise TypeError(f"{name}: takes (alpha, v, beta, M) as in SINGA, or (v, M); "
                        f"got {len(args)} arguments")
    _check_tensor(v, name)
    _check_tensor(M, name)
    if alpha == 1.0 and beta == 1.0:
        plain(v.data, M.data)
    else:
        scaled(float(alpha), float(beta), v.data, M.data)
    return M


@_export
def add_row(*args):
    """SINGA's add_row(alpha, v, beta, M): M = alpha * v + beta * M for each
    row of the matrix M, in place; add_row(v, M) adds v. Returns M."""
    return _row_col("add_row", _cw.AddRow, _cw.AddRowWithScale, args)


@_export
def add_column(*args):
    """SINGA's add_column(alpha, v, beta, M): M = alpha * v + beta * M for
    each column of the matrix M, in place; add_column(v, M) adds v."""
    return _row_col("add_column", _cw.AddColumn, _cw.AddColumnWithScale, args)


# ---- SINGA's fills of a given tensor ----

@_export
def bernoulli(p, t):
    """Fills t with 1 with probability p, else 0; returns t."""
    _check_tensor(t, "bernoulli")
    return t.bernoulli(p)


@_export
def gaussian(mean, std, t):
    """Fills t with normal samples; returns t."""
    _check_tensor(t, "gaussian")
    return t.gaussian(mean, std)


@_export
def uniform(low, high, t):
    """Fills t with uniform samples from [low, high); returns t."""
    _check_tensor(t, "uniform")
    return t.uniform(low, high)


@_export
def copy_from_numpy(data, np_array):
    """Copies np_array's elements into data, a CTensor (SINGA) or a Tensor."""
    if isinstance(data, Tensor):
        data.copy_from_numpy(np_array)
        return
    if not isinstance(data, _cw.Tensor):
        raise TypeError(f"copy_from_numpy: expected a CTensor or a Tensor, got "
                        f"{type(data).__name__}")
    _wrap(data).copy_from_numpy(np_array)


@_export
def tensordot(A, B, axes=2):
    """Sums products over the given axes of A and B (NumPy tensordot)."""
    _check_tensor(A, "tensordot")
    _check_tensor(B, "tensordot")
    if isinstance(axes, numbers.Integral):
        if axes < 0 or axes > builtins.min(A.ndim(), B.ndim()):
            raise ValueError(f"tensordot: axes={axes} does not fit shapes {A.shape} and {B.shape}")
        ax_a = list(range(A.ndim() - axes, A.ndim()))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, numbers.Integral) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, numbers.Integral) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise ValueError(f"tensordot: axes {ax_a} and {ax_b} differ in length")
    ax_a = [a % A.ndim() if -A.ndim() <= a < A.ndim() else _bad_axis(a, A) for a in ax_a]
    ax_b = [b % B.ndim() if -B.ndim() <= b < B.ndim() else _bad_axis(b, B) for b in ax_b]
    for a, b in zip(ax_a, ax_b):
        if A.shape[a] != B.shape[b]:
            raise ValueError(f"tensordot: axis {a} of shape {A.shape} and axis {b} of "
                             f"shape {B.shape} differ in length")
    free_a = [i for i in range(A.ndim()) if i not in ax_a]
    free_b = [i for i in range(B.ndim()) if i not in ax_b]
    k = 1
    for a in ax_a:
        k *= A.shape[a]
    at = A.transpose(free_a + ax_a).reshape((-1, k) if k else (_prod(A.shape, free_a), 0))
    bt = B.transpose(ax_b + free_b).reshape((k, -1) if k else (0, _prod(B.shape, free_b)))
    out = mult(at, bt)
    return out.reshape([A.shape[i] for i in free_a] + [B.shape[i] for i in free_b])


def _prod(shape, idx):
    p = 1
    for i in idx:
        p *= shape[i]
    return p


def _bad_axis(a, t):
    raise IndexError(f"axis {a} is out of range for shape {t.shape}")


@_export
def einsum(ops, *args):
    """Einstein summation over one or two tensors, e.g. 'ij,jk->ik'.

    Indices shared by both operands and kept in the output are batch
    dimensions; shared ones not kept are contracted through a batched GEMM.
    """
    if "->" not in ops:
        raise ValueError(f"einsum: '{ops}' needs an explicit '->' output")
    lhs, out = ops.replace(" ", "").split("->")
    terms = lhs.split(",")
    if len(terms) != len(args) or not 1 <= len(args) <= 2:
        raise ValueError(f"einsum: '{ops}' names {len(terms)} operands, got {len(args)}")
    dims = {}
    for term, t in zip(terms, args):
        _check_tensor(t, "einsum")
        if len(term) != t.ndim():
            raise ValueError(f"einsum: '{term}' does not match shape {t.shape}")
        if len(set(term)) != len(term):
            raise ValueError(f"einsum: repeated index in '{term}' (diagonals) is not supported")
        for c, d in zip(term, t.shape):
            if dims.setdefault(c, d) != d:
                raise ValueError(f"einsum: index '{c}' has lengths {dims[c]} and {d}")
    if len(set(out)) != len(out) or any(c not in dims for c in out):
        raise ValueError(f"einsum: bad output '{out}' for inputs '{lhs}'")

    def reduce_unused(term, t, keep):
        drop = [i for i, c in enumerate(term) if c not in keep]
        if drop:
            t = sum(t, tuple(drop))
            term = "".join(c for c in term if c in keep)
        return term, t

    if len(args) == 1:
        term, t = reduce_unused(terms[0], args[0], out)
        return t.transpose([term.index(c) for c in out]).contiguous()
    ta, tb = terms
    a, b = args
    ta, a = reduce_unused(ta, a, set(out) | set(tb))
    tb, b = reduce_unused(tb, b, set(out) | set(ta))
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    size = lambda cs: _prod([dims[c] for c in cs], range(len(cs)))  # noqa: E731
    a3 = a.transpose([ta.index(c) for c in batch + free_a + contract]).reshape(
        (size(batch), size(free_a), size(contract)))
    b3 = b.transpose([tb.index(c) for c in batch + contract + free_b]).reshape(
        (size(batch), size(contract), size(free_b)))
    r = matmul(a3, b3).reshape([dims[c] for c in batch + free_a + free_b])
    order = batch + free_a + free_b
    return r.transpose([order.index(c) for c in out]).contiguous()


# ---- joining and repeating ----

@_export
def concatenate(tensors, axis=0):
    """Joins tensors along an existing axis."""
    tensors = list(tensors)
    for t in tensors:
        _check_tensor(t, "concatenate")
    return _wrap(_cw.ConcatOn([t.data for t in tensors], int(axis)))


@_export
def repeat(t, repeats, axis=None):
    """NumPy repeat: each element repeated (flattened first when axis is None)."""
    _check_tensor(t, "repeat")
    reps = [repeats] if isinstance(repeats, numbers.Integral) else list(repeats)
    if any(r < 0 for r in reps):
        raise ValueError(f"repeat: negative repeat count in {reps}")
    x = t.data
    if axis is None:
        x = x.Reshape([x.Size()])
        axis = 0
    return _wrap(_cw.Repeat(x, [int(r) for r in reps], int(axis)))


@_export
def tile(t, reps):
    """NumPy tile."""
    _check_tensor(t, "tile")
    reps = _check_shape(reps, "tile")
    return _wrap(_cw.Tile(t.data, list(reps)))
