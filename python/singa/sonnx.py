"""ONNX for singa: export autograd graphs and models, import ONNX models.

Export::

    model.eval()
    y = model(x)                                 # any forward pass is recorded
    m = sonnx.to_onnx([x], [y])                  # inference behaviour
    m = sonnx.export_model(model, [x])           # the same, traced for you
    sonnx.save(m, "model.onnx")                  # onnx.save

Import::

    rep = sonnx.prepare("model.onnx", dev)      # or a ModelProto / bytes
    y, = rep.run([x])                            # Tensors or NumPy in, Tensors out
    net = sonnx.SONNXModel(onnx_model)           # a trainable Model
    out = net(x)                                 # a list, as in SINGA
    outs = sonnx.run_node(node, [a, b])          # one node: {name: Tensor}

SINGA's other names are here too: ``get_op``, ``load`` (``onnx.load``),
``SingaFrontend``, ``OnnxNode``, ``OnnxAttributes``,
``onnx_type_to_singa_type``, ``NP_TYPE_TO_SINGA_SUPPORT_TYPE``,
``cpu_dev`` and ``gpu_dev``. ``SingaBackend`` implements
``onnx.backend.base.Backend`` (NumPy in and out, as onnx's backend tests
expect). Errors are SonnxError subclasses (UnsupportedError, GraphError,
OnnxTypeError) that name the node and the reason.

Data types: singa holds float32, float16 and int32; see
``singa._onnx.dtypes`` for how double, int64, other integers and bool map.
"""

from collections import OrderedDict, namedtuple  # noqa: F401 (SINGA's module names)

try:
    import onnx
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
from singa._onnx.singa_api import (SingaFrontend, OnnxNode, OnnxAttributes, SingaOp, get_op,
                                   run_node, onnx_type_to_singa_type,
                                   NP_TYPE_TO_SINGA_SUPPORT_TYPE)
from singa import device as _device

__all__ = ["SonnxError", "UnsupportedError", "GraphError", "OnnxTypeError",
           "SingaRep", "SingaNumpyRep", "SingaBackend", "prepare", "load_model",
           "supported_import_ops", "supported_export_ops", "to_onnx", "export_model",
           "SONNXModel", "SingaFrontend", "OnnxNode", "OnnxAttributes", "SingaOp", "get_op",
           "run_node", "save", "load", "onnx_type_to_singa_type",
           "NP_TYPE_TO_SINGA_SUPPORT_TYPE", "cpu_dev", "gpu_dev"]

run_model = SingaBackend.run_model
supports_device = SingaBackend.supports_device
save = onnx.save
load = onnx.load
cpu_dev = _device.get_default_device()


def __getattr__(name):
    # SINGA makes a GPU device at import; here it is made on first use of
    # gpu_dev, and is None in a build or on a machine without a GPU.
    if name == "gpu_dev":
        global gpu_dev
        gpu_dev = _device.create_cuda_gpu() if _device.get_num_gpus() > 0 else None
        return gpu_dev
    raise AttributeError(f"module 'singa.sonnx' has no attribute {name!r}")


def supported_import_ops():
    """The ONNX operators the importer implements, sorted."""
    return sorted(_OPS)


def supported_export_ops():
    """The autograd Operator classes the exporter handles, sorted."""
    return sorted(_EXPORTERS)
