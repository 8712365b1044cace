"""Import tests: sonnx.prepare / SingaRep, SingaBackend, SONNXModel
fine-tuning, and the errors bad models and inputs raise."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from singa import autograd, layer, model, opt, sonnx, tensor  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _relu_model():
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                  [_vi("x", [2, 3])], [_vi("y", [2, 3])])


# ---- running ----

def test_prepare_and_run_gives_singa_tensors():
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    rep = sonnx.prepare(_relu_model())
    (y,) = rep.run([x])
    assert isinstance(y, tensor.Tensor)
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
    (y2,) = rep.run({"x": tensor.from_numpy(x)})
    np.testing.assert_array_equal(y2.numpy(), np.maximum(x, 0))


def test_prepare_accepts_bytes_and_paths(tmp_path):
    m = _relu_model()
    path = tmp_path / "relu.onnx"
    onnx.save(m, str(path))
    x = np.ones((2, 3), np.float32)
    for src in (m.SerializeToString(), str(path), path):
        np.testing.assert_array_equal(sonnx.prepare(src).run([x])[0].numpy(), x)


def test_conv_auto_pad_and_gemm():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((3, 4 * 3 * 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, alpha=0.5),
    ]
    m = _model(nodes, [_vi("x", [1, 2, 5, 6])], [_vi("y", [1, 3])],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc")])
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sonnx.prepare(m).run([x])[0].numpy(), want,
                               rtol=1e-5, atol=1e-5)


def test_int64_and_bool_boundaries():
    # Shape -> Gather -> Equal: int64 and bool values inside singa are int32.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
             helper.make_node("Equal", ["d", "k"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 5])], [_vi("y", [], TensorProto.BOOL)],
               [numpy_helper.from_array(np.array(1, np.int64), "i"),
                numpy_helper.from_array(np.array(5, np.int64), "k")])
    out = sonnx.SingaBackend.run_model(m, [np.zeros((2, 5), np.float32)])
    assert out[0].dtype == np.bool_ and bool(out[0]) is True
    (t,) = sonnx.prepare(m).run([np.zeros((2, 5), np.float32)])
    assert t.dtype == tensor.int32


def test_backend_interface():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    (c,) = sonnx.SingaBackend.run_node(node, [a, np.float32(2)])
    np.testing.assert_array_equal(c, a + 2)
    assert sonnx.SingaBackend.supports_device("CPU")
    assert not sonnx.SingaBackend.supports_device("TPU")


# ---- fine-tuning ----

class SmallCNN(model.Model):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(8, 3, padding=1)
        self.bn = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(10)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.relu(self.bn(self.conv(x))))))


def test_imported_cnn_fine_tunes_on_digits():
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x_all = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y_all = digits.target.astype(np.int32)
    xb, yb = tensor.from_numpy(x_all[:128]), tensor.from_numpy(y_all[:128])

    net = SmallCNN()
    net.compile([xb], is_train=False)
    onnx_model = sonnx.export_model(net, [xb], dynamic_axes={"input_0": {0: "batch"},
                                                             "output_0": {0: "batch"}})

    tuned = sonnx.SONNXModel(onnx_model)
    assert set(tuned.get_params()) == set(net.get_params())
    tuned.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    tuned.train()

    def loss_now():
        tuned.eval()
        out = tuned(xb)[0]       # SONNXModel.forward returns a list, as in SINGA
        tuned.train()
        return float(autograd.softmax_cross_entropy(out, yb))

    before = loss_now()
    w0 = tuned.get_params()["conv.W"].numpy().copy()
    for step in range(8):
        lo = (step * 64) % 1024
        tuned(tensor.from_numpy(x_all[lo:lo + 64]), tensor.from_numpy(y_all[lo:lo + 64]))
    after = loss_now()
    assert after < before * 0.8, (before, after)
    assert not np.array_equal(tuned.get_params()["conv.W"].numpy(), w0)
    # Running statistics moved while training (they are states, not params).
    assert "bn.running_mean" in tuned.get_states()
    assert "bn.running_mean" not in tuned.get_params()
    assert np.abs(tuned.get_states()["bn.running_mean"].numpy()).sum() > 0
    # The tuned model exports again, with the tuned weights.
    again = sonnx.export_model(tuned, [xb])
    onnx.checker.check_model(again, full_check=True)
    init = {i.name: numpy_helper.to_array(i) for i in again.graph.initializer}
    np.testing.assert_array_equal(init["conv.W"], tuned.get_params()["conv.W"].numpy())


# ---- errors ----

def test_unsupported_operator_is_named():
    m = _model([helper.make_node("Det", ["x"], ["y"], name="det1")],
               [_vi("x", [2, 2])], [_vi("y", [])])
    with pytest.raises(sonnx.UnsupportedError, match=r'Det node "det1".*not supported'):
        sonnx.prepare(m)


def test_unsupported_attribute_is_named():
    m = _model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2],
                                 storage_order=1, name="mp")],
               [_vi("x", [1, 1, 4, 4])],
               [_vi("y", [1, 1, 3, 3]), _vi("i", [1, 1, 3, 3], TensorProto.INT64)])
    with pytest.raises(sonnx.UnsupportedError, match='MaxPool node "mp"'):
        sonnx.prepare(m).run([np.zeros((1, 1, 4, 4), np.float32)])


def test_unknown_attribute_rejected_at_prepare():
    node = helper.make_node("Relu", ["x"], ["y"], name="r", bogus=3)
    m = _model([node], [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(sonnx.SonnxError):
        sonnx.prepare(m)


def test_unsupported_opset_and_domain():
    m = _relu_model()
    m.opset_import[0].version = 99
    with pytest.raises(sonnx.SonnxError, match="opset"):
        sonnx.prepare(m)
    node = helper.make_node("Relu", ["x"], ["y"], domain="com.example")
    g = helper.make_graph([node], "g", [_vi("x", [2])], [_vi("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example", 1)])
    with pytest.raises(sonnx.UnsupportedError, match="com.example"):
        sonnx.prepare(m)


def test_malformed_graph():
    m = _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
               [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(sonnx.GraphError):
        sonnx.prepare(m)


@pytest.mark.parametrize("data", [b"", b"\x08\x07garbage\xff\xff", b"\x00" * 64])
def test_garbage_bytes(data):
    with pytest.raises(sonnx.SonnxError):
        sonnx.prepare(data)


def test_missing_file(tmp_path):
    with pytest.raises(sonnx.GraphError, match="does not exist"):
        sonnx.prepare(str(tmp_path / "nope.onnx"))


def test_input_shape_and_count_mismatch():
    rep = sonnx.prepare(_relu_model())
    with pytest.raises(sonnx.GraphError, match=r'input "x".*\(2, 3\)'):
        rep.run([np.zeros((3, 2), np.float32)])
    with pytest.raises(sonnx.GraphError, match="1 input"):
        rep.run([np.zeros((2, 3), np.float32)] * 2)
    with pytest.raises(sonnx.GraphError, match="unknown input"):
        rep.run({"z": np.zeros((2, 3), np.float32)})


def test_shape_mismatch_inside_graph_names_node():
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
               [_vi("x", [2, 3])], [_vi("y", [2, 5])],
               [numpy_helper.from_array(np.zeros((4, 5), np.float32), "w")])
    with pytest.raises(sonnx.GraphError, match='MatMul node "mm"'):
        sonnx.prepare(m).run([np.zeros((2, 3), np.float32)])


def test_unsupported_input_dtype():
    m = _model([helper.make_node("Identity", ["x"], ["y"])],
               [_vi("x", [2], TensorProto.STRING)], [_vi("y", [2], TensorProto.STRING)])
    with pytest.raises(sonnx.UnsupportedError, match="STRING"):
        sonnx.prepare(m)


def test_wrong_tensor_dtype():
    rep = sonnx.prepare(_relu_model())
    with pytest.raises(TypeError, match="float32"):
        rep.run([tensor.from_numpy(np.zeros((2, 3), np.int32))])


def test_doc_lists_every_operator_not_imported():
    import os
    import re
    from singa._onnx.registry import OPS
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "doc", "onnx.md")
    with open(doc) as f:
        text = f.read()
    listed = set(re.findall(r"`(\w+)`", text[text.index("- Not imported:"):]))
    known = {s.name for s in onnx.defs.get_all_schemas_with_history()
             if s.domain in ("", "ai.onnx") and s.since_version <= 28}
    assert not listed & set(OPS), "doc/onnx.md lists imported operators as not imported"
    assert known - set(OPS) <= listed, "doc/onnx.md misses operators that are not imported"
