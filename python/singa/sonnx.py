"""ONNX for singa: export autograd graphs and models, import ONNX models.

Export::

    m = sonnx.to_onnx([x], [y])                  # from a recorded graph
    m = sonnx.export_model(model, [x])           # a singa Model
    onnx.save(m, "model.onnx")

Import::

    rep = sonnx.prepare("model.onnx", dev)      # or a ModelProto / bytes
    y, = rep.run([x])                            # singa Tensors
    net = sonnx.SONNXModel(onnx_model)           # a trainable Model

``SingaBackend`` implements ``onnx.backend.base.Backend`` (NumPy in and
out). Errors are SonnxError subclasses (UnsupportedError, GraphError,
OnnxTypeError) that name the node and the reason.

Data types: singa holds float32, float16 and int32; see
``singa._onnx.dtypes`` for how double, int64, other integers and bool map.
"""

try:
    import onnx  # noqa: F401
except ImportError as e:  # onnx is an optional dependency
    raise ImportError("singa.sonnx needs the onnx package: pip install onnx "
                      "(or install singa with the [onnx] extra)") from e

from singa._onnx.errors import (SonnxError, UnsupportedError, GraphError,
                                OnnxTypeError)
from singa._onnx.importer import SingaRep, prepare, load_model
from singa._onnx.backend import SingaBackend, SingaNumpyRep
from singa._onnx.registry import OPS as _OPS
from singa._onnx.exporter import to_onnx, export_model
from singa._onnx.export_ops import EXPORTERS as _EXPORTERS
from singa._onnx.sonnx_model import SONNXModel

__all__ = ["SonnxError", "UnsupportedError", "GraphError", "OnnxTypeError",
           "SingaRep", "SingaNumpyRep", "SingaBackend", "prepare", "load_model",
           "supported_import_ops", "supported_export_ops", "to_onnx", "export_model",
           "SONNXModel"]

run_model = SingaBackend.run_model
run_node = SingaBackend.run_node
supports_device = SingaBackend.supports_device


def supported_import_ops():
    """The ONNX operators the importer implements, sorted."""
    return sorted(_OPS)


def supported_export_ops():
    """The autograd Operator classes the exporter handles, sorted."""
    return sorted(_EXPORTERS)
