"""Losses, in SINGA's form: the operator takes the target in its
constructor and the prediction as its one input (``SoftMaxCrossEntropy(t)(x)``),
the function both (``softmax_cross_entropy(x, t)``). Each returns a tensor
of shape (1,), summed over the elements and divided by the batch size N
(x.shape[0]), as SINGA does; the target gets no gradient. backward takes
dy as a CTensor or a number (1.0 by default, so ``loss.creator.backward()``
works as in SINGA).

Integer class labels are turned into one-hot rows with one broadcast
comparison against 0..C-1, so no loss loops in Python or leaves C++.
"""

import numbers

import numpy as np

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import constant
from singa.tensor import Tensor

__all__ = [
    "SoftMaxCrossEntropy", "softmax_cross_entropy", "CrossEntropy", "cross_entropy",
    "BinaryCrossEntropy", "binary_cross_entropy", "MeanSquareError", "mse_loss",
    "NLLLoss", "nll_loss", "RankingLoss", "ranking_loss",
]


def _targets(x, t, where):
    """t as a float (N, C) matrix matching the 2-D scores x: (N, C) targets
    are used as they are, (N,) or (N, 1) class labels become one-hot rows.
    Labels outside [0, C) raise IndexError (checked on host devices, where
    reading them costs no synchronisation, outside graph recording)."""
    if x.nDim() != 2:
        raise ValueError(f"{where}: expected (batch, classes) scores, got shape {x.shape()}")
    n, c = x.shape()
    if t.shape() == x.shape():
        return t if t.data_type() == x.data_type() else t.AsType(x.data_type())
    if t.shape() not in ((n,), (n, 1)):
        raise ValueError(f"{where}: targets of shape {t.shape()} match neither the scores "
                         f"of shape {x.shape()} nor ({n},) labels")
    labels = t if t.data_type() == _cw.kFloat32 else t.AsType(_cw.kFloat32)
    dev = x.device()
    host = dev.is_host()
    hot = _cw.Equal(labels.Reshape([n, 1]), _classes(c, dev, host))
    # Skipped while a graph is recorded: the labels of later steps are not
    # known then (an out-of-range label gives a zero row). Whole labels in
    # range give n ones; only otherwise are the extremes read.
    if host and n and not dev.graph_enabled() and _host_scalar(_cw.Sum(hot, [], False)) != n:
        lo = _host_scalar(_cw.Min(labels, [], False))
        hi = _host_scalar(_cw.Max(labels, [], False))
        if lo < 0 or hi >= c:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{where}: label {bad:g} is out of range for scores of shape "
                             f"{x.shape()} ({c} classes)")
    return hot if x.data_type() == _cw.kFloat32 else hot.AsType(x.data_type())


# (1, C) rows 0..C-1 on host devices, by (C, device id): made once, not at
# every step (ids of host devices are never reused).
_CLASSES = {}


def _classes(c, dev, host):
    key = (c, dev.id())
    row = _CLASSES.get(key) if host else None
    if row is None:
        from singa.device import unrecorded
        with unrecorded(dev):
            row = _cw.Tensor((1, c), dev, _cw.kFloat32)
            row.CopyDataFromHostPtr(np.arange(c, dtype=np.float32))
        if host:
            if len(_CLASSES) >= 64:
                _CLASSES.clear()
            _CLASSES[key] = row
    return row


def _host_scalar(ct):
    out = np.empty((), dtype=np.float32)
    ct.CopyDataToHostPtr(out)
    return float(out)


def _total(ct, scale):
    """sum(ct) * scale as a tensor of shape (1,)."""
    return _cw.MulScalar(_cw.Sum(ct, [], False), scale).Reshape([1])


def _scaled(g, dy, factor):
    """g * dy * factor; dy is a CTensor of shape (1,) or a number."""
    if isinstance(dy, numbers.Real):
        return _cw.MulScalar(g, float(dy) * factor)
    return _cw.Mul(g, _cw.MulScalar(dy, factor))


