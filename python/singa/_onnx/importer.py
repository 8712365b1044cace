"""Running ONNX graphs on singa: prepare() and SingaRep.

prepare() validates the whole model before anything runs (opset, domains,
operators, attributes, graph wiring) so a bad file fails with one clear
exception instead of half-way through a run. run() executes the nodes in
order; every handler computes with singa tensors, through autograd where
the op is differentiable, so the same plan serves inference and fine-tuning
(see SONNXModel in sonnx_model.py).
"""

import os

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference, TensorProto
from onnx.backend.base import BackendRep

from singa import autograd
from singa import device as singa_device
from singa import tensor
from singa._onnx import dtypes
from singa._onnx.errors import (GraphError, OnnxTypeError, UnsupportedError,
                                describe, wrap_node_error)
from singa._onnx.registry import OPS, NodeView, parse_attrs
from singa._onnx import ops_math, ops_shape, ops_nn  # noqa: F401  (register ops)

# Oldest default-domain opset accepted; handlers also check each
# operator's own version (OpSpec.since).
MIN_OPSET = 1
MAX_OPSET = onnx.defs.onnx_opset_version()

# Nodes that produce no tensor work of their own: their value is fixed once
# the model is prepared.
_CONSTANT_OPS = ("Constant",)


def load_model(model):
    """A ModelProto from a ModelProto, serialized bytes or a file path."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_model_from_string(bytes(model))
        except Exception as e:
            raise GraphError(f"cannot parse the ONNX model bytes: {e}") from e
    if isinstance(model, (str, os.PathLike)):
        if not os.path.isfile(model):
            raise GraphError(f"ONNX model file {os.fspath(model)!r} does not exist")
        try:
            return onnx.load(model)
        except Exception as e:
            raise GraphError(f"cannot parse ONNX model file {os.fspath(model)!r}: {e}") from e
    raise OnnxTypeError("expected an onnx.ModelProto, bytes or a file path, got "
                        f"{type(model).__name__}")


def resolve_device(dev):
    """A singa device from a singa device, None, or 'CPU' / 'CUDA[:i]'."""
    if dev is None:
        return singa_device.get_default_device()
    if isinstance(dev, singa_device.Device):
        return dev
    if isinstance(dev, str):
        kind, _, idx = dev.upper().partition(":")
        if kind == "CPU":
            return singa_device.get_default_device()
        if kind == "CUDA":
            return singa_device.create_cuda_gpu_on(int(idx or 0))
    raise OnnxTypeError(f"unknown device {dev!r}; use a singa device, 'CPU' or 'CUDA'")


def default_opset(model):
    """The ai.onnx opset a model imports (UnsupportedError when unusable)."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            v = int(imp.version)
            if not MIN_OPSET <= v <= MAX_OPSET:
                raise UnsupportedError(f"model uses ai.onnx opset {v}; singa supports "
                                       f"opsets {MIN_OPSET} to {MAX_OPSET}")
            return v
    if len(model.opset_import) == 0 and model.ir_version < 3:
        return MIN_OPSET
    raise UnsupportedError("model imports no ai.onnx opset")


def _value_infos(graph):
    """Every ValueInfoProto of graph and of the subgraphs in its nodes."""
    yield from graph.input
    yield from graph.output
    yield from graph.value_info
    for node in graph.node:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _value_infos(sub)


def check_declared_shapes(model):
    """GraphError for a declared dimension below zero.

    onnx's shape inference trusts declared dimensions (a negative one feeding
    a Slice aborts the process inside onnx), so they are checked before any
    model reaches it.
    """
    for vi in _value_infos(model.graph):
        t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if t is None or not t.HasField("shape"):
            continue
        for i, d in enumerate(t.shape.dim):
            if d.HasField("dim_value") and d.dim_value < 0:
                dims = [x.dim_value if x.HasField("dim_value") else x.dim_param or "?"
                        for x in t.shape.dim]
                raise GraphError(f'value "{vi.name}" declares shape {dims}: dimension {i} '
                                 "is negative")


