"""singa.autograd as SINGA's scripts use it (SINGA_API.md, SINGA_COMPAT.md):
always-recorded graphs, tuple returns from Operator calls, SINGA's loss
operators, argument orders and defaults, backward / gradients and the
helper functions. Values are checked against NumPy."""

import gc
import weakref

import numpy as np
import pytest

from singa import autograd, layer, singa_wrap, tensor
from gradcheck import check_grad, make_tensor

rng = np.random.default_rng(8)


def T(a, **kw):
    t = tensor.from_numpy(np.asarray(a, np.float32) if np.asarray(a).dtype.kind == "f"
                          else np.asarray(a))
    for k, v in kw.items():
        setattr(t, k, v)
    return t


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ---- recording and call forms ----

def test_operator_calls_return_tuples_and_functions_return_values():
    x = T(randn(2, 3))
    out = autograd.ReLU()(x)
    assert isinstance(out, tuple) and len(out) == 1
    np.testing.assert_array_equal(out[0].numpy(), np.maximum(x.numpy(), 0))
    y = autograd.relu(x)
    assert isinstance(y, tensor.Tensor)
    a, b = autograd.Split(1, [1, 2])(x)
    np.testing.assert_array_equal(b.numpy(), x.numpy()[:, 1:])
    assert isinstance(autograd.split(x, 1, [1, 2]), tuple)
    (s,) = autograd.Add()(x, x)
    np.testing.assert_array_equal(s.numpy(), 2 * x.numpy())


def test_graph_is_recorded_whatever_training_says():
    w = T(randn(3, 2), stores_grad=True)
    x = T(randn(4, 3))
    assert autograd.training is False
    y = autograd.relu(autograd.matmul(x, w))
    assert isinstance(y.creator, autograd.ReLU)
    mm = y.creator.src[0][0]
    assert isinstance(mm, autograd.Matmul)
    assert [s[0].tensor for s in mm.src] == [x, w]
    # nothing was kept for backward, and backward says which op lacks it
    assert y.creator.saved is False
    with pytest.raises(ValueError, match=r"(Matmul|ReLU|ReduceSum)_\d+ ran with autograd.training off"):
        list(autograd.backward(autograd.reduce_sum(y)))


