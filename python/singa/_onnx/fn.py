"""The tensor functions the importer's handlers compute with.

Handlers call these instead of singa.tensor or singa.autograd directly, so
this module is the one place that decides which implementation a graph
uses: the autograd function where autograd has the op (so an imported model
can be fine-tuned), the plain tensor function for ops with no gradient
(comparisons, logic, rounding, integer work) or that autograd lacks.
"""

import builtins

from singa import autograd as ag
from singa import opdefs, tensor

builtins_slice = builtins.slice


def _no_grad(f):
    """f with its result marked as needing no gradient (masks, indices)."""
    def g(*args):
        out = f(*args)
        out.requires_grad = False
        return out
    g.__name__ = f.__name__
    return g


# ---- the op table (singa.opdefs): autograd where the row has a gradient ----
for _row in opdefs.ROWS:
    _differentiable = _row.grad is not None if _row.arity == 1 else any(_row.grad)
    globals()[_row.fn] = (getattr(ag, _row.fn) if _differentiable
                          else _no_grad(getattr(tensor, _row.fn)))
del _row, _differentiable

# ---- no gradient: arg-reductions ----
argmax = _no_grad(tensor.argmax)
argmin = _no_grad(tensor.argmin)


def _onnx_shape(y, x, axes, keepdims):
    """y with ONNX's result shape: singa's full reductions give (1,) where
    ONNX gives a 0-d tensor."""
    if keepdims:
        return y
    want = tuple(d for i, d in enumerate(x.shape) if i not in set(axes))
    return y if tuple(y.shape) == want else reshape(y, want)


# Max / min reductions have no autograd operator yet.
def reduce_max(x, axes, keepdims):
    out = tensor.max(x, axes, keepdims)
    out.requires_grad = False
    return _onnx_shape(out, x, axes, keepdims)


def reduce_min(x, axes, keepdims):
    out = tensor.min(x, axes, keepdims)
    out.requires_grad = False
    return _onnx_shape(out, x, axes, keepdims)

# ---- differentiable: autograd ----
softmax = ag.softmax
log_softmax = ag.log_softmax
tile = ag.tile


def where(cond, x, y):
    """x where cond is nonzero, else y (ONNX's argument order)."""
    return ag.where(x, y, cond)


def leakyrelu(x, alpha):
    return ag.leakyrelu(x, alpha)


def reduce_sum(x, axes, keepdims):
    return _onnx_shape(ag.reduce_sum(x, list(axes), int(keepdims)), x, axes, keepdims)


def reduce_mean(x, axes, keepdims):
    return _onnx_shape(ag.reduce_mean(x, list(axes), int(keepdims)), x, axes, keepdims)


def clip(x, lo, hi):
    """x limited to [lo, hi] (infinite bounds are absent); all hi when
    lo > hi, as ONNX Clip defines."""
    lo = None if lo == -float("inf") else lo
    hi = None if hi == float("inf") else hi
    if x.dtype == tensor.int32 or (lo is not None and hi is not None and lo > hi):
        # Integer bounds stay exact as int32 tensors (the C++ Clip takes
        # float bounds), and min-then-max gives ONNX's lo > hi rule.
        if lo is not None:
            x = maximum(x, scalar_like(x, lo))
        if hi is not None:
            x = minimum(x, scalar_like(x, hi))
        return x
    return ag.clip(x, lo, hi)


def matmul(a, b):
    if a.dtype == tensor.float16 or b.dtype == tensor.float16:
        # singa stores float16 but multiplies in float32.
        y = ag.matmul(ag.cast(a, tensor.float32), ag.cast(b, tensor.float32))
        return ag.cast(y, tensor.float16)
    return ag.matmul(a, b)


def reshape(x, shape):
    shape = tuple(int(d) for d in shape)
    if 0 in shape:
        # autograd's reshape reads 0 as "copy this dimension"; here 0 is an
        # empty dimension, which carries no gradient anyway.
        return x.reshape(shape)
    return ag.reshape(x, list(shape))


def transpose(x, perm):
    return ag.transpose(x, list(perm))


def concat(xs, axis):
    return ag.cat(list(xs), axis)


def split(x, axis, parts):
    out = ag.split(x, axis, list(parts))
    return list(out) if isinstance(out, tuple) else [out]


def slice(x, starts, ends, axes, steps):
    """ONNX Slice: Python-style clamping of out-of-range bounds."""
    return ag.slice(x, starts, ends, axes, steps)


def gather(x, axis, indices):
    """x's entries at the host int array indices along axis."""
    if indices.size == 0:
        shape = tuple(x.shape[:axis]) + indices.shape + tuple(x.shape[axis + 1:])
        return tensor.Tensor(shape, x.device, x.dtype, requires_grad=False)
    return ag.gather(x, axis, indices)


def broadcast_to(x, shape):
    return ag.expand(x, list(shape))


