"""Layers: forward against NumPy, lazy initialisation, naming, parameter and
state access, reuse on different shapes, and errors."""

import numpy as np
import pytest

from singa import autograd, layer, tensor

RNG = np.random.default_rng(0)


def T(a, requires_grad=False):
    t = tensor.from_numpy(np.asarray(a, dtype=np.float32))
    t.requires_grad = requires_grad
    return t


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.numpy() if isinstance(a, tensor.Tensor) else a, b,
                               rtol=tol, atol=tol)


# ---- dense layers ----

def test_linear_lazy_init_and_forward():
    x = rand(5, 7)
    fc = layer.Linear(3)
    y = fc(T(x))
    assert fc.W.shape == (7, 3) and fc.b.shape == (3,)
    close(y, x @ fc.W.numpy() + fc.b.numpy())
    # SINGA's (in, out) form checks the input size.
    with pytest.raises(ValueError, match=r"8 input features.*\(5, 7\)"):
        layer.Linear(8, 3)(T(x))
    no_bias = layer.Linear(4, bias=False)
    close(no_bias(T(x)), x @ no_bias.W.numpy())
    assert "b" not in no_bias.get_params()


def test_linear_batch_size_may_change_and_nd_inputs():
    fc = layer.Linear(4)
    for n in (3, 1, 9):
        x = rand(n, 6)
        close(fc(T(x)), x @ fc.W.numpy() + fc.b.numpy())
    x3 = rand(2, 3, 6)
    close(fc(T(x3)), x3 @ fc.W.numpy() + fc.b.numpy())
    with pytest.raises(ValueError, match=r"last dimension 6.*\(2, 5\)"):
        fc(T(rand(2, 5)))


def test_linear_initialiser_argument():
    from singa import initializer
    fc = layer.Linear(300, W_initializer=initializer.he_normal)
    fc(T(rand(2, 400)))
    assert fc.W.numpy().std() == pytest.approx(np.sqrt(2.0 / 400), rel=0.05)


@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (False, False), (True, True)])
def test_gemm(trans_a, trans_b):
    x = rand(4, 6) if not trans_a else rand(6, 4)
    g = layer.Gemm(3, alpha=0.5, beta=2.0, transA=trans_a, transB=trans_b)
    y = g(T(x))
    a = x.T if trans_a else x
    w = g.W.numpy().T if trans_b else g.W.numpy()
    assert g.b.shape == (1, 3)  # SINGA's bias shape
    g.set_params({"b": np.arange(3, dtype=np.float32)[None]})
    close(g(T(x)), 0.5 * a @ w + 2.0 * np.arange(3))
    assert y.shape == (4, 3)


def test_embedding():
    emb = layer.Embedding(10, 4)
    idx = np.array([[1, 2, 9], [0, 0, 3]], dtype=np.int32)
    y = emb(tensor.from_numpy(idx))
    assert y.shape == (2, 3, 4)
    close(y, emb.W.numpy()[idx])
    with pytest.raises((IndexError, ValueError), match="10"):
        emb(tensor.from_numpy(np.array([10], dtype=np.int32)))


# ---- parameter-free layers ----

def test_activations_and_shapes():
    x = rand(3, 4, 2)
    close(layer.ReLU()(T(x)), np.maximum(x, 0))
    close(layer.Sigmoid()(T(x)), 1 / (1 + np.exp(-x)))
    close(layer.Tanh()(T(x)), np.tanh(x))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close(layer.SoftMax(axis=1)(T(x)), e / e.sum(axis=1, keepdims=True))
    close(layer.Flatten()(T(x)), x.reshape(3, 8))
    close(layer.Flatten(axis=2)(T(x)), x.reshape(12, 2))
    close(layer.Reshape((4, -1))(T(x)), x.reshape(4, 6))
    close(layer.Reshape()(T(x), (2, 12)), x.reshape(2, 12))
    y = rand(3, 1, 2)
    close(layer.Cat(axis=1)([T(x), T(y)]), np.concatenate([x, y], axis=1))
    close(layer.Add()(T(x), T(y)), x + y)


def test_dropout_train_and_eval():
    x = np.ones((200, 50), np.float32)
    d = layer.Dropout(0.3)
    close(d(T(x)), x)  # autograd.training is off: identity
    with autograd.train_mode(True):
        y = d(T(x, requires_grad=True)).numpy()
    kept = y != 0
    assert kept.mean() == pytest.approx(0.7, abs=0.02)
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-5)