def test_training_keeps_what_backward_needs_and_second_backward_works():
    w = T(randn(3, 2), stores_grad=True)
    x = T(randn(4, 3))
    autograd.training = True
    y = autograd.matmul(x, w)
    loss = autograd.reduce_mean(autograd.mul(y, y))
    g1 = autograd.gradients(loss)
    g2 = autograd.gradients(loss)           # SINGA allows a second backward
    want = x.numpy().T @ (2 * (x.numpy() @ w.numpy()) / 8)
    for g in (g1, g2):
        assert list(g) == [id(w)]           # keyed by id(param), as SINGA
        np.testing.assert_allclose(g[id(w)].numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(g[w].numpy(), want, rtol=1e-5)
    op = weakref.ref(y.creator)
    del y
    autograd.relu(w)                        # the next recording op releases the graph
    gc.collect()
    assert op() is None
    with pytest.raises(ValueError, match="released"):
        autograd.gradients(loss)


def test_backward_yields_param_grad_pairs():
    w = T(randn(2, 2), stores_grad=True)
    b = T(randn(2), stores_grad=True)
    autograd.training = True
    loss = autograd.reduce_sum(autograd.add_bias(autograd.matmul(T(np.eye(2)), w), b))
    pairs = dict((id(p), g.numpy()) for p, g in autograd.backward(loss))
    np.testing.assert_allclose(pairs[id(w)], np.ones((2, 2)))
    np.testing.assert_allclose(pairs[id(b)], [2, 2])


def test_operator_names_and_params():
    x = T(randn(2))
    op = autograd.ReLU()
    op(x)
    assert op.output_name(0) == f"{op.name}:0"
    assert op.grad_name(1) == f"{op.name}:1_g"
    assert op.get_params() == {}
    d = op.src[0][0]
    assert isinstance(d, autograd.Dummy)
    assert d.output_name(0) == d.name and d.grad_name(0) == f"{d.name}_g"
    assert autograd.Operation is autograd.Operator
    named = autograd.Operator(name="mine")
    assert named.name == "mine"


def test_infer_dependency_counts_uses():
    x = T(randn(3))
    h = autograd.exp(x)
    y = autograd.add(autograd.mul(h, h), h)
    ops, outs = autograd.infer_dependency(y.creator)
    assert ops[h.creator] == 3
    assert outs[h.creator.output_name(0)] == 3
    assert ops[h.creator.src[0][0]] == 1


def test_helpers():
    x = T(randn(2, 3))
    np.testing.assert_array_equal(autograd.ctensor2numpy(x.data), x.numpy())
    with pytest.raises(TypeError, match="CTensor"):
        autograd.ctensor2numpy(x)
    assert autograd.axis_helper((4, 2, 3), (2, 1)) == (0, 2)
    g = T(randn(4, 2, 3))
    back = autograd.back_broadcast((4, 2, 3), (2, 1), g.data)
    np.testing.assert_allclose(autograd.ctensor2numpy(back),
                               g.numpy().sum((0, 2)).reshape(2, 1), rtol=1e-6)
    a, b, c = T(randn(2)), T(randn(2)), T(randn(2))
    np.testing.assert_allclose(autograd.add_all(a, b, c).numpy(),
                               a.numpy() + b.numpy() + c.numpy(), rtol=1e-6)


def test_layer_aliases():
    for name in ("Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                 "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN", "LSTM"):
        assert getattr(autograd, name) is getattr(layer, name)
    assert "Linear" in dir(autograd)


# ---- losses: target in the constructor, shape (1,) ----

def test_softmax_cross_entropy_singa_form():
    x, labels = randn(4, 3), np.array([0, 2, 1, 2], np.int32)
    onehot = np.eye(3, dtype=np.float32)[labels]
    p = np_softmax(x, 1)
    want = -np.log(p[np.arange(4), labels]).sum() / 4
    autograd.training = True
    for t in (T(onehot), T(labels)):
        loss = autograd.SoftMaxCrossEntropy(t)(T(x))[0]
        assert loss.shape == (1,)
        assert tensor.to_numpy(loss)[0] == pytest.approx(want, rel=1e-5)
        assert float(loss) == pytest.approx(want, rel=1e-5)
        dx = loss.creator.backward()                   # dy=1.0 by default
        np.testing.assert_allclose(autograd.ctensor2numpy(dx), (p - onehot) / 4, atol=1e-6)
        np.testing.assert_allclose(
            autograd.softmax_cross_entropy(T(x), t).numpy(), [want], rtol=1e-5)


def test_mean_square_error_singa_form():
    x, t = randn(3, 4), randn(3, 4)
    autograd.training = True
    loss = autograd.MeanSquareError(T(t))(T(x))[0]
    np.testing.assert_allclose(loss.numpy(), [((x - t) ** 2).sum() / 3 / 2], rtol=1e-5)
    dx = autograd.ctensor2numpy(loss.creator.backward(2.0))
    np.testing.assert_allclose(dx, 2.0 * (x - t) / 3, rtol=1e-5)
    np.testing.assert_allclose(autograd.mse_loss(T(x), T(t)).numpy(), loss.numpy())


def test_cross_entropy_and_binary_cross_entropy():
    p = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    t = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
    autograd.training = True
    ce = autograd.CrossEntropy(T(t))(T(p))[0]
    np.testing.assert_allclose(ce.numpy(), [-(t * np.log(p)).sum() / 4], rtol=1e-5)
    np.testing.assert_allclose(autograd.ctensor2numpy(ce.creator.backward()), -t / p / 4,
                               rtol=1e-5)
    bce = autograd.BinaryCrossEntropy(T(t))(T(p))[0]
    want = -(t * np.log(p + 1e-4) + (1 - t) * np.log(1.0001 - p)).sum() / 4
    np.testing.assert_allclose(bce.numpy(), [want], rtol=1e-5)
    check_grad(lambda q: autograd.binary_cross_entropy(q, T(t)), [p])
    # a saturated prediction stays finite, as in SINGA
    sat = autograd.binary_cross_entropy(T(np.array([[0.0, 1.0]])), T(np.array([[1.0, 0.0]])))
    assert np.isfinite(sat.numpy()).all()


def test_ranking_loss():
    pos, neg = randn(5), randn(5)
    autograd.training = True
    loss = autograd.RankingLoss(0.3)(T(pos), T(neg))[0]
    np.testing.assert_allclose(loss.numpy(), [np.maximum(0, 0.3 - pos + neg).sum() / 5],
                               rtol=1e-5)
    dpos, dneg = loss.creator.backward()
    active = (0.3 - pos + neg > 0) / 5
    np.testing.assert_allclose(autograd.ctensor2numpy(dpos), -active, rtol=1e-6)
    np.testing.assert_allclose(autograd.ctensor2numpy(dneg), active, rtol=1e-6)


def test_losses_train_through_backward():
    w = T(randn(3, 2) * 0.1, stores_grad=True)
    x, t = randn(8, 3), np.eye(2, dtype=np.float32)[rng.integers(0, 2, 8)]
    autograd.training = True
    loss = autograd.softmax_cross_entropy(autograd.matmul(T(x), w), T(t))
    (p, g), = autograd.backward(loss)
    want = x.T @ ((np_softmax(x @ w.numpy(), 1) - t) / 8)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-6)


def test_full_reductions_have_shape_one():
    x = T(randn(2, 3))
    y = autograd.reduce_sum(x, None, 0)
    assert y.shape == (1,)
    np.testing.assert_allclose(y.numpy(), [x.numpy().sum()], rtol=1e-6)
    assert autograd.reduce_mean(x, None, 0).shape == (1,)
    assert autograd.reduce_sum(x).shape == (1, 1)       # keepdims=1 by default


# ---- argument orders and defaults ----

def test_where_takes_x_y_then_condition():
    x, y = randn(2, 3), randn(2, 3)
    cond = rng.random((2, 3)) < 0.5
    out = autograd.where(T(x), T(y), cond)                      # a NumPy condition
    np.testing.assert_array_equal(out.numpy(), np.where(cond, x, y))
    out = autograd.where(T(x), T(y), T(cond.astype(np.float32)))
    np.testing.assert_array_equal(out.numpy(), np.where(cond, x, y))
    (out,) = autograd.Where(cond.tolist())(T(x), T(y))
    np.testing.assert_array_equal(out.numpy(), np.where(cond, x, y))
    check_grad(lambda a, b: autograd.where(a, b, cond), [x, y])
    with pytest.raises(TypeError, match="condition"):
        autograd.where(T(x), T(y), "yes")


def test_softmax_defaults_to_axis_1():
    x = randn(2, 3, 4)
    np.testing.assert_allclose(autograd.softmax(T(x)).numpy(), np_softmax(x, 1), rtol=1e-5)
    np.testing.assert_allclose(autograd.SoftMax()(T(x))[0].numpy(), np_softmax(x, 1),
                               rtol=1e-5)
    np.testing.assert_allclose(autograd.softmax(T(x), 2).numpy(), np_softmax(x, 2), rtol=1e-5)


def test_dropout_seed_then_ratio():
    x = np.ones((200, 50), np.float32)
    autograd.training = True
    y = autograd.dropout(T(x), 0, 0.2).numpy()         # dropout(x, seed, ratio)
    kept = y != 0
    assert kept.mean() == pytest.approx(0.8, abs=0.03)
    np.testing.assert_allclose(y[kept], 1 / 0.8, rtol=1e-6)
    op = autograd.Dropout(7, 0.5)
    assert (op.seed, op.ratio) == (7, 0.5)
    autograd.training = False
    np.testing.assert_array_equal(autograd.dropout(T(x)).numpy(), x)


def test_activation_signatures():
    x = randn(3, 4)
    np.testing.assert_allclose(autograd.LeakyRelu(0.2)(T(x))[0].numpy(),
                               np.where(x > 0, x, 0.2 * x), rtol=1e-6)
    assert autograd.LeakyRelu(0.2).a == pytest.approx(0.2)
    np.testing.assert_allclose(autograd.hardsigmoid(T(x), 0.3, 0.4).numpy(),
                               np.clip(0.3 * x + 0.4, 0, 1), rtol=1e-6)
    assert autograd.HardSigmoid(gamma=0.1).gamma == pytest.approx(0.1)
    np.testing.assert_allclose(autograd.elu(T(x), 1).numpy(),
                               np.where(x > 0, x, np.exp(x) - 1), rtol=1e-5, atol=1e-6)


def test_shape_op_signatures():
    x = randn(1, 3, 1, 2)
    assert autograd.squeeze(T(x)).shape == (3, 2)              # axis=[] squeezes all
    assert autograd.Squeeze([2])(T(x))[0].shape == (1, 3, 2)
    np.testing.assert_array_equal(autograd.transpose(T(x), (3, 1, 0, 2)).numpy(),
                                  x.transpose(3, 1, 0, 2))
    np.testing.assert_array_equal(autograd.transpose(T(x), shape=(1, 0, 2, 3)).numpy(),
                                  x.transpose(1, 0, 2, 3))
    np.testing.assert_array_equal(autograd.unsqueeze(T(x[0, :, 0]), 0).numpy(),
                                  x[0, :, 0][None])


def test_global_average_pool_data_formats():
    x = randn(2, 3, 4, 5)
    np.testing.assert_allclose(autograd.globalaveragepool(T(x)).numpy(),
                               x.mean((2, 3), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(autograd.globalaveragepool(T(x), "channels_last").numpy(),
                               x.mean((1, 2), keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="data_format"):
        autograd.GlobalAveragePool("nchw")


def test_scatter_elements_singa_form():
    x = randn(3, 3)
    idx = np.array([[1, 0, 2], [0, 2, 1]])
    upd = randn(2, 3)
    want = x.copy()
    np.put_along_axis(want, idx, upd, 0)
    (y,) = autograd.ScatterElements(idx, upd, 0)(T(x))          # updates as an array
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(autograd.scatter_elements(T(x), idx, T(upd)).numpy(), want)
    op = autograd.ScatterElements(idx, upd, 0)
    np.testing.assert_array_equal(autograd.ctensor2numpy(op.forward(T(x).data)), want)


def test_space_to_depth_modes():
    x = randn(1, 2, 4, 6)
    b = 2
    n, c, h, w = x.shape
    dcr = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    crd = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 1, 3, 5, 2, 4)
    np.testing.assert_array_equal(autograd.space_to_depth(T(x), 2).numpy(),
                                  dcr.reshape(n, c * 4, h // b, w // b))
    y = autograd.space_to_depth(T(x), 2, "CRD")
    np.testing.assert_array_equal(y.numpy(), crd.reshape(n, c * 4, h // b, w // b))
    np.testing.assert_array_equal(autograd.depth_to_space(y, 2, "CRD").numpy(), x)


def test_cossim_and_dot():
    a, b = randn(4, 5), randn(4, 5)
    dot = autograd.CosSim.dot(T(a).data, T(b).data)
    np.testing.assert_allclose(autograd.ctensor2numpy(dot), (a * b).sum(1), rtol=1e-5)
    want = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(autograd.cossim(T(a), T(b)).numpy(), want, rtol=1e-5)


def test_variadic_and_binary_functions_take_singa_names():
    a, b = randn(3), randn(3)
    np.testing.assert_allclose(autograd.mean(T(a), T(b)).numpy(), (a + b) / 2, rtol=1e-6)
    np.testing.assert_allclose(autograd.max(T(a), T(b)).numpy(), np.maximum(a, b))
    np.testing.assert_allclose(autograd.mul(x=T(a), y=T(b)).numpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose(autograd.add(a=T(a), b=T(b)).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(autograd.exp(a=T(a)).numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(autograd.less(x=T(a), y=T(b)).numpy(), a < b)
    np.testing.assert_allclose(autograd.matmul(x=T(a[None]), w=T(b[:, None])).numpy(),
                               a[None] @ b[:, None], rtol=1e-6)
    np.testing.assert_allclose(autograd.onehot(1, T(np.array([0, 2])), 3, [0, 1]).numpy(),
                               np.eye(3)[[0, 2]])


def test_yielded_gradients_need_no_grad():
    w = T(randn(2), stores_grad=True)
    autograd.training = True
    (p, g), = autograd.backward(autograd.reduce_sum(autograd.mul(w, w)))
    assert g.requires_grad is False and p is w


def test_singa_wrap_names_used_by_scripts():
    assert autograd.CTensor is singa_wrap.Tensor
    assert isinstance(autograd.training, bool)


def test_gradcheck_of_a_recorded_inference_graph_rerun_in_training():
    # the same model code records in both modes; only training keeps tensors
    x = randn(2, 3)
    y_inf = autograd.tanh(make_tensor(x))
    autograd.training = True
    y_tr = autograd.tanh(make_tensor(x))
    np.testing.assert_array_equal(y_inf.numpy(), y_tr.numpy())
    assert y_inf.creator.saved is False and y_tr.creator.saved is True
