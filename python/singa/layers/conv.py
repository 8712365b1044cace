"""Convolution and pooling layers over NCHW (and NCL) inputs.

Padding is given as an int, a pair (ph, pw) applied to both sides, or four
values in SINGA's order, axis by axis: (top, bottom, left, right) (the
order of ``utils.get_padding_shape``); ``pad_mode`` "SAME_UPPER" / "SAME_LOWER"
(ONNX auto_pad) instead computes, for every input, the padding that keeps
ceil(size / stride) outputs, putting the odd pixel at the end (UPPER) or
the start (LOWER). Because that is recomputed per call, one layer can be
applied to inputs of different spatial sizes.
"""

import math
import numbers

from singa import autograd
from singa.tensor import Tensor
from singa.layers.base import Layer, check_input, new_param
from singa.ops.conv import _Conv2d, _Pooling2d

__all__ = ["Conv2d", "SeparableConv2d", "Pooling2d", "MaxPool2d", "AvgPool2d",
           "Pooling1d", "MaxPool1d", "AvgPool1d"]

_PAD_MODES = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _pair(v, what, where, low=1):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        v = tuple(int(a) for a in v)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {what} must be an int or a pair of ints, got {v!r}") from None
    if len(v) != 2 or min(v) < low:
        raise ValueError(f"{where}: {what} must be an int or a pair of ints >= {low}, got {v}")
    return v


def _pads(padding, where):
    """(top, left, bottom, right), the order the conv and pooling ops take,
    from an int, a pair (ph, pw) or SINGA's four values (top, bottom, left,
    right)."""
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        padding = (padding, padding)
    try:
        p = tuple(int(a) for a in padding)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: padding must be an int, a pair or four ints, "
                        f"got {padding!r}") from None
    if len(p) == 2:
        p = (p[0], p[0], p[1], p[1])
    if len(p) != 4 or min(p) < 0:
        raise ValueError(f"{where}: padding must be an int, a pair or four values >= 0, "
                         f"got {padding!r}")
    top, bottom, left, right = p
    return (top, left, bottom, right)


# Conv2d keyword arguments SINGA accepts for cuDNN's algorithm choice; they
# do not apply here and are kept only so SINGA code passing them runs.
_CUDNN_KWARGS = ("cudnn_prefer", "workspace_MB_limit")


def _conv_kwargs(kwargs, where):
    unknown = [k for k in kwargs if k not in _CUDNN_KWARGS + ("W_initializer",)]
    if unknown:
        raise TypeError(f"{where}: unexpected keyword argument {unknown[0]!r}")
    return kwargs.get("W_initializer")


def _check_pad_mode(pad_mode, where):
    pad_mode = str(pad_mode).upper()
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"{where}: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
    return pad_mode


def _same_pads(size, kernel, stride, dilation, pad_mode):
    """ONNX auto_pad SAME_*: per-side pads giving ceil(size / stride) outputs."""
    pads_begin, pads_end = [], []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        if pad_mode == "SAME_UPPER":
            pads_begin.append(small)
            pads_end.append(big)
        else:
            pads_begin.append(big)
            pads_end.append(small)
    return (pads_begin[0], pads_begin[1], pads_end[0], pads_end[1])


