"""Recurrent layers composed from autograd ops (so they run, and
differentiate, wherever those ops do), with SINGA's arguments, parameter
names and return forms.

Both take the sequence either as a list of (batch, input) Tensors, one per
time step (SINGA's form), or as one Tensor of shape (seq, batch, input)
((batch, seq, input) with batch_first). They return the outputs in the
same form as the input: ``RNN`` gives ``(outputs, h)`` and ``LSTM``
``(outputs, h, c)``. The initial state may be left out (zeros).

The input projection of every step is one matrix product over the whole
sequence; only the recurrent product runs step by step.
"""

import math
import numbers

from singa import autograd
from singa.layers.base import Layer, check_input, new_param
from singa.tensor import Tensor

__all__ = ["RNN_Base", "RNN", "LSTM"]


def _positive(v, what, where):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"{where}: {what} must be a positive int, got {v!r}")
    return int(v)


class RNN_Base(Layer):
    """Shared argument handling and sequence plumbing of RNN and LSTM.

    ``input_size`` may be left out (``LSTM(hidden_size=32)`` or
    ``LSTM(32)`` with one argument): it is then taken from the first input.
    Only one layer in one direction is built; dropout (applied between
    stacked layers) therefore has nothing to act on.
    """

    def __init__(self, input_size, hidden_size=None, num_layers=1, bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super().__init__()
        name = type(self).__name__
        if hidden_size is None:
            input_size, hidden_size = None, input_size
        self.input_size = None if input_size is None else _positive(input_size, "input_size",
                                                                      name)
        self.hidden_size = _positive(hidden_size, "hidden_size", name)
        if num_layers != 1:
            raise NotImplementedError(f"{name}: num_layers={num_layers!r}; only one layer is "
                                      "built (stack layers instead)")
        if bidirectional:
            raise NotImplementedError(f"{name}: bidirectional=True is not supported")
        if not 0 <= dropout < 1:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout!r}")
        self.num_layers = 1
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = dropout
        self.bidirectional = False

    def step_forward(self, x=None, h=None, c=None, Wx=None, Wh=None, Bx=None, Bh=None, b=None):
        raise NotImplementedError(f"{type(self).__name__}.step_forward")

    # ---- sequence plumbing ----

    def _dtype_like(self):
        return self._first_param() if self._param_names else "float"

    def _first_param(self):
        return getattr(self, self._param_names[0])

    def _steps(self, xs):
        """(list of (batch, input) step tensors, as_tensor flag)."""
        name = type(self).__name__
        dtype = self._dtype_like()
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
            steps = [xs] if t == 1 else list(autograd.split(xs, 0, [1] * t))
            return [autograd.reshape(s, (b, f)) for s in steps], True
        if not isinstance(xs, (list, tuple)) or not xs:
            raise TypeError(f"{name}: expected a Tensor or a non-empty list of Tensors, got "
                            f"{type(xs).__name__}")
        for i, x in enumerate(xs):
            check_input(self, x, 2, f"step {i}", dtype)
            if tuple(x.shape) != tuple(xs[0].shape):
                raise ValueError(f"{name}: step {i} has shape {tuple(x.shape)}, step 0 has "
                                 f"{tuple(xs[0].shape)}")
        return list(xs), False

    def _input_size_of(self, xs):
        steps, _ = self._steps(xs)
        f = steps[0].shape[1]
        if self.input_size is not None and f != self.input_size:
            raise ValueError(f"{type(self).__name__}: built for input_size {self.input_size}, "
                             f"got steps of shape {tuple(steps[0].shape)}")
        self.input_size = f
        return steps[0]

    def _check_steps(self, steps):
        if steps[0].shape[1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: built for input_size {self.input_size}, "
                             f"got steps of shape {tuple(steps[0].shape)}")

    def _state(self, s, like, what):
        if s is None:
            return Tensor((like.shape[0], self.hidden_size), like.device, like.dtype,
                          requires_grad=False)
        want = (like.shape[0], self.hidden_size)
        check_input(self, s, 2, what)
        if tuple(s.shape) != want:
            raise ValueError(f"{type(self).__name__}: {what} must have shape {want}, got "
                             f"{tuple(s.shape)}")
        return s

    def _input_proj(self, steps, Wx, b):
        """x_t Wx + b for every step, as one matrix product."""
        n = steps[0].shape[0]
        xs = steps[0] if len(steps) == 1 else autograd.cat(steps, 0)
        z = autograd.matmul(xs, Wx)
        if b is not None:
            z = autograd.add_bias(z, b, axis=0)
        if len(steps) == 1:
            return [z]
        return list(autograd.split(z, 0, [n] * len(steps)))

    def _pack(self, hs, as_tensor):
        if not as_tensor:
            return hs
        b = hs[0].shape[0]
        seq = autograd.reshape(autograd.cat(hs, 0), (len(hs), b, self.hidden_size))
        return autograd.transpose(seq, (1, 0, 2)) if self.batch_first else seq


def _uniform_init(hidden):
    # U(-1/sqrt(H), 1/sqrt(H)), as cuDNN and PyTorch initialise RNNs.
    k = 1.0 / math.sqrt(hidden)
    return lambda t: t.uniform(-k, k)


