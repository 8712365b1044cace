"""Every autograd operator (forward and backward), every layer and every
optimizer step on another device against the default CPU device, on the
same inputs. `other` is a separate CPU device and every visible GPU (see
conftest.py); float32 agrees to rtol 1e-5 with atol 1e-5 of the largest
magnitude (sums run in another order on a GPU).
"""

import inspect

import numpy as np
import pytest

from singa import autograd, layer, opdefs, ops, opt, singa_wrap, tensor

rng = np.random.default_rng(11)
CPU = singa_wrap.DefaultDevice()
LAYOUTS = ("contiguous", "transposed", "sliced")


def close(got, want, rtol=1e-5, what=""):
    want = np.asarray(want, dtype=np.float64)
    scale = float(np.abs(want).max()) if want.size else 1.0
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol,
                               atol=rtol * max(scale, 1.0), err_msg=what)


def U(lo, hi, shape=(3, 4)):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def S(lo, hi, shape=(3, 4)):
    """|x| in [lo, hi] with random signs (away from kinks at 0)."""
    return U(lo, hi, shape) * np.where(rng.random(shape) < 0.5, -1, 1).astype(np.float32)


def I(*values):
    return np.array(values, np.int32)


def on(arr, dev, layout):
    if arr.dtype.kind != "f" or arr.ndim < 1 or layout == "contiguous":
        return tensor.from_numpy(arr, dev)
    if layout == "transposed" and arr.ndim >= 2:
        axes = tuple(range(arr.ndim - 2)) + (arr.ndim - 1, arr.ndim - 2)
        return tensor.from_numpy(np.ascontiguousarray(arr.transpose(axes)), dev).transpose(axes)
    wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), arr.dtype)
    wide[..., ::2] = arr
    return tensor.from_numpy(wide, dev).view[..., ::2]


