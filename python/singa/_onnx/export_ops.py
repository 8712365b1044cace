"""How each autograd Operator class becomes ONNX nodes.

The classes made from the op table (singa.opdefs) export as their row
says; FALLBACKS covers rows that ONNX cannot write as one node. The
classes written by hand have an exporter each below.

An exporter is ``fn(op, ins, outs, g, leaves)``: op is the recorded
Operator (attributes as public fields), ins / outs the ONNX value names of
its inputs and outputs, g the GraphBuilder (g.node, g.const, g.ints,
g.opset) and leaves, per input, the leaf Tensor when that input is one
(else None). Scalar constants an exporter creates (clip bounds, pad
values) are float32: singa graphs that reach these ops compute in float32.
"""

import math

import numpy as np
import onnx
from onnx import TensorProto

from singa import opdefs, tensor
from singa._onnx.errors import UnsupportedError

EXPORTERS = {}


def exports(*classes):
    def deco(fn):
        for c in classes:
            EXPORTERS[c] = fn
        return fn
    return deco


# ---- the op table (singa.opdefs): one node of the row's type and attrs ----

def _fallback_gelu(op, ins, outs, g, leaves):
    # Before opset 20: 0.5 x (1 + erf(x / sqrt(2))).
    x = ins[0]
    scaled = g.node("Mul", [x, g.const(np.float32(1 / math.sqrt(2)), "gelu_c")])
    e = g.node("Erf", scaled)
    one = g.node("Add", [e[0], g.const(np.float32(1.0), "one")])
    half = g.node("Mul", [one[0], g.const(np.float32(0.5), "half")])
    g.node("Mul", [x, half[0]], outs, name=op.name)


def _fallback_relu_grad(op, ins, outs, g, leaves):
    # a * (b > 0), the comparison cast back to a's type
    pos = g.node("Greater", [ins[1], g.const(np.float32(0.0), "zero")])
    mask = g.node("Cast", [pos[0]], to=TensorProto.FLOAT)
    g.node("Mul", [ins[0], mask[0]], outs, name=op.name)


# Rows that ONNX cannot express as one node (onnx=None), or not at every
# opset the exporter writes (below the row's opset): op -> exporter.
FALLBACKS = {
    "Square": lambda op, ins, outs, g, leaves: g.node("Mul", [ins[0], ins[0]], outs,
                                                      name=op.name),
    "Gelu": _fallback_gelu,
    "ReLUGrad": _fallback_relu_grad,
}


def _bool_only(schema, formal):
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    return allowed.get(formal.type_str, [formal.type_str]) == ["tensor(bool)"]


def _row_node(row, op, ins, outs, g):
    """The row's node. ONNX comparisons and logic take or give bool tensors
    where singa's give 0 / 1 in the inputs' dtype: casts bridge the two."""
    schema = onnx.defs.get_schema(row.onnx, g.opset)
    args = ins
    if _bool_only(schema, schema.inputs[0]):
        args = [g.node("Cast", [x], to=TensorProto.BOOL)[0] for x in ins]
    if not _bool_only(schema, schema.outputs[0]):
        g.node(row.onnx, args, outs, name=op.name, **row.attrs)
        return
    if g.opset < 15:
        raise UnsupportedError(f"ONNX {row.onnx} gives bool, and casting it back to the "
                               "inputs' type needs CastLike (opset 15 or later)")
    flag = g.node(row.onnx, args, name=op.name, **row.attrs)
    g.node("CastLike", [flag[0], ins[0]], outs)


def _row_exporter(row):
    fallback = FALLBACKS.get(row.op)

    def fn(op, ins, outs, g, leaves):
        if row.onnx is not None and g.opset >= row.opset:
            _row_node(row, op, ins, outs, g)
        elif fallback is not None:
            fallback(op, ins, outs, g, leaves)
        elif row.onnx is None:
            raise UnsupportedError(f"no ONNX form: {row.why}")
        else:
            raise UnsupportedError(f"exports as ONNX {row.onnx}, which needs opset "
                                   f"{row.opset} or later (opset_version={g.opset})")
    return fn


for _row in opdefs.ROWS:
    exports(_row.op)(_row_exporter(_row))