class Conv2d(Layer):
    """2-D convolution (cross-correlation) of (N, C, H, W) input.

    ``Conv2d(nb_kernels, kernel_size)`` infers C from the first input;
    ``Conv2d(in_channels, nb_kernels, kernel_size[, stride, padding])``
    (SINGA's rule: three leading positional ints) also checks it. W has
    shape (nb_kernels, C / group, kh, kw) and starts as N(0, 2 / (C kh kw +
    nb_kernels)) (SINGA's choice) unless W_initializer is given; b starts at
    zero. activation "RELU" applies a ReLU to the output.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 group=1, bias=True, pad_mode="NOTSET", activation="NOTSET", **kwargs):
        super().__init__()
        W_initializer = _conv_kwargs(kwargs, "Conv2d")
        self.in_channels = None
        if args:
            # SINGA's older positional form: (in_channels, out_channels, kernel[, stride,
            # padding]).
            if len(args) > 3:
                raise TypeError("Conv2d: too many positional arguments")
            self.in_channels = int(nb_kernels)
            nb_kernels, kernel_size = kernel_size, args[0]
            if len(args) > 1:
                stride = args[1]
            if len(args) > 2:
                padding = args[2]
        if not isinstance(nb_kernels, numbers.Integral) or nb_kernels <= 0:
            raise ValueError(f"Conv2d: nb_kernels must be a positive int, got {nb_kernels!r}")
        self.nb_kernels = int(nb_kernels)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = _pair(stride, "stride", "Conv2d")
        self.dilation = _pair(dilation, "dilation", "Conv2d")
        self.padding = _pads(padding, "Conv2d")
        self.pad_mode = _check_pad_mode(pad_mode, "Conv2d")
        if not isinstance(group, numbers.Integral) or group <= 0 or self.nb_kernels % group:
            raise ValueError(f"Conv2d: group must be a positive divisor of nb_kernels "
                             f"({self.nb_kernels}), got {group!r}")
        self.group = int(group)
        self.bias = bool(bias)
        act = str(activation).upper()
        if act not in ("NOTSET", "RELU"):
            raise ValueError(f"Conv2d: activation must be 'NOTSET' or 'RELU', got {activation!r}")
        self.activation = act
        self.W_initializer = W_initializer

    def _check(self, x):
        check_input(self, x, 4, dtype=self.W if "W" in self._param_names else "float")
        c = x.shape[1]
        if self.in_channels is not None and c != self.in_channels:
            raise ValueError(f"Conv2d: built for {self.in_channels} input channels, got input "
                             f"of shape {tuple(x.shape)}")
        if c % self.group:
            raise ValueError(f"Conv2d: group {self.group} does not divide the {c} channels of "
                             f"input shape {tuple(x.shape)}")
        return c

    def initialize(self, x):
        c = self._check(x)
        self.in_channels = c
        kh, kw = self.kernel_size
        shape = (self.nb_kernels, c // self.group, kh, kw)
        std = math.sqrt(2.0 / (c * kh * kw + self.nb_kernels))
        self.W = new_param(shape, x, self.W_initializer or (lambda t: t.gaussian(0.0, std)))
        if self.bias:
            self.b = new_param((self.nb_kernels,), x, value=0.0)

    def _padding_for(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            return _same_pads(x.shape[2:], self.kernel_size, self.stride, self.dilation,
                              self.pad_mode)
        if self.pad_mode == "VALID":
            return (0, 0, 0, 0)
        return self.padding

    def forward(self, x):
        if not isinstance(x, Tensor):
            self._check(x)
        # the op autograd.conv2d would build; the input is checked (for the
        # layer's own wording) only when the op or the core rejects it
        op = _Conv2d._prepared(handle=None, strides=list(self.stride),
                               pads=list(self._padding_for(x)), dilations=list(self.dilation),
                               group=self.group)
        try:
            y = (op(x, self.W, self.b) if self.bias else op(x, self.W))[0]
        except (ValueError, TypeError) as e:
            err = e
        else:
            return autograd.relu(y) if self.activation == "RELU" else y
        self._check(x)
        raise err


class SeparableConv2d(Layer):
    """A depthwise convolution (one kernel per input channel) followed by a
    1x1 pointwise convolution to nb_kernels channels (as in Xception).

    Sub-layers ``depthwise_conv`` and ``point_conv`` (SINGA's names) are made
    on the first call. ``SeparableConv2d(in_channels, nb_kernels,
    kernel_size[, stride, padding])`` is SINGA's positional form.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, bias=False,
                 pad_mode="NOTSET"):
        super().__init__()
        self.in_channels = None
        if args:
            if len(args) > 3:
                raise TypeError("SeparableConv2d: too many positional arguments")
            self.in_channels = int(nb_kernels)
            nb_kernels, kernel_size = kernel_size, args[0]
            if len(args) > 1:
                stride = args[1]
            if len(args) > 2:
                padding = args[2]
        # Validate the arguments now rather than at the first call.
        Conv2d(nb_kernels, kernel_size, stride=stride, padding=padding, pad_mode=pad_mode)
        self.nb_kernels = int(nb_kernels)
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.bias = bool(bias)
        self.pad_mode = pad_mode

    def initialize(self, x):
        check_input(self, x, 4, dtype="float")
        c = x.shape[1]
        if self.in_channels is not None and c != self.in_channels:
            raise ValueError(f"SeparableConv2d: built for {self.in_channels} input channels, "
                             f"got input of shape {tuple(x.shape)}")
        self.in_channels = c
        self.depthwise_conv = Conv2d(c, self.kernel_size, stride=self.stride,
                                     padding=self.padding, group=c, bias=self.bias,
                                     pad_mode=self.pad_mode)
        self.point_conv = Conv2d(self.nb_kernels, 1, bias=self.bias)

    def forward(self, x):
        return self.point_conv(self.depthwise_conv(x))