# Operator class name: (function of tensors, inputs, indices that get a
# gradient or None for every float input). The element-wise ops of the op
# table (singa.opdefs) come from test_opdefs' reference rows, one per op.
OTHER_CASES = {
    "LeakyReLU": (lambda x: ops.leakyrelu(x, 0.2), [S(0.1, 2)], None),
    "Elu": (lambda x: ops.elu(x, 0.7), [S(0.1, 2)], None),
    "SeLU": (ops.selu, [S(0.1, 2)], None),
    "PRelu": (ops.prelu, [S(0.1, 2, (2, 3, 4)), U(0.1, 0.5, (3, 1))], None),
    "HardSigmoid": (ops.hardsigmoid, [S(0.1, 2.4)], None),
    "SoftMax": (lambda x: ops.softmax(x, 0), [S(0, 3)], None),
    "LogSoftMax": (lambda x: ops.log_softmax(x, 1), [S(0, 3, (2, 3, 4))], None),
    "Clip": (lambda x: ops.clip(x, -0.5, 0.7), [S(0.1, 2)], None),
    "Identity": (ops.identity, [U(-2, 2)], None),
    "Negative": (ops.negative, [U(-2, 2)], None),
    "Where": (lambda c, a, b: ops.where(a, b, c), [np.round(U(0, 1)), U(-2, 2), U(-2, 2, (4,))],
              [1, 2]),
    "Sum": (ops.sum, [U(-2, 2), U(-2, 2, (4,)), U(-2, 2, (3, 1))], None),
    "Mean": (ops.mean, [U(-2, 2), U(-2, 2, (4,))], None),
    "Min": (ops.min, [U(-2, 2), U(-2, 2, (4,))], None),
    "Max": (ops.max, [U(-2, 2), U(-2, 2, (4,))], None),
    "Cast": (lambda x: ops.cast(ops.cast(x, tensor.float16), tensor.float32), [U(-2, 2)], None),
    "Matmul": (ops.matmul, [U(-1, 1, (2, 3, 5)), U(-1, 1, (5, 4))], None),
    "AddBias": (lambda x, b: ops.add_bias(x, b, 0), [U(-1, 1, (3, 4)), U(-1, 1, (4,))], None),
    "Gemm": (lambda a, b, c: ops.gemm(a, b, c, 0.5, 2.0, 1, 0),
             [U(-1, 1, (5, 3)), U(-1, 1, (5, 4)), U(-1, 1, (4,))], None),
    "CosSim": (ops.cossim, [U(-1, 1, (3, 5)), U(-1, 1, (3, 5))], None),
    "ReduceSum": (lambda x: ops.reduce_sum(x, [1], 0), [U(-1, 1, (2, 3, 4))], None),
    "ReduceMean": (lambda x: ops.reduce_mean(x, [0, 2], 1), [U(-1, 1, (2, 3, 4))], None),
    "GlobalAveragePool": (ops.globalaveragepool, [U(-1, 1, (2, 3, 4, 5))], None),
    "Reshape": (lambda x: ops.reshape(x, (4, 3)), [U(-1, 1)], None),
    "Flatten": (lambda x: ops.flatten(x, 2), [U(-1, 1, (2, 3, 4))], None),
    "Transpose": (lambda x: ops.transpose(x, (1, 2, 0)), [U(-1, 1, (2, 3, 4))], None),
    "Squeeze": (lambda x: ops.squeeze(x, [1]), [U(-1, 1, (3, 1, 4))], None),
    "Unsqueeze": (lambda x: ops.unsqueeze(x, [0, 2]), [U(-1, 1)], None),
    "Concat": (lambda a, b: ops.cat([a, b], 1), [U(-1, 1, (3, 2)), U(-1, 1, (3, 4))], None),
    "Split": (lambda x: ops.split(x, 1, [1, 3])[1], [U(-1, 1)], None),
    "Slice": (lambda x: ops.slice(x, [0, 1], [3, 4], [0, 1], [2, 2]), [U(-1, 1, (4, 5))], None),
    "Tile": (lambda x: ops.tile(x, [2, 3]), [U(-1, 1)], None),
    "Expand": (lambda x: ops.expand(x, [2, 3, 4]), [U(-1, 1, (3, 1))], None),
    "Pad": (lambda x: ops.pad(x, "reflect", [1, 2, 1, 0]), [U(-1, 1)], None),
    "UpSample": (lambda x: ops.upsample(x, "nearest", [1, 1, 2, 3]), [U(-1, 1, (1, 2, 2, 3))],
                 None),
    "DepthToSpace": (lambda x: ops.depth_to_space(x, 2, "CRD"), [U(-1, 1, (1, 8, 2, 3))], None),
    "SpaceToDepth": (lambda x: ops.space_to_depth(x, 2), [U(-1, 1, (1, 2, 4, 6))], None),
    "Gather": (lambda x: ops.gather(x, 1, [[0, 3], [-1, 1]]), [U(-1, 1, (3, 4, 2))], None),
    "Embedding": (ops.embedding, [I(3, 0, 3, 1), U(-1, 1, (5, 3))], [1]),
    "ScatterElements": (lambda x, u: ops.scatter_elements(x, [[1, 0, 2], [0, 2, 1]], u, 0),
                        [U(-1, 1, (3, 3)), U(-1, 1, (2, 3))], None),
    "OneHot": (lambda i: ops.onehot(-1, i, 5), [I(0, 3, -1, 4)], []),
    "Shape": (ops.shape, [U(-1, 1, (2, 3, 4))], []),
    "ConstantOfShape": (lambda s: ops.constant_of_shape(s, 2.5), [I(2, 3)], []),
    "NonZero": (ops.nonzero, [np.round(U(-1, 1))], []),
    "_Conv2d": (lambda x, w, b: ops.conv2d(x, w, b, 2, 1, 1, 2),
               [U(-1, 1, (2, 4, 7, 6)), U(-1, 1, (6, 2, 3, 3)), U(-1, 1, (6,))], None),
    "_Pooling2d": (lambda x: ops.max_pool2d(x, 3, 2, 1, 1, True), [U(-1, 1, (2, 3, 7, 6))],
                  None),
    "_Pooling1d": (lambda x: ops.avg_pool1d(x, 3, 2, 1, True, True), [U(-1, 1, (2, 3, 9))], None),
    "_BatchNorm2d": (lambda x, s, b, m, v: ops.batchnorm_2d(x, s, b, m, v),
                    [U(-1, 1, (4, 3, 2, 5)), U(0.5, 1.5, (3,)), U(-1, 1, (3,)),
                     U(-0.1, 0.1, (3,)), U(0.9, 1.1, (3,))], [0, 1, 2]),
    "LayerNorm": (lambda x, s, b: ops.layer_norm(x, s, b, -1),
                  [U(-1, 1, (3, 2, 5)), U(0.5, 1.5, (5,)), U(-1, 1, (5,))], None),
    "SoftMaxCrossEntropy": (ops.softmax_cross_entropy, [S(0, 3, (4, 5)), I(0, 4, 2, 2)], [0]),
    "CrossEntropy": (ops.cross_entropy,
                     [U(0.1, 1, (4, 5)), np.eye(5, dtype=np.float32)[[1, 0, 4, 2]]], [0]),
    "BinaryCrossEntropy": (ops.binary_cross_entropy,
                           [U(0.1, 0.9, (3, 4)), np.round(U(0, 1, (3, 4)))], [0]),
    "MeanSquareError": (ops.mse_loss, [U(-1, 1), U(-1, 1)], [0]),
    "NLLLoss": (ops.nll_loss, [S(0, 3, (4, 5)), I(3, 0, 4, 1)], [0]),
    "RankingLoss": (ops.ranking_loss, [U(-1, 1, (6,)), U(-1, 1, (6,))], None),
}


