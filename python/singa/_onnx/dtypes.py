"""How ONNX element types map onto singa's three dtypes.

singa tensors hold float32, float16 or int32 only, so at the boundary:

* FLOAT -> float32, FLOAT16 -> float16, DOUBLE -> float32 (computed in
  single precision; results are converted back to float64 on the way out).
* INT64, INT32, INT16, INT8, UINT32, UINT16, UINT8 -> int32. Values outside
  the int32 range are saturated: in real graphs they only appear as the
  "to the end" sentinels (INT64_MAX / INT64_MIN) of Slice and friends.
* BOOL -> int32 holding 0 / 1. Comparison ops keep their input's dtype and
  return 0 / 1, and every consumer of a boolean treats nonzero as true.
* Anything else (strings, complex, bfloat16, float8, uint64, int4 ...)
  raises UnsupportedError.

Outputs handed back as NumPy (the ONNX backend API) take the element type the
graph declares for them, so int64 and bool results round-trip.
"""

import numpy as np
from onnx import TensorProto, helper

from singa import tensor
from singa._onnx.errors import UnsupportedError

_INT_TYPES = (TensorProto.INT64, TensorProto.INT32, TensorProto.INT16,
              TensorProto.INT8, TensorProto.UINT32, TensorProto.UINT16,
              TensorProto.UINT8, TensorProto.BOOL)

TO_SINGA = {TensorProto.FLOAT: tensor.float32,
            TensorProto.FLOAT16: tensor.float16,
            TensorProto.DOUBLE: tensor.float32}
TO_SINGA.update({t: tensor.int32 for t in _INT_TYPES})

FROM_SINGA = {tensor.float32: TensorProto.FLOAT,
              tensor.float16: TensorProto.FLOAT16,
              tensor.int32: TensorProto.INT32}

_INT32_MIN, _INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def type_name(elem_type):
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def singa_dtype(elem_type, where=""):
    """The singa dtype that holds ONNX elem_type, or UnsupportedError."""
    try:
        return TO_SINGA[elem_type]
    except KeyError:
        raise UnsupportedError(f"{where}element type {type_name(elem_type)} is not "
                               "supported (singa holds float32, float16 and int32)") from None


def np_to_singa_array(arr, where=""):
    """arr converted to the NumPy dtype singa stores it as."""
    arr = np.asarray(arr)
    kind = arr.dtype
    if kind == np.float32 or kind == np.float16 or kind == np.int32:
        return arr
    if kind == np.float64:
        return arr.astype(np.float32)
    if kind == np.bool_:
        return arr.astype(np.int32)
    if kind.kind in "iu":
        return np.clip(arr, _INT32_MIN, _INT32_MAX).astype(np.int32)
    raise UnsupportedError(f"{where}NumPy dtype {kind} is not supported (singa holds "
                           "float32, float16 and int32; float64, int64, other ints "
                           "and bool are converted)")


def to_tensor(arr, dev, where=""):
    """A singa tensor holding arr (see the module doc for the dtype rules)."""
    return tensor.from_numpy(np_to_singa_array(arr, where), dev)


def to_numpy(t, elem_type=None):
    """t's values as NumPy, in ONNX elem_type when given."""
    arr = tensor.to_numpy(t)
    if elem_type is None or elem_type == TensorProto.UNDEFINED:
        return arr
    if elem_type == TensorProto.BOOL:
        return arr != 0
    try:
        np_type = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        return arr
    return arr.astype(np_type)


def np_dtype(elem_type):
    """The NumPy dtype for ONNX elem_type (for constants kept on the host)."""
    return helper.tensor_dtype_to_np_dtype(elem_type)
