"""SINGA's Layer API and layer call forms (SINGA_API.md, SINGA_COMPAT.md
"layer, model, opt"), checked against NumPy."""

import numpy as np
import pytest

from singa import autograd, layer, tensor

RNG = np.random.default_rng(11)


def T(a):
    return tensor.from_numpy(np.asarray(a, dtype=np.float32))


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.numpy() if isinstance(a, tensor.Tensor) else a, b,
                               rtol=tol, atol=tol)


def np_conv(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), group=1):
    """pads in SINGA's order (top, bottom, left, right)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    oc, cg, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1]]
    per = oc // group
    outs = []
    for o in range(oc):
        g = o // per
        outs.append(np.einsum("nchwij,cij->nhw", win[:, g * cg:(g + 1) * cg], w[o]))
    y = np.stack(outs, 1)
    return y if b is None else y + b[None, :, None, None]


# ---- the Layer API ----

class Block(layer.Layer):
    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(3)
        self.act = layer.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Stack(layer.Layer):
    """SINGA's way of adding a list of layers: register_layers."""

    def __init__(self, n):
        super().__init__()
        self.blocks = [Block() for _ in range(n)]
        self.register_layers(*self.blocks)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_register_layers_names_like_singa():
    s = Stack(2)
    s(T(rand(4, 5)))
    assert list(s.get_params()) == ["0.fc.W", "0.fc.b", "1.fc.W", "1.fc.b"]
    # Sub-layers are reachable by attribute and report full names.
    assert getattr(s, "1") is s.blocks[1]
    assert list(s.blocks[1].get_params()) == ["1.fc.W", "1.fc.b"]
    assert s.blocks[1].fc.W.name == "1.fc.W"
    one = layer.Layer()
    one.register_layers([layer.Linear(2), layer.Linear(2)])
    assert set(one._layers) == {"0", "1"}
    with pytest.raises(TypeError, match="item 1 is a int"):
        layer.Layer().register_layers(layer.ReLU(), 3)


def test_forward_called_directly_initialises_like_singa():
    fc = layer.Linear(2)
    x = rand(3, 4)
    y = fc.forward(T(x))  # LayerMeta's forward wrapper
    close(y, x @ fc.W.numpy() + fc.b.numpy())
    assert fc._initialized and fc.W.name == "W"


def test_initialize_may_be_overridden_and_called_directly():
    class Scale(layer.Layer):
        def initialize(self, x):
            self.w = tensor.Tensor((x.shape[1],), x.device, requires_grad=True,
                                   stores_grad=True)
            self.w.set_value(2.0)

        def forward(self, x):
            return autograd.mul(x, self.w)

    s = Scale()
    s.initialize(T(rand(2, 3)))
    assert s._initialized and s.w.name == "w" and list(s.get_params()) == ["w"]
    x = rand(2, 3)
    close(s(T(x)), 2 * x)


def test_set_params_with_singa_or_relative_names_and_set_attribute():
    s = Stack(1)
    s(T(rand(2, 4)))
    s.blocks[0].set_params({"0.fc.b": np.ones(3, np.float32)})
    close(s.blocks[0].fc.b, 1.0)
    s.blocks[0].set_params({"fc.b": np.full(3, 2.0, np.float32)})
    close(s.blocks[0].fc.b, 2.0)
    fc = s.blocks[0].fc
    fc.set_attribute(fc.b, T([3.0, 3.0, 3.0]))
    close(fc.b, 3.0)
    with pytest.raises(ValueError, match=r"shape \(3,\).*\(2,\)"):
        fc.set_attribute(fc.b, np.zeros(2, np.float32))


def test_device_check_moves_and_dtype_check_casts():
    from singa import device
    other = device.create_separate_cpu_device()
    fc = layer.Linear(2)
    x = T(rand(3, 4))
    fc(x)
    w = tensor.from_numpy(fc.W.numpy(), other)
    fc.device_check(x, w)
    assert w.device.id() == x.device.id()
    h = tensor.from_numpy(np.ones((2, 2), np.float16))
    f = T(np.ones((2, 2)))
    fc.dtype_check(h, f)
    assert f.dtype == tensor.float16


# ---- dense layers ----