# ---- one node, same inputs, no attributes ----
_SAME = {
    "Identity": "Identity", "Sum": "Sum", "Mean": "Mean", "Min": "Min",
    "Max": "Max", "Matmul": "MatMul", "PRelu": "PRelu",
}


def _same(onnx_type):
    def fn(op, ins, outs, g, leaves):
        g.node(onnx_type, ins, outs, name=op.name)
    return fn


for _cls, _onnx in _SAME.items():
    exports(_cls)(_same(_onnx))


@exports("Where")
def _where(op, ins, outs, g, leaves):
    # singa records Where(condition)(a, b) with inputs (a, b, condition)
    g.node("Where", [ins[2], ins[0], ins[1]], outs, name=op.name)


@exports("LeakyReLU")
def _leaky_relu(op, ins, outs, g, leaves):
    g.node("LeakyRelu", ins, outs, name=op.name, alpha=float(op.alpha))


@exports("Elu")
def _elu(op, ins, outs, g, leaves):
    g.node("Elu", ins, outs, name=op.name, alpha=float(op.alpha))


@exports("SeLU")
def _selu(op, ins, outs, g, leaves):
    g.node("Selu", ins, outs, name=op.name, alpha=float(op.alpha), gamma=float(op.gamma))


@exports("HardSigmoid")
def _hard_sigmoid(op, ins, outs, g, leaves):
    g.node("HardSigmoid", ins, outs, name=op.name, alpha=float(op.alpha),
           beta=float(op.gamma))


@exports("SoftMax")
def _softmax(op, ins, outs, g, leaves):
    g.node("Softmax", ins, outs, name=op.name, axis=int(op.axis))


@exports("LogSoftMax")
def _log_softmax(op, ins, outs, g, leaves):
    g.node("LogSoftmax", ins, outs, name=op.name, axis=int(op.axis))


@exports("Dropout")
def _dropout(op, ins, outs, g, leaves):
    # Exported for inference: training_mode is left out (false), so the
    # node is the identity, as singa's dropout is outside training.
    ratio = g.const(np.float32(op.ratio), f"{op.name}_ratio")
    g.node("Dropout", [ins[0], ratio], outs, name=op.name)


@exports("Clip")
def _clip(op, ins, outs, g, leaves):
    lo = "" if op.min is None else g.const(np.float32(op.min), f"{op.name}_min")
    hi = "" if op.max is None else g.const(np.float32(op.max), f"{op.name}_max")
    args = [ins[0], lo, hi]
    while args[-1] == "":
        args.pop()
    g.node("Clip", args, outs, name=op.name)


_CAST_TO = {tensor.float32: TensorProto.FLOAT, tensor.float16: TensorProto.FLOAT16,
            tensor.int32: TensorProto.INT32}


@exports("Cast")
def _cast(op, ins, outs, g, leaves):
    g.node("Cast", ins, outs, name=op.name, to=_CAST_TO[op.to])


# ---- linear algebra ----

@exports("Gemm")
def _gemm(op, ins, outs, g, leaves):
    g.node("Gemm", ins, outs, name=op.name, alpha=float(op.alpha), beta=float(op.beta),
           transA=int(op.transA), transB=int(op.transB))


@exports("AddBias")
def _add_bias(op, ins, outs, g, leaves):
    x, b = ins
    if op.axis == 1:
        # A per-row bias broadcasts as a column.
        b = g.node("Unsqueeze", [b, g.ints([1], "axes")])[0]
    g.node("Add", [x, b], outs, name=op.name)


@exports("_Linear")
def _linear(op, ins, outs, g, leaves):
    # layer.Linear's fused operator, written as the MatMul + Add pair it
    # stands for
    x, w, b = ins
    y = g.node("MatMul", [x, w], name=f"{op.name}_matmul")
    g.node("Add", [y[0], b], outs, name=op.name)


# ---- reductions ----

def _axes_input_or_attr(g, op_type, axes, since, ins, outs, name, **attrs):
    if axes is None:
        g.node(op_type, ins, outs, name=name, **attrs)
    elif g.opset >= since:
        g.node(op_type, ins + [g.ints(axes, "axes")], outs, name=name, **attrs)
    else:
        g.node(op_type, ins, outs, name=name, axes=list(axes), **attrs)


@exports("ReduceSum")
def _reduce_sum(op, ins, outs, g, leaves):
    axes = None if op.axes is None else _as_list(op.axes)
    _axes_input_or_attr(g, "ReduceSum", axes, 13, ins, outs, op.name,
                        keepdims=int(op.keepdims))


