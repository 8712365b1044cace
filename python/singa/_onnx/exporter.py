"""Exporting singa autograd graphs to ONNX: to_onnx and export_model.

The graph is the one autograd records (``singa.autograd`` documents the
layout): every recorded output tensor has ``creator``, every Operator lists
its inputs in ``src`` and holds its attributes as public fields. The walk
starts at the outputs, visits each operator once, and emits its nodes in
dependency order. Leaves (``Dummy`` operators) become graph inputs when
they are one of the given inputs, and initializers otherwise: parameters
and states keep their layer names, other constants get generated names.
How each operator class becomes ONNX nodes is in export_ops.
"""

import numpy as np
import onnx
from onnx import helper, numpy_helper

from singa import autograd
from singa import tensor
from singa._onnx import dtypes
from singa._onnx.errors import OnnxTypeError, UnsupportedError, SonnxError
from singa._onnx.export_ops import EXPORTERS

MIN_EXPORT_OPSET = 13
MAX_EXPORT_OPSET = onnx.defs.onnx_opset_version()


class GraphBuilder:
    """Collects nodes and initializers; handed to every exporter."""

    def __init__(self, opset):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self._names = set()
        self._counter = 0
        self._tensors = {}   # id -> (name, tensor): one initializer per tensor

    def unique(self, hint):
        """A value name not used yet, based on hint."""
        hint = hint or "value"
        name = hint
        while name in self._names:
            self._counter += 1
            name = f"{hint}_{self._counter}"
        self._names.add(name)
        return name

    def claim(self, name):
        """Reserves an exact name; False when it is taken."""
        if name in self._names:
            return False
        self._names.add(name)
        return True

    def node(self, op_type, inputs, outputs=None, name=None, **attrs):
        """Adds a node; returns its output names (fresh ones when None)."""
        if outputs is None:
            outputs = [self.unique(f"{name or op_type}_out")]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                           name=self.unique(name or op_type), **attrs))
        return outputs

    def const(self, value, hint="const", dtype=None):
        """Adds an initializer holding value; returns its name."""
        arr = np.asarray(value, dtype=dtype)
        name = self.unique(hint)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def tensor(self, t, hint=None):
        """The name of an initializer holding tensor t's values, added the
        first time t is seen; named after t (or hint) when that is free."""
        known = self._tensors.get(id(t))
        if known is not None:
            return known[0]
        hint = hint or t.name or "const"
        name = hint if self.claim(hint) else self.unique(hint)
        self.initializers.append(numpy_helper.from_array(tensor.to_numpy(t), name))
        self._tensors[id(t)] = (name, t)   # t is kept, so its id stays its own
        return name

    def ints(self, values, hint="ints"):
        """An int64 1-D initializer (shapes, axes, pads ...)."""
        return self.const(np.asarray(list(values), np.int64).reshape(-1), hint)


def _value_info(name, t):
    return helper.make_tensor_value_info(name, dtypes.FROM_SINGA[t.dtype], list(t.shape))


def _topological(outputs):
    """The recorded operators feeding outputs, producers first."""
    order, state = [], {}
    for y in outputs:
        root = _creator(y)
        if root is None:
            continue
        stack = [(root, False)]
        while stack:
            op, done = stack.pop()
            if done:
                if state.get(op) != 2:
                    state[op] = 2
                    order.append(op)
                continue
            if state.get(op):
                continue
            state[op] = 1
            stack.append((op, True))
            if op.src is None:
                raise SonnxError(f"to_onnx: the graph through {op.name} was released by a "
                                 "backward pass and the operator calls after it; export "
                                 "the outputs of a forward pass run after training (e.g. "
                                 "after model.eval())")
            for src in reversed(list(op.src)):
                if not state.get(src[0]):
                    stack.append((src[0], False))
    return order


def _creator(y):
    """The operator that produced y; None for a leaf."""
    op = y.creator
    return None if op is None or isinstance(op, autograd.Dummy) else op