def test_losses():
    x = rand(6, 4)
    labels = RNG.integers(0, 4, 6)
    onehot = np.eye(4, dtype=np.float32)[labels]
    lsm = x - x.max(1, keepdims=True)
    lsm = lsm - np.log(np.exp(lsm).sum(1, keepdims=True))
    want = -np.mean(lsm[np.arange(6), labels])
    close(layer.SoftMaxCrossEntropy()(T(x), T(onehot)), want)
    close(layer.SoftMaxCrossEntropy()(T(x), tensor.from_numpy(labels.astype(np.int32))), want)
    p = np.exp(lsm)
    close(layer.CrossEntropy()(T(p), T(onehot)), want)
    q = 1 / (1 + np.exp(-x))
    t = (rand(6, 4) > 0).astype(np.float32)
    # SINGA's definitions: sums over the batch of 6, 1e-4 inside the logs
    close(layer.BinaryCrossEntropy()(T(q), T(t)),
          -np.sum(t * np.log(q + 1e-4) + (1 - t) * np.log(1.0001 - q)) / 6)
    close(layer.MeanSquareError()(T(x), T(onehot)), np.sum((x - onehot) ** 2) / (2 * 6))


# ---- normalisation ----

def test_batchnorm_training_and_inference():
    x = rand(8, 3, 4, 5) * 2 + 1
    bn = layer.BatchNorm2d(momentum=0.8)
    with autograd.train_mode(True):
        y = bn(T(x, requires_grad=True))
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    close(y, (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5))
    close(bn.running_mean, 0.2 * mean)
    close(bn.running_var, 0.8 + 0.2 * var)
    # Inference uses the running statistics, and leaves them alone.
    bn.set_params({"scale": np.full(3, 2.0, np.float32), "bias": np.ones(3, np.float32)})
    x2 = rand(2, 3, 4, 5)
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    y2 = bn(T(x2))
    close(y2, 2 * (x2 - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5) + 1)
    close(bn.running_mean, rm)
    assert set(bn.get_params()) == {"scale", "bias"}
    assert set(bn.get_states()) == {"scale", "bias", "running_mean", "running_var"}
    with pytest.raises(ValueError, match=r"3 channels.*\(2, 4, 4, 5\)"):
        bn(T(rand(2, 4, 4, 5)))


def test_layernorm():
    x = rand(4, 5, 6)
    ln = layer.LayerNorm()
    mu = x.mean(-1, keepdims=True)
    close(ln(T(x)), (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5))
    ln2 = layer.LayerNorm(axis=1)
    ln2(T(x))
    assert ln2.scale.shape == (5, 6)
    mu = x.mean((1, 2), keepdims=True)
    close(ln2(T(x)), (x - mu) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5))
    with pytest.raises(ValueError, match=r"\(6,\).*\(4, 7\)"):
        ln(T(rand(4, 7)))


# ---- recurrent ----

def _np_rnn(xs, wx, wh, b, h):
    out = []
    for x in xs:
        h = np.tanh(x @ wx + h @ wh + b)
        out.append(h)
    return out, h


