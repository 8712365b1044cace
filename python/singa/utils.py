"""SINGA's helpers: a progress bar, ONNX-style padding arithmetic, odd
(asymmetric) padding of ``singa_wrap`` tensors, conv/pool handle renewal,
and a post-order walk of an autograd graph.

Padding lists are axis by axis, begin then end: for 2-D, (top, bottom,
left, right).
"""

import math
import sys
from collections import OrderedDict

from singa import singa_wrap as _cw

__all__ = ["update_progress", "handle_odd_pad_fwd", "handle_odd_pad_bwd",
           "same_pad_shape_check", "re_new_handle", "get_padding_shape", "get_output_shape",
           "force_unicode", "post_order_recursive", "OrderedDict"]

_BAR = 20


def update_progress(progress, info):
    """Writes a progress bar for progress in [0, 1] followed by info, and
    moves the cursor back so the next call redraws it in place. A negative
    progress shows "Halt.", 1 or more "Done."."""
    status = ""
    if isinstance(progress, bool) or not isinstance(progress, (int, float)):
        progress, status = 0.0, "error: progress must be a number. "
    progress = float(progress)
    if math.isnan(progress) or progress < 0:
        progress, status = 0.0, "Halt. "
    elif progress >= 1:
        progress, status = 1.0, "Done. "
    status += str(info)
    filled = int(round(_BAR * progress))
    text = f"[{'.' * filled}{' ' * (_BAR - filled)}] {progress * 100:5.1f}% {status}"
    sys.stdout.write(text)
    sys.stdout.write("\b" * len(text))
    sys.stdout.flush()


def _check_ctensor(x, where):
    if not isinstance(x, _cw.Tensor):
        raise TypeError(f"{where}: expected a singa_wrap Tensor (tensor.data), got "
                        f"{type(x).__name__}")
    if x.nDim() != 4:
        raise ValueError(f"{where}: expected a 4-D (N, C, H, W) tensor, got shape {x.shape()}")


def _check_odd_padding(odd_padding, where):
    try:
        pads = tuple(int(p) for p in odd_padding)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: odd_padding must be four ints, got {odd_padding!r}") from None
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError(f"{where}: odd_padding must be four ints >= 0 (top, bottom, left, "
                         f"right), got {odd_padding!r}")
    return pads


# (axis, at the start) for each entry of odd_padding
_SIDES = ((2, True), (2, False), (3, True), (3, False))


def _slice_on(x, start, end, axis):
    """Rows start:end of x along axis, as a contiguous copy."""
    return x.Slice(axis, start, end).Clone()


def handle_odd_pad_fwd(x, odd_padding, is_pool=False):
    """x (a singa_wrap Tensor, NCHW) with odd_padding = (top, bottom, left,
    right) extra rows and columns: zeros, or for pooling copies of the edge
    rows/columns nearest that side (so they never win a max or shift an
    average)."""
    _check_ctensor(x, "handle_odd_pad_fwd")
    pads = _check_odd_padding(odd_padding, "handle_odd_pad_fwd")
    for (axis, start), pad in zip(_SIDES, pads):
        if pad == 0:
            continue
        size = x.shape(axis)
        if is_pool:
            if pad > size:
                raise ValueError(f"handle_odd_pad_fwd: cannot repeat {pad} edge rows of an "
                                 f"axis of size {size}")
            edge = _slice_on(x, 0, pad, axis) if start else _slice_on(x, size - pad, size, axis)
        else:
            shape = list(x.shape())
            shape[axis] = pad
            edge = _cw.Tensor(shape, x.device(), x.data_type())
            edge.SetValue(0.0)
        parts = [edge, x] if start else [x, edge]
        x = _cw.ConcatOn(_cw.VecTensor(parts), axis)
    return x


def handle_odd_pad_bwd(dx, odd_padding):
    """The gradient of handle_odd_pad_fwd (zero padding): dx without the
    padded rows and columns."""
    _check_ctensor(dx, "handle_odd_pad_bwd")
    pads = _check_odd_padding(odd_padding, "handle_odd_pad_bwd")
    for (axis, start), pad in zip(_SIDES, pads):
        if pad == 0:
            continue
        size = dx.shape(axis)
        if pad > size:
            raise ValueError(f"handle_odd_pad_bwd: cannot remove {pad} rows from an axis of "
                             f"size {size}")
        dx = _slice_on(dx, pad, size, axis) if start else _slice_on(dx, 0, size - pad, axis)
    return dx


def _spatial(seq, what, where):
    try:
        out = [int(v) for v in seq]
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {what} must be a list of ints, got {seq!r}") from None
    return out