def _elem_types(model):
    """Value name -> ONNX element type, from the graph and shape inference."""
    types = {}
    g = model.graph
    for init in g.initializer:
        types[init.name] = init.data_type
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False).graph
    except Exception:
        # Inference is only a source of output types; an uninferable graph
        # still runs and its outputs keep singa's dtypes.
        inferred = g
    for vi in list(inferred.value_info) + list(g.input) + list(g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _declared_shape(vi):
    """A value_info's shape as a list of int (known) / None (symbolic), or
    None when the rank is unknown."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


def _constant_value(node, attrs):
    """The NumPy value of a Constant node."""
    if "value" in attrs:
        return attrs["value"]
    if "value_float" in attrs:
        return np.array(attrs["value_float"], np.float32)
    if "value_floats" in attrs:
        return np.array(attrs["value_floats"], np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"], np.int64)
    if "value_ints" in attrs:
        return np.array(attrs["value_ints"], np.int64)
    kinds = ", ".join(sorted(attrs)) or "no value"
    raise UnsupportedError(f"{describe(node)}: constant of kind {kinds} is not "
                           "supported (strings and sparse tensors have no singa dtype)")


class _Step:
    __slots__ = ("node", "spec", "attrs")

    def __init__(self, node, spec, attrs):
        self.node = node
        self.spec = spec
        self.attrs = attrs


class SingaRep(BackendRep):
    """A prepared ONNX model. ``run(inputs)`` returns singa tensors.

    Attributes:
        model: the ModelProto.
        opset: its ai.onnx opset.
        device: where it runs.
        input_names / output_names: graph inputs (initializers excluded) and
            outputs, in order.
        params: initializer name -> Tensor for the floating-point
            initializers (the weights; SONNXModel trains them).
    """

    def __init__(self, model, device=None, trainable=False):
        model = load_model(model)
        self.device = resolve_device(device)
        try:
            onnx.checker.check_model(model)
        except Exception as e:
            raise GraphError(f"malformed ONNX model: {e}") from e
        check_declared_shapes(model)
        self.model = model
        self.opset = default_opset(model)
        g = model.graph
        self._types = _elem_types(model)
        self.consts = {}
        self.params = {}
        self._const_tensors = {}
        for init in g.initializer:
            self._add_initializer(init, trainable)
        init_names = {i.name for i in g.initializer}
        self._inputs = [vi for vi in g.input if vi.name not in init_names]
        self.input_names = [vi.name for vi in self._inputs]
        self.output_names = [vi.name for vi in g.output]
        self._steps = self._plan(g)
        self.training = False

    def _add_initializer(self, init, trainable):
        where = f'initializer "{init.name}": '
        if init.data_location == TensorProto.EXTERNAL:
            raise UnsupportedError(f"{where}external data is not supported; load the "
                                   "model with onnx.load(path) first")
        try:
            arr = numpy_helper.to_array(init)
        except Exception as e:
            raise GraphError(f"{where}cannot decode: {e}") from e
        dtypes.singa_dtype(init.data_type, where)
        self.consts[init.name] = arr
        t = dtypes.to_tensor(arr, self.device, where)
        if arr.dtype.kind == "f":
            t.requires_grad = bool(trainable)
            t.stores_grad = bool(trainable)
            t.name = init.name
            self.params[init.name] = t
        else:
            t.requires_grad = False
        self._const_tensors[init.name] = t

    def _plan(self, g):
        """Validates the nodes and returns the steps to run."""
        defined = set(self.consts) | set(self.input_names)
        for vi in self._inputs:
            if vi.type.WhichOneof("value") != "tensor_type":
                raise UnsupportedError(f'graph input "{vi.name}" is not a tensor; '
                                       "sequences, maps and optionals are not supported")
            dtypes.singa_dtype(vi.type.tensor_type.elem_type, f'graph input "{vi.name}": ')
        steps = []
        for node in g.node:
            label = describe(node)
            if node.domain not in ("", "ai.onnx"):
                raise UnsupportedError(f"{label}: domain {node.domain!r} is not supported "
                                       "(only the default ai.onnx domain is)")
            spec = OPS.get(node.op_type)
            if spec is None:
                raise UnsupportedError(f"{label}: operator {node.op_type} is not supported")
            try:
                schema = onnx.defs.get_schema(node.op_type, self.opset, "")
            except Exception:
                raise UnsupportedError(f"{label}: operator {node.op_type} does not exist "
                                       f"in opset {self.opset}") from None
            if schema.since_version < spec.since:
                raise UnsupportedError(
                    f"{label}: {node.op_type} version {schema.since_version} (opset "
                    f"{self.opset}) is not supported; singa implements version "
                    f"{spec.since} and later")
            attrs = parse_attrs(node)
            extra = sorted(set(attrs) - spec.attrs)
            if extra:
                raise UnsupportedError(f"{label}: attribute(s) {', '.join(extra)} not "
                                       f"supported by singa's {node.op_type}")
            for name in node.input:
                if name and name not in defined:
                    raise GraphError(f"{label}: input {name!r} is not produced by any "
                                     "earlier node, graph input or initializer")
            for name in node.output:
                if name and name in defined:
                    raise GraphError(f"{label}: output {name!r} is defined twice")
                if name:
                    defined.add(name)
            if node.op_type in _CONSTANT_OPS:
                arr = _constant_value(node, attrs)
                where = f"{label}: "
                self.consts[node.output[0]] = arr
                t = dtypes.to_tensor(arr, self.device, where)
                t.requires_grad = False
                self._const_tensors[node.output[0]] = t
                continue
            steps.append(_Step(node, spec, attrs))
        for name in self.output_names:
            if name not in defined:
                raise GraphError(f'graph output "{name}" is not produced by any node')
        return steps

    # ---- running ----
    def _feed(self, inputs):
        """Graph input name -> Tensor, validated against the declarations."""
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - set(self.input_names))
            if unknown:
                raise GraphError(f"unknown input name(s) {unknown}; the model's inputs "
                                 f"are {self.input_names}")
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise GraphError(f"missing input(s) {missing}")
            items = [inputs[n] for n in self.input_names]
        else:
            if isinstance(inputs, (np.ndarray, tensor.Tensor)):
                inputs = [inputs]
            items = list(inputs)
            if len(items) != len(self.input_names):
                raise GraphError(f"the model takes {len(self.input_names)} input(s) "
                                 f"{self.input_names}, got {len(items)}")
        feed = {}
        for vi, value in zip(self._inputs, items):
            want = dtypes.singa_dtype(vi.type.tensor_type.elem_type)
            where = f'input "{vi.name}": '
            if isinstance(value, tensor.Tensor):
                if value.dtype != want:
                    raise OnnxTypeError(
                        f"{where}expected {tensor.dtype_name(want)} for ONNX "
                        f"{dtypes.type_name(vi.type.tensor_type.elem_type)}, got "
                        f"{tensor.dtype_name(value.dtype)}")
                t = value
                if t.device.id() != self.device.id():
                    t = tensor.Tensor(data=t.data.Clone(self.device),
                                      requires_grad=t.requires_grad)
            else:
                try:
                    arr = np.asarray(value)
                except Exception as e:
                    raise OnnxTypeError(f"{where}cannot convert to an array: {e}") from e
                if arr.dtype.kind not in "fiub":
                    raise OnnxTypeError(f"{where}dtype {arr.dtype} is not numeric")
                arr = dtypes.np_to_singa_array(arr, where)
                arr = arr.astype(tensor._TO_NUMPY[want], copy=False)
                t = tensor.from_numpy(arr, self.device)
            shape = _declared_shape(vi)
            if shape is not None:
                got = tuple(t.shape)
                if len(got) != len(shape) or any(
                        d is not None and d != g for d, g in zip(shape, got)):
                    want_s = tuple("?" if d is None else d for d in shape)
                    raise GraphError(f"{where}expected shape {want_s}, got {got}")
            feed[vi.name] = t
        return feed

    def run(self, x, aux_output=(), last_layers=-1, **kwargs):
        """Runs the graph on inputs x (a list in graph-input order, or a dict by
        name; NumPy arrays or singa tensors). Returns a list of Tensors: the
        graph's outputs, then the values named in aux_output.

        last_layers (SINGA's) is the index of the last node to run, counted
        as Python indexes (-1, the default, runs every node; -2 stops before
        the last): the outputs of that node replace the graph's outputs.
        Constant nodes are not counted."""
        values = dict(self._const_tensors)
        values.update(self._feed(x))
        n = len(self._steps)
        if isinstance(last_layers, bool) or not isinstance(last_layers, int) or \
                not (last_layers == -1 or -n <= last_layers < n):
            raise GraphError(f"last_layers={last_layers!r} is out of range for a graph of "
                             f"{n} nodes")
        stop = last_layers % n if n else -1
        steps = self._steps[:stop + 1]
        if stop == n - 1:
            wanted = list(self.output_names)
        else:
            wanted = [o for o in self._steps[stop].node.output if o]
        aux = [aux_output] if isinstance(aux_output, str) else list(aux_output)
        known = set(values) | {o for st in steps for o in st.node.output}
        missing = [a for a in aux if a not in known]
        if missing:
            raise GraphError(f"aux_output {missing} are not values of the graph up to node "
                             f"{stop}")
        values = self._execute(values, steps)
        return [values[name] for name in wanted + aux]

    def _execute(self, values, steps=None):
        # Ops that behave differently in training (batch norm, dropout)
        # follow this rep's flag, whatever the global autograd setting.
        with autograd.train_mode(self.training):
            return self._execute_steps(values, self._steps if steps is None else steps)

    def _execute_steps(self, values, steps):
        for step in steps:
            node = step.node
            ins = [values[n] if n else None for n in node.input]
            view = NodeView(node, step.attrs, ins, self.opset, self.device,
                            self.training, self.consts,
                            [self._types.get(n) for n in node.input],
                            [self._types.get(n) for n in node.output])
            try:
                outs = step.spec.fn(view)
            except Exception as e:
                # Anything a handler or the C++ core raises is reported
                # against the node that failed.
                raise wrap_node_error(node, e) from e
            if isinstance(outs, tensor.Tensor):
                outs = (outs,)
            for i, name in enumerate(node.output):
                if not name:
                    continue
                if i >= len(outs) or outs[i] is None:
                    raise GraphError(f"{describe(node)}: output {i} ({name}) is not "
                                     "produced by singa's implementation")
                values[name] = outs[i]
        return values

    # ---- SINGA's helpers ----
    def initialize(self):
        """(Re)loads the initializers' values into the parameter tensors, so
        a fine-tuned rep starts again from the file's weights."""
        for init in self.model.graph.initializer:
            t = self._const_tensors.get(init.name)
            if t is not None:
                t.copy_from_numpy(dtypes.np_to_singa_array(self.consts[init.name]))

    def init_tensor_count(self):
        """{value name: number of nodes that read it}."""
        count = {}
        for step in self._steps:
            for name in step.node.input:
                if name:
                    count[name] = count.get(name, 0) + 1
        return count

    def to_input_tensor(self, x):
        """x (a NumPy array or a Tensor) as a Tensor on this rep's device."""
        if isinstance(x, tensor.Tensor):
            if x.device.id() == self.device.id():
                return x
            return tensor.Tensor(data=x.data.Clone(self.device), requires_grad=x.requires_grad)
        return dtypes.to_tensor(np.asarray(x), self.device, "input: ")

    def to_output_tensor(self, y, out_name):
        """y in the singa dtype that holds the type the graph declares for
        out_name."""
        declared = self._types.get(out_name)
        if declared is None:
            return y
        want = dtypes.singa_dtype(declared, f'output "{out_name}": ')
        return y if y.dtype == want else y.as_type(want)

    def get_s(self, name, node, tensor_dict):
        """The value called name, an input of node, as a NumPy array: from
        the model's constants, else read from tensor_dict."""
        if name in self.consts:
            return self.consts[name]
        if name not in tensor_dict:
            raise GraphError(f"{describe(node)}: value {name!r} is not available")
        return dtypes.to_numpy(tensor_dict[name])

    def handle_special_ops(self, node, op, tensor_dict):
        """SINGA's hook that completes a node's operation just before it
        runs, from values known only then.

        The inputs of node that steer the operation rather than feed it
        (singa_api.ATTRIBUTE_INPUTS: a Reshape's shape, a Slice's starts,
        ends, axes and steps, a Clip's bounds, ...) are read with get_s,
        fixed in op and set on it under those names (``op.shape``); op then
        takes the other inputs only. For Conv and Gemm, the weights' shapes
        give SINGA's layer attributes ``nb_kernels`` (output channels or
        columns) and, for Gemm, ``bias_shape``. On an OnnxNode,
        ``attr_inputs`` and ``weight_inputs`` record which input went
        where. (run does not call it: singa's handlers read these inputs
        themselves.)

        Args:
            node: a node of this rep's graph (a NodeProto or an OnnxNode).
            op: the node's SingaOp (get_op(node)), or None to make one.
            tensor_dict: value name -> Tensor, the values computed so far
                (graph inputs and earlier nodes' outputs).
        Returns:
            (op, inputs): ``op(*inputs)`` computes the node's outputs.
        """
        from singa._onnx.singa_api import (ATTRIBUTE_INPUTS, WEIGHT_INPUTS, OnnxNode,
                                           SingaOp)
        proto = node.node if isinstance(node, OnnxNode) else node
        if not isinstance(proto, onnx.NodeProto):
            raise TypeError(f"handle_special_ops: expected an onnx NodeProto or OnnxNode, "
                            f"got {type(node).__name__}")
        if not any(step.node is proto or step.node == proto for step in self._steps):
            raise GraphError(f"handle_special_ops: {describe(proto)} is not a node of this "
                             "model's graph")
        if op is None:
            op = SingaOp(proto, self.opset)
        elif not isinstance(op, SingaOp) or op.node != proto:
            raise TypeError(f"handle_special_ops: op must be the SingaOp of {describe(proto)} "
                            f"(get_op(node)), got {type(op).__name__}")
        names = list(proto.input)
        for i, key in ATTRIBUTE_INPUTS.get(proto.op_type, {}).items():
            if i < len(names) and names[i]:
                value = np.asarray(self.get_s(names[i], proto, tensor_dict))
                op.fix_input(i, value)
                setattr(op, key, value.tolist())
                if isinstance(node, OnnxNode):
                    node.set_attr_inputs(names[i], key)
        for i, key in WEIGHT_INPUTS.get(proto.op_type, {}).items():
            if i < len(names) and names[i] in self.params and isinstance(node, OnnxNode):
                node.set_weight_inputs(names[i], key)
        if proto.op_type == "Conv":
            op.nb_kernels = int(self._shape_of(names[1], proto, tensor_dict)[0])
        elif proto.op_type == "Gemm":
            w = self._shape_of(names[1], proto, tensor_dict)
            op.nb_kernels = int(w[0] if op.attrs.get("transB", 0) else w[-1])
            has_c = len(names) > 2 and names[2]
            op.bias_shape = list(self._shape_of(names[2], proto, tensor_dict)) if has_c \
                else None
        inputs = []
        for i, name in enumerate(names):
            if name and i not in op.fixed:
                if name in tensor_dict:
                    inputs.append(tensor_dict[name])
                elif name in self._const_tensors:
                    inputs.append(self._const_tensors[name])
                else:
                    raise GraphError(f"{describe(proto)}: value {name!r} is not available")
        return op, inputs

    def _shape_of(self, name, node, tensor_dict):
        if name in self._const_tensors:
            return tuple(self._const_tensors[name].shape)
        if name not in tensor_dict:
            raise GraphError(f"{describe(node)}: value {name!r} is not available")
        return tuple(tensor_dict[name].shape)

    def output_types(self):
        """The ONNX element type each graph output is declared with."""
        return [self._types.get(n) for n in self.output_names]


def prepare(model, device="CPU", **kwargs):
    """Validates an ONNX model and returns a SingaRep that runs it.

    Args:
        model: an onnx.ModelProto, its serialized bytes, or a file path.
        device: a singa device, or 'CPU' (the default) / 'CUDA'.
    """
    return SingaRep(model, device)
