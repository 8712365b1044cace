"""Losses against NumPy formulas (SINGA's: summed and divided by the batch
size, shape (1,)); gradients against central differences."""

import numpy as np
import pytest

from singa import autograd as ag
from gradcheck import LAYOUTS, check_grad, make_tensor

rng = np.random.default_rng(11)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def np_log_softmax(x):
    z = x - x.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


LABELS = np.array([2, 0, 3], np.int32)
ONE_HOT = np.eye(4, dtype=np.float32)[LABELS]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("target", ["labels", "float_labels", "one_hot", "soft"])
def test_softmax_cross_entropy(target, layout, dev):
    x = randn(3, 4) * 2
    t = {"labels": LABELS, "float_labels": LABELS.astype(np.float32), "one_hot": ONE_HOT,
         "soft": np.full((3, 4), 0.3, np.float32)}[target]
    y = check_grad(ag.softmax_cross_entropy, [x, t], layout, wrt=[0], dev=dev)
    dense = ONE_HOT if t.ndim == 1 else t
    np.testing.assert_allclose(y, [-(dense * np_log_softmax(x)).sum() / 3], rtol=1e-5)
    assert y.shape == (1,)


def test_softmax_cross_entropy_bad_labels():
    x = make_tensor(randn(3, 4))
    with pytest.raises(IndexError, match=r"\(3, 4\)"):
        ag.softmax_cross_entropy(x, make_tensor(np.array([0, 4, 1], np.int32)))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2,\)|\(2,\).*\(3, 4\)"):
        ag.softmax_cross_entropy(x, make_tensor(np.array([0, 1], np.int32)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cross_entropy(layout):
    p = rng.uniform(0.1, 1, (3, 4)).astype(np.float32)
    y = check_grad(ag.cross_entropy, [p, ONE_HOT], layout, wrt=[0])
    np.testing.assert_allclose(y, [-(ONE_HOT * np.log(p)).sum() / 3], rtol=1e-5)
    y = check_grad(ag.cross_entropy, [p, LABELS], layout, wrt=[0])
    np.testing.assert_allclose(y, [-(ONE_HOT * np.log(p)).sum() / 3], rtol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_cross_entropy(layout):
    p = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    t = (rng.random((3, 4)) < 0.5).astype(np.float32)
    y = check_grad(ag.binary_cross_entropy, [p, t], layout, wrt=[0])
    # SINGA's: 1e-4 keeps the logs finite, the sum is divided by the batch size
    ref = -(t * np.log(p + 1e-4) + (1 - t) * np.log(1.0001 - p)).sum() / 3
    np.testing.assert_allclose(y, [ref], rtol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_mse_loss(layout):
    x, t = randn(3, 4), randn(3, 4)
    y = check_grad(ag.mse_loss, [x, t], layout, wrt=[0])
    # SINGA's: half the squared error per sample
    np.testing.assert_allclose(y, [((x - t) ** 2).sum() / (2 * 3)], rtol=1e-5)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        ag.mse_loss(make_tensor(x), make_tensor(t.T.copy()))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nll_loss(layout):
    lp = np_log_softmax(randn(3, 4))
    y = check_grad(ag.nll_loss, [lp, LABELS], layout, wrt=[0])
    np.testing.assert_allclose(y, [-lp[np.arange(3), LABELS].mean()], rtol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ranking_loss(layout):
    # margins M - pos + neg kept at least 0.05 away from the kink at 0
    pos = randn(4, 3)
    gap = rng.uniform(0.05, 1, (4, 3)) * np.where(rng.random((4, 3)) < 0.5, -1, 1)
    neg = (pos - 0.2 + gap).astype(np.float32)
    y = check_grad(lambda p, n: ag.ranking_loss(p, n, 0.2), [pos, neg], layout)
    np.testing.assert_allclose(y, [np.maximum(0, 0.2 - pos + neg).sum() / 4], rtol=1e-5)


# ---- the fused host path for class labels (SoftmaxCrossEntropyLabels) ----

def _np_sce(x, labels):
    """float64 loss and softmax of a labelled batch (rows without a class,
    a fraction, count as zero one-hot rows)."""
    x = x.astype(np.float64)
    z = x - x.max(1, keepdims=True)
    lsm = z - np.log(np.exp(z).sum(1, keepdims=True))
    rows = np.arange(len(x))
    lab = labels.reshape(-1).astype(np.float64)
    whole = lab == np.floor(lab)
    loss = -lsm[rows[whole], lab[whole].astype(int)].sum() / len(x)
    p = np.exp(lsm) * whole[:, None]
    return loss, p


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 3), (37, 10), (128, 10), (9, 130)])
@pytest.mark.parametrize("label_dtype", [np.int32, np.float32])
@pytest.mark.parametrize("column", [False, True])
def test_fused_softmax_cross_entropy_op(shape, label_dtype, column):
    from singa import singa_wrap as cw
    from singa import tensor
    n, c = shape
    x = randn(n, c) * 3
    x[0, 0] += 60.0   # a large logit: must not overflow
    labels = rng.integers(0, c, n).astype(label_dtype)
    if column:
        labels = labels.reshape(n, 1)
    lt = tensor.from_numpy(labels).data
    loss, p = cw.SoftmaxCrossEntropyLabels(tensor.from_numpy(x).data, lt)
    ref_loss, ref_p = _np_sce(x, labels)
    np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(loss)), [ref_loss], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(p)), ref_p, rtol=1e-5, atol=1e-7)
    dy = tensor.from_numpy(np.array([2.5], np.float32)).data
    g = tensor.to_numpy(tensor._wrap(cw.SoftmaxCrossEntropyLabelsGrad(p, lt, dy)))
    onehot = np.eye(c)[labels.reshape(-1).astype(int)]
    np.testing.assert_allclose(g, 2.5 * (ref_p - onehot) / n, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("label_dtype", [np.int32, np.float32])
def test_fused_softmax_cross_entropy_autograd(label_dtype):
    """The autograd op on host labels (the fused path) against float64,
    forward and gradient, with dy as a tensor and as a number."""
    from singa import tensor
    x = randn(13, 6) * 2
    labels = rng.integers(0, 6, 13).astype(label_dtype)
    xt = make_tensor(x)
    xt.requires_grad = True
    xt.stores_grad = True
    with ag.train_mode(True):
        y = ag.softmax_cross_entropy(xt, make_tensor(labels))
        (_, g), = list(ag.backward(y))
        ref_loss, ref_p = _np_sce(x, labels)
        np.testing.assert_allclose(tensor.to_numpy(y), [ref_loss], rtol=1e-5)
        grad = (ref_p - np.eye(6)[labels.astype(int)]) / 13
        np.testing.assert_allclose(tensor.to_numpy(g), grad, rtol=1e-5, atol=1e-7)
        g3 = y.creator.backward(3.0)
        np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(g3)), 3 * grad, rtol=1e-5,
                                   atol=1e-7)