def _elementwise_cases():
    import test_opdefs as ref  # one reference row (NumPy function, input ranges) per op
    cases = {}
    for op, (_, dom) in ref.UNARY_REF.items():
        row = opdefs.by_op(op)
        cases[op] = (getattr(autograd, row.fn), [dom.draw((3, 4), rng)],
                     None if row.grad is not None else [])
    for op, (_, da, db) in ref.BINARY_REF.items():
        row = opdefs.by_op(op)
        cases[op] = (getattr(autograd, row.fn), [da.draw((3, 4), rng), db.draw((4,), rng)],
                     [i for i, g in enumerate(row.grad) if g is not None])
    return cases


CASES = {**_elementwise_cases(), **OTHER_CASES}
# Random: compared by the properties of its output (test_dropout); the base
# class of the generated operators.
NOT_CASES = {"Dropout", "Elementwise"}


def run(fn, arrays, wrt, dev, layout):
    """Output and input gradients (as NumPy) of sum(r * fn(...))."""
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    ts = []
    for i, a in enumerate(arrays):
        t = on(a, dev, layout)
        t.requires_grad = t.stores_grad = i in wrt
        ts.append(t)
    with autograd.train_mode(True):
        y = fn(*ts)
        assert y.device.name() == dev.name(), f"output on {y.device.name()}, not {dev.name()}"
        out = tensor.to_numpy(y)
        grads = {}
        if wrt:
            r = np.random.default_rng(5).uniform(0.5, 1.5, out.shape).astype(np.float32)
            g = autograd.gradients(y, tensor.from_numpy(r.astype(out.dtype), dev))
            for i in wrt:
                grads[i] = tensor.to_numpy(g[ts[i]])
    return out, grads


def test_every_operator_has_a_case():
    classes = {getattr(ops, n) for n in ops.__all__
               if inspect.isclass(getattr(ops, n)) and issubclass(getattr(ops, n),
                                                                   autograd.Operator)}
    covered = {getattr(ops, n) for n in set(CASES) | NOT_CASES}
    missing = sorted(c.__name__ for c in classes - covered)
    assert not missing, f"operators without a cross-device case: {missing}"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_operator(name, layout, other):
    fn, arrays, wrt = CASES[name]
    want, want_g = run(fn, arrays, wrt, CPU, layout)
    got, got_g = run(fn, arrays, wrt, other, layout)
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want, what=f"{name} forward")
    for i in want_g:
        close(got_g[i], want_g[i], what=f"{name} gradient of input {i}")


# float16 operands are computed in float32 and rounded once, on both
# devices, so results agree to about one float16 rounding (rtol 2e-3).
HALF = ["Add", "Mul", "ReLU", "SoftMax", "Matmul", "AddBias", "Gemm", "_Conv2d", "_Pooling2d",
        "_Pooling1d", "_BatchNorm2d", "MeanSquareError", "ReduceSum", "Exp", "Tanh"]


@pytest.mark.parametrize("name", HALF)
def test_float16_operator(name, other):
    fn, arrays, wrt = CASES[name]
    arrays = [a.astype(np.float16) if a.dtype == np.float32 else a for a in arrays]
    want, want_g = run(fn, arrays, wrt, CPU, "transposed")
    got, got_g = run(fn, arrays, wrt, other, "transposed")
    assert got.dtype == want.dtype == np.float16
    close(got, want, rtol=2e-3, what=f"{name} forward")
    for i in want_g:
        assert want_g[i].dtype == np.float16
        close(got_g[i], want_g[i], rtol=2e-3, what=f"{name} gradient of input {i}")


