"""singa as an ``onnx.backend.base.Backend``: the API that ONNX's backend
test suite (and other tools) drive. Inputs and outputs are NumPy arrays;
outputs take the element types the graph declares (see dtypes)."""

import numpy as np
import onnx
from onnx import helper, shape_inference
from onnx.backend.base import Backend

from singa import device as singa_device
from singa._onnx import dtypes
from singa._onnx.errors import GraphError
from singa._onnx.importer import SingaRep, check_declared_shapes


class SingaNumpyRep(SingaRep):
    """A SingaRep whose run() takes and returns NumPy arrays."""

    def run(self, inputs, **kwargs):
        outs = super().run(inputs, **kwargs)
        # the declared types apply when the outputs are the graph's
        types = [] if kwargs.get("aux_output") or kwargs.get("last_layers", -1) != -1 \
            else self.output_types()
        return [dtypes.to_numpy(t, types[i] if i < len(types) else None)
                for i, t in enumerate(outs)]


class SingaBackend(Backend):
    """The ONNX backend interface over singa."""

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        return SingaNumpyRep(model, device)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", opset_version=None, outputs_info=None,
                 **kwargs):
        """Runs one NodeProto on NumPy inputs (in node.input order) at
        opset_version (the installed onnx's newest by default); returns a
        list of NumPy arrays, as onnx.backend expects. ``sonnx.run_node``
        is SINGA's form (an OrderedDict of Tensors)."""
        names = [n for n in node.input if n]
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in names]
        inputs = [np.asarray(v) for v in inputs]
        if len(inputs) != len(names):
            raise GraphError(f"{node.op_type} node takes {len(names)} inputs, "
                             f"got {len(inputs)}")
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in zip(names, inputs)]
        outs = []
        for i, n in enumerate(node.output):
            if not n:
                continue
            elem = 0
            if outputs_info is not None and i < len(outputs_info):
                elem = helper.np_dtype_to_tensor_dtype(np.dtype(outputs_info[i][0]))
            outs.append(helper.make_tensor_value_info(n, elem, None))
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, outs)
        opset = opset_version or onnx.defs.onnx_opset_version()
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        # Graph outputs need a type; take what shape inference finds.
        check_declared_shapes(model)
        try:
            inferred = shape_inference.infer_shapes(model).graph.value_info
        except Exception:
            inferred = []
        known = {vi.name: vi for vi in inferred}
        for out in model.graph.output:
            if out.name in known:
                out.CopyFrom(known[out.name])
            elif not out.type.tensor_type.HasField("shape"):
                out.type.tensor_type.shape.SetInParent()
        return cls.prepare(model, device).run(inputs)

    @classmethod
    def supports_device(cls, device):
        kind = str(device).upper().partition(":")[0]
        if kind == "CPU":
            return True
        if kind == "CUDA":
            return singa_device.get_num_gpus() > 0
        return False
