"""SINGA's CudnnRNN: a multi-layer, optionally bidirectional RNN, LSTM or
GRU whose weights are one flat parameter ``W``, as cuDNN keeps them.

Here it is composed from autograd ops, so it runs (and differentiates) on
every device this build has; a SINGA script written for a GPU runs
unchanged on the CPU. The formulas and gate orders are cuDNN's:

* tanh / relu ("vanilla" is tanh): h = act(x Wx + bx + h Wh + bh)
* lstm, gates i, f, g, o: c = f c + i g, h = o tanh(c)
* gru, gates r, z, n: n = tanh(x Wx_n + bx_n + r (h Wh_n + bh_n)),
  h = (1 - z) n + z h

W is laid out layer by layer, direction by direction (forward, then
backward): Wx (input, gates * hidden), Wh (hidden, gates * hidden), then,
with bias, bx and bh (gates * hidden each). This layout is singa's own
(cuDNN's packing is private to cuDNN), so W values do not carry over from
SINGA's GPU checkpoints.
"""

import math
import numbers

import numpy as np

from singa import autograd
from singa import tensor as _tensor
from singa.layers.base import Layer, check_input, new_param

__all__ = ["CudnnRNN"]

_MODES = {"lstm": 4, "gru": 3, "tanh": 1, "vanilla": 1, "relu": 1}