def test_linear_singa_positional_forms():
    x = rand(5, 4)
    fc = layer.Linear(4, 3, False)  # (in_features, out_features, bias)
    close(fc(T(x)), x @ fc.W.numpy())
    assert list(fc.get_params()) == ["W"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        layer.Linear(3, bogus=1)


def test_gemm_takes_nb_kernels_and_singa_bias_shape():
    x = rand(4, 6)
    g = layer.Gemm(nb_kernels=3, alpha=2.0, beta=0.5)
    g(T(x))
    assert g.W.shape == (3, 6) and g.b.shape == (1, 3)
    b = rand(1, 3)
    g.set_params({"b": b})
    close(g(T(x)), 2.0 * x @ g.W.numpy().T + 0.5 * b)


def test_embedding_initializers_and_from_pretrained():
    idx = tensor.from_numpy(np.array([[0, 3], [2, 2]], np.int32))
    u = layer.Embedding(2000, 8, initializer="uniform")
    u(idx)
    w = u.W.numpy()
    assert w.min() >= -1 and w.max() <= 1 and abs(w.std() - 1 / np.sqrt(3)) < 0.02
    g = layer.Embedding(2000, 8)
    g(idx)
    assert abs(g.W.numpy().std() - 1.0) < 0.03
    table = rand(4, 3)
    e = layer.Embedding(4, 3).from_pretrained(table)
    close(e(idx), table[[[0, 3], [2, 2]]])
    assert not e.W.stores_grad
    e2 = layer.Embedding(4, 3).from_pretrained(T(table), freeze=False)
    assert e2.W.requires_grad and e2.W.stores_grad
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 3\)"):
        layer.Embedding(4, 3).from_pretrained(rand(3, 3))


# ---- convolution and pooling ----

def test_conv2d_three_leading_ints_rule():
    x = rand(2, 3, 7, 7)
    c = layer.Conv2d(3, 4, 3, 2, 1)  # in, out, kernel, stride, padding
    y = c(T(x))
    assert c.W.shape == (4, 3, 3, 3)
    close(y, np_conv(x, c.W.numpy(), c.b.numpy(), (2, 2), (1, 1, 1, 1)))
    c2 = layer.Conv2d(4, 3, stride=2, padding=1)  # nb_kernels, kernel
    c2(T(x))
    assert c2.W.shape == (4, 3, 3, 3)
    # SINGA's cuDNN keywords are accepted; others are not.
    layer.Conv2d(4, 3, cudnn_prefer="fastest", workspace_MB_limit=512)
    with pytest.raises(TypeError, match="'bogus'"):
        layer.Conv2d(4, 3, bogus=1)


def test_four_number_padding_is_top_bottom_left_right():
    x = rand(1, 2, 6, 5)
    conv = layer.Conv2d(3, 3, padding=(2, 0, 1, 1), bias=False)
    y = conv(T(x))
    want = np_conv(x, conv.W.numpy(), None, pads=(2, 0, 1, 1))
    assert y.shape == want.shape == (1, 3, 6, 5)
    close(y, want)
    pool = layer.MaxPool2d(2, stride=1, padding=(1, 0, 0, 1))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1)), constant_values=-np.inf)
    want = np.lib.stride_tricks.sliding_window_view(xp, (2, 2), axis=(2, 3)).max((-1, -2))
    close(pool(T(x)), want)


def test_separable_conv_singa_forms():
    x = rand(2, 3, 6, 6)
    sep = layer.SeparableConv2d(3, 5, 3, stride=1, padding=1)
    y = sep(T(x))
    assert set(sep.get_params()) == {"depthwise_conv.W", "point_conv.W"}
    mid = np_conv(x, sep.depthwise_conv.W.numpy(), pads=(1, 1, 1, 1), group=3)
    close(y, np_conv(mid.astype(np.float32), sep.point_conv.W.numpy()))
    with pytest.raises(ValueError, match=r"3 input channels.*\(2, 4, 6, 6\)"):
        layer.SeparableConv2d(3, 5, 3)(T(rand(2, 4, 6, 6)))


def test_pool1d_on_singa_four_d_input():
    x = rand(2, 3, 1, 8)
    y = layer.MaxPool1d(2)(T(x))
    assert y.shape == (2, 3, 1, 4)
    close(y, x.reshape(2, 3, 1, 4, 2).max(-1))
    close(layer.AvgPool1d(4, stride=2)(T(x)),
          np.lib.stride_tricks.sliding_window_view(x, 4, axis=3)[..., ::2, :].mean(-1))
    with pytest.raises(ValueError, match="height 1"):
        layer.MaxPool1d(2)(T(rand(2, 3, 2, 8)))


