"""Export tests: singa models -> ONNX -> onnxruntime and back into singa.

Each model runs in singa (eval mode), is exported with sonnx.export_model,
checked with onnx.checker (full_check), run by onnxruntime, and imported
again with sonnx.prepare and sonnx.SONNXModel; all outputs must agree.
"""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from singa import autograd, layer, model, sonnx, tensor  # noqa: E402

RTOL = 1e-5
# Sums of a few hundred float32 products differ in the last bits between
# BLAS libraries; 1e-5 absolute covers that at the magnitudes used here.
ATOL = 1e-5


def _ort_run(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _round_trip(net, xs, **kwargs):
    """Exports net and checks onnxruntime and singa's importer against it."""
    net.compile(xs, is_train=False)
    net.eval()
    want = net(*xs)
    want = [w.numpy() for w in (want if isinstance(want, (list, tuple)) else [want])]
    m = sonnx.export_model(net, xs, **kwargs)
    onnx.checker.check_model(m, full_check=True)
    feeds = {vi.name: x.numpy() for vi, x in zip(m.graph.input, xs)}
    for got, w in zip(_ort_run(m, feeds), want):
        np.testing.assert_allclose(got, w, rtol=RTOL, atol=ATOL)
    for got, w in zip(sonnx.prepare(m).run(xs), want):
        np.testing.assert_allclose(got.numpy(), w, rtol=RTOL, atol=ATOL)
    imported = sonnx.SONNXModel(m)
    imported.eval()
    got = imported(*xs)
    for g, w in zip(got if isinstance(got, list) else [got], want):
        np.testing.assert_allclose(g.numpy(), w, rtol=RTOL, atol=ATOL)
    return m


def _randn(*shape, seed=0):
    return tensor.from_numpy(np.random.default_rng(seed).standard_normal(shape)
                             .astype(np.float32))


class MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(32)
        self.relu = layer.ReLU()
        self.fc2 = layer.Linear(10)
        self.softmax = layer.SoftMax()

    def forward(self, x):
        return self.softmax(self.fc2(self.relu(self.fc1(x))))


class LeNet(model.Model):
    """LeNet-style CNN: two conv / pool stages and two dense layers."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = layer.Conv2d(6, 3, padding=1)
        self.relu1 = layer.ReLU()
        self.pool1 = layer.MaxPool2d(2, 2)
        self.conv2 = layer.Conv2d(16, 3)
        self.relu2 = layer.ReLU()
        self.pool2 = layer.AvgPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.fc1 = layer.Linear(32)
        self.relu3 = layer.ReLU()
        self.dropout = layer.Dropout(0.25)
        self.fc2 = layer.Linear(classes)

    def forward(self, x):
        y = self.pool1(self.relu1(self.conv1(x)))
        y = self.pool2(self.relu2(self.conv2(y)))
        y = self.relu3(self.fc1(self.flatten(y)))
        return self.fc2(self.dropout(y))


class ResBlock(model.Model):
    """conv-bn-relu-conv-bn plus a strided 1x1 projection, then relu."""

    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(8, 3, stride=2, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(8, 3, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d()
        self.proj = layer.Conv2d(8, 1, stride=2, bias=False)
        self.bn3 = layer.BatchNorm2d()
        self.add = layer.Add()
        self.relu2 = layer.ReLU()

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(self.add(y, self.bn3(self.proj(x))))


class LSTMNet(model.Model):
    def __init__(self):
        super().__init__()
        self.lstm = layer.LSTM(12, batch_first=True)
        self.fc = layer.Linear(3)

    def forward(self, x):
        seq, h, c = self.lstm(x)
        return self.fc(h)


class TwoHeads(model.Model):
    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(6)
        self.a = layer.Linear(2)
        self.b = layer.Linear(3)

    def forward(self, x):
        h = autograd.tanh(self.fc(x))
        return [self.a(h), autograd.sigmoid(self.b(h))]


def _settle_batchnorm(net, x, steps=3):
    """Moves running statistics away from their 0 / 1 start."""
    net.train()
    with autograd.train_mode(True):
        for _ in range(steps):
            net.forward(x)
    net.eval()


def test_mlp_round_trip():
    m = _round_trip(MLP(), [_randn(5, 20)])
    assert [n.op_type for n in m.graph.node] == ["MatMul", "Add", "Relu", "MatMul", "Add",
                                                 "Softmax"]
    assert m.opset_import[0].version == 17


def test_lenet_round_trip():
    m = _round_trip(LeNet(), [_randn(4, 1, 12, 12)])
    types = [n.op_type for n in m.graph.node]
    for t in ("Conv", "MaxPool", "AveragePool", "Flatten", "Dropout", "MatMul"):
        assert t in types


def test_resnet_block_round_trip():
    net = ResBlock()
    x = _randn(2, 4, 8, 8)
    net.compile([x], is_train=False)
    _settle_batchnorm(net, _randn(2, 4, 8, 8, seed=1))
    m = _round_trip(net, [x])
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 3
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in bn[0].attribute}
    assert attrs["epsilon"] == pytest.approx(1e-5) and attrs["momentum"] == pytest.approx(0.9)


def test_lstm_round_trip():
    _round_trip(LSTMNet(), [_randn(3, 5, 4)])


def test_multiple_outputs():
    m = _round_trip(TwoHeads(), [_randn(4, 5)], output_names=["logits", "probs"])
    assert [o.name for o in m.graph.output] == ["logits", "probs"]


def test_parameters_become_named_initializers():
    net = LeNet()
    x = _randn(1, 1, 12, 12)
    net.compile([x], is_train=False)
    m = sonnx.export_model(net, [x])
    names = {i.name for i in m.graph.initializer}
    assert set(net.get_params()) <= names
    init = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    np.testing.assert_array_equal(init["conv1.W"], net.conv1.W.numpy())


def test_export_leaves_running_statistics_alone():
    net = ResBlock()
    x = _randn(2, 4, 8, 8)
    net.compile([x], is_train=False)
    before = {k: v.numpy().copy() for k, v in net.get_states().items()}
    sonnx.export_model(net, [x])
    for k, v in net.get_states().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_conv_and_pool_attributes_exported():
    x = _randn(1, 4, 9, 9)
    w = _randn(6, 2, 3, 3, seed=2)
    with autograd.train_mode(True):
        y = autograd.conv2d(x, w, None, stride=2, padding=(1, 0, 2, 1), dilation=1, group=2)
        z = autograd.max_pool2d(y, 2, stride=1, padding=1, ceil_mode=True)
        a = autograd.avg_pool2d(y, 3, stride=2, padding=1, count_include_pad=True)
    m = sonnx.to_onnx([x], [z, a])
    onnx.checker.check_model(m, full_check=True)
    nodes = {n.op_type: {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
             for n in m.graph.node}
    assert nodes["Conv"]["strides"] == [2, 2]
    assert nodes["Conv"]["pads"] == [1, 0, 2, 1]
    assert nodes["Conv"]["group"] == 2
    assert nodes["MaxPool"]["ceil_mode"] == 1 and nodes["MaxPool"]["pads"] == [1, 1, 1, 1]
    assert nodes["AveragePool"]["count_include_pad"] == 1
    got = _ort_run(m, {"input_0": x.numpy()})
    np.testing.assert_allclose(got[0], z.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], a.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opset", [13, 17, 18, 20])
def test_opsets(opset):
    x = _randn(2, 3, 4)
    with autograd.train_mode(True):
        y = autograd.reduce_mean(autograd.gelu(x), [1], 0)
        parts = autograd.split(autograd.unsqueeze(y, [0]), 2, [1, 3])
        z = autograd.cat([parts[1], autograd.clip(parts[0], -0.1, 0.1)], 2)
    m = sonnx.to_onnx([x], [z], opset_version=opset)
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == opset
    np.testing.assert_allclose(_ort_run(m, {"input_0": x.numpy()})[0], z.numpy(),
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sonnx.prepare(m).run([x])[0].numpy(), z.numpy(),
                               rtol=RTOL, atol=ATOL)


def test_shape_ops_round_trip():
    x = _randn(2, 3, 4)
    with autograd.train_mode(True):
        y = autograd.transpose(x, (2, 0, 1))
        y = autograd.slice(y, [1, 0], [4, 3], [0, 2], [2, 1])
        y = autograd.pad(y, "reflect", [0, 0, 1, 0, 0, 1])
        y = autograd.gather(y, 2, [0, 2])
        y = autograd.tile(autograd.reshape(y, (2, -1)), [2, 1])
        y = autograd.leakyrelu(autograd.mul(y, 3.0), 0.2)
    m = sonnx.to_onnx(x, y)
    onnx.checker.check_model(m, full_check=True)
    np.testing.assert_allclose(_ort_run(m, {"input_0": x.numpy()})[0], y.numpy(),
                               rtol=RTOL, atol=ATOL)


def test_reexport_of_imported_model():
    net = MLP()
    x = _randn(3, 20)
    net.compile([x], is_train=False)
    first = sonnx.export_model(net, [x])
    again = sonnx.export_model(sonnx.SONNXModel(first), [x])
    onnx.checker.check_model(again, full_check=True)
    assert {i.name for i in again.graph.initializer} >= set(net.get_params())
    np.testing.assert_allclose(_ort_run(again, {"input_0": x.numpy()})[0],
                               _ort_run(first, {"input_0": x.numpy()})[0],
                               rtol=RTOL, atol=ATOL)


def test_operator_without_onnx_counterpart_is_named():
    x = _randn(3)
    with autograd.train_mode(True):
        y = autograd.round(x)
    with pytest.raises(sonnx.UnsupportedError, match="Round"):
        sonnx.to_onnx([x], [y])


def test_unrecorded_output_is_reported():
    x = _randn(3)
    y = tensor.relu(x)     # a tensor function, not an autograd operator
    with pytest.raises(sonnx.SonnxError, match="not recorded"):
        sonnx.to_onnx([x], [y])


def test_unused_input_is_reported():
    x, z = _randn(3), _randn(3, seed=1)
    with autograd.train_mode(True):
        y = autograd.relu(x)
    with pytest.raises(sonnx.SonnxError, match="input_1"):
        sonnx.to_onnx([x, z], [y])


@pytest.mark.parametrize("opset", [9, 10_000, "17"])
def test_bad_opset(opset):
    x = _randn(3)
    with autograd.train_mode(True):
        y = autograd.relu(x)
    with pytest.raises(sonnx.UnsupportedError, match="opset"):
        sonnx.to_onnx([x], [y], opset_version=opset)


def test_non_tensor_arguments():
    with pytest.raises(TypeError, match="not a singa Tensor"):
        sonnx.to_onnx([np.zeros(3)], [_randn(3)])


def test_model_exports_itself():
    net = MLP()
    x = _randn(3, 20)
    net.compile([x], is_train=False)
    m = net.to_onnx([x], model_name="mlp")
    onnx.checker.check_model(m, full_check=True)
    assert m.graph.name == "mlp"
    got = sonnx.prepare(m).run([x])[0]
    np.testing.assert_allclose(tensor.to_numpy(got), tensor.to_numpy(net(x)), rtol=1e-5, atol=1e-6)
