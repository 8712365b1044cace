"""The autograd engine: recording, backward / gradients, accumulation,
graph release, the training flag, the graph layout graph walkers rely on,
and errors."""

import gc
import weakref

import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor
from gradcheck import make_tensor

rng = np.random.default_rng(0)


def param(*shape):
    t = tensor.from_numpy(rng.standard_normal(shape).astype(np.float32))
    t.stores_grad = True
    return t


def test_backward_yields_every_parameter_once():
    x = make_tensor(rng.standard_normal((4, 3)))
    w1, b1, w2 = param(3, 5), param(5), param(5, 2)
    with ag.train_mode(True):
        h = ag.relu(ag.add_bias(ag.matmul(x, w1), b1))
        loss = ag.reduce_mean(ag.matmul(h, w2))
        pairs = list(ag.backward(loss))
    assert sorted(id(p) for p, _ in pairs) == sorted(id(p) for p in (w1, b1, w2))
    for p, g in pairs:
        assert g.shape == p.shape and g.is_contiguous()
    # the same numbers with NumPy
    xn, w1n, b1n, w2n = (tensor.to_numpy(t) for t in (x, w1, b1, w2))
    pre = xn @ w1n + b1n
    hn = np.maximum(pre, 0)
    dout = np.full((4, 2), 1 / 8)
    dh = dout @ w2n.T * (pre > 0)
    grads = {id(p): tensor.to_numpy(g) for p, g in pairs}
    np.testing.assert_allclose(grads[id(w2)], hn.T @ dout, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[id(w1)], xn.T @ dh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[id(b1)], dh.sum(0), rtol=1e-5, atol=1e-6)


def test_gradients_accumulate_over_uses():
    w = param(3)
    wn = tensor.to_numpy(w)
    with ag.train_mode(True):
        # w used three times: w * w + sin(w)
        y = ag.reduce_sum(ag.add(ag.mul(w, w), ag.sin(w)))
        g = ag.gradients(y)
    np.testing.assert_allclose(tensor.to_numpy(g[w]), 2 * wn + np.cos(wn), rtol=1e-5)
    # two branches from one intermediate
    with ag.train_mode(True):
        h = ag.exp(w)
        y = ag.reduce_sum(ag.add(ag.mul(h, 2.0), h))
        g = ag.gradients(y)
    np.testing.assert_allclose(tensor.to_numpy(g[w]), 3 * np.exp(wn), rtol=1e-5)


def test_dy_argument():
    w = param(2, 3)
    with ag.train_mode(True):
        y = ag.mul(w, 3.0)
        dy = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
        g = ag.gradients(y, dy)[w]
    np.testing.assert_allclose(tensor.to_numpy(g), 3 * np.arange(6).reshape(2, 3))
    with ag.train_mode(True):
        g = ag.gradients(ag.mul(w, 3.0), 2.0)[w]
    np.testing.assert_allclose(tensor.to_numpy(g), np.full((2, 3), 6.0))
    with ag.train_mode(True):
        y = ag.mul(w, 3.0)
        with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
            ag.gradients(y, tensor.from_numpy(np.ones((3, 2), np.float32)))
        with pytest.raises(TypeError):
            ag.gradients(y, "ones")


def test_yielded_gradients_do_not_alias():
    a, b = param(3), param(3)
    with ag.train_mode(True):
        g = ag.gradients(ag.add(a, b))
    g[a] += 1.0
    np.testing.assert_array_equal(tensor.to_numpy(g[b]), np.ones(3))


def test_parameter_behind_a_flat_op_gets_zeros():
    w = param(2, 2)
    with ag.train_mode(True):
        g = ag.gradients(ag.reduce_sum(ag.floor(w)))
    np.testing.assert_array_equal(tensor.to_numpy(g[w]), np.zeros((2, 2)))


def test_intermediate_with_stores_grad_gets_its_gradient():
    w = param(3)
    with ag.train_mode(True):
        h = ag.mul(w, 2.0)
        h.stores_grad = True
        y = ag.reduce_sum(ag.mul(h, h))
        g = ag.gradients(y)
    np.testing.assert_allclose(tensor.to_numpy(g[h]), 2 * tensor.to_numpy(h), rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(g[w]), 8 * tensor.to_numpy(w), rtol=1e-6)


def test_backward_keeps_the_graph_until_the_next_recording_op():
    w = param(4, 4)
    x = make_tensor(rng.standard_normal((2, 4)))
    with ag.train_mode(True):
        h = ag.tanh(ag.matmul(x, w))
        loss = ag.reduce_sum(ag.mul(h, h))
    hidden_op = weakref.ref(h.creator)
    matmul_op = weakref.ref(h.creator.src[0][0])
    del h
    gc.collect()
    assert hidden_op() is not None   # alive while the graph is
    list(ag.backward(loss))
    gc.collect()
    assert hidden_op() is not None   # kept: a second backward may follow
    assert loss.creator.src is not None
    with ag.train_mode(True):
        ag.relu(w)                    # the next step's first op releases it
    gc.collect()
    assert hidden_op() is None and matmul_op() is None
    assert loss.creator.src is None   # the kept loss no longer pins anything