class CudnnRNN(Layer):
    """See the module doc. ``forward(x, hx=None, cx=None, seq_lengths=None)``
    takes x of shape (batch, seq, input) with batch_first (the default),
    else (seq, batch, input), and hx / cx of shape (num_layers * directions,
    batch, hidden). It returns the top layer's outputs, (batch, seq,
    hidden * directions) (seq first without batch_first), or with
    return_sequences=False the output at the last step, (batch, hidden *
    directions). With use_mask, seq_lengths (an int Tensor of shape
    (batch,)) gives each sequence's length: later steps give zeros and do
    not change the state, and the last step is each sequence's own.
    """

    def __init__(self, hidden_size, activation="tanh", num_layers=1, bias=True,
                 batch_first=True, dropout=0, bidirectional=False, rnn_mode="lstm",
                 use_mask=False, return_sequences=True):
        super().__init__()
        if not isinstance(hidden_size, numbers.Integral) or hidden_size <= 0:
            raise ValueError(f"CudnnRNN: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, numbers.Integral) or num_layers <= 0:
            raise ValueError(f"CudnnRNN: num_layers must be a positive int, got {num_layers!r}")
        if not 0 <= dropout < 1:
            raise ValueError(f"CudnnRNN: dropout must be in [0, 1), got {dropout!r}")
        if rnn_mode not in _MODES:
            raise ValueError(f"CudnnRNN: rnn_mode must be one of {sorted(_MODES)}, "
                             f"got {rnn_mode!r}")
        self.hidden_size = int(hidden_size)
        self.activation = activation
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.rnn_mode = rnn_mode
        self.use_mask = bool(use_mask)
        self.return_sequences = bool(return_sequences)
        self.input_size = None

    @property
    def _dirs(self):
        return 2 if self.bidirectional else 1

    def _blocks(self):
        """(layer, direction, name, shape) of each piece of W, in order."""
        g = _MODES[self.rnn_mode] * self.hidden_size
        out = []
        for layer in range(self.num_layers):
            fan = self.input_size if layer == 0 else self.hidden_size * self._dirs
            for d in range(self._dirs):
                out += [(layer, d, "Wx", (fan, g)), (layer, d, "Wh", (self.hidden_size, g))]
                if self.bias:
                    out += [(layer, d, "bx", (g,)), (layer, d, "bh", (g,))]
        return out

    def _seq_first(self, x):
        check_input(self, x, 3, dtype=self.W if self._param_names else "float")
        return autograd.transpose(x, (1, 0, 2)) if self.batch_first else x

    def initialize(self, x, hx=None, cx=None, seq_lengths=None):
        x = self._seq_first(x)
        self.input_size = x.shape[2]
        size = sum(math.prod(shape) for *_, shape in self._blocks())
        k = 1.0 / math.sqrt(self.hidden_size)
        self.W = new_param((size,), x, lambda t: t.uniform(-k, k))

    def _weights(self):
        """{(layer, direction, name): autograd view of W}."""
        blocks = self._blocks()
        sizes = [math.prod(shape) for *_, shape in blocks]
        parts = autograd.split(self.W, 0, sizes) if len(sizes) > 1 else [self.W]
        return {(layer, d, name): autograd.reshape(p, shape)
                for (layer, d, name, shape), p in zip(blocks, parts)}

    def _state(self, s, batch, like, what):
        want = (self.num_layers * self._dirs, batch, self.hidden_size)
        if s is None:
            return None
        check_input(self, s, 3, what)
        if tuple(s.shape) != want:
            raise ValueError(f"CudnnRNN: {what} must have shape {want}, got {tuple(s.shape)}")
        n = want[0]
        parts = autograd.split(s, 0, [1] * n) if n > 1 else [s]
        return [autograd.reshape(p, want[1:]) for p in parts]

    def _masks(self, seq_lengths, seq, batch, like):
        if not self.use_mask:
            return None
        if not isinstance(seq_lengths, _tensor.Tensor):
            raise TypeError("CudnnRNN: use_mask needs seq_lengths, an int Tensor of shape "
                            f"(batch,), got {type(seq_lengths).__name__}")
        lengths = seq_lengths.numpy().astype(np.int64).reshape(-1)
        if lengths.shape != (batch,) or lengths.min() < 1 or lengths.max() > seq:
            raise ValueError(f"CudnnRNN: seq_lengths must hold {batch} lengths in [1, {seq}], "
                             f"got {lengths.tolist()}")
        valid = (np.arange(seq)[:, None] < lengths[None, :]).astype(np.float32)

        def col(v):
            return _tensor.from_numpy(v.reshape(batch, 1), like.device)
        return [(col(valid[t]), col(1.0 - valid[t])) for t in range(seq)], lengths

    def _cell(self, x_proj, h, c, wh, bh):
        n = self.hidden_size
        r = autograd.matmul(h, wh)
        if bh is not None:
            r = autograd.add_bias(r, bh, axis=0)
        mode = self.rnn_mode
        if mode == "lstm":
            i, f, g, o = autograd.split(autograd.add(x_proj, r), 1, [n] * 4)
            c = autograd.add(autograd.mul(autograd.sigmoid(f), c),
                             autograd.mul(autograd.sigmoid(i), autograd.tanh(g)))
            return autograd.mul(autograd.sigmoid(o), autograd.tanh(c)), c
        if mode == "gru":
            xr, xz, xn = autograd.split(x_proj, 1, [n] * 3)
            hr, hz, hn = autograd.split(r, 1, [n] * 3)
            rg = autograd.sigmoid(autograd.add(xr, hr))
            z = autograd.sigmoid(autograd.add(xz, hz))
            cand = autograd.tanh(autograd.add(xn, autograd.mul(rg, hn)))
            # (1 - z) n + z h = n + z (h - n)
            return autograd.add(cand, autograd.mul(z, autograd.sub(h, cand))), c
        act = autograd.relu if mode == "relu" else autograd.tanh
        return act(autograd.add(x_proj, r)), c

    def _direction(self, steps, h, c, w, masks, reverse):
        seq = len(steps)
        batch = steps[0].shape[0]
        xs = autograd.cat(steps, 0) if seq > 1 else steps[0]
        proj = autograd.matmul(xs, w["Wx"])
        if "bx" in w:
            proj = autograd.add_bias(proj, w["bx"], axis=0)
        projs = list(autograd.split(proj, 0, [batch] * seq)) if seq > 1 else [proj]
        outs = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            h_new, c_new = self._cell(projs[t], h, c, w["Wh"], w.get("bh"))
            if masks is None:
                h, c = h_new, c_new
                outs[t] = h
            else:
                m, keep = masks[t]
                outs[t] = autograd.mul(h_new, m)
                h = autograd.add(outs[t], autograd.mul(h, keep))
                if self.rnn_mode == "lstm":
                    c = autograd.add(autograd.mul(c_new, m), autograd.mul(c, keep))
        return outs, h, c

    def forward(self, x, hx=None, cx=None, seq_lengths=None):
        x = self._seq_first(x)
        seq, batch, f = x.shape
        if f != self.input_size:
            raise ValueError(f"CudnnRNN: built for input_size {self.input_size}, got input of "
                             f"shape {tuple(x.shape)} (seq first)")
        zeros = _tensor.Tensor((batch, self.hidden_size), x.device, x.dtype,
                               requires_grad=False)
        hs = self._state(hx, batch, x, "hx")
        cs = self._state(cx, batch, x, "cx")
        mask_info = self._masks(seq_lengths, seq, batch, x)
        masks = None if mask_info is None else mask_info[0]
        w = self._weights()
        steps = list(autograd.split(x, 0, [1] * seq)) if seq > 1 else [x]
        steps = [autograd.reshape(s, (batch, f)) for s in steps]
        for layer in range(self.num_layers):
            per_dir = []
            for d in range(self._dirs):
                i = layer * self._dirs + d
                h0 = zeros if hs is None else hs[i]
                c0 = zeros if cs is None else cs[i]
                wd = {k[2]: v for k, v in w.items() if k[:2] == (layer, d)}
                outs, _, _ = self._direction(steps, h0, c0, wd, masks, reverse=(d == 1))
                per_dir.append(outs)
            steps = per_dir[0] if self._dirs == 1 else \
                [autograd.cat([a, b], 1) for a, b in zip(*per_dir)]
            if self.dropout and autograd.training and layer < self.num_layers - 1:
                steps = [autograd.dropout(s, self.dropout) for s in steps]
        if not self.return_sequences:
            if mask_info is None:
                return steps[-1]
            lengths = mask_info[1]
            last = None
            for t, s in enumerate(steps):
                pick = _tensor.from_numpy((lengths == t + 1).astype(np.float32)
                                          .reshape(batch, 1), x.device)
                term = autograd.mul(s, pick)
                last = term if last is None else autograd.add(last, term)
            return last
        y = autograd.reshape(autograd.cat(steps, 0), (seq, batch, steps[0].shape[1]))
        return autograd.transpose(y, (1, 0, 2)) if self.batch_first else y