def test_fused_softmax_cross_entropy_odd_labels():
    from singa import singa_wrap as cw
    from singa import tensor
    x = randn(3, 4)
    # a fractional label names no class: its row adds nothing, as in the
    # one-hot formulation
    frac = np.array([1.0, 2.5, 3.0], np.float32)
    loss, p = cw.SoftmaxCrossEntropyLabels(tensor.from_numpy(x).data,
                                           tensor.from_numpy(frac).data)
    ref_loss, ref_p = _np_sce(x, frac)
    np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(loss)), [ref_loss], rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(p)), ref_p, rtol=1e-5, atol=1e-7)
    y = ag.softmax_cross_entropy(make_tensor(x), make_tensor(frac))
    np.testing.assert_allclose(tensor.to_numpy(y), [ref_loss], rtol=1e-5)
    for bad in (np.array([0, -1, 2], np.int32), np.array([0, 1, 4], np.float32)):
        with pytest.raises(IndexError, match=r"\(3, 4\)"):
            cw.SoftmaxCrossEntropyLabels(tensor.from_numpy(x).data, tensor.from_numpy(bad).data)
    with pytest.raises(ValueError, match=r"\(2,\).*\(3, 4\)"):
        cw.SoftmaxCrossEntropyLabels(tensor.from_numpy(x).data,
                                     tensor.from_numpy(np.zeros(2, np.int32)).data)
    with pytest.raises(TypeError, match="int32"):
        cw.SoftmaxCrossEntropyLabels(tensor.from_numpy(x.astype(np.int32)).data,
                                     tensor.from_numpy(np.zeros(3, np.int32)).data)


def test_fused_softmax_cross_entropy_recorded_labels():
    """While a graph records, labels are not read: replayed with a label out
    of range, that row adds nothing and gets no gradient, as a zero one-hot
    row would; the other rows match float64."""
    from singa import device, tensor
    from singa import singa_wrap as cw
    dev = device.create_separate_cpu_device()
    x = randn(4, 5)
    xt = tensor.from_numpy(x, dev)
    lt = tensor.from_numpy(np.array([1, 4, 0, 2], np.int32), dev)
    dy = tensor.from_numpy(np.array([1.0], np.float32), dev)
    try:
        dev.EnableGraph(True)
        loss, p = cw.SoftmaxCrossEntropyLabels(xt.data, lt.data)
        g = cw.SoftmaxCrossEntropyLabelsGrad(p, lt.data, dy.data)
        dev.EnableGraph(False)
        labels = np.array([1, 7, 0, 2], np.int32)
        lt.copy_from_numpy(labels)
        dev.RunGraph()
        keep = labels < 5
        ref_loss, ref_p = _np_sce(x[keep], labels[keep])
        np.testing.assert_allclose(tensor.to_numpy(tensor._wrap(loss)), [ref_loss * 3 / 4],
                                   rtol=1e-5)
        grad = tensor.to_numpy(tensor._wrap(g))
        np.testing.assert_allclose(grad[1], 0.0)
        onehot = np.eye(5)[labels[keep]]
        np.testing.assert_allclose(grad[keep], (ref_p - onehot) / 4, rtol=1e-5, atol=1e-7)
    finally:
        dev.EnableGraph(False)
        dev.ResetGraph()
