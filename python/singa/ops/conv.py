"""2-D convolution and 1-D / 2-D max and average pooling (NCHW).

The arithmetic runs in the C++ kernels of src/core/nn (im2col + GEMM,
pooling with argmax); this module checks the arguments, names the shapes in
errors, and keeps what backward needs (the input and weight for conv, the
argmax positions for max pooling).

Two call forms. SINGA's takes a handle from ``singa_wrap`` that records
the layer geometry: ``conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0,
0))`` with a ``ConvHandle``, ``pooling_2d(handle, x, odd_padding)`` with a
``PoolingHandle``; odd_padding is SINGA's extra (top, bottom, left, right)
padding for "SAME" modes and the handle is made for the padded input, as in
SINGA. singa's own takes the geometry directly: ``conv2d(x, W, b=None,
stride=1, padding=0, dilation=1, group=1)``, ``pooling_2d(x, kernel_size,
...)``. The operator classes are ``_Conv2d`` and ``_Pooling2d`` (SINGA's
names; ``autograd.Conv2d`` and ``autograd.Pooling2d`` are the layers).

Window geometry follows ONNX: pads are [top, left, bottom, right]; the
output length is floor((in + pads - dilation (k - 1) - 1) / stride) + 1,
or ceil(...) with ceil_mode, where a last window starting past the input
plus the leading pad is dropped.
"""

import functools
import inspect
import numbers

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.tensor import Tensor

__all__ = [
    "_Conv2d", "conv2d", "_Pooling2d", "pooling_2d", "max_pool2d", "avg_pool2d",
    "_Pooling1d", "pooling_1d", "max_pool1d", "avg_pool1d",
]


def _pair(v, where, name):
    if isinstance(v, numbers.Integral):
        return [int(v), int(v)]
    v = [int(a) for a in v]
    if len(v) != 2:
        raise ValueError(f"{where}: {name} must be an int or 2 ints, got {v}")
    return v


def _pads(v, where):
    """[top, left, bottom, right] from an int, (ph, pw) or 4 ints."""
    if isinstance(v, numbers.Integral):
        v = [int(v)] * 4
    else:
        v = [int(a) for a in v]
        if len(v) == 2:
            v = v + v
    if len(v) != 4 or any(p < 0 for p in v):
        raise ValueError(f"{where}: padding must be >= 0 as an int, (ph, pw) or "
                         f"(top, left, bottom, right), got {v}")
    return v


def out_size(n, k, stride, pad_begin, pad_end, dilation, ceil_mode=False):
    """Output length of a sliding window along one axis (0 if none fits)."""
    span = n + pad_begin + pad_end - dilation * (k - 1) - 1
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= n + pad_begin:
        out -= 1
    return out