def test_batchnorm_channels_and_softmax_axis():
    bn = layer.BatchNorm2d(4, 0.8)
    bn(T(rand(2, 4, 3, 3)))
    assert bn.channels == 4 and bn.momentum == 0.8
    x = rand(2, 3, 4)
    e = np.exp(x - x.max(1, keepdims=True))
    close(layer.SoftMax()(T(x)), e / e.sum(1, keepdims=True))


# ---- recurrent ----

def _sig(v):
    return 1 / (1 + np.exp(-v))


def test_rnn_singa_call_and_step_forward():
    xs = [rand(3, 4) for _ in range(5)]
    h0 = rand(3, 6)
    rnn = layer.RNN(4, 6, 1, "relu")
    out, h = rnn(list(map(T, xs)), T(h0))
    p = {k: v.numpy() for k, v in rnn.get_params().items()}
    assert set(p) == {"Wx", "Wh", "b"}
    hn = h0
    for x, o in zip(xs, out):
        hn = np.maximum(x @ p["Wx"] + hn @ p["Wh"] + p["b"], 0)
        close(o, hn)
    close(h, hn)
    one = rnn.step_forward(T(xs[0]), T(h0), rnn.Wx, rnn.Wh, rnn.b)
    close(one, np.maximum(xs[0] @ p["Wx"] + h0 @ p["Wh"] + p["b"], 0))
    with pytest.raises(NotImplementedError, match="num_layers"):
        layer.RNN(4, 6, 2)
    with pytest.raises(NotImplementedError, match="bidirectional"):
        layer.LSTM(4, 6, bidirectional=True)


def test_lstm_singa_call_returns_outputs_h_c():
    xs = [rand(2, 3) for _ in range(4)]
    h0, c0 = rand(2, 5), rand(2, 5)
    lstm = layer.LSTM(3, 5)
    out, h, c = lstm(list(map(T, xs)), (T(h0), T(c0)))
    assert isinstance(out, list) and len(out) == 4
    p = {k: v.numpy() for k, v in lstm.get_params().items()}
    hn, cn = h0, c0
    for x, o in zip(xs, out):
        z = {k: x @ p["Wx_" + k] + p["Bx_" + k] + hn @ p["Wh_" + k] + p["Bh_" + k]
             for k in "ifog"}
        cn = _sig(z["f"]) * cn + _sig(z["i"]) * np.tanh(z["g"])
        hn = _sig(z["o"]) * np.tanh(cn)
        close(o, hn)
    close(h, hn)
    close(c, cn)
    h1, c1 = lstm.step_forward(T(xs[0]), T(h0), T(c0))
    z = {k: xs[0] @ p["Wx_" + k] + p["Bx_" + k] + h0 @ p["Wh_" + k] + p["Bh_" + k]
         for k in "ifog"}
    c_ref = _sig(z["f"]) * c0 + _sig(z["i"]) * np.tanh(z["g"])
    close(c1, c_ref)
    close(h1, _sig(z["o"]) * np.tanh(c_ref))
    assert [t.name for t in lstm.Wx] == ["Wx_i", "Wx_f", "Wx_o", "Wx_g"]


def test_lstm_trains_through_singa_step():
    from singa import opt
    autograd.training = True
    lstm = layer.LSTM(2, 4)
    fc = layer.Linear(1)
    sgd = opt.SGD(lr=0.2)
    xs = [T(rand(8, 2)) for _ in range(3)]
    target = T(np.ones((8, 1)) * 0.5)
    h0 = tensor.Tensor((8, 4), requires_grad=False)
    losses = []
    for _ in range(30):
        out, h, c = lstm(xs, (h0, h0))
        loss = autograd.mse_loss(fc(h), target)
        sgd(loss)
        losses.append(float(loss))
    assert losses[-1] < 0.2 * losses[0]


# ---- CudnnRNN (composed ops; cuDNN's formulas and gate orders) ----

def _torch_rnn(torch, mode, inp, hid, layers, bidir):
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}.get(mode)
    if cls is None:
        return torch.nn.RNN(inp, hid, layers, nonlinearity=mode, bidirectional=bidir)
    return cls(inp, hid, layers, bidirectional=bidir)