def to_onnx(inputs, outputs, model_name="sonnx", opset_version=17,
            input_names=None, output_names=None, doc_string="", dynamic_axes=None):
    """Exports the graph recorded from inputs to outputs as an ONNX model.

    Autograd records every forward pass, so outputs may come from an
    inference-mode forward (``autograd.training`` off, ``model.eval()``),
    which is what this exports: operators export in their inference form
    (Dropout as the identity, BatchNorm with its running statistics), and
    nothing is run or changed. Outputs of a training-mode forward export
    the same way until a backward pass and the next training step release
    their graph.

    Args:
        inputs: the input Tensors (a Tensor or a list).
        outputs: the output Tensors (a Tensor or a list).
        model_name: the ONNX graph name.
        opset_version: ai.onnx opset to target (13 to the installed onnx's
            newest; 17 by default).
        input_names, output_names: names for the graph inputs / outputs;
            "input_<i>" / "output_<i>" by default.
        dynamic_axes: {input or output name: {axis: symbolic name}} for
            dimensions left free in the file (e.g. the batch), as in
            torch.onnx; every other dimension is fixed to the example's.

    Returns:
        an onnx.ModelProto that passes onnx.checker.check_model.

    Raises:
        UnsupportedError naming an operator with no ONNX counterpart;
        SonnxError when an output was not produced by autograd operators, its
        graph was released, or an input is unused.
    """
    inputs = [inputs] if isinstance(inputs, tensor.Tensor) else list(inputs)
    outputs = [outputs] if isinstance(outputs, tensor.Tensor) else list(outputs)
    for what, ts in (("input", inputs), ("output", outputs)):
        for i, t in enumerate(ts):
            if not isinstance(t, tensor.Tensor):
                raise OnnxTypeError(f"to_onnx: {what} {i} is a {type(t).__name__}, "
                                    "not a singa Tensor")
    if not outputs:
        raise SonnxError("to_onnx: no outputs given")
    if not isinstance(opset_version, int) or not \
            MIN_EXPORT_OPSET <= opset_version <= MAX_EXPORT_OPSET:
        raise UnsupportedError(f"to_onnx: opset_version {opset_version!r} is not supported; "
                               f"use {MIN_EXPORT_OPSET} to {MAX_EXPORT_OPSET}")
    input_names = list(input_names or [f"input_{i}" for i in range(len(inputs))])
    output_names = list(output_names or [f"output_{i}" for i in range(len(outputs))])
    if len(input_names) != len(inputs) or len(output_names) != len(outputs):
        raise SonnxError("to_onnx: input_names / output_names must match the numbers "
                         "of inputs and outputs")
    if len(set(input_names) | set(output_names)) != len(input_names) + len(output_names):
        raise SonnxError("to_onnx: input and output names must be distinct")
    for i, y in enumerate(outputs):
        if _creator(y) is None and not any(y is x for x in inputs):
            raise SonnxError(
                f"to_onnx: output {i} (shape {tuple(y.shape)}) was not recorded by "
                "autograd: it was made by tensor functions, not autograd operators; "
                "compute it with singa.autograd (or layers), or use "
                "sonnx.export_model(model, inputs)")

    g = GraphBuilder(opset_version)
    for n in input_names + output_names:
        g.claim(n)
    values = {}        # (op, output index) -> value name
    input_ids = {id(x): name for x, name in zip(inputs, input_names)}
    used_inputs = set()

    def leaf(d):
        t = d.tensor
        key = id(t)
        if key in input_ids:
            used_inputs.add(key)
            return input_ids[key]
        return g.tensor(t, t.name or d.name)

    def name_of(src):
        op, idx = src[0], src[1]
        if isinstance(op, autograd.Dummy):
            return leaf(op)
        return values[(op, idx)]

    # Outputs that are produced by an operator take the graph output name.
    wanted = {}
    for y, name in zip(outputs, output_names):
        if _creator(y) is not None:
            key = (y.creator, getattr(y, "creator_index", 0))
            wanted.setdefault(key, name)

    for op in _topological(outputs):
        if isinstance(op, autograd.Dummy):
            continue
        kind = type(op).__name__
        exporter = EXPORTERS.get(kind)
        if exporter is None:
            raise UnsupportedError(f"to_onnx: operator {kind} ({op.name}) has no ONNX "
                                   "export")
        ins = [name_of(s) for s in op.src]
        outs = []
        for i in range(op.n_outputs):
            name = wanted.get((op, i))
            outs.append(name if name is not None else g.unique(f"{op.name}:{i}"
                                                               if op.n_outputs > 1
                                                               else op.name))
        leaves = [s[0].tensor if isinstance(s[0], autograd.Dummy) else None for s in op.src]
        try:
            exporter(op, ins, outs, g, leaves)
        except SonnxError as e:
            raise type(e)(f"to_onnx: {kind} ({op.name}): {e}") from e
        except (ValueError, TypeError, KeyError) as e:
            raise SonnxError(f"to_onnx: {kind} ({op.name}): {e}") from e
        for i, name in enumerate(outs):
            values[(op, i)] = name

    missing = [n for x, n in zip(inputs, input_names) if id(x) not in used_inputs]
    if missing:
        raise SonnxError(f"to_onnx: input(s) {missing} do not reach the outputs in the "
                         "recorded graph")

    graph_outputs = []
    for y, name in zip(outputs, output_names):
        if _creator(y) is None:
            src = input_ids[id(y)]
        else:
            src = values[(y.creator, getattr(y, "creator_index", 0))]
        if src != name:
            g.node("Identity", [src], [name])
        graph_outputs.append(_value_info(name, y))
    graph_inputs = [_value_info(n, x) for x, n in zip(inputs, input_names)]
    _set_dynamic(graph_inputs + graph_outputs, dynamic_axes or {})
    graph = helper.make_graph(g.nodes, model_name, graph_inputs, graph_outputs,
                              initializer=g.initializers, doc_string=doc_string)
    model = helper.make_model(graph, producer_name="singa",
                              opset_imports=[helper.make_opsetid("", opset_version)])
    model.ir_version = min(model.ir_version, _max_ir_version(opset_version))
    return model


