"""Normalisation layers."""

import numbers

from singa import autograd
from singa.layers.base import Layer, check_input, new_param, new_state
from singa.ops.norm import _BatchNorm2d

__all__ = ["BatchNorm2d", "LayerNorm"]


class BatchNorm2d(Layer):
    """Batch normalisation per channel of (N, C, H, W) (or any (N, C, ...))
    input.

    Parameters scale (ones) and bias (zeros); states running_mean (zeros)
    and running_var (ones), updated while training as
    running = momentum * running + (1 - momentum) * batch statistic (SINGA's
    convention: momentum is the weight of the old value). num_features is
    optional and only checked; ``channels`` is SINGA's name for it.
    """

    @property
    def channels(self):
        return self.num_features

    def __init__(self, num_features=None, momentum=0.9, epsilon=1e-5):
        super().__init__()
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm2d: momentum must be in [0, 1], got {momentum}")
        if epsilon <= 0:
            raise ValueError(f"BatchNorm2d: epsilon must be > 0, got {epsilon}")
        self.num_features = num_features
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)

    def _channels(self, x):
        check_input(self, x, dtype=self.scale if "scale" in self._param_names else "float")
        if x.ndim() < 2:
            raise ValueError(f"BatchNorm2d: expected (N, C, ...) input, got shape {tuple(x.shape)}")
        return x.shape[1]

    def initialize(self, x):
        c = self._channels(x)
        if self.num_features is not None and c != self.num_features:
            raise ValueError(f"BatchNorm2d: built for {self.num_features} channels, got "
                             f"input of shape {tuple(x.shape)}")
        self.num_features = c
        self.scale = new_param((c,), x, value=1.0)
        self.bias = new_param((c,), x, value=0.0)
        self.running_mean = new_state((c,), x, 0.0)
        self.running_var = new_state((c,), x, 1.0)

    def forward(self, x):
        # the op autograd.batchnorm_2d would build; the input is checked (for
        # the layer's own wording) only when the op or the core rejects it
        op = _BatchNorm2d._prepared(handle=None, running_mean=self.running_mean,
                                    running_var=self.running_var, momentum=self.momentum,
                                    epsilon=self.epsilon)
        try:
            return op(x, self.scale, self.bias)[0]
        except (ValueError, TypeError) as e:
            err = e
        c = self._channels(x)
        if c != self.num_features:
            raise ValueError(f"BatchNorm2d: built for {self.num_features} channels, got "
                             f"input of shape {tuple(x.shape)}")
        raise err


class LayerNorm(Layer):
    """Layer normalisation over the axes from axis to the last (the last
    one by default), with a learned scale (ones) and bias (zeros) shaped
    like those axes, which are fixed by the first input."""

    def __init__(self, axis=-1, epsilon=1e-5):
        super().__init__()
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
            raise TypeError(f"LayerNorm: axis must be an int, got {axis!r}")
        if epsilon <= 0:
            raise ValueError(f"LayerNorm: epsilon must be > 0, got {epsilon}")
        self.axis = int(axis)
        self.epsilon = float(epsilon)

    def _norm_shape(self, x):
        check_input(self, x, dtype=self.scale if "scale" in self._param_names else "float")
        n = x.ndim()
        if not -n <= self.axis < n:
            raise ValueError(f"LayerNorm: axis {self.axis} is out of range for input shape "
                             f"{tuple(x.shape)}")
        return tuple(x.shape)[self.axis % n:]

    def initialize(self, x):
        shape = self._norm_shape(x)
        self.scale = new_param(shape, x, value=1.0)
        self.bias = new_param(shape, x, value=0.0)

    def forward(self, x):
        shape = self._norm_shape(x)
        if shape != tuple(self.scale.shape):
            raise ValueError(f"LayerNorm: built for trailing shape {tuple(self.scale.shape)}, "
                             f"got input of shape {tuple(x.shape)}")
        return autograd.layer_norm(x, self.scale, self.bias, self.axis, self.epsilon)
