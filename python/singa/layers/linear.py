"""Fully connected layers and embeddings."""

import math
import numbers

import numpy as np

from singa import autograd
from singa import initializer
from singa import tensor
from singa.layers.base import Layer, check_input, new_param
from singa.ops.linalg import _linear

__all__ = ["Linear", "Gemm", "Embedding"]


def _positive_int(value, what, where):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{where}: {what} must be a positive int, got {value!r}")
    return int(value)


class Linear(Layer):
    """y = x W + b, with W of shape (in_features, out_features).

    ``Linear(out_features)`` infers in_features from the first input;
    ``Linear(in_features, out_features[, bias])`` (SINGA's older form)
    checks it.
    W starts as N(0, 2 / (in + out)) (Glorot normal) unless W_initializer
    (a function filling a tensor in place, see singa.initializer) is given;
    b starts at zero. Inputs of more than two dimensions are multiplied on
    their last axis.
    """

    def __init__(self, out_features, *args, bias=True, **kwargs):
        super().__init__()
        if len(args) > 2:
            raise TypeError(f"Linear: expected (out_features) or (in_features, out_features"
                            f"[, bias]), got {1 + len(args)} positional arguments")
        unknown = [k for k in kwargs if k != "W_initializer"]
        if unknown:
            raise TypeError(f"Linear: unexpected keyword argument {unknown[0]!r}")
        W_initializer = kwargs.get("W_initializer")
        self.in_features = None
        if args:
            self.in_features = _positive_int(out_features, "in_features", "Linear")
            out_features = args[0]
            if len(args) > 1:
                bias = args[1]
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
        if self.bias and x.ndim() == 2:
            return _linear(x, self.W, self.b)
        y = autograd.matmul(x, self.W)
        if not self.bias:
            return y
        return autograd.add(y, self.b)


class Gemm(Layer):
    """ONNX Gemm as a layer: y = alpha A' W' + beta b, where A' is x or x^T
    (transA) and W' is W or W^T (transB).

    W has shape (nb_kernels, in_features) when transB (as ONNX exporters and
    PyTorch store it) and (in_features, nb_kernels) otherwise; b has shape
    bias_shape, by default (1, nb_kernels) (SINGA's).
    """

    def __init__(self, nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True,
                 bias=True, bias_shape=None):
        super().__init__()
        self.nb_kernels = self.nb_output = _positive_int(nb_kernels, "nb_kernels", "Gemm")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.transA = bool(transA)
        self.transB = bool(transB)
        self.bias = bool(bias)
        self.bias_shape = (tuple(bias_shape) if bias_shape is not None
                           else (1, self.nb_output))

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
    N(0, 1) ("gaussian", the default) or U(-1, 1) ("uniform"), as in SINGA;
    initializer may also name a function of singa.initializer or be a
    function filling a tensor.
    """

    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        super().__init__()
        self.input_dim = _positive_int(input_dim, "input_dim", "Embedding")
        self.output_dim = _positive_int(output_dim, "output_dim", "Embedding")
        self.initializer = initializer
        self._init_fn()

    def _init_fn(self):
        init = self.initializer
        if callable(init):
            return init
        if init == "gaussian":
            return lambda t: t.gaussian(0.0, 1.0)
        if init == "uniform":
            return lambda t: t.uniform(-1.0, 1.0)
        fn = getattr(initializer, str(init), None)
        if fn is None or not callable(fn) or str(init).startswith("_"):
            raise ValueError(f"Embedding: unknown initializer {init!r}")
        return fn

    def initialize(self, x):
        check_input(self, x)
        # The table is float32 even when the indices are int32.
        self.W = new_param((self.input_dim, self.output_dim), x, self._init_fn(),
                           dtype=tensor.float32)

    def from_pretrained(self, W, freeze=True):
        """Uses W (a Tensor or NumPy array of shape (input_dim, output_dim))
        as the table; freeze keeps the optimizer from updating it."""
        arr = W.numpy() if isinstance(W, tensor.Tensor) else np.asarray(W)
        want = (self.input_dim, self.output_dim)
        if arr.shape != want:
            raise ValueError(f"Embedding.from_pretrained: expected a table of shape {want}, "
                             f"got {arr.shape}")
        if arr.dtype.kind != "f":
            raise TypeError(f"Embedding.from_pretrained: expected float values, got {arr.dtype}")
        if not self._initialized:
            dev = W.device if isinstance(W, tensor.Tensor) else None
            like = tensor.Tensor((1,), dev)
            self.W = new_param(want, like, dtype=tensor.float32)
            self.__dict__["_initialized"] = True
            self._name_tensors()
        self.W.copy_from_numpy(arr.astype(np.float32))
        self.W.requires_grad = not freeze
        self.W.stores_grad = not freeze
        return self

    def forward(self, x):
        check_input(self, x)
        return autograd.embedding(x, self.W)
