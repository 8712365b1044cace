"""Activations with attributes, softmax and dropout.

Gradients are written with C++ element-wise ops on the saved input or
output, whichever the formula needs. The activations without attributes
(relu, sigmoid, tanh, gelu, softplus, softsign) are rows of singa.opdefs,
made into operators in ops/generated.py.
"""

from singa import singa_wrap as _cw
from singa import autograd
from singa.autograd import Operator
from singa.ops import unbroadcast, norm_axis

__all__ = [
    "LeakyReLU", "LeakyRelu", "leakyrelu", "Elu", "elu", "SeLU", "selu", "PRelu", "prelu",
    "HardSigmoid", "hardsigmoid", "SoftMax", "softmax", "LogSoftMax", "LogSoftmax",
    "log_softmax", "Dropout", "dropout",
]


class LeakyReLU(Operator):
    """x for x > 0, a x otherwise (ONNX LeakyRelu; attribute alpha, which
    holds SINGA's a)."""

    def __init__(self, a=0.01, name=None):
        super().__init__(name)
        self.alpha = float(a)

    @property
    def a(self):
        return self.alpha

    def forward(self, x):
        self._x = x
        return _cw.LeakyReLU(x, self.alpha)

    def backward(self, dy):
        # slope = 1 where x > 0, alpha elsewhere, as alpha + (1 - alpha) [x > 0]
        pos = _cw.GreaterScalar(self._x, 0.0)
        return _cw.Mul(dy, _cw.AddScalar(_cw.MulScalar(pos, 1.0 - self.alpha), self.alpha))


def leakyrelu(x, a=0.01):
    return LeakyReLU(a)(x)[0]


LeakyRelu = LeakyReLU  # SINGA's name


class Elu(Operator):
    """x for x > 0, alpha (e^x - 1) otherwise (ONNX Elu; attribute alpha).

    Below zero the gradient is alpha e^x = y + alpha.
    """

    def __init__(self, alpha=1.0, name=None):
        super().__init__(name)
        self.alpha = float(alpha)

    def forward(self, x):
        # exp of min(x, 0) so large positive inputs cannot overflow
        neg = _cw.MulScalar(_cw.AddScalar(_cw.Exp(_cw.MinimumScalar(x, 0.0)), -1.0), self.alpha)
        self._x = x
        self._y = y = _cw.Add(_cw.ReLU(x), neg)
        return y

    def backward(self, dy):
        pos = _cw.GreaterScalar(self._x, 0.0)
        return _cw.Mul(dy, _cw.Where(pos, pos, _cw.AddScalar(self._y, self.alpha)))


def elu(x, alpha=1.0):
    return Elu(alpha)(x)[0]


class SeLU(Operator):
    """gamma x for x > 0, gamma alpha (e^x - 1) otherwise (ONNX Selu)."""

    def __init__(self, alpha=1.67326, gamma=1.0507, name=None):
        super().__init__(name)
        self.alpha = float(alpha)
        self.gamma = float(gamma)

    def forward(self, x):
        ga = self.gamma * self.alpha
        neg = _cw.MulScalar(_cw.AddScalar(_cw.Exp(_cw.MinimumScalar(x, 0.0)), -1.0), ga)
        self._x = x
        self._y = y = _cw.Add(_cw.MulScalar(_cw.ReLU(x), self.gamma), neg)
        return y

    def backward(self, dy):
        # below zero: gamma alpha e^x = y + gamma alpha
        pos = _cw.GreaterScalar(self._x, 0.0)
        slope = _cw.Where(pos, _cw.MulScalar(pos, self.gamma),
                          _cw.AddScalar(self._y, self.gamma * self.alpha))
        return _cw.Mul(dy, slope)


def selu(x, alpha=1.67326, gamma=1.0507):
    return SeLU(alpha, gamma)(x)[0]


class PRelu(Operator):
    """x for x > 0, slope x otherwise; slope broadcasts to x (ONNX PRelu)."""

    def forward(self, x, slope):
        self._x, self._slope = x, slope
        neg = _cw.MinimumScalar(x, 0.0)
        return _cw.Add(_cw.ReLU(x), _cw.Mul(neg, slope))

    def backward(self, dy):
        x, slope = self._x, self._slope
        pos = _cw.GreaterScalar(x, 0.0)
        dx = _cw.Mul(dy, _cw.Where(pos, pos, slope))
        dslope = _cw.Mul(dy, _cw.MinimumScalar(x, 0.0))
        return unbroadcast(dx, x.shape()), unbroadcast(dslope, slope.shape())


