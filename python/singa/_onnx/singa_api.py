"""SINGA's sonnx names over singa's exporter and importer.

SingaFrontend (export), OnnxNode / OnnxAttributes (a node's view),
get_op / run_node (one node on singa tensors) and the dtype helpers, with
SINGA's signatures and return forms. The work is done by exporter.py,
export_ops.py and the importer's handler table (registry.OPS).
"""

import collections

import numpy as np
import onnx
from onnx import helper

from singa import autograd
from singa import tensor
from singa._onnx import dtypes
from singa._onnx.errors import GraphError, UnsupportedError, SonnxError
from singa._onnx.export_ops import EXPORTERS
from singa._onnx.exporter import GraphBuilder, to_onnx
from singa._onnx.importer import resolve_device
from singa._onnx.registry import OPS, NodeView, parse_attrs

_OPSET = onnx.defs.onnx_opset_version()

# NumPy dtype -> the NumPy dtype singa holds its values in (SINGA's table).
NP_TYPE_TO_SINGA_SUPPORT_TYPE = {
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float16): np.dtype(np.float16),
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.int32): np.dtype(np.int32),
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.int16): np.dtype(np.int32),
    np.dtype(np.int8): np.dtype(np.int32),
    np.dtype(np.uint32): np.dtype(np.int32),
    np.dtype(np.uint16): np.dtype(np.int32),
    np.dtype(np.uint8): np.dtype(np.int32),
    np.dtype(np.bool_): np.dtype(np.int32),
}


def onnx_type_to_singa_type(onnx_type):
    """The NumPy dtype singa holds values of ONNX element type onnx_type in
    (float32, float16 or int32); UnsupportedError for the others."""
    singa = dtypes.singa_dtype(onnx_type)
    return np.dtype(tensor._TO_NUMPY[singa])


class OnnxAttributes(dict):
    """A node's attributes as a dict of Python values."""

    @staticmethod
    def from_onnx(args):
        """From a node's AttributeProto list."""
        node = helper.make_node("Identity", [], [])
        node.attribute.extend(args)
        return OnnxAttributes(parse_attrs(node))


class OnnxNode:
    """A NodeProto seen as SINGA's importer sees it: name, op_type, attrs,
    inputs, outputs, and the bookkeeping of inputs that hold attributes
    (attr_inputs) or weights (weight_inputs)."""

    def __init__(self, node):
        self.node = node
        self.name = str(node.name)
        self.op_type = str(node.op_type)
        self.attrs = OnnxAttributes.from_onnx(node.attribute)
        self.inputs = list(node.input)
        self.outputs = list(node.output)
        self.attr_inputs = {}
        self.weight_inputs = {}

    def getattr(self, key, default=None):
        return self.attrs.get(key, default)

    def set_attr_inputs(self, key, name):
        self.attr_inputs[key] = name

    def del_attr_inputs(self, key):
        self.attr_inputs.pop(key, None)

    def set_weight_inputs(self, key, name):
        self.weight_inputs[key] = name

    def del_weight_inputs(self, key):
        self.weight_inputs.pop(key, None)


# The inputs of these ONNX operators that steer the operation rather than
# feed it (a target shape, axes, pads, ...): SINGA's "attribute inputs",
# which its operators take as constructor arguments. Input index -> the
# name SingaRep.handle_special_ops gives the value on the op.
_REDUCE_AXES = {1: "axes"}
ATTRIBUTE_INPUTS = {
    "Reshape": {1: "shape"}, "Expand": {1: "shape"}, "Tile": {1: "repeats"},
    "Squeeze": {1: "axes"}, "Unsqueeze": {1: "axes"}, "Split": {1: "split"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "Pad": {1: "pads", 2: "constant_value", 3: "axes"}, "Clip": {1: "min", 2: "max"},
    "ConstantOfShape": {0: "shape"}, "Range": {0: "start", 1: "limit", 2: "delta"},
    "Trilu": {1: "k"}, "OneHot": {1: "depth", 2: "values"}, "CumSum": {1: "axis"},
    "Dropout": {1: "ratio", 2: "training_mode"}, "Gather": {1: "indices"},
    "Compress": {1: "condition"},
    **{f"Reduce{k}": _REDUCE_AXES for k in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2",
                                             "SumSquare", "LogSum", "LogSumExp")},
}

# The parameter inputs of the operators SINGA makes layers for, by SINGA's
# key in OnnxNode.weight_inputs.
WEIGHT_INPUTS = {
    "Conv": {1: "W", 2: "b"}, "Gemm": {1: "B", 2: "C"},
    "BatchNormalization": {1: "scale", 2: "bias", 3: "mean", 4: "var"},
}