@exports("ReduceMean")
def _reduce_mean(op, ins, outs, g, leaves):
    axes = None if op.axes is None else _as_list(op.axes)
    _axes_input_or_attr(g, "ReduceMean", axes, 18, ins, outs, op.name,
                        keepdims=int(op.keepdims))


@exports("GlobalAveragePool")
def _global_average_pool(op, ins, outs, g, leaves):
    if getattr(op, "data_format", "channels_first") == "channels_first":
        g.node("GlobalAveragePool", ins, outs, name=op.name)
        return
    # channels_last: a mean over the axes between the batch and the channels
    _axes_input_or_attr(g, "ReduceMean", list(range(1, op.rank - 1)), 18, ins, outs,
                        op.name, keepdims=1)


def _as_list(v):
    return [int(v)] if isinstance(v, (int, np.integer)) else [int(a) for a in v]


# ---- shapes ----

@exports("Reshape")
def _reshape(op, ins, outs, g, leaves):
    # singa's reshape reads 0 as "copy the dimension", ONNX's default.
    g.node("Reshape", [ins[0], g.ints(op.shape, "shape")], outs, name=op.name)


@exports("Flatten")
def _flatten(op, ins, outs, g, leaves):
    g.node("Flatten", ins, outs, name=op.name, axis=int(op.axis))


@exports("Transpose")
def _transpose(op, ins, outs, g, leaves):
    perm = None if op.perm is None else [int(a) for a in op.perm]
    g.node("Transpose", ins, outs, name=op.name, perm=perm)


@exports("Squeeze")
def _squeeze(op, ins, outs, g, leaves):
    args = list(ins)
    if op.axis is not None:
        args.append(g.ints(_as_list(op.axis), "axes"))
    g.node("Squeeze", args, outs, name=op.name)


@exports("Unsqueeze")
def _unsqueeze(op, ins, outs, g, leaves):
    g.node("Unsqueeze", [ins[0], g.ints(_as_list(op.axis), "axes")], outs, name=op.name)


@exports("Concat")
def _concat(op, ins, outs, g, leaves):
    g.node("Concat", ins, outs, name=op.name, axis=int(op.axis))


@exports("Split")
def _split(op, ins, outs, g, leaves):
    parts = op.parts if op.parts is not None else getattr(op, "_parts", None)
    if parts is None:
        if g.opset >= 18:
            g.node("Split", ins, outs, name=op.name, axis=int(op.axis),
                   num_outputs=int(op.num_output))
        else:
            g.node("Split", ins, outs, name=op.name, axis=int(op.axis))
        return
    g.node("Split", [ins[0], g.ints(parts, "split")], outs, name=op.name, axis=int(op.axis))


@exports("Slice")
def _slice(op, ins, outs, g, leaves):
    args = [ins[0], g.ints(op.starts, "starts"), g.ints(op.ends, "ends")]
    if op.axes is not None or op.steps is not None:
        axes = op.axes if op.axes is not None else list(range(len(op.starts)))
        args.append(g.ints(axes, "axes"))
    if op.steps is not None:
        args.append(g.ints(op.steps, "steps"))
    g.node("Slice", args, outs, name=op.name)


@exports("Gather")
def _gather(op, ins, outs, g, leaves):
    idx = g.const(np.asarray(op.indices, np.int64), "indices")
    g.node("Gather", [ins[0], idx], outs, name=op.name, axis=int(op.axis))


@exports("Embedding")
def _embedding(op, ins, outs, g, leaves):
    # ONNX Gather wants integer indices; singa's may be whole floats.
    idx = g.node("Cast", [ins[0]], to=TensorProto.INT64)
    g.node("Gather", [ins[1], idx[0]], outs, name=op.name, axis=0)


@exports("ScatterElements")
def _scatter_elements(op, ins, outs, g, leaves):
    idx = g.const(np.asarray(op.indices, np.int64), "indices")
    g.node("ScatterElements", [ins[0], idx, ins[1]], outs, name=op.name, axis=int(op.axis))


@exports("Tile")
def _tile(op, ins, outs, g, leaves):
    g.node("Tile", [ins[0], g.ints(op.repeats, "repeats")], outs, name=op.name)


