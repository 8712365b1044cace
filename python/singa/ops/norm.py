"""Normalisation: batch norm over (N, C, ...) (C++ kernels) and layer
norm (composed from C++ reductions and element-wise ops, with statistics
kept as size-1 axes so they broadcast against the input).
"""

from singa import singa_wrap as _cw
from singa import autograd
from singa.autograd import Operator
from singa.ops import unbroadcast, norm_axis
from singa.ops.conv import _two_forms
from singa.tensor import Tensor, _wrap

__all__ = ["_BatchNorm2d", "batchnorm_2d", "LayerNorm", "layer_norm"]


class _BatchNorm2d(Operator):
    """Batch normalisation of x (N, C, ...) per channel (ONNX
    BatchNormalization; inputs x, scale, bias of shape (C,); the running
    statistics are the fields running_mean and running_var, Tensors of
    shape (C,) (ONNX inputs 3 and 4, written as initializers on export);
    attributes momentum, epsilon).

    While ``autograd.training`` is on, x is normalised with the batch mean
    and biased variance (as ONNX), and the running statistics are updated
    in place: running = momentum * running + (1 - momentum) * batch.
    Otherwise the running statistics are used. The C++ kernels of
    src/core/nn do the arithmetic. backward returns (dx, dscale, dbias), as
    SINGA's: the training gradient, through the batch statistics; it needs
    a forward run in training mode.

    SINGA's form ``_BatchNorm2d(handle, running_mean, running_var)(x,
    scale, bias)`` takes momentum and epsilon from a
    ``singa_wrap.BatchNormHandle``; singa's gives them as keywords.
    """

    def __init__(self, handle=None, running_mean=None, running_var=None, name=None,
                 momentum=0.9, epsilon=1e-5):
        super().__init__(name)
        self.handle = handle
        if handle is not None:
            if not isinstance(handle, _cw.BatchNormHandle):
                raise TypeError(f"batchnorm_2d: handle must be a singa_wrap.BatchNormHandle, "
                                f"got {type(handle).__name__}")
            momentum, epsilon = handle.factor, handle.epsilon
        self.running_mean = _statistic(running_mean, "running_mean")
        self.running_var = _statistic(running_var, "running_var")
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)

    def forward(self, x, scale, bias):
        if not autograd.training and self.running_mean is not None and \
                self.running_var is not None:
            # The core checks every argument itself; the checks below run
            # only to word an error it reports.
            try:
                return _cw.BatchNormForwardInference(x, scale, bias, self.running_mean.data,
                                                     self.running_var.data, self.epsilon)
            except (ValueError, TypeError):
                pass
        s = x.shape()
        if len(s) < 2:
            raise ValueError(f"batchnorm_2d: expected (N, C, ...) input, got shape {s}")
        if self.running_mean is None or self.running_var is None:
            raise ValueError("batchnorm_2d: the operator needs running_mean and running_var")
        running_mean, running_var = self.running_mean.data, self.running_var.data
        c = s[1]
        for t, n in ((scale, "scale"), (bias, "bias"), (running_mean, "running_mean"),
                     (running_var, "running_var")):
            if t.shape() != (c,):
                raise ValueError(f"batchnorm_2d: {n} of shape {t.shape()} does not match "
                                 f"the {c} channels of input shape {s}")
        if not autograd.training:
            return _cw.BatchNormForwardInference(x, scale, bias, running_mean, running_var,
                                                 self.epsilon)
        y, mean, var = _cw.BatchNormForwardTraining(x, scale, bias, self.epsilon)
        _blend(running_mean, mean, self.momentum)
        _blend(running_var, var, self.momentum)
        self._x, self._scale, self._mean, self._var = x, scale, mean, var
        return y

    def backward(self, dy):
        return _cw.BatchNormBackward(self._x, dy, self._scale, self._mean, self._var,
                                     self.epsilon)


def _statistic(t, name):
    """A running statistic as a Tensor (SINGA's scripts may hand its
    CTensor, t.data)."""
    if t is None or isinstance(t, Tensor):
        return t
    if isinstance(t, _cw.Tensor):
        return _wrap(t)
    raise TypeError(f"batchnorm_2d: {name} must be a Tensor, got {type(t).__name__}")


def _blend(running, batch, momentum):
    """running = momentum * running + (1 - momentum) * batch, in place."""
    _cw.MulScalarInto(running, momentum, running)
    _cw.Axpy(1.0 - momentum, batch.Reshape([batch.Size()]), running)


def _singa_batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    """batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    batch norm with the BatchNormHandle's momentum and epsilon (SINGA's
    form)."""
    return _BatchNorm2d(handle, running_mean, running_var)(x, scale, bias)[0]


@_two_forms(_singa_batchnorm_2d, _cw.BatchNormHandle)
def batchnorm_2d(x, scale, bias, running_mean, running_var, momentum=0.9, epsilon=1e-5):
    """batchnorm_2d(x, scale, bias, running_mean, running_var, momentum=0.9,
    epsilon=1e-5)."""
    return _BatchNorm2d(None, running_mean, running_var, momentum=momentum,
                        epsilon=epsilon)(x, scale, bias)[0]


class LayerNorm(Operator):
    """Normalises x over the axes from axis to the last (ONNX
    LayerNormalization; attributes axis, epsilon), then applies scale and
    bias, which broadcast against those axes.

    Gradient, with xhat the normalised input and means over the normalised
    axes: dx = (g - mean(g) - xhat mean(g xhat)) / sqrt(var + eps), g = dy
    scale.
    """

    def __init__(self, axis=-1, epsilon=1e-5, name=None):
        super().__init__(name)
        self.axis = int(axis)
        self.epsilon = float(epsilon)

    def forward(self, x, scale, bias):
        s = x.shape()
        a = norm_axis(self.axis, len(s), "layer_norm", s)
        self._axes = axes = list(range(a, len(s)))
        mean = _cw.Mean(x, axes, True)
        xc = _cw.Sub(x, mean)
        var = _cw.Mean(_cw.Square(xc), axes, True)
        self._rstd = rstd = _cw.Reciprocal(_cw.Sqrt(_cw.AddScalar(var, self.epsilon)))
        self._xhat = xhat = _cw.Mul(xc, rstd)
        self._scale = scale
        self._shapes = (scale.shape(), bias.shape())
        return _cw.Add(_cw.Mul(xhat, scale), bias)

    def backward(self, dy):
        axes, xhat = self._axes, self._xhat
        g = _cw.Mul(dy, self._scale)
        mg = _cw.Mean(g, axes, True)
        mgx = _cw.Mean(_cw.Mul(g, xhat), axes, True)
        dx = _cw.Mul(_cw.Sub(_cw.Sub(g, mg), _cw.Mul(xhat, mgx)), self._rstd)
        ss, bs = self._shapes
        return dx, unbroadcast(_cw.Mul(dy, xhat), ss), unbroadcast(dy, bs)


def layer_norm(x, scale, bias, axis=-1, epsilon=1e-5):
    return LayerNorm(axis, epsilon)(x, scale, bias)[0]