class _Geometry:
    """Shapes and window parameters of one conv or pooling call."""

    def __init__(self, where, x_shape, kernel, strides, pads, dilations, ceil_mode=False):
        if len(x_shape) != 4:
            raise ValueError(f"{where}: expected an NCHW input, got shape {x_shape}")
        self.n, self.c, self.h, self.w = x_shape
        self.kh, self.kw = kernel
        self.sh, self.sw = strides
        self.pt, self.pl, self.pb, self.pr = pads
        self.dh, self.dw = dilations
        if min(self.kh, self.kw, self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError(f"{where}: kernel {kernel}, strides {strides} and dilations "
                             f"{dilations} must be positive")
        self.oh = out_size(self.h, self.kh, self.sh, self.pt, self.pb, self.dh, ceil_mode)
        self.ow = out_size(self.w, self.kw, self.sw, self.pl, self.pr, self.dw, ceil_mode)
        if self.oh <= 0 or self.ow <= 0:
            raise ValueError(f"{where}: kernel {kernel} (dilations {dilations}) does not "
                             f"fit input shape {x_shape} with pads {pads}")
        self.ceil_mode = ceil_mode
        self.x_shape = tuple(x_shape)

    def ints(self):
        """(stride, pads, dilation) lists as the C++ bindings take them."""
        return [self.sh, self.sw], [self.pt, self.pl, self.pb, self.pr], [self.dh, self.dw]


def _odd(odd_padding, where):
    """SINGA's odd_padding (top, bottom, left, right) as 4 ints >= 0."""
    v = [int(p) for p in odd_padding]
    if len(v) != 4 or min(v) < 0:
        raise ValueError(f"{where}: odd_padding must be 4 ints >= 0 (top, bottom, left, "
                         f"right), got {tuple(odd_padding)}")
    return v


def _with_odd(ph, pw, odd):
    """[top, left, bottom, right] from a handle's symmetric (ph, pw) and
    odd_padding (top, bottom, left, right)."""
    return [ph + odd[0], pw + odd[2], ph + odd[1], pw + odd[3]]


def _check_handle(where, handle, x_shape, odd):
    """x (N, C, H, W) must be the input the handle was made for, less the
    odd padding."""
    want = (handle.channels, handle.height - odd[0] - odd[1], handle.width - odd[2] - odd[3])
    if len(x_shape) != 4 or tuple(x_shape[1:]) != want:
        raise ValueError(f"{where}: input of shape {tuple(x_shape)} does not match the handle, "
                         f"made for (N, {handle.channels}, {handle.height}, {handle.width})"
                         + (f" with odd_padding {tuple(odd)}" if any(odd) else ""))


class _Conv2d(Operator):
    """Cross-correlation of x (N, C, H, W) with W (OC, C / group, KH, KW),
    plus the optional bias b (OC,) (ONNX Conv; attributes strides, pads
    [top, left, bottom, right], dilations, group; kernel_shape is W's).

    ``_Conv2d(handle, odd_padding)`` takes the geometry from a
    ``singa_wrap.ConvHandle`` (SINGA's form; ``self.handle``);
    ``_Conv2d(strides=, pads=, dilations=, group=)`` gives it directly.
    """

    saves_only_when_told = True

    def __init__(self, handle=None, odd_padding=(0, 0, 0, 0), strides=1, pads=0, dilations=1,
                 group=1, name=None):
        super().__init__(name)
        self.handle = handle
        if handle is not None:
            if not isinstance(handle, _cw.ConvHandle):
                raise TypeError(f"conv2d: handle must be a singa_wrap.ConvHandle, got "
                                f"{type(handle).__name__}")
            self.odd_padding = _odd(odd_padding, "conv2d")
            strides = [handle.stride_h, handle.stride_w]
            pads = _with_odd(handle.pad_h, handle.pad_w, self.odd_padding)
            group = handle.group
        self.strides = _pair(strides, "conv2d", "strides")
        self.pads = _pads(pads, "conv2d")
        self.dilations = _pair(dilations, "conv2d", "dilations")
        self.group = int(group)

    def forward(self, x, W, b=None):
        if not self.saved and self.handle is None:
            # Nothing to keep for backward: the core checks every argument
            # (shapes, dtypes, geometry) itself, so the checks below run
            # only to word an error it reports.
            try:
                return _cw.Conv2dForward(x, W, _cw.Tensor() if b is None else b, self.strides,
                                         self.pads, self.dilations, self.group)
            except (ValueError, TypeError):
                pass
        if self.handle is not None:
            _check_handle("conv2d", self.handle, x.shape(), self.odd_padding)
        if W.nDim() != 4:
            raise ValueError(f"conv2d: the weight must be (OC, C/group, KH, KW), got {W.shape()}")
        oc, cg, kh, kw = W.shape()
        g = _Geometry("conv2d", x.shape(), (kh, kw), self.strides, self.pads, self.dilations)
        if self.group < 1 or g.c % self.group or oc % self.group or cg * self.group != g.c:
            raise ValueError(f"conv2d: input shape {x.shape()} and weight shape {W.shape()} "
                             f"do not agree with group={self.group}")
        if b is not None and b.shape() != (oc,):
            raise ValueError(f"conv2d: bias of shape {b.shape()} does not match {oc} "
                             "output channels")
        if self.saved:
            self._geo, self._x, self._W, self._has_b = g, x, W, b is not None
        return _conv_forward(x, W, b, g, self.group)

    def backward(self, dy):
        g, x, W = self._geo, self._x, self._W
        dx = _conv_backward_data(dy, W, g, self.group) if self.needs_grad(0) else None
        dW = _conv_backward_weight(dy, x, W.shape(), g, self.group) if self.needs_grad(1) \
            else None
        if self._has_b:
            return dx, dW, _cw.Sum(dy, [0, 2, 3], False)
        return dx, dW


def _two_forms(singa_form, handle_type):
    """A function that runs singa_form when its first argument is a handle
    of handle_type (SINGA's call) and the decorated function otherwise;
    its signature is SINGA's."""
    def deco(native):
        @functools.wraps(singa_form)
        def fn(*args, **kwargs):
            first = args[0] if args else kwargs.get("handle")
            if isinstance(first, handle_type):
                return singa_form(*args, **kwargs)
            if isinstance(first, Tensor):
                return native(*args, **kwargs)
            raise TypeError(f"{singa_form.__name__}: expected a singa_wrap."
                            f"{handle_type.__name__} or an input Tensor first, got "
                            f"{type(first).__name__}")
        fn.__signature__ = inspect.signature(singa_form)
        fn.__doc__ = f"{singa_form.__doc__}\n\n    singa's form: {native.__doc__}"
        return fn
    return deco


def _singa_conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)):
    """conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)): x convolved
    with W (and b) as the ConvHandle says (SINGA's form); b is ignored when
    the handle has no bias."""
    op = _Conv2d(handle, odd_padding)
    if b is None or not handle.bias_term:
        return op(x, W)[0]
    return op(x, W, b)[0]