def prelu(x, slope):
    return PRelu()(x, slope)[0]


class HardSigmoid(Operator):
    """max(0, min(1, alpha x + gamma)) (ONNX HardSigmoid, whose beta is
    SINGA's gamma)."""

    def __init__(self, alpha=0.2, gamma=0.5, name=None):
        super().__init__(name)
        self.alpha = float(alpha)
        self.gamma = float(gamma)

    def forward(self, x):
        self._y = y = _cw.Clip(_cw.AddScalar(_cw.MulScalar(x, self.alpha), self.gamma), 0.0,
                               1.0)
        return y

    def backward(self, dy):
        # slope alpha strictly inside (0, 1), zero where clipped
        y = self._y
        inside = _cw.Mul(_cw.GreaterScalar(y, 0.0), _cw.LessScalar(y, 1.0))
        return _cw.Mul(dy, _cw.MulScalar(inside, self.alpha))


def hardsigmoid(x, alpha=0.2, gamma=0.5):
    return HardSigmoid(alpha, gamma)(x)[0]


class SoftMax(Operator):
    """Softmax along axis, 1 by default as in SINGA (ONNX Softmax, opset 13:
    one axis).

    Gradient: y (dy - sum(dy y, axis)).
    """

    def __init__(self, axis=1, name=None):
        super().__init__(name)
        self.axis = axis

    def forward(self, x):
        self._axis = norm_axis(self.axis, x.nDim(), "softmax", x.shape())
        self._y = y = _cw.SoftMax(x, self._axis)
        return y

    def backward(self, dy):
        y = self._y
        s = _cw.Sum(_cw.Mul(dy, y), [self._axis], True)
        return _cw.Mul(y, _cw.Sub(dy, s))


def softmax(x, axis=1):
    return SoftMax(axis)(x)[0]


class LogSoftMax(Operator):
    """log(softmax(x)) along axis (ONNX LogSoftmax, opset 13).

    Gradient: dy - softmax(x) sum(dy, axis), with softmax(x) = e^y.
    """

    def __init__(self, axis=-1, name=None):
        super().__init__(name)
        self.axis = axis

    def forward(self, x):
        self._axis = norm_axis(self.axis, x.nDim(), "log_softmax", x.shape())
        self._y = y = _cw.LogSoftMax(x, self._axis)
        return y

    def backward(self, dy):
        s = _cw.Sum(dy, [self._axis], True)
        return _cw.Sub(dy, _cw.Mul(_cw.Exp(self._y), s))


def log_softmax(x, axis=-1):
    return LogSoftMax(axis)(x)[0]


LogSoftmax = LogSoftMax


class Dropout(Operator):
    """Zeroes each element with probability ratio and scales the rest by
    1 / (1 - ratio) while ``autograd.training`` is on; the identity at
    inference (ONNX Dropout, attribute ratio).

    seed is accepted as in SINGA but does not reseed anything: the mask is
    drawn from the device's generator (``device.SetRandSeed``), so
    successive calls get new masks.
    """

    def __init__(self, seed=0, ratio=0.5, name=None):
        super().__init__(name)
        ratio = float(ratio)
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"dropout: ratio must be in [0, 1), got {ratio}")
        self.seed = seed
        self.ratio = ratio

    def forward(self, x):
        if not autograd.training or self.ratio == 0.0:
            self._mask = None
            return x
        mask = _cw.Tensor(x.shape(), x.device(), x.data_type())
        mask.Bernoulli(1.0 - self.ratio)
        self._mask = mask = _cw.MulScalar(mask, 1.0 / (1.0 - self.ratio))
        return _cw.Mul(x, mask)

    def backward(self, dy):
        return dy if self._mask is None else _cw.Mul(dy, self._mask)


def dropout(x, seed=0, ratio=0.5):
    return Dropout(seed, ratio)(x)[0]
