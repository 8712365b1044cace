"""The importer's op table and the per-node view handlers receive.

A handler is registered once per ONNX operator name::

    @op("Relu")
    def relu(n):
        return autograd.relu(n.x(0))

``n`` is a :class:`NodeView`. A handler returns a Tensor or a sequence of
Tensors (one per node output; None for an output it does not produce).
``attrs`` lists the attributes the handler understands: any other attribute
on a node is rejected when the model is prepared, so a graph never runs with
an attribute silently ignored. ``since`` is the oldest operator version
(the schema's since_version) the handler implements.
"""

import numpy as np
from onnx import helper, AttributeProto

from singa._onnx import dtypes
from singa._onnx.errors import GraphError

OPS = {}


class OpSpec:
    __slots__ = ("fn", "attrs", "since", "name")

    def __init__(self, name, fn, attrs, since):
        self.name = name
        self.fn = fn
        self.attrs = frozenset(attrs)
        self.since = since


def op(*names, attrs=(), since=1):
    """Registers the decorated handler for the ONNX operators in names."""
    def deco(fn):
        for name in names:
            if name in OPS:
                raise RuntimeError(f"ONNX operator {name} registered twice")
            OPS[name] = OpSpec(name, fn, attrs, since)
        return fn
    return deco


def parse_attrs(node):
    """The node's attributes as Python values (tensors as NumPy arrays)."""
    out = {}
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH or a.type == AttributeProto.GRAPHS:
            out[a.name] = a
            continue
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif a.type == AttributeProto.TENSOR:
            from onnx import numpy_helper
            v = numpy_helper.to_array(v)
        elif a.type == AttributeProto.INTS:
            v = [int(i) for i in v]
        elif a.type == AttributeProto.FLOATS:
            v = [float(f) for f in v]
        out[a.name] = v
    return out


class NodeView:
    """What a handler sees of one node while the graph runs.

    Attributes:
        node: the NodeProto.
        attrs: attribute name -> Python value.
        inputs: the input Tensors (None for an omitted optional input).
        opset: the model's ai.onnx opset.
        dev: the device the graph runs on.
        training: True while SONNXModel trains (affects Dropout, BatchNorm).
    """

    __slots__ = ("node", "attrs", "inputs", "opset", "dev", "training",
                 "_consts", "in_types", "out_types")

    def __init__(self, node, attrs, inputs, opset, dev, training, consts,
                 in_types, out_types):
        self.node = node
        self.attrs = attrs
        self.inputs = inputs
        self.opset = opset
        self.dev = dev
        self.training = training
        self._consts = consts
        self.in_types = in_types
        self.out_types = out_types

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def has(self, i):
        """True when optional input i is present."""
        return i < len(self.inputs) and self.inputs[i] is not None

    def x(self, i):
        """Input tensor i (it must be present)."""
        if not self.has(i):
            raise GraphError(f"input {i} is required but missing")
        return self.inputs[i]

    def static(self, i, default=None):
        """Input i as a NumPy array (ints as int64), for the inputs that
        steer an op rather than feed it: shapes, axes, pads, starts.
        Constants keep their original values (so INT64_MAX survives);
        computed values are read back from the device."""
        if not self.has(i):
            return default
        name = self.node.input[i]
        if name in self._consts:
            arr = self._consts[name]
        else:
            arr = dtypes.to_numpy(self.inputs[i])
        if arr.dtype.kind in "iub":
            arr = arr.astype(np.int64)
        return arr

    def static_ints(self, i, default=None):
        v = self.static(i)
        if v is None:
            return default
        if v.dtype.kind not in "iub":
            raise GraphError(f"input {i} ({self.node.input[i]}) must hold integers, "
                             f"got {v.dtype}")
        return [int(a) for a in v.reshape(-1)]

    def out_type(self, i=0):
        return self.out_types[i] if i < len(self.out_types) else None

    def in_type(self, i=0):
        return self.in_types[i] if i < len(self.in_types) else None


# The handler modules register themselves through ``op`` above; importing
# them here fills OPS whichever module is imported first.
from singa._onnx import ops_math, ops_shape, ops_nn  # noqa: E402,F401