@_two_forms(_singa_conv2d, _cw.ConvHandle)
def conv2d(x, W, b=None, stride=1, padding=0, dilation=1, group=1):
    """conv2d(x, W, b=None, stride=1, padding=0, dilation=1, group=1), with
    padding an int, (ph, pw) or (top, left, bottom, right)."""
    op = _Conv2d(strides=stride, pads=padding, dilations=dilation, group=group)
    return (op(x, W) if b is None else op(x, W, b))[0]


class _Pooling2d(Operator):
    """Max or average pooling of x (N, C, H, W) (ONNX MaxPool /
    AveragePool; attributes kernel_shape, strides, pads [top, left, bottom,
    right], dilations (max only), ceil_mode, count_include_pad (average
    only; ONNX's default, False, divides by the cells inside the input)).
    strides default to the kernel size, as SINGA's and PyTorch's pooling;
    pads may be at most half the kernel, so every window sees the input.

    ``_Pooling2d(handle, odd_padding)`` takes the geometry from a
    ``singa_wrap.PoolingHandle`` (SINGA's form; ``self.handle``).
    """

    handle = None

    def __init__(self, kernel_shape=None, strides=None, pads=0, is_max=True, dilations=1,
                 ceil_mode=False, count_include_pad=False, name=None, odd_padding=(0, 0, 0, 0)):
        super().__init__(name)
        self.handle = None
        if isinstance(kernel_shape, _cw.PoolingHandle):
            h = self.handle = kernel_shape
            # SINGA's positional form _Pooling2d(handle, odd_padding)
            odd = strides if strides is not None else odd_padding
            self.odd_padding = _odd(odd, "pooling_2d")
            kernel_shape = [h.kernel_h, h.kernel_w]
            strides = [h.stride_h, h.stride_w]
            pads = _with_odd(h.pad_h, h.pad_w, self.odd_padding)
            is_max = h.is_max_pooling
        elif kernel_shape is None:
            raise TypeError("pooling: give a kernel_shape or a singa_wrap.PoolingHandle")
        self.kernel_shape = _pair(kernel_shape, "pooling", "kernel_shape")
        self.strides = self.kernel_shape[:] if strides is None else \
            _pair(strides, "pooling", "strides")
        self.pads = _pads(pads, "pooling")
        self._init_common(is_max, _pair(dilations, "pooling", "dilations"), ceil_mode,
                          count_include_pad, self.kernel_shape, self.pads)

    def _init_common(self, is_max, dilations, ceil_mode, count_include_pad, k2, p4):
        self.is_max = bool(is_max)
        self.dilations = dilations
        if not self.is_max and any(d != 1 for d in dilations):
            raise ValueError("pooling: dilations apply to max pooling only")
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        kh, kw = k2
        if max(p4[0], p4[2]) > kh // 2 or max(p4[1], p4[3]) > kw // 2:
            raise ValueError(f"pooling: pads {self.pads} must be at most half the kernel "
                             f"{self.kernel_shape}")

    def forward(self, x):
        if self.handle is not None:
            _check_handle("pooling_2d", self.handle, x.shape(), self.odd_padding)
        return self._pool(x, self.kernel_shape, self.strides, self.pads, self.dilations)

    def _pool(self, x, kernel, strides, pads, dilations):
        g = _Geometry("pooling", x.shape(), kernel, strides, pads, dilations, self.ceil_mode)
        self._geo = g
        if self.is_max:
            y, self._argmax = _max_pool_forward(x, g)
            return y
        return _avg_pool_forward(x, g, self.count_include_pad)

    def backward(self, dy):
        if self.is_max:
            return _max_pool_backward(dy, self._argmax, self._geo)
        return _avg_pool_backward(dy, self._geo, self.count_include_pad)


def _singa_pooling_2d(handle, x, odd_padding=(0, 0, 0, 0)):
    """pooling_2d(handle, x, odd_padding=(0, 0, 0, 0)): max or average
    pooling of x as the PoolingHandle says (SINGA's form)."""
    return _Pooling2d(handle, odd_padding=odd_padding)(x)[0]