def get_output_shape(auto_pad, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """Output sizes of a conv or pooling under ONNX's auto_pad: ceil(n / s)
    for SAME_UPPER/SAME_LOWER, ceil((n - k + 1) / s) for VALID (a list)."""
    where = "get_output_shape"
    size = _spatial(input_spatial_shape, "input_spatial_shape", where)
    kernel = _spatial(kernel_spatial_shape, "kernel_spatial_shape", where)
    stride = _spatial(strides_spatial, "strides_spatial", where)
    if not len(size) == len(kernel) == len(stride):
        raise ValueError(f"{where}: shapes {size}, {kernel} and {stride} differ in length")
    if min(stride, default=1) < 1:
        raise ValueError(f"{where}: strides must be >= 1, got {stride}")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return [-(-n // s) for n, s in zip(size, stride)]
    if auto_pad == "VALID":
        return [max(-(-(n - k + 1) // s), 0) for n, k, s in zip(size, kernel, stride)]
    raise ValueError(f"{where}: auto_pad must be SAME_UPPER, SAME_LOWER or VALID, "
                     f"got {auto_pad!r}")


def get_padding_shape(pad_mode, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """(pads, odd_padding) for ONNX's auto_pad pad_mode: pads gives each axis
    the even part of its total padding on both sides (begin, end per axis);
    odd_padding the one left-over cell, at the end for SAME_UPPER and at
    the start for SAME_LOWER."""
    out = get_output_shape(pad_mode, input_spatial_shape, kernel_spatial_shape, strides_spatial)
    pads, odd = [], []
    for n, k, s, o in zip(input_spatial_shape, kernel_spatial_shape, strides_spatial, out):
        total = max((o - 1) * int(s) + int(k) - int(n), 0)
        pads += [total // 2, total // 2]
        extra = total % 2
        odd += [0, extra] if pad_mode == "SAME_UPPER" else [extra, 0]
    return pads, odd


def _handle_geometry(handle, where):
    try:
        return ([handle.kernel_h, handle.kernel_w], [handle.stride_h, handle.stride_w],
                [handle.pad_h, handle.pad_w])
    except AttributeError:
        raise TypeError(f"{where}: expected a conv or pooling handle, got "
                        f"{type(handle).__name__}") from None


def same_pad_shape_check(handle, pad_mode, x):
    """Raises ValueError unless the handle's padding is what pad_mode
    (SAME_UPPER/SAME_LOWER) gives for input x (a singa_wrap Tensor)."""
    kernel, stride, padding = _handle_geometry(handle, "same_pad_shape_check")
    pads, _ = get_padding_shape(pad_mode, list(x.shape())[2:], kernel, stride)
    want = [pads[0], pads[2]]
    if padding != want:
        raise ValueError(f"same_pad_shape_check: for {pad_mode} and input shape {x.shape()} "
                         f"the padding should be {want}, the handle has {padding}")


def re_new_handle(handle, x, is_pool=False):
    """A new handle like handle (same kernel, stride, padding and, for a
    conv, channels, filters, bias and group) for input x."""
    kernel, stride, padding = _handle_geometry(handle, "re_new_handle")
    kind = type(handle).__name__
    if is_pool:
        cls = getattr(_cw, kind, None) if kind.endswith("PoolingHandle") else None
        args = (x, kernel, stride, padding, handle.is_max_pooling)
    else:
        cls = getattr(_cw, kind, None) if kind.endswith("ConvHandle") else None
        args = (x, kernel, stride, padding, handle.channels, handle.num_filters,
                handle.bias_term, handle.group)
    if cls is None:
        raise TypeError(f"re_new_handle: {kind} is not a singa_wrap "
                        f"{'pooling' if is_pool else 'conv'} handle")
    return cls(*args)


def force_unicode(s):
    """s decoded as UTF-8 if it is bytes, else s."""
    if isinstance(s, (bytes, bytearray)):
        return bytes(s).decode("utf-8")
    return s


def post_order_recursive(root, root_t):
    """Walks the autograd graph that ends in operator root (whose output is
    root_t) depth first, inputs before the operators using them.

    Returns (nodes, weights, inputs), OrderedDicts keyed by name: the
    operators in post order; the leaves holding a tensor that stores its
    gradient (parameters), mapped to it; the other leaves (data), mapped to
    None. The walk uses an explicit stack, so deep graphs do not hit
    Python's recursion limit.
    """
    nodes, weights, inputs = OrderedDict(), OrderedDict(), OrderedDict()
    seen = set()
    stack = [(root, root_t, False)]
    while stack:
        op, t, expanded = stack.pop()
        if op is None:
            continue
        if type(op).__name__ == "Dummy":
            if t is not None:
                weights[op.name] = t
            else:
                inputs[op.name] = None
            continue
        if expanded:
            nodes[op.name] = op
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.append((op, t, True))
        for src in reversed(list(op.src or ())):
            stack.append((src[0], src[2], False))
    return nodes, weights, inputs
