"""Importer handlers: linear algebra, softmax, normalisation, pooling,
convolution and dropout."""

import numpy as np

from singa import tensor
from singa._onnx import fn as F
from singa._onnx.errors import GraphError, UnsupportedError
from singa._onnx.registry import op


def _axis(a, rank):
    if not -rank <= a < rank:
        raise GraphError(f"axis {a} is out of range for rank {rank}")
    return a % rank


# ---- linear algebra ----

@op("MatMul")
def matmul(n):
    return F.matmul(n.x(0), n.x(1))


@op("Gemm", attrs=("alpha", "beta", "transA", "transB", "broadcast"), since=6)
def gemm(n):
    a, b = n.x(0), n.x(1)
    if a.ndim() != 2 or b.ndim() != 2:
        raise GraphError(f"A and B must be 2-D, got shapes {a.shape} and {b.shape}")
    c = n.inputs[2] if n.has(2) else None
    return F.gemm(a, b, c, n.attr("alpha", 1.0), n.attr("beta", 1.0),
                  n.attr("transA", 0), n.attr("transB", 0))


@op("Einsum", attrs=("equation",))
def einsum(n):
    eq = n.attr("equation").replace(" ", "")
    if "..." in eq:
        raise UnsupportedError(f"equation {eq!r}: ellipsis is not supported")
    if "->" not in eq:
        # Implicit output: the letters used once, in alphabetical order.
        letters = eq.replace(",", "")
        eq += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    xs = [n.x(i) for i in range(len(n.inputs))]
    return tensor.einsum(eq, *xs)


# ---- softmax family ----

def _softmax_like(f):
    def handler(n):
        x = n.x(0)
        rank = x.ndim()
        if n.opset >= 13:
            return f(x, _axis(n.attr("axis", -1), rank))
        # Before opset 13 the input is seen as 2-D: [prod(:axis), prod(axis:)].
        axis = _axis(n.attr("axis", 1), rank) if rank else 0
        lead = int(np.prod(x.shape[:axis], dtype=np.int64))
        y = f(F.reshape(x, (lead, -1) if x.size() else (lead, 0)), 1)
        return F.reshape(y, tuple(x.shape))
    return handler


def _hardmax(x, axis):
    idx = F.argmax(x, axis, True)
    shape = [1] * x.ndim()
    shape[axis] = x.shape[axis]
    ar = tensor.from_numpy(np.arange(x.shape[axis], dtype=np.int32).reshape(shape), x.device)
    hot = F.equal(idx, ar)
    return F.broadcast_to(hot, tuple(x.shape)).as_type(x.dtype)


op("Softmax", attrs=("axis",))(_softmax_like(F.softmax))
op("LogSoftmax", attrs=("axis",))(_softmax_like(F.log_softmax))
op("Hardmax", attrs=("axis",))(_softmax_like(_hardmax))


# ---- normalisation ----

def _channel_view(p, rank):
    """A per-channel vector p shaped to broadcast over NC... tensors."""
    return F.reshape(p, (1, p.size()) + (1,) * (rank - 2))


def _moments(x, axes):
    """Mean and biased variance over axes (kept)."""
    mean = F.reduce_mean(x, axes, True)
    d = F.sub(x, mean)
    var = F.reduce_mean(F.mul(d, d), axes, True)
    return mean, var


@op("BatchNormalization",
    attrs=("epsilon", "momentum", "training_mode", "spatial", "is_test",
           "consumed_inputs"), since=6)
def batch_norm(n):
    x, scale, bias, mean, var = (n.x(i) for i in range(5))
    eps = n.attr("epsilon", 1e-5)
    momentum = n.attr("momentum", 0.9)
    if n.attr("spatial", 1) != 1:
        raise UnsupportedError("spatial=0 (per-element statistics) is not supported")
    rank = x.ndim()
    if rank < 2:
        raise GraphError(f"input must be at least 2-D, got shape {x.shape}")
    for name, p in (("scale", scale), ("B", bias), ("mean", mean), ("var", var)):
        if p.shape != (x.shape[1],):
            raise GraphError(f"{name} of shape {p.shape} does not match "
                             f"{x.shape[1]} channels")
    if n.attr("training_mode", 0):
        # ONNX's training form returns the updated statistics as outputs.
        return F.batch_norm_train(x, scale, bias, mean, var, eps, momentum)
    # singa's batch norm: running statistics at inference; batch statistics
    # and an in-place update of the running ones while a SONNXModel trains.
    return F.batch_norm(x, scale, bias, mean, var, eps, momentum)