def test_a_second_backward_and_shared_graphs():
    w = param(3)
    wn = tensor.to_numpy(w)
    with ag.train_mode(True):
        trunk = ag.tanh(w)
        loss1 = ag.reduce_sum(trunk)
        loss2 = ag.reduce_mean(ag.mul(trunk, trunk))
    g1 = tensor.to_numpy(ag.gradients(loss1)[w])
    np.testing.assert_allclose(g1, 1 - np.tanh(wn) ** 2, rtol=1e-5)
    # the same loss again, then another loss through the same trunk
    np.testing.assert_allclose(tensor.to_numpy(ag.gradients(loss1)[w]), g1, rtol=1e-6)
    g2 = tensor.to_numpy(ag.gradients(loss2)[w])
    np.testing.assert_allclose(g2, 2 / 3 * np.tanh(wn) * (1 - np.tanh(wn) ** 2), rtol=1e-5)
    # an operator that records for backward releases what was walked
    with ag.train_mode(True):
        y = ag.reduce_sum(ag.mul(trunk, w))
    with pytest.raises(ValueError, match="released"):
        ag.gradients(loss1)
    with pytest.raises(ValueError, match="released"):
        ag.gradients(loss2)
    # a released intermediate used afterwards is a constant leaf
    g = ag.gradients(y)
    np.testing.assert_allclose(tensor.to_numpy(g[w]), tensor.to_numpy(trunk), rtol=1e-6)


def test_an_op_inside_the_backward_loop_does_not_release_its_graph():
    w = param(3)
    with ag.train_mode(True):
        loss = ag.reduce_sum(ag.mul(ag.exp(w), w))
        for p, g in ag.backward(loss):
            ag.relu(p)                # records, but this pass owns its graph
        assert g.requires_grad is False
    np.testing.assert_allclose(tensor.to_numpy(ag.gradients(loss)[w]),
                               tensor.to_numpy(g), rtol=1e-6)


def test_memory_does_not_grow_across_steps():
    w = param(8, 8)
    x = make_tensor(rng.standard_normal((4, 8)))
    losses = []

    def live_ops():
        gc.collect()
        return sum(isinstance(o, ag.Operator) for o in gc.get_objects())

    for step in range(30):
        with ag.train_mode(True):
            loss = ag.reduce_mean(ag.relu(ag.matmul(ag.relu(ag.matmul(x, w)), w)))
            for _ in ag.backward(loss):
                pass
        losses.append(loss)   # keeping the losses must not keep their graphs
        if step == 5:
            base = live_ops()
    assert live_ops() - base <= 24   # one released op per kept loss, nothing more


def test_training_flag_and_scopes():
    assert ag.training is False
    x = param(2)
    y = ag.relu(x)
    assert y.creator is not None and y.creator.saved is False   # recorded, kept nothing
    with ag.train_mode(True):
        assert ag.training is True
        assert ag.relu(x).creator.saved is True
        with ag.no_grad():
            assert ag.training is False
            assert ag.relu(x).creator.saved is False
        assert ag.training is True
    assert ag.training is False
    with pytest.raises(RuntimeError):
        with ag.train_mode(True):
            raise RuntimeError("boom")
    assert ag.training is False                # restored on errors too
    ag.training = True                         # SINGA's global style
    try:
        assert ag.relu(x).creator.saved is True
    finally:
        ag.training = False
    with pytest.raises(ValueError, match="ReLU.*training off"):
        ag.gradients(ag.reduce_sum(y))


def test_nothing_kept_without_requires_grad():
    x = tensor.from_numpy(np.ones((2, 2), np.float32))
    x.requires_grad = False
    with ag.train_mode(True):
        y = ag.relu(x)
        assert y.creator is not None and y.requires_grad is False
        assert not [k for k in vars(y.creator) if k.startswith("_")]
        with pytest.raises(ValueError, match="requires grad"):
            list(ag.backward(y))


def test_graph_layout_for_exporters():
    x = make_tensor(rng.standard_normal((1, 2, 5, 5)))
    x.name = "input"
    w = param(3, 2, 3, 3)
    with ag.train_mode(True):
        y = ag.conv2d(x, w, None, stride=2, padding=1)
        z = ag.add(y, y)
        s = ag.mul(z, z)
    conv = y.creator
    assert isinstance(conv, ag._Conv2d)
    assert conv.strides == [2, 2] and conv.pads == [1, 1, 1, 1] and conv.group == 1
    (xs, xi, xt, xsg), (ws, wi, wt, wsg) = conv.src
    assert isinstance(xs, ag.Dummy) and xs.tensor is x and xs.name == "input"
    assert xi == 0 and xt is None and xsg is False
    assert isinstance(ws, ag.Dummy) and ws.tensor is w and wt is w and wsg is True
    add = z.creator
    assert add.src[0][0] is conv and add.src[1][0] is conv   # y used twice
    mul = s.creator
    assert mul.src[0][0] is add and mul.src[1][0] is add
    names = {conv.name, add.name, mul.name, xs.name, ws.name}
    assert len(names) == 5
    # a leaf used by two ops is one Dummy
    with ag.train_mode(True):
        a, b = ag.relu(w), ag.tanh(w)
    assert a.creator.src[0][0] is b.creator.src[0][0]


def test_inputs_must_be_tensors():
    with pytest.raises(TypeError, match="Tensor"):
        ag.relu(np.ones(3))
    with pytest.raises(TypeError):
        list(ag.backward(np.ones(3)))
    with pytest.raises(TypeError):
        ag.Dummy(param(2))(param(2))


def test_backward_on_a_leaf():
    w = param(3)
    with ag.train_mode(True):
        y = ag.identity(w)
    g = ag.gradients(y)
    np.testing.assert_array_equal(tensor.to_numpy(g[w]), np.ones(3))
