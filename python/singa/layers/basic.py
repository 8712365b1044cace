"""Parameter-free layers: activations, dropout, shape changes, joins and
losses. Each wraps the autograd function of the same name."""

import numbers

from singa import autograd
from singa.layers.base import Layer, check_input

__all__ = ["ReLU", "Sigmoid", "Tanh", "SoftMax", "Dropout", "Flatten", "Cat", "Reshape",
           "Add", "SoftMaxCrossEntropy", "CrossEntropy", "BinaryCrossEntropy",
           "MeanSquareError"]


class _Unary(Layer):
    _fn = None   # the name of the autograd function

    def forward(self, x):
        check_input(self, x)
        return getattr(autograd, self._fn)(x)


class ReLU(_Unary):
    """max(x, 0)."""
    _fn = "relu"


class Sigmoid(_Unary):
    """1 / (1 + e^-x)."""
    _fn = "sigmoid"


class Tanh(_Unary):
    _fn = "tanh"


class SoftMax(Layer):
    """Softmax along axis (1 by default, as SINGA's softmax)."""

    def __init__(self, axis=1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        check_input(self, x)
        return autograd.softmax(x, self.axis)


class Dropout(Layer):
    """Zeroes elements with probability ratio while training (scaling the
    rest by 1 / (1 - ratio)); the identity at evaluation."""

    def __init__(self, ratio=0.5):
        super().__init__()
        ratio = float(ratio)
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"Dropout: ratio must be in [0, 1), got {ratio}")
        self.ratio = ratio

    def forward(self, x):
        check_input(self, x)
        return autograd.dropout(x, ratio=self.ratio)


class Flatten(Layer):
    """Reshapes to 2-D: the axes before axis become rows, the rest columns."""

    def __init__(self, axis=1):
        super().__init__()
        if not isinstance(axis, numbers.Integral):
            raise TypeError(f"Flatten: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def forward(self, x):
        check_input(self, x)
        return autograd.flatten(x, self.axis)


class Cat(Layer):
    """Concatenates a list of tensors along axis."""

    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def forward(self, xs):
        if not isinstance(xs, (list, tuple)) or not xs:
            raise TypeError(f"Cat: expected a non-empty list of Tensors, got {type(xs).__name__}")
        for i, x in enumerate(xs):
            check_input(self, x, what=f"input {i}")
        return autograd.cat(list(xs), self.axis)


class Reshape(Layer):
    """Reshapes to shape (given here, or per call as forward(x, shape));
    one dimension may be -1."""

    def __init__(self, shape=None):
        super().__init__()
        self.shape = None if shape is None else tuple(shape)

    def forward(self, x, shape=None):
        check_input(self, x)
        shape = self.shape if shape is None else tuple(shape)
        if shape is None:
            raise ValueError("Reshape: no target shape given (pass it to Reshape() or forward)")
        return autograd.reshape(x, shape)


class Add(Layer):
    """a + b with broadcasting."""

    def forward(self, a, b):
        check_input(self, a, what="first input")
        check_input(self, b, what="second input")
        return autograd.add(a, b)


class _Loss(Layer):
    _fn = None   # the name of the autograd function

    def forward(self, x, t):
        check_input(self, x, what="prediction")
        check_input(self, t, what="target")
        return getattr(autograd, self._fn)(x, t)


class SoftMaxCrossEntropy(_Loss):
    """Mean cross-entropy of softmax(x) against t (class indices or one-hot)."""
    _fn = "softmax_cross_entropy"


class CrossEntropy(_Loss):
    """Mean cross-entropy of probabilities y against t."""
    _fn = "cross_entropy"


class BinaryCrossEntropy(_Loss):
    """Mean binary cross-entropy of probabilities y against 0/1 targets."""
    _fn = "binary_cross_entropy"


class MeanSquareError(_Loss):
    """Mean squared error between x and t (see autograd.mse_loss)."""
    _fn = "mse_loss"