class _HalfCNN(layer.Layer):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(8, 3, padding=1, activation="RELU")
        self.bn = layer.BatchNorm2d(8)
        self.pool = layer.MaxPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(10)

    def forward(self, x):
        return self.fc(self.flat(self.pool(self.bn(self.conv(x)))))


def test_float16_model_trains(dev):
    x = rng.standard_normal((32, 1, 8, 8)).astype(np.float16)
    y = rng.integers(0, 10, 32).astype(np.int32)
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    net, sgd = _HalfCNN(), opt.SGD(lr=0.05, momentum=0.9)
    losses = []
    with autograd.train_mode(True):
        for _ in range(20):
            loss = ops.softmax_cross_entropy(net(tx), ty)
            sgd(loss)
            losses.append(float(tensor.to_numpy(loss)[0]))
    assert all(p.dtype == tensor.float16 for p in net.get_params().values())
    assert np.isfinite(losses).all() and losses[-1] < 0.2 * losses[0], losses


def test_dropout(other):
    x = U(1, 2, (200, 50))
    t = tensor.from_numpy(x, other)
    t.stores_grad = True
    with autograd.train_mode(True):
        y = ops.dropout(t, ratio=0.3)
        g = autograd.gradients(y, tensor.from_numpy(np.ones_like(x), other))[t]
    y, g = tensor.to_numpy(y), tensor.to_numpy(g)
    kept = y != 0
    close(y[kept], x[kept] / 0.7)
    np.testing.assert_array_equal(g, kept / np.float32(0.7))
    assert abs(kept.mean() - 0.7) < 0.03


# ---- layers ----

def _lstm_input(n):
    return U(-1, 1, (5, n, 3))


LAYERS = {
    "Linear": (lambda: layer.Linear(4), [U(-1, 1, (3, 5))]),
    "Gemm": (lambda: layer.Gemm(4, transA=True, bias=True), [U(-1, 1, (5, 3))]),
    "Embedding": (lambda: layer.Embedding(6, 3), [I(1, 5, 0, 5)]),
    "Conv2d": (lambda: layer.Conv2d(4, 3, stride=2, padding=1, activation="RELU"),
               [U(-1, 1, (2, 3, 7, 7))]),
    "SeparableConv2d": (lambda: layer.SeparableConv2d(4, 3, padding=1), [U(-1, 1, (2, 2, 5, 5))]),
    "MaxPool2d": (lambda: layer.MaxPool2d(2, 2), [U(-1, 1, (2, 3, 6, 5))]),
    "AvgPool2d": (lambda: layer.AvgPool2d(3, 1, 1), [U(-1, 1, (2, 3, 6, 5))]),
    "Pooling2d": (lambda: layer.Pooling2d(2, 2, is_max=False), [U(-1, 1, (2, 3, 6, 4))]),
    "MaxPool1d": (lambda: layer.MaxPool1d(3, 2), [U(-1, 1, (2, 3, 9))]),
    "AvgPool1d": (lambda: layer.AvgPool1d(2, 2), [U(-1, 1, (2, 3, 8))]),
    "Pooling1d": (lambda: layer.Pooling1d(2, 1), [U(-1, 1, (2, 3, 8))]),
    "BatchNorm2d": (lambda: layer.BatchNorm2d(3), [U(-1, 1, (4, 3, 3, 3))]),
    "LayerNorm": (layer.LayerNorm, [U(-1, 1, (3, 5))]),
    "RNN": (lambda: layer.RNN(3, 4), [_lstm_input(2)]),
    "LSTM": (lambda: layer.LSTM(3, 4), [_lstm_input(2)]),
    "CudnnRNN": (lambda: layer.CudnnRNN(4, num_layers=2, bidirectional=True),
                 [U(-1, 1, (2, 5, 3))]),
    "ReLU": (layer.ReLU, [S(0.1, 1)]),
    "Sigmoid": (layer.Sigmoid, [U(-1, 1)]),
    "Tanh": (layer.Tanh, [U(-1, 1)]),
    "SoftMax": (layer.SoftMax, [U(-1, 1)]),
    "Flatten": (layer.Flatten, [U(-1, 1, (2, 3, 4))]),
    "Reshape": (lambda: layer.Reshape((3, 4)), [U(-1, 1, (2, 6))]),
    "Cat": (lambda: _ListInput(layer.Cat(1)), [U(-1, 1, (2, 3)), U(-1, 1, (2, 4))]),
    "Add": (layer.Add, [U(-1, 1, (2, 3)), U(-1, 1, (2, 3))]),
    "SoftMaxCrossEntropy": (layer.SoftMaxCrossEntropy, [U(-1, 1, (4, 3)), I(0, 2, 1, 1)]),
    "CrossEntropy": (layer.CrossEntropy, [U(0.1, 1, (4, 3)),
                                         np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]]),
    "BinaryCrossEntropy": (layer.BinaryCrossEntropy, [U(0.1, 0.9), np.round(U(0, 1))]),
    "MeanSquareError": (layer.MeanSquareError, [U(-1, 1), U(-1, 1)]),
    "Sequential": (lambda: layer.Sequential(layer.Linear(3), layer.ReLU(), layer.Linear(2)),
                   [U(-1, 1, (4, 5))]),
}
# Base classes and the metaclass; random (test_dropout).
NOT_TESTED_HERE = {"Layer", "LayerMeta", "RNN_Base", "Dropout"}