def _target(t, where):
    """The target as a CTensor: a Tensor's data, a CTensor, or a NumPy
    array copied to the host device."""
    if isinstance(t, Tensor):
        return t.data
    if isinstance(t, _cw.Tensor):
        return t
    if isinstance(t, (np.ndarray, list, tuple)):
        from singa.tensor import from_numpy
        return from_numpy(np.asarray(t)).data
    raise TypeError(f"{where}: the target must be a Tensor or a NumPy array, "
                    f"got {type(t).__name__}")


class _Loss(Operator):
    """A loss of one input x against the target t given to the constructor
    (kept as the CTensor ``self.t``)."""

    where = "loss"

    def __init__(self, t, name=None):
        super().__init__(name)
        self.t = _target(t, self.where)


class SoftMaxCrossEntropy(_Loss):
    """-sum(t log softmax(x)) / N for (N, C) logits x; t is one-hot (or any
    distribution) of shape (N, C), or (N,) integer labels (ONNX
    SoftmaxCrossEntropyLoss, reduction 'mean'). log-softmax is computed in
    C++ so large logits cannot overflow.

    Gradient: (softmax(x) sum_c t - t) / N, which is softmax(x) - t for
    one-hot rows.
    """

    where = "softmax_cross_entropy"

    def forward(self, x):
        labels = self.t
        if (x.nDim() == 2 and x.data_type() == _cw.kFloat32 and labels.nDim() in (1, 2)
                and labels.shape() in ((x.shape(0),), (x.shape(0), 1))
                and labels.data_type() in (_cw.kInt, _cw.kFloat32)):
            if x.device().is_host():
                # Class labels on the host: one C++ pass for the loss and
                # the softmax its gradient needs, no one-hot matrix (labels
                # are checked as _targets does, not while a graph records).
                loss, self._p = _cw.SoftmaxCrossEntropyLabels(x, labels)
                return loss
        t = _targets(x, labels, self.where)
        lsm = _cw.LogSoftMax(x, 1)
        self._lsm, self._t, self._n = lsm, t, x.shape(0)
        return _total(_cw.Mul(t, lsm), -1.0 / max(self._n, 1))

    def backward(self, dy=1.0):
        p = self.__dict__.get("_p")
        if p is not None:
            if isinstance(dy, numbers.Real):
                dy = constant(dy, p)
            return _cw.SoftmaxCrossEntropyLabelsGrad(p, self.t, dy)
        t = self._t
        rows = _cw.Sum(t, [1], True)
        g = _cw.Sub(_cw.Mul(_cw.Exp(self._lsm), rows), t)
        return _scaled(g, dy, 1.0 / max(self._n, 1))


def softmax_cross_entropy(x, t):
    return SoftMaxCrossEntropy(t)(x)[0]


class CrossEntropy(_Loss):
    """-sum(t log x) / N for (N, C) probabilities x and one-hot (or label)
    targets t, as SINGA's CrossEntropy. Gradient: -t / (x N)."""

    where = "cross_entropy"

    def forward(self, x):
        t = _targets(x, self.t, self.where)
        self._x, self._t, self._n = x, t, x.shape(0)
        return _total(_cw.Mul(t, _cw.Log(x)), -1.0 / max(self._n, 1))

    def backward(self, dy=1.0):
        return _scaled(_cw.Div(self._t, self._x), dy, -1.0 / max(self._n, 1))


def cross_entropy(x, t):
    return CrossEntropy(t)(x)[0]


# SINGA's guard against log(0) when a sigmoid saturates in float32.
_BCE_EPS = 1e-4