@_two_forms(_singa_pooling_2d, _cw.PoolingHandle)
def pooling_2d(x, kernel_size, stride=None, padding=0, is_max=True, ceil_mode=False):
    """pooling_2d(x, kernel_size, stride=None, padding=0, is_max=True,
    ceil_mode=False)."""
    return _Pooling2d(kernel_size, stride, padding, is_max, 1, ceil_mode)(x)[0]


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    return _Pooling2d(kernel_size, stride, padding, True, dilation, ceil_mode)(x)[0]


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=False):
    return _Pooling2d(kernel_size, stride, padding, False, 1, ceil_mode, count_include_pad)(x)[0]


class _Pooling1d(_Pooling2d):
    """Max or average pooling of x (N, C, L); the attributes are 1-D lists
    (kernel_shape [k], strides [s], pads [begin, end], dilations [d]). Runs
    as 2-D pooling over (N, C, 1, L)."""

    def __init__(self, kernel_shape, strides=None, pads=0, is_max=True, dilations=1,
                 ceil_mode=False, count_include_pad=False, name=None):
        Operator.__init__(self, name)
        self.kernel_shape = [_one(kernel_shape, "kernel_shape")]
        self.strides = self.kernel_shape[:] if strides is None else [_one(strides, "strides")]
        p = [int(pads)] * 2 if isinstance(pads, numbers.Integral) else [int(v) for v in pads]
        if len(p) != 2 or min(p) < 0:
            raise ValueError(f"pooling_1d: pads must be >= 0, an int or (begin, end), got {pads}")
        self.pads = p
        self._init_common(is_max, [_one(dilations, "dilations")], ceil_mode,
                          count_include_pad, (1, self.kernel_shape[0]), [0, p[0], 0, p[1]])

    def forward(self, x):
        if x.nDim() != 3:
            raise ValueError(f"pooling_1d: expected an (N, C, L) input, got shape {x.shape()}")
        n, c, length = x.shape()
        y = self._pool(x.Reshape([n, c, 1, length]), [1, self.kernel_shape[0]],
                       [1, self.strides[0]], [0, self.pads[0], 0, self.pads[1]],
                       [1, self.dilations[0]])
        return y.Reshape([n, c, y.shape(3)])

    def backward(self, dy):
        g = self._geo
        dx = super().backward(dy.Reshape([g.n, g.c, 1, g.ow]))
        return dx.Reshape([g.n, g.c, g.w])


def _one(v, name):
    if isinstance(v, numbers.Integral):
        return int(v)
    v = list(v)
    if len(v) != 1:
        raise ValueError(f"pooling_1d: {name} must be one int, got {v}")
    return int(v[0])


def pooling_1d(x, kernel_size, stride=None, padding=0, is_max=True, ceil_mode=False):
    return _Pooling1d(kernel_size, stride, padding, is_max, 1, ceil_mode)(x)[0]


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    return _Pooling1d(kernel_size, stride, padding, True, dilation, ceil_mode)(x)[0]


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=False):
    return _Pooling1d(kernel_size, stride, padding, False, 1, ceil_mode, count_include_pad)(x)[0]


# ---- the C++ kernels (src/core/nn, bound in api/core_nn.i) ----

def _conv_forward(x, W, b, g, group):
    s, p, d = g.ints()
    return _cw.Conv2dForward(x, W, b if b is not None else _cw.Tensor(), s, p, d, group)


def _conv_backward_data(dy, W, g, group):
    s, p, d = g.ints()
    return _cw.Conv2dBackwardData(dy, W, list(g.x_shape), s, p, d, group)


def _conv_backward_weight(dy, x, w_shape, g, group):
    s, p, d = g.ints()
    return _cw.Conv2dBackwardWeight(x, dy, list(w_shape), s, p, d, group)


def _max_pool_forward(x, g):
    s, p, d = g.ints()
    y, argmax = _cw.MaxPool2dForward(x, [g.kh, g.kw], s, p, d, g.ceil_mode)
    return y, argmax


def _max_pool_backward(dy, argmax, g):
    s, p, d = g.ints()
    return _cw.MaxPool2dBackward(dy, argmax, list(g.x_shape), [g.kh, g.kw], s, p, d,
                                 g.ceil_mode)


def _avg_pool_forward(x, g, include_pad):
    s, p, _ = g.ints()
    return _cw.AvgPool2dForward(x, [g.kh, g.kw], s, p, g.ceil_mode, include_pad)


def _avg_pool_backward(dy, g, include_pad):
    s, p, _ = g.ints()
    return _cw.AvgPool2dBackward(dy, list(g.x_shape), [g.kh, g.kw], s, p, g.ceil_mode,
                                 include_pad)