@op("InstanceNormalization", attrs=("epsilon",))
def instance_norm(n):
    x, scale, bias = n.x(0), n.x(1), n.x(2)
    rank = x.ndim()
    axes = tuple(range(2, rank))
    mean, var = _moments(x, axes)
    y = F.div(F.sub(x, mean), F.sqrt(F.add(var, n.attr("epsilon", 1e-5))))
    return F.add(F.mul(y, _channel_view(scale, rank)), _channel_view(bias, rank))


@op("LayerNormalization", attrs=("axis", "epsilon", "stash_type"))
def layer_norm(n):
    x, scale = n.x(0), n.x(1)
    rank = x.ndim()
    axis = _axis(n.attr("axis", -1), rank)
    axes = tuple(range(axis, rank))
    mean, var = _moments(x, axes)
    inv_std = F.reciprocal(F.sqrt(F.add(var, n.attr("epsilon", 1e-5))))
    y = F.mul(F.mul(F.sub(x, mean), inv_std), scale)
    if n.has(2):
        y = F.add(y, n.x(2))
    return y, mean, inv_std


@op("GroupNormalization", attrs=("num_groups", "epsilon", "stash_type"), since=18)
def group_norm(n):
    x, scale, bias = n.x(0), n.x(1), n.x(2)
    g = n.attr("num_groups")
    N, C = x.shape[:2]
    if C % g:
        raise GraphError(f"{C} channels do not split into {g} groups")
    rank = x.ndim()
    grouped = F.reshape(x, (N, g, -1))
    mean, var = _moments(grouped, (2,))
    y = F.div(F.sub(grouped, mean), F.sqrt(F.add(var, n.attr("epsilon", 1e-5))))
    y = F.reshape(y, tuple(x.shape))
    if scale.size() == g and g != C:
        # Opset 18 gave scale and bias per group: expand them per channel.
        scale = tensor.repeat(scale, C // g, 0)
        bias = tensor.repeat(bias, C // g, 0)
    return F.add(F.mul(y, _channel_view(scale, rank)), _channel_view(bias, rank))


@op("MeanVarianceNormalization", attrs=("axes",))
def mean_variance_norm(n):
    x = n.x(0)
    axes = tuple(_axis(a, x.ndim()) for a in n.attr("axes", [0, 2, 3]))
    mean, var = _moments(x, axes)
    # The ONNX function adds 1e-9 to the standard deviation.
    return F.div(F.sub(x, mean), F.add(F.sqrt(var), 1e-9))


@op("LpNormalization", attrs=("axis", "p"))
def lp_norm(n):
    x = n.x(0)
    axis = _axis(n.attr("axis", -1), x.ndim())
    p = n.attr("p", 2)
    if p == 1:
        norm = F.reduce_sum(F.abs(x), (axis,), True)
    elif p == 2:
        norm = F.sqrt(F.reduce_sum(F.mul(x, x), (axis,), True))
    else:
        raise UnsupportedError(f"p={p} is not supported (1 or 2)")
    zero = F.equal(norm, F.scalar_like(norm, 0.0))
    # A zero norm gives zeros, not NaN: divide by 1 there instead.
    return F.div(x, F.add(norm, zero))


@op("LRN", attrs=("alpha", "beta", "bias", "size"))
def lrn(n):
    x = n.x(0)
    size = n.attr("size")
    if not isinstance(size, int) or size < 1:
        raise GraphError(f"size must be a positive int, got {size!r}")
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    C = x.shape[1]
    lo = (size - 1) // 2
    hi = size - 1 - lo
    sq = F.mul(x, x)
    padded = F.pad(sq, [0, lo] + [0] * (x.ndim() - 2), [0, hi] + [0] * (x.ndim() - 2),
                   "constant", 0.0)
    acc = None
    for k in range(size):
        part = F.slice(padded, [k], [k + C], [1], None)
        acc = part if acc is None else F.add(acc, part)
    denom = F.pow(F.add(F.mul(acc, alpha / size), bias), F.scalar_like(x, beta))
    return F.div(x, denom)


# ---- pooling over everything ----

@op("GlobalAveragePool")
def global_average_pool(n):
    x = n.x(0)
    return F.reduce_mean(x, tuple(range(2, x.ndim())), True)


@op("GlobalMaxPool")
def global_max_pool(n):
    x = n.x(0)
    return F.reduce_max(x, tuple(range(2, x.ndim())), True)


# ---- dropout ----

@op("Dropout", attrs=("ratio", "seed", "is_test", "consumed_inputs"), since=6)
def dropout(n):
    x = n.x(0)
    if n.opset >= 12:
        ratio = n.static(1)
        ratio = 0.5 if ratio is None else float(ratio.reshape(-1)[0])
        mode = n.static(2)
        train = bool(mode.reshape(-1)[0]) if mode is not None else False
    else:
        ratio = n.attr("ratio", 0.5)
        train = False
    if not 0 <= ratio < 1:
        raise GraphError(f"ratio {ratio} is outside [0, 1)")
    train = train or n.training
    if not train or ratio == 0:
        mask = tensor.Tensor(tuple(x.shape), x.device, tensor.int32, requires_grad=False)
        return x, mask.set_value(1)
    return F.dropout(x, ratio)


# ---- convolution and pooling (1-D runs as 2-D with a height of 1) ----

def _window(n, x, kernel):
    """(strides, pads [top, left, bottom, right], dilations) for a 2-D
    window, from the node's attributes; 1-D attributes are lifted to 2-D."""
    spatial = x.ndim() - 2
    if spatial not in (1, 2):
        raise UnsupportedError(f"{spatial}-D windows are not supported (1-D and 2-D are)")
    strides = n.attr("strides", [1] * spatial)
    dilations = n.attr("dilations", [1] * spatial)
    pads = n.attr("pads", [0] * (2 * spatial))
    if len(strides) != spatial or len(dilations) != spatial or len(pads) != 2 * spatial \
            or len(kernel) != spatial:
        raise GraphError(f"kernel {kernel}, strides {strides}, dilations {dilations} and "
                         f"pads {pads} do not fit a {spatial}-D window")
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * spatial)
        for i in range(spatial):
            size = x.shape[2 + i]
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            small = total // 2
            if auto == "SAME_UPPER":
                pads[i], pads[i + spatial] = small, total - small
            else:
                pads[i], pads[i + spatial] = total - small, small
    elif auto == "VALID":
        pads = [0] * (2 * spatial)
    elif auto != "NOTSET":
        raise UnsupportedError(f"auto_pad={auto!r} is not supported")
    if spatial == 1:
        return [1, strides[0]], [0, pads[0], 0, pads[1]], [1, dilations[0]]
    return list(strides), [pads[0], pads[1], pads[2], pads[3]], list(dilations)


def _as_2d(x):
    """x with a height axis of 1 inserted when it is (N, C, L)."""
    if x.ndim() == 3:
        return F.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    return x


def _from_2d(y, like):
    if like.ndim() == 3:
        return F.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
    return y


@op("Conv", attrs=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
def conv(n):
    x, w = n.x(0), n.x(1)
    if w.ndim() != x.ndim():
        raise GraphError(f"weight of shape {w.shape} does not fit input of shape {x.shape}")
    kernel = n.attr("kernel_shape", list(w.shape[2:]))
    if list(kernel) != list(w.shape[2:]):
        raise GraphError(f"kernel_shape {kernel} differs from the weight's {w.shape[2:]}")
    strides, pads, dilations = _window(n, x, kernel)
    b = n.inputs[2] if n.has(2) else None
    y = F.conv2d(_as_2d(x), _as_2d(w), b, strides, pads, dilations, n.attr("group", 1))
    return _from_2d(y, x)


def _pool(is_max):
    def handler(n):
        x = n.x(0)
        if is_max and len([o for o in n.node.output if o]) > 1:
            raise UnsupportedError("the Indices output of MaxPool is not supported")
        if n.attr("storage_order", 0):
            raise UnsupportedError("storage_order=1 is not supported")
        kernel = n.attr("kernel_shape")
        strides, pads, dilations = _window(n, x, kernel)
        k2 = [1, kernel[0]] if len(kernel) == 1 else list(kernel)
        y = F.pool2d(_as_2d(x), k2, strides, pads, is_max, dilations,
                     bool(n.attr("ceil_mode", 0)), bool(n.attr("count_include_pad", 0)))
        return _from_2d(y, x)
    return handler


op("MaxPool", attrs=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                     "storage_order", "strides"), since=8)(_pool(True))
op("AveragePool", attrs=("auto_pad", "ceil_mode", "count_include_pad", "dilations",
                         "kernel_shape", "pads", "strides"), since=7)(_pool(False))
