"""Importer handlers: shapes, indexing, joining, and tensors built from
shapes (Shape, Range, ConstantOfShape ...).

NumPy appears only for bookkeeping on small host values: shapes, axes,
index lists read back from the device, and the few ops whose output shape
depends on the data (NonZero) or that build a constant pattern (EyeLike,
Trilu's mask). The tensor data itself moves through singa's C++ views,
concatenation, broadcasting and element-wise ops.
"""

import numpy as np

from singa import tensor
from singa._onnx import dtypes, fn as F
from singa._onnx.errors import GraphError, UnsupportedError
from singa._onnx.registry import op


def _axis(a, rank, what="axis"):
    if not -rank <= a < rank:
        raise GraphError(f"{what} {a} is out of range for rank {rank}")
    return a % rank


def _int_tensor(values, dev):
    return tensor.from_numpy(np.asarray(values, dtype=np.int32).reshape(np.shape(values)), dev)


def _select(x, axis, index):
    """x at index along axis (the axis stays, length 1)."""
    return F.slice(x, [index], [index + 1], [axis], None)


# ---- shape arithmetic ----

@op("Shape", attrs=("start", "end"))
def shape(n):
    dims = list(n.x(0).shape)
    rank = len(dims)
    start = n.attr("start", 0)
    end = n.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return _int_tensor(np.array(dims[start:end], np.int64), n.dev)


@op("Size")
def size(n):
    return _int_tensor(np.array(n.x(0).size()), n.dev)


