"""Recurrent layers composed from autograd ops (so they run, and
differentiate, wherever those ops do).

Both take the sequence either as a list of (batch, input) Tensors, one per
time step (SINGA's form), or as one Tensor of shape (seq, batch, input)
((batch, seq, input) with batch_first). They return the outputs in the
same form as the input, plus the final state.
"""

import math
import numbers

from singa import autograd
from singa.layers.base import Layer, check_input, new_param
from singa.tensor import Tensor

__all__ = ["RNN", "LSTM"]


class _Recurrent(Layer):
    _gates = 1   # blocks of hidden_size columns in Wx, Wh and b

    def __init__(self, hidden_size, *args, bias=True, batch_first=False):
        super().__init__()
        name = type(self).__name__
        if len(args) > 1:
            raise TypeError(f"{name}: expected (hidden_size) or (input_size, hidden_size)")
        self.input_size = None
        if args:
            self.input_size = hidden_size
            hidden_size = args[0]
        for v, what in ((hidden_size, "hidden_size"), (self.input_size, "input_size")):
            if v is not None and (not isinstance(v, numbers.Integral) or v <= 0):
                raise ValueError(f"{name}: {what} must be a positive int, got {v!r}")
        self.hidden_size = int(hidden_size)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)

    def _steps(self, xs):
        """(list of (batch, input) step tensors, as_tensor flag)."""
        name = type(self).__name__
        dtype = self.Wx if "Wx" in self._param_names else "float"
        if isinstance(xs, Tensor):
            check_input(self, xs, dtype=dtype)
            if xs.ndim() != 3:
                raise ValueError(f"{name}: expected a 3-D sequence tensor, got shape "
                                 f"{tuple(xs.shape)}")
            if self.batch_first:
                xs = autograd.transpose(xs, (1, 0, 2))
            t, b, f = xs.shape
            if t == 0:
                raise ValueError(f"{name}: empty sequence of shape {tuple(xs.shape)}")
            return [autograd.reshape(s, (b, f)) for s in _split_steps(xs, t)], True
        if not isinstance(xs, (list, tuple)) or not xs:
            raise TypeError(f"{name}: expected a Tensor or a non-empty list of Tensors, got "
                            f"{type(xs).__name__}")
        for i, x in enumerate(xs):
            check_input(self, x, 2, f"step {i}", dtype)
            if tuple(x.shape) != tuple(xs[0].shape):
                raise ValueError(f"{name}: step {i} has shape {tuple(x.shape)}, step 0 has "
                                 f"{tuple(xs[0].shape)}")
        return list(xs), False

    def initialize(self, xs, *state):
        steps, _ = self._steps(xs)
        x0 = steps[0]
        f = x0.shape[1]
        if self.input_size is not None and f != self.input_size:
            raise ValueError(f"{type(self).__name__}: built for input_size {self.input_size}, "
                             f"got steps of shape {tuple(x0.shape)}")
        self.input_size = f
        h, g = self.hidden_size, self._gates * self.hidden_size
        # U(-1/sqrt(H), 1/sqrt(H)), as cuDNN and PyTorch initialise RNNs.
        k = 1.0 / math.sqrt(h)
        init = (lambda t: t.uniform(-k, k))
        self.Wx = new_param((f, g), x0, init)
        self.Wh = new_param((h, g), x0, init)
        if self.bias:
            self.b = new_param((g,), x0, init)

    def _input_proj(self, steps):
        """x_t Wx + b for every step, as one matrix product."""
        b, f = steps[0].shape
        if f != self.input_size:
            raise ValueError(f"{type(self).__name__}: built for input_size {self.input_size}, "
                             f"got steps of shape {tuple(steps[0].shape)}")
        xs = steps[0] if len(steps) == 1 else autograd.cat(steps, 0)
        z = autograd.matmul(xs, self.Wx)
        if self.bias:
            z = autograd.add_bias(z, self.b, axis=0)
        if len(steps) == 1:
            return [z]
        return list(autograd.split(z, 0, [b] * len(steps)))

    def _zeros(self, like):
        t = Tensor((like.shape[0], self.hidden_size), like.device, like.dtype,
                   requires_grad=False)
        return t

    def _check_state(self, s, like, what):
        want = (like.shape[0], self.hidden_size)
        check_input(self, s, 2, what)
        if tuple(s.shape) != want:
            raise ValueError(f"{type(self).__name__}: {what} must have shape {want}, got "
                             f"{tuple(s.shape)}")
        return s

    def _pack(self, hs, as_tensor):
        if not as_tensor:
            return hs
        b = hs[0].shape[0]
        seq = autograd.reshape(autograd.cat(hs, 0), (len(hs), b, self.hidden_size))
        return autograd.transpose(seq, (1, 0, 2)) if self.batch_first else seq


def _split_steps(xs, t):
    return [xs] if t == 1 else list(autograd.split(xs, 0, [1] * t))


class RNN(_Recurrent):
    """Elman RNN: h_t = act(x_t Wx + h_{t-1} Wh + b), act tanh or relu.

    ``forward(xs, h0=None)`` returns (outputs, h_last); h0 defaults to
    zeros.
    """

    def __init__(self, hidden_size, *args, nonlinearity="tanh", bias=True, batch_first=False):
        super().__init__(hidden_size, *args, bias=bias, batch_first=batch_first)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity

    def forward(self, xs, h0=None):
        steps, as_tensor = self._steps(xs)
        act = autograd.tanh if self.nonlinearity == "tanh" else autograd.relu
        h = self._zeros(steps[0]) if h0 is None else self._check_state(h0, steps[0], "h0")
        hs = []
        for z in self._input_proj(steps):
            h = act(autograd.add(z, autograd.matmul(h, self.Wh)))
            hs.append(h)
        return self._pack(hs, as_tensor), h


class LSTM(_Recurrent):
    """Long short-term memory (Hochreiter & Schmidhuber), gates in PyTorch's
    order (input, forget, cell, output)::

        i, f, g, o = split(x_t Wx + h_{t-1} Wh + b)
        c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)
        h_t = sigmoid(o) tanh(c_t)

    ``forward(xs, (h0, c0)=None)`` returns (outputs, (h_last, c_last)).
    """

    _gates = 4

    def forward(self, xs, state=None):
        steps, as_tensor = self._steps(xs)
        if state is None:
            h, c = self._zeros(steps[0]), self._zeros(steps[0])
        else:
            if not isinstance(state, (list, tuple)) or len(state) != 2:
                raise TypeError("LSTM: state must be a pair (h0, c0)")
            h = self._check_state(state[0], steps[0], "h0")
            c = self._check_state(state[1], steps[0], "c0")
        n = self.hidden_size
        hs = []
        for z in self._input_proj(steps):
            z = autograd.add(z, autograd.matmul(h, self.Wh))
            i, f, g, o = autograd.split(z, 1, [n, n, n, n])
            c = autograd.add(autograd.mul(autograd.sigmoid(f), c),
                             autograd.mul(autograd.sigmoid(i), autograd.tanh(g)))
            h = autograd.mul(autograd.sigmoid(o), autograd.tanh(c))
            hs.append(h)
        return self._pack(hs, as_tensor), (h, c)