def _load_flat_w(rnn, ref):
    pieces = []
    for layer_i in range(rnn.num_layers):
        for d in range(2 if rnn.bidirectional else 1):
            sfx = f"_l{layer_i}" + ("_reverse" if d else "")
            pieces += [getattr(ref, "weight_ih" + sfx).detach().numpy().T.ravel(),
                       getattr(ref, "weight_hh" + sfx).detach().numpy().T.ravel(),
                       getattr(ref, "bias_ih" + sfx).detach().numpy(),
                       getattr(ref, "bias_hh" + sfx).detach().numpy()]
    flat = np.concatenate(pieces).astype(np.float32)
    assert flat.shape == rnn.W.shape
    rnn.set_params({"W": flat})


@pytest.mark.parametrize("mode,layers,bidir", [("lstm", 2, True), ("gru", 2, False),
                                               ("tanh", 1, True), ("relu", 2, False)])
def test_cudnn_rnn_matches_pytorch(torch, mode, layers, bidir):
    x = rand(4, 5, 3)  # batch first
    rnn = layer.CudnnRNN(6, num_layers=layers, bidirectional=bidir, rnn_mode=mode)
    rnn(T(x))
    ref = _torch_rnn(torch, mode, 3, 6, layers, bidir)
    _load_flat_w(rnn, ref)
    dirs = 2 if bidir else 1
    h0 = rand(layers * dirs, 4, 6)
    c0 = rand(layers * dirs, 4, 6)
    with torch.no_grad():
        targs = (torch.tensor(h0), torch.tensor(c0)) if mode == "lstm" else torch.tensor(h0)
        want, _ = ref(torch.tensor(x.transpose(1, 0, 2)), targs)
    y = rnn(T(x), T(h0), T(c0))
    close(y, want.numpy().transpose(1, 0, 2), tol=2e-4)
    last = layer.CudnnRNN(6, num_layers=layers, bidirectional=bidir, rnn_mode=mode,
                          return_sequences=False)
    last(T(x))
    last.set_params(rnn.get_params())
    close(last(T(x), T(h0), T(c0)), want.numpy()[-1], tol=2e-4)


def test_cudnn_rnn_masked_sequences_match_numpy():
    x = rand(3, 4, 2)
    lengths = np.array([4, 2, 1], np.int32)
    rnn = layer.CudnnRNN(5, rnn_mode="tanh", use_mask=True, return_sequences=False)
    rnn(T(x), seq_lengths=tensor.from_numpy(lengths))
    w = rnn.W.numpy()
    wx, wh = w[:10].reshape(2, 5), w[10:35].reshape(5, 5)
    bx, bh = w[35:40], w[40:45]
    want = []
    for b in range(3):
        h = np.zeros(5, np.float32)
        for t in range(lengths[b]):
            h = np.tanh(x[b, t] @ wx + bx + h @ wh + bh)
        want.append(h)
    close(rnn(T(x), seq_lengths=tensor.from_numpy(lengths)), np.stack(want))
    seqs = layer.CudnnRNN(5, rnn_mode="tanh", use_mask=True)
    seqs(T(x), seq_lengths=tensor.from_numpy(lengths))
    seqs.set_params(rnn.get_params())
    y = seqs(T(x), seq_lengths=tensor.from_numpy(lengths)).numpy()
    assert np.all(y[1, 2:] == 0) and np.all(y[2, 1:] == 0)
    close(y[1, 1], want[1])
    with pytest.raises(ValueError, match="seq_lengths"):
        rnn(T(x), seq_lengths=tensor.from_numpy(np.array([5, 1, 1], np.int32)))
    with pytest.raises(ValueError, match="rnn_mode"):
        layer.CudnnRNN(4, rnn_mode="transformer")


def test_cudnn_rnn_masked_bidirectional_matches_pytorch_per_sequence(torch):
    x = rand(5, 3, 4)  # seq first
    lengths = np.array([5, 3, 1], np.int32)
    rnn = layer.CudnnRNN(6, batch_first=False, bidirectional=True, use_mask=True)
    rnn(T(x), seq_lengths=tensor.from_numpy(lengths))
    ref = torch.nn.LSTM(4, 6, bidirectional=True)
    _load_flat_w(rnn, ref)
    got = rnn(T(x), seq_lengths=tensor.from_numpy(lengths)).numpy()
    for b, n in enumerate(lengths):
        # Each sequence alone, at its own length, as cuDNN's packed form runs it.
        with torch.no_grad():
            want, _ = ref(torch.tensor(x[:n, b:b + 1]))
        close(got[:n, b], want.numpy()[:, 0])
        assert np.all(got[n:, b] == 0)