class RNN(RNN_Base):
    """Elman RNN: h_t = act(x_t Wx + h_{t-1} Wh + b), act tanh or relu.

    Parameters Wx (input_size, hidden_size), Wh (hidden_size, hidden_size)
    and b (hidden_size,). ``forward(xs, h0=None)`` returns (outputs, h_last).
    """

    def __init__(self, input_size, hidden_size=None, num_layers=1, nonlinearity="tanh",
                 bias=True, batch_first=False, dropout=0, bidirectional=False):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity

    def initialize(self, xs, h0=None):
        x0 = self._input_size_of(xs)
        h = self.hidden_size
        init = _uniform_init(h)
        self.Wx = new_param((self.input_size, h), x0, init)
        self.Wh = new_param((h, h), x0, init)
        if self.bias:
            self.b = new_param((h,), x0, init)

    def _act(self, z):
        return autograd.tanh(z) if self.nonlinearity == "tanh" else autograd.relu(z)

    def forward(self, xs, h0=None):
        steps, as_tensor = self._steps(xs)
        self._check_steps(steps)
        h = self._state(h0, steps[0], "h0")
        hs = []
        for z in self._input_proj(steps, self.Wx, self.b if self.bias else None):
            h = self._act(autograd.add(z, autograd.matmul(h, self.Wh)))
            hs.append(h)
        return self._pack(hs, as_tensor), h

    def step_forward(self, x, h, Wx, Wh, b):
        """One step: act(x Wx + h Wh + b)."""
        y = autograd.add(autograd.matmul(h, Wh), autograd.matmul(x, Wx))
        if b is not None:
            y = autograd.add_bias(y, b, axis=0)
        return self._act(y)


_GATES = ("i", "f", "o", "g")


class LSTM(RNN_Base):
    """Long short-term memory (Hochreiter & Schmidhuber), with SINGA's
    parameters: for each gate k of input (i), forget (f), output (o) and
    candidate (g), Wx_k (input_size, hidden_size), Wh_k (hidden_size,
    hidden_size), Bx_k and Bh_k (hidden_size,)::

        i, f, o = sigmoid(x_t Wx_k + Bx_k + h_{t-1} Wh_k + Bh_k), k = i, f, o
        g = tanh(x_t Wx_g + Bx_g + h_{t-1} Wh_g + Bh_g)
        c_t = f c_{t-1} + i g
        h_t = o tanh(c_t)

    ``forward(xs, (h0, c0)=None)`` returns (outputs, h_last, c_last). The
    four gates are computed together: the parameters are concatenated once
    per call.
    """

    def __init__(self, input_size, hidden_size=None, nonlinearity="tanh", num_layers=1,
                 bias=True, batch_first=False, dropout=0, bidirectional=False):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional)
        if nonlinearity != "tanh":
            raise ValueError(f"LSTM: nonlinearity must be 'tanh', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity

    def initialize(self, xs, h0_c0=None):
        x0 = self._input_size_of(xs)
        h = self.hidden_size
        init = _uniform_init(h)
        for k in _GATES:
            setattr(self, "Wx_" + k, new_param((self.input_size, h), x0, init))
        for k in _GATES:
            setattr(self, "Wh_" + k, new_param((h, h), x0, init))
        if self.bias:
            for prefix in ("Bx_", "Bh_"):
                for k in _GATES:
                    setattr(self, prefix + k, new_param((h,), x0, init))

    def _group(self, prefix):
        return [getattr(self, prefix + k) for k in _GATES]

    @property
    def Wx(self):
        return self._group("Wx_")

    @property
    def Wh(self):
        return self._group("Wh_")

    @property
    def Bx(self):
        return self._group("Bx_") if self.bias else []

    @property
    def Bh(self):
        return self._group("Bh_") if self.bias else []

    def _fused(self):
        wx = autograd.cat(self.Wx, 1)
        wh = autograd.cat(self.Wh, 1)
        b = None
        if self.bias:
            b = autograd.add(autograd.cat(self.Bx, 0), autograd.cat(self.Bh, 0))
        return wx, wh, b

    def _cell(self, z, c):
        n = self.hidden_size
        i, f, o, g = autograd.split(z, 1, [n, n, n, n])
        c = autograd.add(autograd.mul(autograd.sigmoid(f), c),
                         autograd.mul(autograd.sigmoid(i), autograd.tanh(g)))
        h = autograd.mul(autograd.sigmoid(o), autograd.tanh(c))
        return h, c

    def forward(self, xs, h0_c0=None):
        steps, as_tensor = self._steps(xs)
        self._check_steps(steps)
        if h0_c0 is None:
            h0 = c0 = None
        elif not isinstance(h0_c0, (list, tuple)) or len(h0_c0) != 2:
            raise TypeError("LSTM: the state must be a pair (h0, c0)")
        else:
            h0, c0 = h0_c0
        h = self._state(h0, steps[0], "h0")
        c = self._state(c0, steps[0], "c0")
        wx, wh, b = self._fused()
        hs = []
        for z in self._input_proj(steps, wx, b):
            h, c = self._cell(autograd.add(z, autograd.matmul(h, wh)), c)
            hs.append(h)
        return self._pack(hs, as_tensor), h, c

    def step_forward(self, x, h, c):
        """One step from x, h and c; returns (h, c)."""
        wx, wh, b = self._fused()
        z = autograd.add(autograd.matmul(x, wx), autograd.matmul(h, wh))
        if b is not None:
            z = autograd.add_bias(z, b, axis=0)
        return self._cell(z, c)