def _set_dynamic(value_infos, dynamic_axes):
    by_name = {vi.name: vi for vi in value_infos}
    for name, axes in dynamic_axes.items():
        vi = by_name.get(name)
        if vi is None:
            raise SonnxError(f"to_onnx: dynamic_axes names {name!r}, which is not a graph "
                             f"input or output ({sorted(by_name)})")
        dims = vi.type.tensor_type.shape.dim
        for axis, label in dict(axes).items():
            if not -len(dims) <= axis < len(dims):
                raise SonnxError(f"to_onnx: dynamic axis {axis} of {name!r} is out of range")
            dims[axis].dim_param = str(label)


def _max_ir_version(opset):
    """The IR version released with opset (what runtimes expect to read)."""
    table = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}
    return table.get(opset, onnx.IR_VERSION)


def export_model(model, inputs, model_name=None, opset_version=17,
                 input_names=None, output_names=None, dynamic_axes=None):
    """Exports a singa Model (or Layer) by tracing its forward on inputs.

    forward runs once in inference mode (``autograd.training`` off), so
    Dropout exports as the identity and BatchNorm with its running
    statistics, i.e. the model as it behaves in eval mode; the model's
    parameters and states are restored afterwards whatever forward did, so
    exporting changes nothing.

    Args:
        model: a singa.model.Model (or Layer) whose forward takes inputs.
        inputs: example input Tensors (a Tensor or a list).
        the rest: as for to_onnx.
    """
    inputs = [inputs] if isinstance(inputs, tensor.Tensor) else list(inputs)
    traced = []
    for x in inputs:
        if not isinstance(x, tensor.Tensor):
            raise OnnxTypeError(f"export_model: inputs must be Tensors, got {type(x).__name__}")
        # A fresh handle on the same data, so the graph's inputs are these
        # tensors and nothing the caller holds.
        traced.append(tensor.from_raw_tensor(x.data))
    with autograd.train_mode(False):
        if hasattr(model, "_init_once"):
            model._init_once(*traced)
        saved = {k: v.data.Clone() for k, v in model.get_states().items()}
        try:
            outs = model.forward(*traced)
        finally:
            states = model.get_states()
            for k, v in saved.items():
                states[k].data.CopyData(v)
    if isinstance(outs, tensor.Tensor):
        outs = [outs]
    name = model_name or type(model).__name__
    return to_onnx(traced, list(outs), name, opset_version, input_names, output_names,
                   dynamic_axes=dynamic_axes)