class Pooling2d(Layer):
    """Max (is_max) or average pooling over (N, C, H, W) input. stride
    defaults to kernel_size. Average pooling divides by the window cells
    inside the input (padding not counted)."""

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET",
                 ceil_mode=False):
        super().__init__()
        where = type(self).__name__
        self.kernel_size = _pair(kernel_size, "kernel_size", where)
        self.stride = self.kernel_size if stride is None else _pair(stride, "stride", where)
        self.padding = _pads(padding, where)
        if max(self.padding[0], self.padding[2]) > self.kernel_size[0] // 2 or \
                max(self.padding[1], self.padding[3]) > self.kernel_size[1] // 2:
            raise ValueError(f"{where}: padding {self.padding} exceeds half the kernel "
                             f"{self.kernel_size}")
        self.pad_mode = _check_pad_mode(pad_mode, where)
        self.is_max = bool(is_max)
        self.ceil_mode = bool(ceil_mode)

    _ranks = 4      # the input ranks forward takes

    def initialize(self, x):
        # no parameters to create; SINGA's signature, and the input checked
        # once before the first forward
        check_input(self, x, self._ranks)

    def _padding_for(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            return _same_pads(x.shape[2:], self.kernel_size, self.stride, (1, 1), self.pad_mode)
        if self.pad_mode == "VALID":
            return (0, 0, 0, 0)
        return self.padding

    def forward(self, x):
        check_input(self, x, 4)
        pads = self._padding_for(x)
        kh, kw = self.kernel_size
        if x.shape[2] + pads[0] + pads[2] < kh or x.shape[3] + pads[1] + pads[3] < kw:
            raise ValueError(f"{type(self).__name__}: kernel {self.kernel_size} does not fit "
                             f"input of shape {tuple(x.shape)} with padding {pads}")
        # the op autograd.max_pool2d / avg_pool2d would build, from arguments
        # checked here (SAME pads, like the constructor's, are at most half
        # the kernel)
        op = _Pooling2d._prepared(kernel_shape=list(self.kernel_size), strides=list(self.stride),
                                  pads=list(pads), is_max=self.is_max, dilations=[1, 1],
                                  ceil_mode=self.ceil_mode, count_include_pad=False)
        return op(x)[0]


class MaxPool2d(Pooling2d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET", ceil_mode=False):
        super().__init__(kernel_size, stride, padding, True, pad_mode, ceil_mode)


class AvgPool2d(Pooling2d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET", ceil_mode=False):
        super().__init__(kernel_size, stride, padding, False, pad_mode, ceil_mode)


class Pooling1d(Pooling2d):
    """Pooling over (N, C, L) input, run as 2-D pooling of height 1; SINGA's
    (N, C, 1, L) input works too and keeps its four dimensions."""

    _ranks = (3, 4)

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET",
                 ceil_mode=False):
        where = type(self).__name__
        k = _pair(kernel_size, "kernel_size", where)[0]
        s = k if stride is None else _pair(stride, "stride", where)[0]
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            padding = (padding, padding)
        p = tuple(padding)
        if len(p) != 2:
            raise ValueError(f"{where}: padding must be an int or a pair (left, right), "
                             f"got {padding!r}")
        super().__init__((1, k), (1, s), (0, 0, p[0], p[1]), is_max, pad_mode, ceil_mode)

    def forward(self, x):
        check_input(self, x, self._ranks)
        if x.ndim() == 4:
            if x.shape[2] != 1:
                raise ValueError(f"{type(self).__name__}: a 4-D input must have height 1, got "
                                 f"shape {tuple(x.shape)}")
            return super().forward(x)
        n, c, length = x.shape
        y = super().forward(autograd.reshape(x, (n, c, 1, length)))
        return autograd.reshape(y, (n, c, y.shape[3]))


class MaxPool1d(Pooling1d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET", ceil_mode=False):
        super().__init__(kernel_size, stride, padding, True, pad_mode, ceil_mode)


class AvgPool1d(Pooling1d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET", ceil_mode=False):
        super().__init__(kernel_size, stride, padding, False, pad_mode, ceil_mode)