@exports("Expand")
def _expand(op, ins, outs, g, leaves):
    g.node("Expand", [ins[0], g.ints(op.shape, "shape")], outs, name=op.name)


@exports("Pad")
def _pad(op, ins, outs, g, leaves):
    args = [ins[0], g.ints(op.pads, "pads")]
    if op.mode == "constant":
        args.append(g.const(np.float32(op.constant), "pad_value"))
    g.node("Pad", args, outs, name=op.name, mode=op.mode)


@exports("UpSample")
def _upsample(op, ins, outs, g, leaves):
    scales = g.const(np.asarray(op.scales, np.float32), "scales")
    g.node("Resize", [ins[0], "", scales], outs, name=op.name, mode="nearest",
           nearest_mode="floor", coordinate_transformation_mode="asymmetric")


@exports("DepthToSpace")
def _depth_to_space(op, ins, outs, g, leaves):
    g.node("DepthToSpace", ins, outs, name=op.name, blocksize=int(op.blocksize),
           mode=op.mode)


@exports("SpaceToDepth")
def _space_to_depth(op, ins, outs, g, leaves):
    if getattr(op, "mode", "DCR") != "DCR":
        raise UnsupportedError("ONNX SpaceToDepth has the DCR layout only, not "
                               f"mode={op.mode!r}")
    g.node("SpaceToDepth", ins, outs, name=op.name, blocksize=int(op.blocksize))


@exports("Shape")
def _shape(op, ins, outs, g, leaves):
    # singa's shape is int32, ONNX's int64.
    s = g.node("Shape", ins)
    g.node("Cast", s, outs, name=op.name, to=TensorProto.INT32)


@exports("NonZero")
def _nonzero(op, ins, outs, g, leaves):
    nz = g.node("NonZero", ins)
    g.node("Cast", nz, outs, name=op.name, to=TensorProto.INT32)


@exports("ConstantOfShape")
def _constant_of_shape(op, ins, outs, g, leaves):
    from onnx import numpy_helper
    shape = g.node("Cast", ins, to=TensorProto.INT64)
    g.node("ConstantOfShape", shape, outs, name=op.name,
           value=numpy_helper.from_array(np.array([op.value], np.float32)))


@exports("OneHot")
def _one_hot(op, ins, outs, g, leaves):
    depth = g.const(np.int64(op.depth), "depth")
    values = g.const(np.asarray(op.values, np.float32), "values")
    g.node("OneHot", [ins[0], depth, values], outs, name=op.name, axis=int(op.axis))


# ---- normalisation ----

@exports("_BatchNorm2d")
def _batch_norm(op, ins, outs, g, leaves):
    # Inference form: normalise with the running statistics (inputs 3, 4),
    # which are the operator's fields.
    stats = [g.tensor(op.running_mean), g.tensor(op.running_var)]
    g.node("BatchNormalization", list(ins) + stats, outs, name=op.name,
           epsilon=float(op.epsilon), momentum=float(op.momentum))


@exports("LayerNorm")
def _layer_norm(op, ins, outs, g, leaves):
    if g.opset < 17:
        raise UnsupportedError("LayerNormalization needs opset 17 or later")
    g.node("LayerNormalization", ins, outs, name=op.name, axis=int(op.axis),
           epsilon=float(op.epsilon))


# ---- convolution and pooling ----

@exports("_Conv2d")
def _conv2d(op, ins, outs, g, leaves):
    # singa's pads are [top, left, bottom, right], ONNX's [h_begin, w_begin,
    # h_end, w_end]: the same order. kernel_shape is left to the weight.
    g.node("Conv", ins, outs, name=op.name, strides=list(op.strides), pads=list(op.pads),
           dilations=list(op.dilations), group=int(op.group))


@exports("_Pooling2d", "_Pooling1d")
def _pooling(op, ins, outs, g, leaves):
    attrs = dict(kernel_shape=list(op.kernel_shape), strides=list(op.strides),
                 pads=list(op.pads), ceil_mode=int(op.ceil_mode))
    if op.is_max:
        g.node("MaxPool", ins, outs, name=op.name, dilations=list(op.dilations), **attrs)
    else:
        g.node("AveragePool", ins, outs, name=op.name,
               count_include_pad=int(op.count_include_pad), **attrs)