class _ListInput(layer.Layer):
    """Calls a layer that takes a list of tensors (Cat) with its inputs."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *xs):
        return self.inner(list(xs))


def test_every_layer_has_a_case():
    assert set(layer.__all__) - set(LAYERS) - NOT_TESTED_HERE == set()


def _run_layer(lay, arrays, dev):
    xs = [tensor.from_numpy(a, dev) for a in arrays]
    for x in xs:
        x.requires_grad = x.data.data_type() == singa_wrap.kFloat32
    with autograd.train_mode(True):
        y = lay(*xs)
        y = y[0] if isinstance(y, (tuple, list)) else y
        r = np.random.default_rng(3).uniform(0.5, 1.5, tuple(y.shape)).astype(np.float32)
        grads = autograd.gradients(y, tensor.from_numpy(r, dev))
    params = lay.get_params()
    return (tensor.to_numpy(y), {n: tensor.to_numpy(grads[p]) for n, p in params.items()
                                 if p in grads},
            {n: tensor.to_numpy(t) for n, t in lay.get_states().items()})


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer(name, other):
    make, arrays = LAYERS[name]
    a, b = make(), make()
    xs = [tensor.from_numpy(x, CPU) for x in arrays]
    with autograd.train_mode(False):
        a(*xs)  # creates the parameters
        b(*[tensor.from_numpy(x, other) for x in arrays])
    b.set_states(a.get_states())
    for t in b.get_states().values():
        assert t.device.name() == other.name()
    ya, ga, sa = _run_layer(a, arrays, CPU)
    yb, gb, sb = _run_layer(b, arrays, other)
    close(yb, ya, what=f"{name} output")
    assert gb.keys() == ga.keys()
    for n in ga:
        close(gb[n], ga[n], what=f"{name} gradient of {n}")
    for n in sa:
        close(sb[n], sa[n], what=f"{name} state {n}")


# ---- optimizers ----

OPTIMIZERS = {
    "SGD": lambda: opt.SGD(lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True),
    "SGD-plain": lambda: opt.SGD(lr=0.05),
    "RMSProp": lambda: opt.RMSProp(lr=0.01, weight_decay=1e-3),
    "AdaGrad": lambda: opt.AdaGrad(lr=0.05),
    "Adam": lambda: opt.Adam(lr=0.01, weight_decay=1e-3),
    "AdamW": lambda: opt.AdamW(lr=0.01),
}


def test_every_optimizer_has_a_case():
    classes = {n for n, c in vars(opt).items()
               if inspect.isclass(c) and issubclass(c, opt.Optimizer) and c is not opt.Optimizer}
    assert classes - {k.split("-")[0] for k in OPTIMIZERS} == set()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps(name, other):
    w0, x, t = U(-1, 1, (5, 3)), U(-1, 1, (8, 5)), U(-1, 1, (8, 3))

    def train(dev):
        w = tensor.from_numpy(w0, dev)
        w.requires_grad = w.stores_grad = True
        w.name = "w"
        o = OPTIMIZERS[name]()
        with autograd.train_mode(True):
            for _ in range(4):
                loss = ops.mse_loss(ops.tanh(ops.matmul(tensor.from_numpy(x, dev), w)),
                                    tensor.from_numpy(t, dev))
                o(loss)
        return tensor.to_numpy(w)
    close(train(other), train(CPU), what=name)