def scalar_like(x, value):
    """A 0-d tensor of x's dtype and device holding value."""
    t = tensor.Tensor((), x.device, x.dtype, requires_grad=False)
    t.set_value(value)
    return t


def gemm(a, b, c, alpha, beta, trans_a, trans_b):
    """alpha * A' B' + beta * C (ONNX Gemm)."""
    return ag.gemm(a, b, c, alpha, beta, int(trans_a), int(trans_b))


def pad(x, begin, end, mode, value):
    """Pads (or, for negative amounts, crops) every axis of x."""
    if any(b < 0 for b in begin) or any(e < 0 for e in end):
        starts = [max(-b, 0) for b in begin]
        ends = [d - max(-e, 0) for d, e in zip(x.shape, end)]
        x = slice(x, starts, ends, None, None)
        begin = [max(b, 0) for b in begin]
        end = [max(e, 0) for e in end]
    if not any(begin) and not any(end):
        return x
    if mode != "wrap":
        return ag.pad(x, mode, list(begin) + list(end), value)
    # Wrap padding: the far end of each axis is put before it and the near
    # end after it.
    for a, (b, e) in enumerate(zip(begin, end)):
        if not b and not e:
            continue
        length = x.shape[a]
        if b > length or e > length:
            raise ValueError(f"wrap pads ({b}, {e}) exceed axis {a} of length {length}")
        pieces = []
        if b:
            pieces.append(slice(x, [length - b], [length], [a], None))
        pieces.append(x)
        if e:
            pieces.append(slice(x, [0], [e], [a], None))
        x = concat(pieces, a)
    return x


def _channel(p, rank):
    return reshape(p, (1, p.size()) + (1,) * (rank - 2))


def batch_norm(x, scale, bias, mean, var, eps, momentum):
    """Batch norm as singa runs it (see autograd._BatchNorm2d)."""
    return ag.batchnorm_2d(x, scale, bias, mean, var, momentum=momentum, epsilon=eps)


def batch_norm_train(x, scale, bias, mean, var, eps, momentum):
    """Normalises with the batch statistics; returns y and the updated
    running mean and variance (ONNX BatchNormalization, training_mode=1)."""
    rank = x.ndim()
    axes = (0,) + tuple(range(2, rank))
    bm = reduce_mean(x, axes, True)
    d = sub(x, bm)
    bv = reduce_mean(mul(d, d), axes, True)
    y = mul(div(d, sqrt(add(bv, eps))), _channel(scale, rank))
    y = add(y, _channel(bias, rank))
    # The running statistics are bookkeeping, outside the graph.
    bm = tensor.from_raw_tensor(bm.data).reshape((x.shape[1],))
    bv = tensor.from_raw_tensor(bv.data).reshape((x.shape[1],))
    run_mean = tensor.add(tensor.mul(mean, momentum), tensor.mul(bm, 1.0 - momentum))
    run_var = tensor.add(tensor.mul(var, momentum), tensor.mul(bv, 1.0 - momentum))
    return y, run_mean, run_var


def dropout(x, ratio):
    """Inverted dropout; returns the output and the keep mask (int32)."""
    mask = tensor.Tensor(tuple(x.shape), x.device, x.dtype, requires_grad=False)
    mask.bernoulli(1.0 - ratio)
    y = mul(x, mul(mask, 1.0 / (1.0 - ratio)))
    return y, mask.as_type(tensor.int32)


def _float32(f):
    """f run in float32 for other dtypes: singa's conv and pooling kernels
    are float32 only, ONNX also allows float16 and integer inputs."""
    def g(x, *args):
        if x.dtype == tensor.float32:
            return f(x, *args)
        to = x.dtype
        args = [ag.cast(a, tensor.float32) if isinstance(a, tensor.Tensor) else a
                for a in args]
        return ag.cast(f(ag.cast(x, tensor.float32), *args), to)
    g.__name__ = f.__name__
    return g


@_float32
def conv2d(x, w, b, strides, pads, dilations, group):
    """ONNX Conv on NCHW tensors; pads are [top, left, bottom, right]."""
    return ag.conv2d(x, w, b, stride=strides, padding=pads, dilation=dilations, group=group)


@_float32
def pool2d(x, kernel, strides, pads, is_max, dilations, ceil_mode, count_include_pad):
    """ONNX MaxPool / AveragePool on NCHW tensors."""
    if is_max and not ceil_mode and (max(pads[0], pads[2]) > kernel[0] // 2
                   or max(pads[1], pads[3]) > kernel[1] // 2):
        # singa's pooling takes pads up to half the kernel; wider ones are
        # applied first as -inf borders, which max pooling never picks.
        x = pad(x, [0, 0, pads[0], pads[1]], [0, 0, pads[2], pads[3]], "constant",
                -float("inf"))
        pads = [0, 0, 0, 0]
    op = ag._Pooling2d(kernel, strides, pads, is_max, dilations, ceil_mode, count_include_pad)
    return op(x)[0]