@op("Reshape", attrs=("allowzero", "shape"), since=5)
def reshape(n):
    x = n.x(0)
    target = n.static_ints(1)
    allowzero = n.attr("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= x.ndim():
                raise GraphError(f"shape {target} copies dimension {i} that input "
                                 f"of shape {x.shape} lacks")
            d = x.shape[i]
        out.append(d)
    if out.count(-1) == 1 and x.size() == 0:
        known = int(np.prod([d for d in out if d != -1]))
        if known == 0:
            raise GraphError(f"cannot infer -1 in {target} for an empty input")
    return F.reshape(x, tuple(out))


@op("Flatten", attrs=("axis",))
def flatten(n):
    x = n.x(0)
    rank = x.ndim()
    axis = n.attr("axis", 1)
    if not -rank <= axis <= rank:
        raise GraphError(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    lead = int(np.prod(x.shape[:axis], dtype=np.int64))
    return F.reshape(x, (lead, int(np.prod(x.shape[axis:], dtype=np.int64))))


@op("Transpose", attrs=("perm",))
def transpose(n):
    x = n.x(0)
    perm = n.attr("perm")
    if perm is None:
        perm = list(range(x.ndim()))[::-1]
    if sorted(perm) != list(range(x.ndim())):
        raise GraphError(f"perm {perm} is not a permutation of the {x.ndim()} axes")
    return F.transpose(x, tuple(perm))


@op("Squeeze", attrs=("axes",))
def squeeze(n):
    x = n.x(0)
    axes = n.attr("axes") if n.opset < 13 else n.static_ints(1)
    rank = x.ndim()
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = {_axis(a, rank) for a in axes}
    for a in axes:
        if x.shape[a] != 1:
            raise GraphError(f"cannot squeeze axis {a} of length {x.shape[a]}")
    return F.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@op("Unsqueeze", attrs=("axes",))
def unsqueeze(n):
    x = n.x(0)
    axes = n.attr("axes") if n.opset < 13 else n.static_ints(1)
    rank = x.ndim() + len(axes)
    axes = sorted({_axis(a, rank) for a in axes})
    if len(axes) != len(n.attr("axes") if n.opset < 13 else n.static_ints(1)):
        raise GraphError(f"repeated axis in {axes}")
    dims = list(x.shape)
    for a in axes:
        dims.insert(a, 1)
    return F.reshape(x, tuple(dims))


@op("Expand", since=8)
def expand(n):
    x = n.x(0)
    target = n.static_ints(1)
    try:
        out = np.broadcast_shapes(tuple(x.shape), tuple(target))
    except ValueError:
        raise GraphError(f"cannot broadcast shape {x.shape} to {tuple(target)}") from None
    return F.broadcast_to(x, out)


@op("Tile", since=6)
def tile(n):
    x = n.x(0)
    reps = n.static_ints(1)
    if len(reps) != x.ndim():
        raise GraphError(f"repeats {reps} do not match rank {x.ndim()}")
    if any(r < 0 for r in reps):
        raise GraphError(f"negative repeat in {reps}")
    return F.tile(x, reps)


# ---- joining and splitting ----

@op("Concat", attrs=("axis",), since=4)
def concat(n):
    xs = [t for t in n.inputs if t is not None]
    if not xs:
        raise GraphError("needs at least one input")
    axis = _axis(n.attr("axis"), xs[0].ndim())
    # Zero-length pieces add nothing; singa's concat need not see them.
    keep = [t for t in xs if t.shape[axis] != 0] or xs[:1]
    return keep[0] if len(keep) == 1 else F.concat(keep, axis)


@op("Split", attrs=("axis", "split", "num_outputs"), since=2)
def split(n):
    x = n.x(0)
    axis = _axis(n.attr("axis", 0), x.ndim())
    length = x.shape[axis]
    parts = n.attr("split") if n.opset < 13 else n.static_ints(1)
    count = len(n.node.output)
    if not parts:
        num = n.attr("num_outputs", count)
        if num != count:
            raise GraphError(f"num_outputs={num} but the node has {count} outputs")
        chunk = -(-length // num)
        parts = [min(chunk, length - i * chunk) for i in range(num)]
        if any(p < 0 for p in parts):
            raise GraphError(f"cannot split length {length} into {num} outputs")
    if sum(parts) != length or len(parts) != count:
        raise GraphError(f"split {parts} does not divide axis {axis} of length "
                         f"{length} into {count} outputs")
    return F.split(x, axis, parts)


@op("Slice", attrs=("starts", "ends", "axes"), since=1)
def slice_(n):
    x = n.x(0)
    rank = x.ndim()
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        axes, steps = n.attr("axes"), None
    else:
        starts, ends = n.static_ints(1), n.static_ints(2)
        axes, steps = n.static_ints(3), n.static_ints(4)
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise GraphError(f"starts {starts}, ends {ends}, axes {axes} and steps "
                         f"{steps} differ in length")
    seen = set()
    for a, st in zip(axes, steps):
        a = _axis(a, rank)
        if a in seen:
            raise GraphError(f"axis {a} repeats in axes {axes}")
        seen.add(a)
        if st == 0:
            raise GraphError("slice step 0")
    return F.slice(x, starts, ends, axes, steps)


def gather_rows(x, axis, idx):
    """x gathered along axis at the int array idx (any shape)."""
    length = x.shape[axis]
    if idx.size and (idx.min() < -length or idx.max() >= length):
        raise GraphError(f"index out of range for axis {axis} of length {length}")
    return F.gather(x, axis, np.where(idx < 0, idx + length, idx))


@op("Gather", attrs=("axis",))
def gather(n):
    x = n.x(0)
    axis = _axis(n.attr("axis", 0), x.ndim())
    return gather_rows(x, axis, n.static(1))


@op("GatherElements", attrs=("axis",))
def gather_elements(n):
    x, idx = n.x(0), n.x(1)
    rank = x.ndim()
    axis = _axis(n.attr("axis", 0), rank)
    length = x.shape[axis]
    if idx.ndim() != rank:
        raise GraphError(f"indices of rank {idx.ndim()} for data of rank {rank}")
    idx = idx.as_type(tensor.int32) if idx.dtype != tensor.int32 else idx
    idx = F.where(F.less(idx, F.scalar_like(idx, 0)), F.add(idx, length), idx)
    # out = sum_k x[.., k, ..] * (idx == k): one masked term per position
    # along the axis, all in singa's broadcasting ops.
    sub = [slice(0, d) for d in idx.shape]
    acc = None
    for k in range(length):
        view = list(sub)
        view[axis] = slice(k, k + 1)
        xk = F.broadcast_to(F.slice(x, [v.start for v in view], [v.stop for v in view],
                                    None, None), idx.shape)
        mask = F.equal(idx, F.scalar_like(idx, k))
        if x.dtype != mask.dtype:
            mask = mask.as_type(x.dtype)
        term = F.mul(xk, mask)
        acc = term if acc is None else F.add(acc, term)
    if acc is None:
        return tensor.Tensor(idx.shape, x.device, x.dtype, requires_grad=False)
    return acc


@op("Compress", attrs=("axis",))
def compress(n):
    x = n.x(0)
    cond = np.nonzero(n.static(1).reshape(-1))[0]
    if n.attr("axis") is None:
        x = F.reshape(x, (x.size(),))
        axis = 0
    else:
        axis = _axis(n.attr("axis"), x.ndim())
    if cond.size and cond.max() >= x.shape[axis]:
        raise GraphError(f"condition is longer than axis {axis} ({x.shape[axis]})")
    return gather_rows(x, axis, cond.astype(np.int64))


@op("NonZero")
def nonzero(n):
    # The output's shape depends on the data, which singa's ops cannot
    # express: computed on the host.
    arr = dtypes.to_numpy(n.x(0))
    return _int_tensor(np.array(np.nonzero(arr), np.int64).reshape(arr.ndim, -1), n.dev)


# ---- tensors built from shapes ----

@op("ConstantOfShape", attrs=("value",))
def constant_of_shape(n):
    dims = n.static_ints(0)
    value = n.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    dt = dtypes.singa_dtype(_np_elem(value))
    if any(d < 0 for d in dims):
        raise GraphError(f"negative dimension in {dims}")
    t = tensor.Tensor(tuple(dims), n.dev, dt, requires_grad=False)
    return t.set_value(float(np.asarray(value).reshape(-1)[0]))


def _np_elem(arr):
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)


@op("Range")
def range_(n):
    start, limit, delta = (n.static(i).reshape(()) for i in range(3))
    if delta == 0:
        raise GraphError("delta is 0")
    # A handful of host scalars decide the result; singa has no arange.
    count = max(int(np.ceil((limit - start) / delta)), 0)
    arr = start + delta * np.arange(count, dtype=np.result_type(start, delta))
    t = dtypes.to_tensor(arr.astype(start.dtype), n.dev)
    if n.x(0).dtype != t.dtype:
        t = t.as_type(n.x(0).dtype)
    return t


@op("EyeLike", attrs=("dtype", "k"))
def eye_like(n):
    x = n.x(0)
    if x.ndim() != 2:
        raise GraphError(f"input must be 2-D, got shape {x.shape}")
    dt = dtypes.singa_dtype(n.attr("dtype")) if n.attr("dtype") is not None else x.dtype
    arr = np.eye(x.shape[0], x.shape[1], k=n.attr("k", 0))
    return tensor.from_numpy(arr.astype(tensor._TO_NUMPY[dt]), n.dev)


@op("Trilu", attrs=("upper",))
def trilu(n):
    x = n.x(0)
    if x.ndim() < 2:
        raise GraphError(f"input must be at least 2-D, got shape {x.shape}")
    k = n.static_ints(1, [0])[0]
    rows, cols = x.shape[-2:]
    # The triangle mask is a constant pattern built on the host; the
    # product with x runs in singa.
    if n.attr("upper", 1):
        mask = np.triu(np.ones((rows, cols)), k)
    else:
        mask = np.tril(np.ones((rows, cols)), k)
    m = tensor.from_numpy(mask.astype(tensor._TO_NUMPY[x.dtype]), n.dev)
    return F.mul(x, m)


@op("OneHot", attrs=("axis",))
def one_hot(n):
    idx = n.x(0)
    depth = int(n.static(1).reshape(-1)[0])
    values = n.x(2)
    rank = idx.ndim() + 1
    axis = _axis(n.attr("axis", -1), rank)
    if idx.dtype != tensor.int32:
        idx = idx.as_type(tensor.int32)
    idx = F.where(F.less(idx, F.scalar_like(idx, 0)), F.add(idx, depth), idx)
    shape = [1] * rank
    shape[axis] = depth
    ar = _int_tensor(np.arange(depth).reshape(shape), n.dev)
    dims = list(idx.shape)
    dims.insert(axis, 1)
    hot = F.equal(F.reshape(idx, tuple(dims)), ar)
    off = F.reshape(values[0:1], ())
    on = F.reshape(values[1:2], ())
    out_shape = list(idx.shape)
    out_shape.insert(axis, depth)
    hot = F.broadcast_to(hot, tuple(out_shape))
    return F.where(hot, F.broadcast_to(on, tuple(out_shape)),
                   F.broadcast_to(off, tuple(out_shape)))


@op("CumSum", attrs=("exclusive", "reverse"))
def cumsum(n):
    x = n.x(0)
    axis = _axis(int(n.static(1).reshape(-1)[0]), x.ndim())
    length = x.shape[axis]
    order = range(length - 1, -1, -1) if n.attr("reverse", 0) else range(length)
    exclusive = n.attr("exclusive", 0)
    pieces = {}
    acc = None
    for i in order:
        xi = _select(x, axis, i)
        if exclusive:
            pieces[i] = F.mul(xi, 0) if acc is None else acc
            acc = xi if acc is None else F.add(acc, xi)
        else:
            acc = xi if acc is None else F.add(acc, xi)
            pieces[i] = acc
    if not pieces:
        return x
    return F.concat([pieces[i] for i in range(length)], axis)


# ---- padding and rearranging ----

@op("Pad", attrs=("mode", "pads", "value"), since=2)
def pad(n):
    x = n.x(0)
    rank = x.ndim()
    mode = n.attr("mode", "constant")
    if n.opset < 11:
        pads, value = n.attr("pads"), n.attr("value", 0.0)
        axes = list(range(rank))
    else:
        pads = n.static_ints(1)
        cv = n.static(2)
        value = 0.0 if cv is None or cv.size == 0 else float(cv.reshape(-1)[0])
        axes = n.static_ints(3, list(range(rank)))
    axes = [_axis(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise GraphError(f"pads {pads} must hold two entries per padded axis "
                         f"({len(axes)})")
    begin = [0] * rank
    end = [0] * rank
    for j, a in enumerate(axes):
        begin[a], end[a] = pads[j], pads[j + len(axes)]
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise UnsupportedError(f"mode {mode!r} is not supported")
    return F.pad(x, begin, end, mode, value)


@op("DepthToSpace", attrs=("blocksize", "mode"))
def depth_to_space(n):
    x = n.x(0)
    if x.ndim() != 4:
        raise GraphError(f"input must be 4-D (NCHW), got shape {x.shape}")
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    if C % (b * b):
        raise GraphError(f"channels {C} are not divisible by blocksize^2 {b * b}")
    c = C // (b * b)
    if n.attr("mode", "DCR") == "DCR":
        t = F.transpose(F.reshape(x, (N, b, b, c, H, W)), (0, 3, 4, 1, 5, 2))
    else:
        t = F.transpose(F.reshape(x, (N, c, b, b, H, W)), (0, 1, 4, 2, 5, 3))
    return F.reshape(t, (N, c, H * b, W * b))


@op("SpaceToDepth", attrs=("blocksize",))
def space_to_depth(n):
    x = n.x(0)
    if x.ndim() != 4:
        raise GraphError(f"input must be 4-D (NCHW), got shape {x.shape}")
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    if H % b or W % b:
        raise GraphError(f"spatial size {H}x{W} is not divisible by blocksize {b}")
    t = F.reshape(x, (N, C, H // b, b, W // b, b))
    t = F.transpose(t, (0, 3, 5, 1, 2, 4))
    return F.reshape(t, (N, C * b * b, H // b, W // b))


@op("Constant", attrs=("value", "value_float", "value_floats", "value_int",
                       "value_ints", "value_string", "value_strings", "sparse_value"))
def constant(n):
    # Constant nodes are folded into the graph's constants when the model is
    # prepared (importer._constant_value); this handler never runs.
    raise GraphError("Constant nodes are folded at prepare time")
