"""singa.sonnx as SINGA's scripts use it (SINGA_API.md, SINGA_COMPAT.md):
to_onnx on the outputs of an inference-mode forward exporting inference
behaviour without touching the model, prepare / run, SONNXModel returning
lists, run_node / get_op, SingaFrontend and the other SINGA names. Values
are checked against onnxruntime and NumPy."""

import collections

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from singa import autograd, device, layer, model, opt, sonnx, tensor  # noqa: E402

rng = np.random.default_rng(5)


def T(a):
    return tensor.from_numpy(np.asarray(a))


def ort_run(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


class CNN(model.Model):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(1, 6, 3, padding=1)
        self.bn = layer.BatchNorm2d(6)
        self.relu = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.dropout = layer.Dropout(0.5)
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pool(self.relu(self.bn(self.conv(x))))
        return self.fc(self.dropout(self.flatten(y)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.fixture(scope="module")
def trained():
    """A CNN with batch norm and dropout after a few SGD steps, so its
    running statistics are far from their initial values."""
    x = T(rng.standard_normal((16, 1, 6, 6)).astype(np.float32) * 3 + 1)
    y = T(rng.integers(0, 3, 16).astype(np.int32))
    m = CNN()
    m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    m.compile([x], is_train=True, use_graph=False, sequential=False)
    m.train()
    for _ in range(4):
        m(x, y)
    m.eval()
    autograd.training = False
    return m, x


def snapshot(m):
    return {k: v.numpy().copy() for k, v in m.get_states().items()}


def test_export_after_eval_matches_onnxruntime_and_changes_nothing(trained):
    m, x = trained
    before = snapshot(m)
    assert np.abs(before["bn.running_mean"]).max() > 0.05   # statistics did move
    y = m(x)                                  # eval: an inference-mode forward
    onnx_model = sonnx.to_onnx([x], [y])
    onnx.checker.check_model(onnx_model, full_check=True)
    after = snapshot(m)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    got = ort_run(onnx_model, {"input_0": x.numpy()})[0]
    np.testing.assert_allclose(got, y.numpy(), rtol=1e-4, atol=1e-5)
    # batch norm exported with the running statistics, under their names
    init = {i.name: numpy_helper.to_array(i) for i in onnx_model.graph.initializer}
    np.testing.assert_array_equal(init["bn.running_mean"], before["bn.running_mean"])
    np.testing.assert_array_equal(init["bn.running_var"], before["bn.running_var"])
    ops = [n.op_type for n in onnx_model.graph.node]
    assert "BatchNormalization" in ops and "Dropout" in ops


def test_model_to_onnx_and_export_model_agree(trained):
    m, x = trained
    before = snapshot(m)
    want = m(x).numpy()
    for exported in (m.to_onnx([x]), sonnx.export_model(m, [x])):
        np.testing.assert_allclose(ort_run(exported, {"input_0": x.numpy()})[0], want,
                                   rtol=1e-4, atol=1e-5)
    for k, v in snapshot(m).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_a_training_mode_graph_exports_inference_behaviour(trained):
    m, x = trained
    states = snapshot(m)
    with autograd.train_mode(True):
        y_train = m.forward(x)                 # batch statistics and dropout
    exported = sonnx.to_onnx([x], [y_train])
    # the export is the eval model, with the running statistics as they are
    # now (the training forward moved them, as training does)
    want = m(x).numpy()
    np.testing.assert_allclose(ort_run(exported, {"input_0": x.numpy()})[0], want,
                               rtol=1e-4, atol=1e-5)
    assert np.abs(y_train.numpy() - want).max() > 1e-3
    m.set_states(states)


def test_round_trip_through_singa(trained):
    m, x = trained
    y = m(x)
    exported = sonnx.to_onnx([x], [y])
    rep = sonnx.prepare(exported, device.get_default_device())
    for inp in (x, x.numpy()):                 # Tensors or NumPy arrays
        outs = rep.run([inp])
        assert isinstance(outs, list) and len(outs) == 1
        np.testing.assert_allclose(outs[0].numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
    net = sonnx.SONNXModel(exported)
    net.eval()
    outs = net(x)
    assert isinstance(outs, list)
    np.testing.assert_allclose(outs[0].numpy(), y.numpy(), rtol=1e-4, atol=1e-5)


def _mlp():
    """An autograd graph MatMul -> Add -> Relu, exported in inference mode."""
    x = T(rng.standard_normal((4, 3)).astype(np.float32))
    w = T(rng.standard_normal((3, 2)).astype(np.float32))
    b = T(rng.standard_normal(2).astype(np.float32))
    w.name, b.name = "w", "b"
    y = autograd.relu(autograd.add(autograd.matmul(x, w), b))
    return x, w, b, y


def test_sonnx_model_aux_output_and_last_layers():
    x, w, b, y = _mlp()
    m = sonnx.to_onnx([x], [y])
    assert [n.op_type for n in m.graph.node] == ["MatMul", "Add", "Relu"]
    net = sonnx.SONNXModel(m)
    net.eval()
    assert isinstance(net.sg_ir, sonnx.SingaRep)
    xn, wn, bn = x.numpy(), w.numpy(), b.numpy()
    mm_name = m.graph.node[0].output[0]
    out, aux = net.forward(x, aux_output=(mm_name,))
    np.testing.assert_allclose(out.numpy(), np.maximum(xn @ wn + bn, 0), rtol=1e-5)
    np.testing.assert_allclose(aux.numpy(), xn @ wn, rtol=1e-5)
    (pre,) = net.forward(x, last_layers=-2)        # stop before the last node
    np.testing.assert_allclose(pre.numpy(), xn @ wn + bn, rtol=1e-5)
    (first,) = net.forward(x, last_layers=0)
    np.testing.assert_allclose(first.numpy(), xn @ wn, rtol=1e-5)
    with pytest.raises(sonnx.GraphError, match="last_layers"):
        net.forward(x, last_layers=3)
    with pytest.raises(sonnx.GraphError, match="aux_output"):
        net.forward(x, aux_output=("nope",))


def test_rep_helpers():
    x, w, b, y = _mlp()
    rep = sonnx.prepare(sonnx.to_onnx([x], [y]))
    counts = rep.init_tensor_count()
    assert counts["w"] == 1 and counts["input_0"] == 1
    t = rep.to_input_tensor(x.numpy().astype(np.float64))
    assert t.dtype == tensor.float32 and np.allclose(t.numpy(), x.numpy())
    assert rep.to_output_tensor(y, "output_0").dtype == tensor.float32
    node = rep.model.graph.node[0]
    np.testing.assert_array_equal(rep.get_s("w", node, {}), w.numpy())
    rep.params["w"].set_value(0.0)
    rep.initialize()                                 # back to the file's weights
    np.testing.assert_array_equal(rep.params["w"].numpy(), w.numpy())


def test_run_node_and_get_op():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = rng.standard_normal((2, 3)).astype(np.float32), np.float32(2.5)
    out = sonnx.run_node(node, [a, b])
    assert isinstance(out, collections.OrderedDict) and list(out) == ["c"]
    np.testing.assert_allclose(out["c"].numpy(), a + b, rtol=1e-6)
    op = sonnx.get_op(sonnx.OnnxNode(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.3)))
    (y,) = op(T(a))
    np.testing.assert_allclose(y.numpy(), np.where(a > 0, a, 0.3 * a), rtol=1e-6)
    split = sonnx.run_node(helper.make_node("Split", ["x", "s"], ["p", "q"], axis=1),
                           [a, np.array([1, 2], np.int64)], opset_version=13)
    np.testing.assert_array_equal(split["q"].numpy(), a[:, 1:])
    with pytest.raises(sonnx.UnsupportedError, match="NoSuchOp"):
        sonnx.get_op(helper.make_node("NoSuchOp", ["x"], ["y"]))
    with pytest.raises(sonnx.GraphError, match="2 inputs"):
        sonnx.run_node(node, [a])
    # the onnx.backend form stays NumPy in and out
    (c,) = sonnx.SingaBackend.run_node(node, [a, b])
    assert isinstance(c, np.ndarray)


def test_frontend():
    x, w, b, y = _mlp()
    model_proto = sonnx.SingaFrontend.singa_to_onnx_model([x], [y])
    assert model_proto.graph.name == "sonnx"
    graph = sonnx.SingaFrontend.singa_to_onnx_graph([x], [y], model_name="g")
    assert isinstance(graph, onnx.GraphProto) and graph.name == "g"
    add = y.creator.src[0][0]
    nodes = sonnx.SingaFrontend.singa_op_to_onnx_node(add, None)
    assert [n.op_type for n in nodes] == ["Add"]
    assert list(nodes[0].input) == [add.src[0][0].output_name(0), "b"]
    assert list(nodes[0].output) == [add.output_name(0)]
    r = autograd.reshape(x, (2, 6))
    nodes = sonnx.SingaFrontend.handle_special_ops(r.creator, ["in"], ["out"])
    assert [n.op_type for n in nodes] == ["Constant", "Reshape"]
    shape = numpy_helper.to_array(nodes[0].attribute[0].t)
    np.testing.assert_array_equal(shape, [2, 6])


def test_onnx_node_and_attributes():
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="c1", strides=[2, 2], group=1)
    node = sonnx.OnnxNode(n)
    assert (node.name, node.op_type, node.inputs, node.outputs) == ("c1", "Conv", ["x", "w"],
                                                                    ["y"])
    assert node.getattr("strides") == [2, 2] and node.getattr("pads", "none") == "none"
    node.set_weight_inputs("w", "W0")
    node.set_attr_inputs("shape", "s")
    assert node.weight_inputs == {"w": "W0"} and node.attr_inputs == {"shape": "s"}
    node.del_weight_inputs("w")
    node.del_attr_inputs("shape")
    assert node.weight_inputs == {} and node.attr_inputs == {}
    attrs = sonnx.OnnxAttributes.from_onnx(n.attribute)
    assert isinstance(attrs, dict) and attrs == {"strides": [2, 2], "group": 1}


def test_dtype_helpers_and_module_names(tmp_path):
    assert sonnx.onnx_type_to_singa_type(TensorProto.INT64) == np.dtype(np.int32)
    assert sonnx.onnx_type_to_singa_type(TensorProto.DOUBLE) == np.dtype(np.float32)
    assert sonnx.onnx_type_to_singa_type(TensorProto.FLOAT16) == np.dtype(np.float16)
    with pytest.raises(sonnx.UnsupportedError):
        sonnx.onnx_type_to_singa_type(TensorProto.STRING)
    assert sonnx.NP_TYPE_TO_SINGA_SUPPORT_TYPE[np.dtype(np.bool_)] == np.dtype(np.int32)
    x, w, b, y = _mlp()
    path = str(tmp_path / "m.onnx")
    sonnx.save(sonnx.to_onnx([x], [y]), path)
    again = sonnx.load(path)
    np.testing.assert_allclose(sonnx.prepare(again).run([x])[0].numpy(), y.numpy(), rtol=1e-6)
    assert sonnx.cpu_dev.id() == device.get_default_device().id()
    if device.get_num_gpus() == 0:
        assert sonnx.gpu_dev is None
    assert sonnx.OrderedDict is collections.OrderedDict


def test_export_of_a_released_graph_says_so():
    w = T(rng.standard_normal((3, 2)).astype(np.float32))
    w.stores_grad = True
    x = T(rng.standard_normal((4, 3)).astype(np.float32))
    autograd.training = True
    y = autograd.relu(autograd.matmul(x, w))
    list(autograd.backward(autograd.reduce_sum(y)))
    sonnx.to_onnx([x], [y])                  # still intact after backward
    autograd.relu(w)                         # the next training step releases it
    with pytest.raises(sonnx.SonnxError, match="released"):
        sonnx.to_onnx([x], [y])
