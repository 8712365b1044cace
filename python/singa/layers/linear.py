"""Fully connected layers and embeddings."""

import math
import numbers

from singa import autograd
from singa import initializer
from singa import tensor
from singa.layers.base import Layer, check_input, new_param

__all__ = ["Linear", "Gemm", "Embedding"]


def _positive_int(value, what, where):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{where}: {what} must be a positive int, got {value!r}")
    return int(value)


class Linear(Layer):
    """y = x W + b, with W of shape (in_features, out_features).

    ``Linear(out_features)`` infers in_features from the first input;
    ``Linear(in_features, out_features)`` (SINGA's older form) checks it.
    W starts as N(0, 2 / (in + out)) (Glorot normal) unless W_initializer
    (a function filling a tensor in place, see singa.initializer) is given;
    b starts at zero. Inputs of more than two dimensions are multiplied on
    their last axis.
    """

    def __init__(self, out_features, *args, bias=True, W_initializer=None):
        super().__init__()
        if len(args) > 1:
            raise TypeError(f"Linear: expected (out_features) or (in_features, out_features), "
                            f"got {1 + len(args)} positional arguments")
        self.in_features = None
        if args:
            self.in_features = _positive_int(out_features, "in_features", "Linear")
            out_features = args[0]
        self.out_features = _positive_int(out_features, "out_features", "Linear")
        self.bias = bool(bias)
        self.W_initializer = W_initializer

    def initialize(self, x):
        check_input(self, x, dtype="float")
        if x.ndim() < 1:
            raise ValueError(f"Linear: input must have at least 1 dimension, got shape {x.shape}")
        fan_in = x.shape[-1]
        if self.in_features is not None and fan_in != self.in_features:
            raise ValueError(f"Linear: built for {self.in_features} input features, got "
                             f"input of shape {tuple(x.shape)}")
        self.in_features = fan_in
        std = math.sqrt(2.0 / (fan_in + self.out_features))
        init = self.W_initializer or (lambda t: t.gaussian(0.0, std))
        self.W = new_param((fan_in, self.out_features), x, init)
        if self.bias:
            self.b = new_param((self.out_features,), x, value=0.0)

    def forward(self, x):
        check_input(self, x, dtype=self.W)
        if x.ndim() < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear: expected input with last dimension {self.in_features}, "
                             f"got shape {tuple(x.shape)}")
        y = autograd.matmul(x, self.W)
        if not self.bias:
            return y
        if y.ndim() == 2:
            return autograd.add_bias(y, self.b, axis=0)
        return autograd.add(y, self.b)


class Gemm(Layer):
    """ONNX Gemm as a layer: y = alpha A' W' + beta b, where A' is x or x^T
    (transA) and W' is W or W^T (transB).

    W has shape (nb_output, in_features) when transB (as ONNX exporters and
    PyTorch store it) and (in_features, nb_output) otherwise; b has shape
    bias_shape, by default (nb_output,).
    """

    def __init__(self, nb_output, alpha=1.0, beta=1.0, transA=False, transB=True,
                 bias=True, bias_shape=None):
        super().__init__()
        self.nb_output = _positive_int(nb_output, "nb_output", "Gemm")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.transA = bool(transA)
        self.transB = bool(transB)
        self.bias = bool(bias)
        self.bias_shape = tuple(bias_shape) if bias_shape is not None else (self.nb_output,)

    def initialize(self, x):
        check_input(self, x, 2, dtype="float")
        fan_in = x.shape[0] if self.transA else x.shape[1]
        shape = (self.nb_output, fan_in) if self.transB else (fan_in, self.nb_output)
        std = math.sqrt(2.0 / (fan_in + self.nb_output))
        self.W = new_param(shape, x, lambda t: t.gaussian(0.0, std))
        if self.bias:
            self.b = new_param(self.bias_shape, x, value=0.0)

    def forward(self, x):
        check_input(self, x, 2, dtype=self.W)
        fan_in = x.shape[0] if self.transA else x.shape[1]
        w_in = self.W.shape[1] if self.transB else self.W.shape[0]
        if fan_in != w_in:
            raise ValueError(f"Gemm: built for {w_in} input features (transA={self.transA}), "
                             f"got input of shape {tuple(x.shape)}")
        if self.bias:
            return autograd.gemm(x, self.W, self.b, self.alpha, self.beta,
                                 int(self.transA), int(self.transB))
        return autograd.gemm(x, self.W, None, self.alpha, self.beta,
                             int(self.transA), int(self.transB))


class Embedding(Layer):
    """Looks up rows of W (input_dim, output_dim) for integer indices.

    The input holds indices (int32, or floats with integral values) of any
    shape; the output has one more axis of length output_dim. W starts as
    N(0, 1) unless initializer (a name in singa.initializer, or a function)
    says otherwise.
    """

    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        super().__init__()
        self.input_dim = _positive_int(input_dim, "input_dim", "Embedding")
        self.output_dim = _positive_int(output_dim, "output_dim", "Embedding")
        self.initializer = initializer

    def _init_fn(self):
        init = self.initializer
        if callable(init):
            return init
        fn = getattr(initializer, str(init), None)
        if fn is None or not callable(fn):
            raise ValueError(f"Embedding: unknown initializer {init!r}")
        return fn

    def initialize(self, x):
        check_input(self, x)
        # The table is float32 even when the indices are int32.
        self.W = new_param((self.input_dim, self.output_dim), x, self._init_fn(),
                           dtype=tensor.float32)

    def forward(self, x):
        check_input(self, x)
        return autograd.embedding(x, self.W)