class BinaryCrossEntropy(_Loss):
    """-sum(t log(x + e) + (1 - t) log(1 + e - x)) / N for predictions x in
    [0, 1] and targets t of x's shape, with e = 1e-4 as in SINGA (so a
    saturated sigmoid gives no infinity). Gradient:
    ((1 - t) / (1 + e - x) - t / (x + e)) / N."""

    where = "binary_cross_entropy"

    def forward(self, x):
        t = self.t
        if x.shape() != t.shape():
            raise ValueError(f"binary_cross_entropy: predictions of shape {x.shape()} and "
                             f"targets of shape {t.shape()} differ")
        if t.data_type() != x.data_type():
            t = t.AsType(x.data_type())
        pos = _cw.AddScalar(x, _BCE_EPS)
        neg = _cw.ScalarSub(1.0 + _BCE_EPS, x)
        one_minus_t = _cw.ScalarSub(1.0, t)
        terms = _cw.Add(_cw.Mul(t, _cw.Log(pos)), _cw.Mul(one_minus_t, _cw.Log(neg)))
        self._t, self._1mt, self._pos, self._neg, self._n = t, one_minus_t, pos, neg, x.shape(0)
        return _total(terms, -1.0 / max(self._n, 1))

    def backward(self, dy=1.0):
        g = _cw.Sub(_cw.Div(self._1mt, self._neg), _cw.Div(self._t, self._pos))
        return _scaled(g, dy, 1.0 / max(self._n, 1))


def binary_cross_entropy(x, t):
    return BinaryCrossEntropy(t)(x)[0]


class MeanSquareError(_Loss):
    """sum((x - t)^2) / (2 N), SINGA's mean squared error (half the squared
    error per sample, as SINGA defines it; PyTorch's mse_loss is
    sum / size). Gradient: (x - t) / N."""

    where = "mse_loss"

    def forward(self, x):
        t = self.t
        if x.shape() != t.shape():
            raise ValueError(f"mse_loss: shapes {x.shape()} and {t.shape()} differ")
        self._err = err = _cw.Sub(x, t)
        self._n = x.shape(0) if x.nDim() else 1
        return _total(_cw.Square(err), 0.5 / max(self._n, 1))

    def backward(self, dy=1.0):
        return _scaled(self._err, dy, 1.0 / max(self._n, 1))


def mse_loss(x, t):
    return MeanSquareError(t)(x)[0]


class NLLLoss(_Loss):
    """-sum_i x[i, t_i] / N for (N, C) log-probabilities x and (N,) labels t
    (or one-hot rows) (ONNX NegativeLogLikelihoodLoss, reduction 'mean').
    Gradient: -t / N."""

    where = "nll_loss"

    def forward(self, x):
        t = _targets(x, self.t, self.where)
        self._t, self._n = t, x.shape(0)
        return _total(_cw.Mul(t, x), -1.0 / max(self._n, 1))

    def backward(self, dy=1.0):
        return _scaled(self._t, dy, -1.0 / max(self._n, 1))


def nll_loss(x, t):
    return NLLLoss(t)(x)[0]


class RankingLoss(Operator):
    """sum(max(0, M - pos + neg)) / N for scores of positive and negative
    pairs of the same shape (N, ...), SINGA's margin ranking loss. Both
    inputs get gradients: -+1 / N where the margin is violated."""

    def __init__(self, M=0.2, name=None):
        super().__init__(name)
        self.M = float(M)

    def forward(self, pos, neg):
        if pos.shape() != neg.shape():
            raise ValueError(f"ranking_loss: shapes {pos.shape()} and {neg.shape()} differ")
        margin = _cw.AddScalar(_cw.Sub(neg, pos), self.M)
        self._active = _cw.GreaterScalar(margin, 0.0)
        self._n = pos.shape(0) if pos.nDim() else 1
        return _total(_cw.ReLU(margin), 1.0 / max(self._n, 1))

    def backward(self, dy=1.0):
        g = _scaled(self._active, dy, 1.0 / max(self._n, 1))
        return _cw.Neg(g), g


def ranking_loss(pos, neg, M=0.2):
    return RankingLoss(M)(pos, neg)[0]
