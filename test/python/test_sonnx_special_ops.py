"""SingaRep.handle_special_ops (SINGA_API.md, singa.sonnx): a node whose
shape-like inputs are known only at run time is completed from the values
computed so far; the completed op's results are checked against
onnxruntime on the whole model."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from singa import sonnx, tensor  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def ort_run(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_reshape_to_a_shape_computed_at_run_time(rng):
    # y = Reshape(x, Concat(Shape(x)[:1], [-1])): the target exists only
    # once Shape and Concat have run
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["s0"]),
             helper.make_node("Concat", ["s0", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [minus1, numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    m = make_model(nodes, [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], inits)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    want, = ort_run(m, {"x": x})

    rep = sonnx.prepare(m)
    tx = tensor.from_numpy(x)
    # the values an executor holds just before the Reshape node
    values = {"x": tx}
    for node in m.graph.node[:3]:
        values.update(sonnx.run_node(node, [values[n] if n in values else rep.consts[n]
                                            for n in node.input]))
    onode = sonnx.OnnxNode(m.graph.node[3])
    op, inputs = rep.handle_special_ops(onode, None, values)
    assert op.shape == [2, -1]
    assert onode.attr_inputs == {"target": "shape"}
    assert len(inputs) == 1 and inputs[0] is tx
    y, = op(*inputs)
    assert tuple(y.shape) == want.shape == (2, 12)
    np.testing.assert_array_equal(tensor.to_numpy(y), want)
    with pytest.raises(sonnx.GraphError, match="takes 1 inputs \\(1 more are fixed\\), got 2"):
        op(tx, tx)


def test_slice_keeps_int64_bounds_from_initializers(rng):
    inits = [numpy_helper.from_array(np.array([1, 0], np.int64), "starts"),
             numpy_helper.from_array(np.array([np.iinfo(np.int64).max, -1], np.int64), "ends"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
             numpy_helper.from_array(np.array([2, 1], np.int64), "steps")]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    m = make_model([node], [vi("x", F, [2, 5, 4])], [vi("y", F, [2, 2, 3])], inits)
    x = rng.standard_normal((2, 5, 4)).astype(np.float32)
    want, = ort_run(m, {"x": x})
    rep = sonnx.prepare(m)
    op, inputs = rep.handle_special_ops(node, None, {"x": tensor.from_numpy(x)})
    assert (op.starts, op.ends, op.axes, op.steps) == \
        ([1, 0], [np.iinfo(np.int64).max, -1], [1, 2], [2, 1])
    y, = op(*inputs)
    np.testing.assert_array_equal(tensor.to_numpy(y), want)
    np.testing.assert_array_equal(want, x[:, 1::2, 0:-1])


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_and_conv_get_singa_layer_attributes(rng, trans_b):
    w = rng.standard_normal((5, 3) if trans_b else (3, 5)).astype(np.float32)
    c = rng.standard_normal((1, 5)).astype(np.float32)
    k = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g"], transB=trans_b),
             helper.make_node("Conv", ["img", "k"], ["y"], pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c"),
             numpy_helper.from_array(k, "k")]
    m = make_model(nodes, [vi("a", F, [2, 3]), vi("img", F, [1, 2, 5, 5])],
                   [vi("g", F, [2, 5]), vi("y", F, [1, 4, 5, 5])], inits)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    img = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    want_g, want_y = ort_run(m, {"a": a, "img": img})
    rep = sonnx.prepare(m)
    values = {"a": tensor.from_numpy(a), "img": tensor.from_numpy(img)}

    gnode = sonnx.OnnxNode(nodes[0])
    op, inputs = rep.handle_special_ops(gnode, sonnx.get_op(nodes[0]), values)
    assert (op.nb_kernels, op.bias_shape) == (5, [1, 5])
    assert gnode.weight_inputs == {"w": "B", "c": "C"}
    assert inputs[1] is rep.params["w"]
    np.testing.assert_allclose(tensor.to_numpy(op(*inputs)[0]), want_g, rtol=1e-5, atol=1e-5)

    op, inputs = rep.handle_special_ops(nodes[1], None, values)
    assert op.nb_kernels == 4
    np.testing.assert_allclose(tensor.to_numpy(op(*inputs)[0]), want_y, rtol=1e-4, atol=1e-4)


def test_bad_arguments_raise_typed_errors(rng):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    m = make_model([node], [vi("x", F, [2, 3]), vi("shape", I64, [2])], [vi("y", F, [3, 2])])
    rep = sonnx.prepare(m)
    tx = tensor.from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(sonnx.GraphError, match="'shape' is not available"):
        rep.handle_special_ops(node, None, {"x": tx})
    other = helper.make_node("Reshape", ["x", "s2"], ["y"])
    with pytest.raises(sonnx.GraphError, match="not a node of this model"):
        rep.handle_special_ops(other, None, {"x": tx})
    with pytest.raises(TypeError, match="NodeProto"):
        rep.handle_special_ops("Reshape", None, {"x": tx})
    with pytest.raises(TypeError, match="SingaOp"):
        rep.handle_special_ops(node, object(), {"x": tx})
    shape = tensor.from_numpy(np.array([3, 2], np.int32))
    op, inputs = rep.handle_special_ops(node, None, {"x": tx, "shape": shape})
    assert op.shape == [3, 2] and tuple(op(*inputs)[0].shape) == (3, 2)
