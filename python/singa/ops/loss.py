"""Losses. Each returns a 0-d tensor, the mean over the batch (or over
the elements, where stated); targets get no gradient unless stated.

Integer class labels are turned into one-hot rows with one broadcast
comparison against 0..C-1, so no loss loops in Python or leaves C++.
"""

import numpy as np

from singa import singa_wrap as _cw
from singa.autograd import Operator

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
    # Skipped while a graph is recorded: the labels of later steps are not
    # known then (an out-of-range label gives a zero row).
    if x.device().is_host() and n and not x.device().graph_enabled():
        lo = _host_scalar(_cw.Min(labels, [], False))
        hi = _host_scalar(_cw.Max(labels, [], False))
        if lo < 0 or hi >= c:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{where}: label {bad:g} is out of range for scores of shape "
                             f"{x.shape()} ({c} classes)")
    classes = _cw.Tensor((1, c), x.device(), _cw.kFloat32)
    classes.CopyDataFromHostPtr(np.arange(c, dtype=np.float32))
    hot = _cw.Equal(labels.Reshape([n, 1]), classes)
    return hot if x.data_type() == _cw.kFloat32 else hot.AsType(x.data_type())


def _host_scalar(ct):
    out = np.empty((), dtype=np.float32)
    ct.CopyDataToHostPtr(out)
    return float(out)


def _total(ct):
    return _cw.Sum(ct, [], False)


class SoftMaxCrossEntropy(Operator):
    """-sum(t log softmax(x)) / N for (N, C) logits x; t is one-hot (or any
    distribution) of shape (N, C), or (N,) integer labels (ONNX
    SoftmaxCrossEntropyLoss, reduction 'mean'). log-softmax is computed in
    C++ so large logits cannot overflow.

    Gradient: (softmax(x) sum_c t - t) / N, which is softmax(x) - t for
    one-hot rows.
    """

    def forward(self, x, t):
        t = _targets(x, t, "softmax_cross_entropy")
        lsm = _cw.LogSoftMax(x, 1)
        self._lsm, self._t, self._n = lsm, t, x.shape(0)
        return _cw.MulScalar(_total(_cw.Mul(t, lsm)), -1.0 / max(self._n, 1))

    def backward(self, dy):
        t = self._t
        rows = _cw.Sum(t, [1], True)
        g = _cw.Sub(_cw.Mul(_cw.Exp(self._lsm), rows), t)
        return _cw.Mul(g, _cw.MulScalar(dy, 1.0 / max(self._n, 1))), None


def softmax_cross_entropy(x, t):
    return SoftMaxCrossEntropy()(x, t)


class CrossEntropy(Operator):
    """-sum(t log x) / N for (N, C) probabilities x and one-hot (or label)
    targets t, as SINGA's CrossEntropy. Gradient: -t / (x N)."""

    def forward(self, x, t):
        t = _targets(x, t, "cross_entropy")
        self._x, self._t, self._n = x, t, x.shape(0)
        return _cw.MulScalar(_total(_cw.Mul(t, _cw.Log(x))), -1.0 / max(self._n, 1))

    def backward(self, dy):
        g = _cw.Div(self._t, self._x)
        return _cw.Mul(g, _cw.MulScalar(dy, -1.0 / max(self._n, 1))), None


def cross_entropy(x, t):
    return CrossEntropy()(x, t)


class BinaryCrossEntropy(Operator):
    """-mean(t log x + (1 - t) log(1 - x)) over all elements, x in (0, 1)
    and t of x's shape. Gradient: (x - t) / (x (1 - x)) / size."""

    def forward(self, x, t):
        if x.shape() != t.shape():
            raise ValueError(f"binary_cross_entropy: predictions of shape {x.shape()} and "
                             f"targets of shape {t.shape()} differ")
        if t.data_type() != x.data_type():
            t = t.AsType(x.data_type())
        one_minus = _cw.ScalarSub(1.0, x)
        terms = _cw.Add(_cw.Mul(t, _cw.Log(x)), _cw.Mul(_cw.ScalarSub(1.0, t), _cw.Log(one_minus)))
        self._x, self._t, self._1mx = x, t, one_minus
        return _cw.MulScalar(_total(terms), -1.0 / max(x.Size(), 1))

    def backward(self, dy):
        x = self._x
        g = _cw.Div(_cw.Sub(x, self._t), _cw.Mul(x, self._1mx))
        return _cw.Mul(g, _cw.MulScalar(dy, 1.0 / max(x.Size(), 1))), None


def binary_cross_entropy(x, t):
    return BinaryCrossEntropy()(x, t)


class MeanSquareError(Operator):
    """mean((x - t)^2) over all elements (as PyTorch's mse_loss; SINGA
    divides the sum by 2N instead). Both x and t get gradients:
    +-2 (x - t) / size."""

    def forward(self, x, t):
        if x.shape() != t.shape():
            raise ValueError(f"mse_loss: shapes {x.shape()} and {t.shape()} differ")
        self._err = err = _cw.Sub(x, t)
        return _cw.MulScalar(_total(_cw.Square(err)), 1.0 / max(x.Size(), 1))

    def backward(self, dy):
        err = self._err
        dx = _cw.Mul(err, _cw.MulScalar(dy, 2.0 / max(err.Size(), 1)))
        return dx, _cw.Neg(dx)


def mse_loss(x, t):
    return MeanSquareError()(x, t)


class NLLLoss(Operator):
    """-mean_i x[i, t_i] for (N, C) log-probabilities x and (N,) labels t
    (or one-hot rows) (ONNX NegativeLogLikelihoodLoss, reduction 'mean').
    Gradient: -t / N."""

    def forward(self, x, t):
        t = _targets(x, t, "nll_loss")
        self._t, self._n = t, x.shape(0)
        return _cw.MulScalar(_total(_cw.Mul(t, x)), -1.0 / max(self._n, 1))

    def backward(self, dy):
        return _cw.Mul(self._t, _cw.MulScalar(dy, -1.0 / max(self._n, 1))), None


def nll_loss(x, t):
    return NLLLoss()(x, t)


class RankingLoss(Operator):
    """mean(max(0, M - pos + neg)) over all elements, SINGA's margin
    ranking loss for scores of positive and negative pairs (same shape).
    Both inputs get gradients: -+1 / size where the margin is violated."""

    def __init__(self, M=0.2, name=None):
        super().__init__(name)
        self.M = float(M)

    def forward(self, pos, neg):
        if pos.shape() != neg.shape():
            raise ValueError(f"ranking_loss: shapes {pos.shape()} and {neg.shape()} differ")
        margin = _cw.AddScalar(_cw.Sub(neg, pos), self.M)
        self._active = _cw.GreaterScalar(margin, 0.0)
        self._size = max(pos.Size(), 1)
        return _cw.MulScalar(_total(_cw.ReLU(margin)), 1.0 / self._size)

    def backward(self, dy):
        g = _cw.Mul(self._active, _cw.MulScalar(dy, 1.0 / self._size))
        return _cw.Neg(g), g


def ranking_loss(pos, neg, M=0.2):
    return RankingLoss(M)(pos, neg)