def _np_lstm(xs, p, h, c):
    """SINGA's LSTM: gates i, f, o, g each with Wx_k, Wh_k, Bx_k, Bh_k."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    out = []
    for x in xs:
        z = {k: x @ p["Wx_" + k] + p["Bx_" + k] + h @ p["Wh_" + k] + p["Bh_" + k]
             for k in "ifog"}
        c = sig(z["f"]) * c + sig(z["i"]) * np.tanh(z["g"])
        h = sig(z["o"]) * np.tanh(c)
        out.append(h)
    return out, h, c


def test_rnn_list_and_tensor_inputs():
    xs = rand(5, 3, 4)  # (seq, batch, input)
    rnn = layer.RNN(6)
    ys, h = rnn([T(x) for x in xs])
    p = {k: v.numpy() for k, v in rnn.get_params().items()}
    want, hw = _np_rnn(xs, p["Wx"], p["Wh"], p["b"], np.zeros((3, 6), np.float32))
    assert len(ys) == 5
    for a, b in zip(ys, want):
        close(a, b)
    close(h, hw)
    seq, h2 = rnn(T(xs))
    close(seq, np.stack(want))
    h0 = rand(3, 6)
    seq, _ = rnn(T(xs), T(h0))
    close(seq, np.stack(_np_rnn(xs, p["Wx"], p["Wh"], p["b"], h0)[0]))
    with pytest.raises(ValueError, match=r"h0 must have shape \(3, 6\)"):
        rnn(T(xs), T(rand(2, 6)))


def test_lstm_matches_numpy_and_batch_first():
    xs = rand(4, 2, 3)
    lstm = layer.LSTM(3, 5)
    h0, c0 = rand(2, 5), rand(2, 5)
    seq, h, c = lstm(T(xs), (T(h0), T(c0)))
    p = {k: v.numpy() for k, v in lstm.get_params().items()}
    assert p["Wx_i"].shape == (3, 5) and p["Wh_g"].shape == (5, 5) and p["Bh_o"].shape == (5,)
    assert len(p) == 16
    want, hw, cw = _np_lstm(xs, p, h0, c0)
    close(seq, np.stack(want))
    close(h, hw)
    close(c, cw)
    bf = layer.LSTM(5, batch_first=True)
    bf(T(xs.transpose(1, 0, 2)))
    bf.set_params(lstm.get_params())
    seq_bf, _, _ = bf(T(xs.transpose(1, 0, 2)), (T(h0), T(c0)))
    close(seq_bf, np.stack(want).transpose(1, 0, 2))
    # A different batch size and sequence length reuse the same weights.
    seq3, _, _ = lstm(T(rand(7, 4, 3)))
    assert seq3.shape == (7, 4, 5)


def test_lstm_gradients_reach_every_parameter():
    lstm = layer.LSTM(4)
    xs = T(rand(3, 2, 3), requires_grad=True)
    with autograd.train_mode(True):
        seq, _, _ = lstm(xs)
        loss = autograd.mse_loss(seq, T(np.zeros((3, 2, 4))))
        grads = {p.name: g.numpy() for p, g in autograd.backward(loss)}
    assert set(grads) == {p + k for p in ("Wx_", "Wh_", "Bx_", "Bh_") for k in "ifog"}
    # h0 = 0, so Wh gets no gradient at the first step only.
    assert all(np.abs(g).sum() > 0 for g in grads.values())


def test_lstm_matches_pytorch(torch):
    xs = rand(6, 3, 4)
    lstm = layer.LSTM(5)
    lstm(T(xs))
    p = {k: v.numpy() for k, v in lstm.get_params().items()}
    ref = torch.nn.LSTM(4, 5)
    order = "ifgo"  # PyTorch's gate order
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.tensor(np.concatenate([p["Wx_" + k].T for k in order])))
        ref.weight_hh_l0.copy_(torch.tensor(np.concatenate([p["Wh_" + k].T for k in order])))
        ref.bias_ih_l0.copy_(torch.tensor(np.concatenate([p["Bx_" + k] for k in order])))
        ref.bias_hh_l0.copy_(torch.tensor(np.concatenate([p["Bh_" + k] for k in order])))
        want, _ = ref(torch.tensor(xs))
    seq, _, _ = lstm(T(xs))
    close(seq, want.numpy())


# ---- naming and parameter access ----

class Block(layer.Layer):
    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(4)
        self.bn = layer.BatchNorm2d()
        self.act = layer.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.fc(x)))


class Net(layer.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = [Block(), Block()]
        self.head = layer.Sequential(layer.Linear(3), layer.ReLU(), layer.Linear(2))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_names_are_dotted_paths():
    net = Net()
    net(T(rand(5, 6)))
    params = net.get_params()
    assert list(params) == [
        "blocks.0.fc.W", "blocks.0.fc.b", "blocks.0.bn.scale", "blocks.0.bn.bias",
        "blocks.1.fc.W", "blocks.1.fc.b", "blocks.1.bn.scale", "blocks.1.bn.bias",
        "head.0.W", "head.0.b", "head.2.W", "head.2.b"]
    for name, t in params.items():
        assert t.name == name and t.stores_grad
    states = net.get_states()
    assert "blocks.1.bn.running_var" in states and len(states) == len(params) + 4
    # A sub-layer reports the same full names (SINGA's keys).
    assert set(net.blocks[1].get_params()) == {"blocks.1.fc.W", "blocks.1.fc.b",
                                               "blocks.1.bn.scale", "blocks.1.bn.bias"}


def test_set_params_and_states_round_trip():
    a, b = Net(), Net()
    x = T(rand(5, 6))
    a(x)
    b(x)
    b.set_states(a.get_states())
    close(b(x), a(x).numpy())
    b.set_params({"head.2.b": np.array([5.0, -5.0], np.float32)})
    close(b.head[2].b, [5.0, -5.0])


def test_set_params_errors_change_nothing():
    net = Net()
    net(T(rand(5, 6)))
    before = net.get_params()["head.0.W"].numpy()
    with pytest.raises(ValueError, match=r"'head\.0\.W' has shape \(4, 3\).*\(3, 4\)"):
        net.set_params({"head.0.b": np.zeros(3, np.float32), "head.0.W": rand(3, 4)})
    with pytest.raises(ValueError, match="unknown name 'head.9.W'"):
        net.set_params({"head.9.W": rand(3, 4)})
    with pytest.raises(ValueError, match="no parameters yet"):
        Net().set_params({"head.0.W": rand(4, 3)})
    with pytest.raises(TypeError, match="head.0.W"):
        net.set_params({"head.0.W": "zeros"})
    close(net.get_params()["head.0.W"], before)


def test_attribute_reassignment_unregisters():
    blk = Block()
    blk(T(rand(2, 3)))
    blk.bn = layer.ReLU()
    assert set(blk.get_params()) == {"fc.W", "fc.b"}
    with pytest.raises(AttributeError, match="super"):
        class Bad(layer.Layer):
            def __init__(self):
                self.fc = layer.Linear(2)
        Bad()


# ---- errors ----

def test_input_errors_name_types_and_shapes():
    with pytest.raises(TypeError, match="Tensor.*ndarray"):
        layer.Linear(3)(rand(2, 2))
    with pytest.raises(ValueError, match="positive int"):
        layer.Linear(0)
    with pytest.raises(ValueError, match="ratio"):
        layer.Dropout(1.0)
    with pytest.raises(ValueError, match="nonlinearity"):
        layer.RNN(3, nonlinearity="gelu")
    with pytest.raises(ValueError, match=r"3-D.*\(2, 3\)"):
        layer.LSTM(3)(T(rand(2, 3)))


# ---- convolution and pooling ----

@pytest.mark.parametrize("train", [False, True])
def test_conv_and_batchnorm_word_input_errors_in_both_modes(train):
    # In inference the layers leave the argument checks to the core and
    # check for their own wording only when it rejects the input; the
    # messages must match training's, where the checks come first.
    conv, bn = layer.Conv2d(4, 3, padding=1), layer.BatchNorm2d()
    with autograd.train_mode(train):
        x = rand(2, 3, 5, 5)
        y = conv(T(x))
        close(y, _np_conv(x, conv.W.numpy(), conv.b.numpy(), pads=(1, 1, 1, 1)))
        bn(y)
        with pytest.raises(ValueError, match=r"3 input channels.*\(2, 2, 5, 5\)"):
            conv(T(rand(2, 2, 5, 5)))
        with pytest.raises(ValueError, match=r"4-D.*\(3, 5, 5\)"):
            conv(T(rand(3, 5, 5)))
        with pytest.raises(TypeError, match="Tensor.*ndarray"):
            conv(x)
        with pytest.raises(TypeError, match="int32"):
            conv(tensor.from_numpy(np.ones((2, 3, 5, 5), np.int32)))
        with pytest.raises(ValueError, match=r"4 channels.*\(2, 5, 5, 5\)"):
            bn(T(rand(2, 5, 5, 5)))
        with pytest.raises(TypeError, match="Tensor.*ndarray"):
            bn(x)


def _np_conv(x, w, b, stride=(1, 1), pads=(0, 0, 0, 0), group=1):
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - kh) // stride[0] + 1
    ow = (xp.shape[3] - kw) // stride[1] + 1
    y = np.zeros((n, oc, oh, ow), np.float64)
    per = oc // group
    for o in range(oc):
        g = o // per
        for i in range(oh):
            for j in range(ow):
                win = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + kh,
                         j * stride[1]:j * stride[1] + kw]
                y[:, o, i, j] = (win * w[o]).sum(axis=(1, 2, 3))
    if b is not None:
        y += b[None, :, None, None]
    return y


def _np_pool(x, k, s, is_max):
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            y[:, :, i, j] = win.max(axis=(2, 3)) if is_max else win.mean(axis=(2, 3))
    return y


def test_conv2d_infers_channels_and_matches_numpy():
    x = rand(2, 3, 9, 8)
    conv = layer.Conv2d(4, 3, stride=2, padding=1)
    y = conv(T(x))
    assert conv.W.shape == (4, 3, 3, 3)
    close(y, _np_conv(x, conv.W.numpy(), conv.b.numpy(), (2, 2), (1, 1, 1, 1)))
    # SINGA's positional form with in_channels, and a fused ReLU.
    conv2 = layer.Conv2d(3, 5, 3, activation="RELU")
    y2 = conv2(T(x))
    close(y2, np.maximum(_np_conv(x, conv2.W.numpy(), conv2.b.numpy()), 0))
    with pytest.raises(ValueError, match=r"3 input channels.*\(2, 4, 9, 8\)"):
        conv2(T(rand(2, 4, 9, 8)))
    with pytest.raises(ValueError, match=r"4-D.*\(3, 9, 8\)"):
        conv(T(rand(3, 9, 8)))


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_conv2d_same_padding_on_varying_sizes(mode):
    conv = layer.Conv2d(2, 4, stride=2, pad_mode=mode, bias=False)
    for size in (7, 8):
        x = rand(1, 1, size, size)
        y = conv(T(x))
        out = -(-size // 2)
        assert y.shape == (1, 2, out, out)
        total = max((out - 1) * 2 + 4 - size, 0)
        lo, hi = (total // 2, total - total // 2)
        if mode == "SAME_LOWER":
            lo, hi = hi, lo
        close(y, _np_conv(x, conv.W.numpy(), None, (2, 2), (lo, lo, hi, hi)))


def test_grouped_and_separable_conv():
    x = rand(2, 4, 6, 6)
    g = layer.Conv2d(6, 3, group=2, padding=1)
    close(g(T(x)), _np_conv(x, g.W.numpy(), g.b.numpy(), pads=(1, 1, 1, 1), group=2))
    sep = layer.SeparableConv2d(5, 3, padding=1)
    y = sep(T(x))
    assert y.shape == (2, 5, 6, 6)
    dw = sep.depthwise_conv.W.numpy()
    assert dw.shape == (4, 1, 3, 3)
    mid = _np_conv(x, dw, None, pads=(1, 1, 1, 1), group=4)
    close(y, _np_conv(mid.astype(np.float32), sep.point_conv.W.numpy(), None))
    assert set(sep.get_params()) == {"point_conv.W", "depthwise_conv.W"}


def test_pooling_layer_reused_on_different_shapes():
    pool = layer.MaxPool2d(2)
    for shape in ((2, 3, 8, 8), (5, 3, 4, 6), (1, 7, 2, 2)):
        x = rand(*shape)
        close(pool(T(x)), _np_pool(x, (2, 2), (2, 2), True))
    avg = layer.AvgPool2d(3, stride=1)
    x = rand(2, 2, 5, 6)
    close(avg(T(x)), _np_pool(x, (3, 3), (1, 1), False))
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(1, 1, 2, 2\)"):
        avg(T(rand(1, 1, 2, 2)))


def test_pooling_1d():
    x = rand(2, 3, 9)
    close(layer.MaxPool1d(3)(T(x)), x.reshape(2, 3, 3, 3).max(-1))
    close(layer.AvgPool1d(2, stride=1)(T(x)), (x[..., 1:] + x[..., :-1]) / 2)
    with pytest.raises(ValueError, match=r"3 or 4-D.*\(2, 3\)"):
        layer.MaxPool1d(2)(T(rand(2, 3)))


def test_conv_and_pool_match_pytorch(torch):
    x = rand(2, 3, 10, 10)
    conv = layer.Conv2d(4, 3, stride=2, padding=(1, 0), dilation=1)
    y = layer.MaxPool2d(2, stride=1, padding=1)(conv(T(x)))
    with torch.no_grad():
        ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(conv.W.numpy()),
                                         torch.tensor(conv.b.numpy()), stride=2,
                                         padding=(1, 0))
        ref = torch.nn.functional.max_pool2d(ref, 2, stride=1, padding=1)
    close(y, ref.numpy())


def test_dtype_errors_name_the_dtypes():
    with pytest.raises(TypeError, match=r"int32.*float"):
        layer.Linear(3)(tensor.from_numpy(np.ones((2, 4), np.int32)))
    fc = layer.Linear(3)
    fc(T(rand(2, 4)))
    with pytest.raises(TypeError, match=r"\(2, 4\) is float16.*float32"):
        fc(tensor.from_numpy(np.ones((2, 4), np.float16)))
    with pytest.raises(TypeError, match="int32"):
        layer.Conv2d(2, 3)(tensor.from_numpy(np.ones((1, 1, 4, 4), np.int32)))
    with pytest.raises(TypeError, match="int32"):
        layer.LSTM(2)(tensor.from_numpy(np.ones((3, 1, 4), np.int32)))