class SingaOp:
    """One ONNX node as a callable on singa Tensors (what get_op returns):
    ``op(*inputs)`` takes a Tensor per non-empty node input, in order, and
    returns a tuple of Tensors, one per output. It computes through
    autograd, so the result can be differentiated.

    ``fix_input(i, value)`` fixes input i to a NumPy value (as
    SingaRep.handle_special_ops does for a Reshape's shape): the op then
    takes the other inputs only."""

    def __init__(self, node, opset_version=_OPSET):
        node = node.node if isinstance(node, OnnxNode) else node
        if not isinstance(node, onnx.NodeProto):
            raise TypeError(f"get_op: expected an onnx NodeProto or OnnxNode, got "
                            f"{type(node).__name__}")
        spec = OPS.get(node.op_type)
        if spec is None or node.domain not in ("", "ai.onnx"):
            raise UnsupportedError(f"get_op: operator {node.op_type} is not supported")
        self.node, self.spec, self.opset = node, spec, int(opset_version)
        self.attrs = parse_attrs(node)
        extra = sorted(set(self.attrs) - spec.attrs)
        if extra:
            raise UnsupportedError(f"get_op: attribute(s) {', '.join(extra)} not supported by "
                                   f"singa's {node.op_type}")
        self.fixed = {}

    def fix_input(self, i, value):
        """Fixes node input i (a present one) to the NumPy array value."""
        names = self.node.input
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(names) or \
                not names[i]:
            raise GraphError(f"{self.node.op_type}: the node has no input {i!r} (inputs "
                             f"{list(names)})")
        self.fixed[i] = np.asarray(value)

    def __call__(self, *inputs):
        names = list(self.node.input)
        free = [i for i, n in enumerate(names) if n and i not in self.fixed]
        if len(inputs) != len(free):
            fixed = f" ({len(self.fixed)} more are fixed)" if self.fixed else ""
            raise GraphError(f"{self.node.op_type}: the node takes {len(free)} inputs"
                             f"{fixed}, got {len(inputs)}")
        for i, x in enumerate(inputs):
            if not isinstance(x, tensor.Tensor):
                raise TypeError(f"{self.node.op_type}: input {i} must be a singa Tensor, got "
                                f"{type(x).__name__}")
        dev = inputs[0].device if inputs else resolve_device(None)
        ins = [None] * len(names)
        for i, x in zip(free, inputs):
            ins[i] = x
        consts = {}
        for i, arr in self.fixed.items():
            # handlers read a fixed input from consts, in its own dtype
            consts[names[i]] = arr
            ins[i] = dtypes.to_tensor(arr, dev, f"{self.node.op_type} input {i}: ")
        in_types = [dtypes.FROM_SINGA[x.dtype] if x is not None else None for x in ins]
        view = NodeView(self.node, self.attrs, ins, self.opset, dev, autograd.training, consts,
                        in_types, [None] * len(self.node.output))
        outs = self.spec.fn(view)
        return (outs,) if isinstance(outs, tensor.Tensor) else tuple(outs)


def get_op(onnx_node, opset_version=_OPSET):
    """The singa operation for one ONNX node (a SingaOp)."""
    return SingaOp(onnx_node, opset_version)


def run_node(node, inputs, device="CPU", opset_version=_OPSET):
    """Runs one ONNX node on inputs (NumPy arrays or Tensors, one per
    non-empty node input); returns an OrderedDict output name -> Tensor,
    as SINGA's sonnx.run_node does."""
    dev = resolve_device(device)
    ts = [x if isinstance(x, tensor.Tensor) else dtypes.to_tensor(np.asarray(x), dev)
          for x in inputs]
    outs = get_op(node, opset_version)(*ts)
    node = node.node if isinstance(node, OnnxNode) else node
    return collections.OrderedDict((n, t) for n, t in zip([o for o in node.output if o], outs))


class SingaFrontend:
    """Exports singa autograd graphs (SINGA's class; see sonnx.to_onnx)."""

    @classmethod
    def singa_to_onnx_model(cls, inputs, y, model_name="sonnx"):
        """The ModelProto of the graph from inputs to y (sonnx.to_onnx)."""
        return to_onnx(inputs, y, model_name)

    @classmethod
    def singa_to_onnx_graph(cls, inputs, y, model_name="sonnx"):
        """The GraphProto of the graph from inputs to y."""
        return to_onnx(inputs, y, model_name).graph

    @classmethod
    def singa_op_to_onnx_node(cls, op, op_t):
        """The NodeProtos for one recorded operator, whose inputs are named
        after their producers' outputs (``src_op.output_name(i)``, or a
        leaf's name) and whose outputs are ``op.output_name(i)``. op_t is
        the operator's output tensor (SINGA's argument; not needed)."""
        if op.src is None:
            raise SonnxError(f"singa_op_to_onnx_node: the graph through {op.name} was "
                             "released")
        ins = [s[0].output_name(s[1]) for s in op.src]
        outs = [op.output_name(i) for i in range(op.n_outputs)]
        return cls.handle_special_ops(op, ins, outs)

    @classmethod
    def handle_special_ops(cls, op, X, W):
        """The NodeProtos for operator op with input value names X and
        output value names W. Constants an exporter adds (shapes, axes)
        become Constant nodes, so the nodes stand alone."""
        exporter = EXPORTERS.get(type(op).__name__)
        if exporter is None:
            raise UnsupportedError(f"operator {type(op).__name__} ({op.name}) has no ONNX "
                                   "export")
        g = GraphBuilder(17)
        for name in list(X) + list(W):
            g.claim(name)
        leaves = [s[0].tensor if isinstance(s[0], autograd.Dummy) else None
                  for s in (op.src or ())]
        exporter(op, list(X), list(W), g, leaves)
        consts = [helper.make_node("Constant", [], [init.name], name=f"{init.name}_const",
                                   value=init) for init in g.initializers]
        return consts + g.nodes
