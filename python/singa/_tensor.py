"""The Tensor class and the functions that make, convert and reshape
tensors; ``singa.tensor`` re-exports them with the math of
``singa.tensor_ops``. It imports only ``singa_wrap`` and ``singa.device``,
so the modules that build on it import in any order.
"""

import builtins
import numbers

import numpy as np

from singa import singa_wrap as _cw
from singa import device as _device

__all__ = [
    "CTensor", "float16", "float32", "int32", "dtype_name", "Tensor", "from_raw_tensor",
    "from_raw_tensors", "from_numpy", "to_numpy", "to_host", "zeros", "ones", "random",
    "zeros_like", "ones_like", "product", "sizeof", "reshape", "transpose", "contiguous",
    "broadcast_to", "copy_data_to_from",
]

CTensor = _cw.Tensor

float16 = _cw.kFloat16
float32 = _cw.kFloat32
int32 = _cw.kInt

_DTYPE_NAMES = {float16: "float16", float32: "float32", int32: "int32"}
_TO_NUMPY = {float16: np.float16, float32: np.float32, int32: np.int32}
_SIZEOF = {float16: 2, float32: 4, int32: 4}


def dtype_name(dtype):
    """'float32' for float32 and so on."""
    return _DTYPE_NAMES.get(dtype, f"dtype({dtype})")


def _check_dtype(dtype, where):
    if dtype not in _DTYPE_NAMES:
        raise TypeError(f"{where}: unknown dtype {dtype!r}; use tensor.float16, "
                        "tensor.float32 or tensor.int32")


def _check_shape(shape, where):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{where}: shape must be a tuple of ints, got {shape!r}") from None
    for d in shape:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool):
            raise TypeError(f"{where}: shape {shape} holds a non-integer {d!r}")
        if d < 0:
            raise ValueError(f"{where}: shape {shape} has a negative dimension")
    return tuple(int(d) for d in shape)


def _scalar(x):
    """x as a Python float, or None when x is not a real number."""
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return _to_float(x)
    if isinstance(x, (numbers.Real, np.number)) and not isinstance(x, (bool, np.bool_)):
        return _to_float(x)
    return None


def _to_float(x):
    try:
        return float(x)
    except OverflowError:
        # An int past float64: certainly past float32 (as the core says for
        # a float that is too large).
        raise ValueError(f"an integer of {int(x).bit_length()} bits is outside the "
                         "float32 range") from None


_new = object.__new__


def _wrap(ct):
    """Wraps a CTensor without the checks of Tensor.__init__ (hot path)."""
    t = _new(Tensor)
    t.data = ct
    return t


def from_raw_tensor(ct):
    """Wraps a SWIG CTensor in a Tensor (shares storage)."""
    return _wrap(ct)


def from_raw_tensors(cts):
    return [_wrap(c) for c in cts]


class Tensor:
    """An n-dimensional array on a device.

    Args:
        shape: tuple of ints.
        device: a device from singa.device; the default CPU device if None.
        dtype: float32 (default), float16 or int32.
        data: a NumPy array (copied) or a CTensor (wrapped) to start from.
        requires_grad: autograd computes a gradient for this tensor.
        stores_grad: autograd hands this tensor's gradient to the optimizer.
        creator: the autograd operator that produced this tensor.
        name: an optional name (parameters use it in checkpoints and ONNX).
    """

    # Class-level defaults keep wrapping op results cheap: only data is set.
    requires_grad = True
    stores_grad = False
    creator = None
    name = None
    __hash__ = object.__hash__

    def __init__(self, shape=(), device=None, dtype=float32, data=None,
                 requires_grad=True, stores_grad=False, creator=None, name=None):
        if isinstance(data, CTensor):
            self.data = data
        elif data is not None:
            self.data = from_numpy(data, device).data
        else:
            shape = _check_shape(shape, "Tensor")
            _check_dtype(dtype, "Tensor")
            if device is not None and not isinstance(device, _cw.Device):
                raise TypeError(f"Tensor: device must be a singa device, got {type(device).__name__}")
            self.data = CTensor(shape, device, dtype)
            self.data.SetValue(0.0)
        if not requires_grad:
            self.requires_grad = False
        if stores_grad:
            self.stores_grad = True
        if creator is not None:
            self.creator = creator
        if name is not None:
            self.name = name

    # ---- properties ----
    @property
    def shape(self):
        return self.data.shape()

    @property
    def device(self):
        return self.data.device()

    @property
    def dtype(self):
        return self.data.data_type()

    @property
    def T(self):
        """The transpose (all axes reversed), as a view."""
        return _wrap(self.data.Transpose())

    def ndim(self):
        return self.data.nDim()

    def size(self):
        return self.data.Size()

    def memsize(self):
        return self.data.MemSize()

    def is_transpose(self):
        return self.data.IsTransposed()

    def is_contiguous(self):
        return self.data.IsContiguous()

    # ---- layout ----
    def reshape(self, shape):
        """A view with a new shape (copies only when not contiguous); one
        dimension may be -1."""
        return _wrap(self.data.Reshape(_infer_shape(self, shape)))

    def transpose(self, axes=None):
        """A view with the axes permuted (reversed when axes is None)."""
        if axes is None:
            return _wrap(self.data.Transpose())
        axes = tuple(axes)
        n = self.data.nDim()
        norm = []
        for a in axes:
            if not isinstance(a, numbers.Integral):
                raise TypeError(f"transpose: axes must be ints, got {axes}")
            if not -n <= a < n:
                raise IndexError(f"transpose: axis {a} is out of range for shape {self.shape}")
            norm.append(int(a) % n)
        return _wrap(self.data.Transpose(norm))

    def contiguous(self):
        """Self when already contiguous, else a contiguous copy."""
        return _wrap(self.data.Contiguous())

    def broadcast_to(self, shape):
        return _wrap(self.data.Broadcast(_check_shape(shape, "broadcast_to")))

    # ---- dtype and device ----
    def as_type(self, dtype):
        """A copy converted to dtype."""
        _check_dtype(dtype, "as_type")
        return _wrap(self.data.AsType(dtype))

    def to_type(self, dtype):
        """Converts this tensor to dtype in place; returns self."""
        _check_dtype(dtype, "to_type")
        self.data.ToType(dtype)
        return self

    def to_device(self, device):
        """Moves this tensor to device in place."""
        self.data.ToDevice(device)

    def to_host(self):
        """Moves this tensor to the default CPU device in place."""
        self.data.ToDevice(_device.get_default_device())

    # ---- values ----
    def set_value(self, x):
        """Sets every element to the scalar x."""
        v = _scalar(x)
        if v is None:
            raise TypeError(f"set_value: expected a number, got {type(x).__name__}")
        self.data.SetValue(v)
        return self

    def copy_from_numpy(self, np_array, offset=0):
        """Copies a NumPy array's elements into this tensor from offset."""
        arr = np.asarray(np_array, dtype=_TO_NUMPY[self.dtype])
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        self.data.CopyDataFromHostPtr(arr, offset)

    def copy_from(self, t):
        self.copy_data(t)

    def copy_data(self, t):
        """Copies t's values into this tensor (same number of elements)."""
        if not isinstance(t, Tensor):
            raise TypeError(f"copy_data: expected a Tensor, got {type(t).__name__}")
        self.data.CopyData(t.data)

    def clone(self):
        """A deep copy (contiguous)."""
        t = _wrap(self.data.Clone())
        t.requires_grad = self.requires_grad
        t.stores_grad = self.stores_grad
        t.name = self.name
        return t

    def deepcopy(self):
        return self.clone()

    def repeat(self, repeats, axis):
        from singa.tensor_ops import repeat
        return repeat(self, repeats, axis)

    def gaussian(self, mean, std):
        self.data.Gaussian(float(mean), float(std))
        return self

    def uniform(self, low, high):
        self.data.Uniform(float(low), float(high))
        return self

    def bernoulli(self, p):
        self.data.Bernoulli(float(p))
        return self

    def l1(self):
        """Mean absolute value (SINGA's l1: the 1-norm over the size)."""
        return self.data.L1()

    def l2(self):
        """The 2-norm over the size, as in SINGA."""
        return self.data.L2()

    def numpy(self):
        return to_numpy(self)

    def item(self):
        if self.data.Size() != 1:
            raise ValueError(f"item: tensor of shape {self.shape} has {self.size()} elements, not 1")
        return to_numpy(self).reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __len__(self):
        if self.data.nDim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape(0)

    def __repr__(self):
        body = np.array2string(to_numpy(self), separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={dtype_name(self.dtype)}, device={self.device.name()})"

    __str__ = __repr__

    # ---- indexing ----
    def __getitem__(self, key):
        return _wrap(_index_view(self.data, key))

    def __setitem__(self, key, value):
        view = _index_view(self.data, key)
        v = _scalar(value)
        if v is not None:
            view.SetValue(v)
            return
        if not isinstance(value, Tensor):
            value = from_numpy(np.asarray(value), self.device)
        view.CopyData(value.data.Broadcast(view.shape()))

    # ---- arithmetic ----
    def __add__(self, o):
        if isinstance(o, Tensor):
            return _wrap(_cw.Add(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.AddScalar(self.data, s))

    def __radd__(self, o):
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.ScalarAdd(s, self.data))

    def __sub__(self, o):
        if isinstance(o, Tensor):
            return _wrap(_cw.Sub(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.SubScalar(self.data, s))

    def __rsub__(self, o):
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.ScalarSub(s, self.data))

    def __mul__(self, o):
        if isinstance(o, Tensor):
            return _wrap(_cw.Mul(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.MulScalar(self.data, s))

    def __rmul__(self, o):
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.ScalarMul(s, self.data))

    def __truediv__(self, o):
        if isinstance(o, Tensor):
            return _wrap(_cw.Div(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.DivScalar(self.data, s))

    def __rtruediv__(self, o):
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.ScalarDiv(s, self.data))

    def __pow__(self, o):
        if isinstance(o, Tensor):
            return _wrap(_cw.Pow(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.PowScalar(self.data, s))

    def __rpow__(self, o):
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(_cw.ScalarPow(s, self.data))

    def __matmul__(self, o):
        if not isinstance(o, Tensor):
            return NotImplemented
        return _wrap(_cw.Matmul(self.data, o.data))

    def __neg__(self):
        return _wrap(_cw.Neg(self.data))

    def __pos__(self):
        return self

    def __abs__(self):
        return _wrap(_cw.Abs(self.data))

    def _inplace(self, o, into, scalar_into):
        if isinstance(o, Tensor):
            into(self.data, o.data, self.data)
            return self
        s = _scalar(o)
        if s is None:
            return NotImplemented
        scalar_into(self.data, s, self.data)
        return self

    def __iadd__(self, o):
        return self._inplace(o, _cw.AddInto, _cw.AddScalarInto)

    def __isub__(self, o):
        return self._inplace(o, _cw.SubInto, _cw.SubScalarInto)

    def __imul__(self, o):
        return self._inplace(o, _cw.MulInto, _cw.MulScalarInto)

    def __itruediv__(self, o):
        return self._inplace(o, _cw.DivInto, _cw.DivScalarInto)

    def _compare(self, o, fn, fn_scalar):
        if isinstance(o, Tensor):
            return _wrap(fn(self.data, o.data))
        s = _scalar(o)
        return NotImplemented if s is None else _wrap(fn_scalar(self.data, s))

    def __lt__(self, o):
        return self._compare(o, _cw.Less, _cw.LessScalar)

    def __le__(self, o):
        return self._compare(o, _cw.LessEqual, _cw.LessEqualScalar)

    def __gt__(self, o):
        return self._compare(o, _cw.Greater, _cw.GreaterScalar)

    def __ge__(self, o):
        return self._compare(o, _cw.GreaterEqual, _cw.GreaterEqualScalar)

    def __eq__(self, o):
        return self._compare(o, _cw.Equal, _cw.EqualScalar)

    def __ne__(self, o):
        r = self._compare(o, _cw.Equal, _cw.EqualScalar)
        return r if r is NotImplemented else _wrap(_cw.Not(r.data))


def _infer_shape(t, shape):
    """shape with one -1 replaced so the size matches t's."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = list(shape)
    for d in shape:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool):
            raise TypeError(f"reshape: shape {tuple(shape)} holds a non-integer {d!r}")
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"reshape: shape {tuple(shape)} has more than one -1")
    if any(d < -1 for d in shape):
        raise ValueError(f"reshape: shape {tuple(shape)} has a negative dimension")
    if unknown:
        known = 1
        for i, d in enumerate(shape):
            if i != unknown[0]:
                known *= d
        size = t.data.Size()
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {t.shape} "
                             f"({size} elements) to {tuple(shape)}")
        shape[unknown[0]] = size // known
    return tuple(int(d) for d in shape)


def _index_view(ct, key):
    """The CTensor view selected by a basic index (ints, slices, None, ...)."""
    if not isinstance(key, tuple):
        key = (key,)
    shape, strides, offset = ct.shape(), ct.stride(), ct.offset()
    ndim = len(shape)
    consumed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor of shape {shape}")
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    new_shape, new_strides = [], []
    dim = 0
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
        elif k is Ellipsis:
            for _ in range(ndim - consumed):
                new_shape.append(shape[dim])
                new_strides.append(strides[dim])
                dim += 1
        elif isinstance(k, slice):
            start, stop, step = k.indices(shape[dim])
            n = len(range(start, stop, step))
            if n:
                offset += start * strides[dim]
            new_shape.append(n)
            # One element needs no step; a huge one would overflow int64.
            new_strides.append(strides[dim] * step if n > 1 else strides[dim])
            dim += 1
        elif isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, (bool, np.bool_)):
            n = shape[dim]
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of range for axis {dim} "
                                 f"of size {n} in a tensor of shape {shape}")
            offset += i * strides[dim]
            dim += 1
        else:
            raise TypeError("tensor indices must be ints, slices, None or Ellipsis, "
                            f"got {type(k).__name__}")
    for d in range(dim, ndim):
        new_shape.append(shape[d])
        new_strides.append(strides[d])
    return ct.View(new_shape, new_strides, offset)


# ---- creation and conversion ----

def from_numpy(np_array, dev=None):
    """A new tensor holding a copy of np_array.

    float16, float32 and int32 are kept; float64 becomes float32 and int64
    becomes int32 (values must fit). Other dtypes raise TypeError.
    """
    arr = np.asarray(np_array)
    kind = arr.dtype
    if kind == np.float64:
        arr = arr.astype(np.float32)
    elif kind == np.int64:
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise ValueError("from_numpy: int64 values do not fit int32")
        arr = arr.astype(np.int32)
    elif kind not in (np.float16, np.float32, np.int32):
        raise TypeError(f"from_numpy: dtype {kind} is not supported; use float16, "
                        "float32, float64, int32 or int64")
    dtype = {np.dtype(np.float16): float16, np.dtype(np.float32): float32,
             np.dtype(np.int32): int32}[arr.dtype]
    if dev is not None and not isinstance(dev, _cw.Device):
        raise TypeError(f"from_numpy: device must be a singa device, got {type(dev).__name__}")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    ct = CTensor(arr.shape, dev, dtype)
    ct.CopyDataFromHostPtr(arr)
    return _wrap(ct)


def to_numpy(t):
    """A NumPy copy of t's values."""
    if not isinstance(t, Tensor):
        raise TypeError(f"to_numpy: expected a Tensor, got {type(t).__name__}")
    arr = np.empty(t.data.shape(), dtype=_TO_NUMPY[t.data.data_type()])
    t.data.CopyDataToHostPtr(arr)
    return arr


def to_host(t):
    """A copy of t on the default CPU device."""
    return _wrap(t.data.Clone(_device.get_default_device()))


def zeros(shape, device=None, dtype=float32):
    return Tensor(shape, device, dtype)


def ones(shape, device=None, dtype=float32):
    return Tensor(shape, device, dtype).set_value(1.0)


def random(shape, device=None):
    """Uniform samples from [0, 1)."""
    return Tensor(shape, device).uniform(0.0, 1.0)


def zeros_like(t):
    return Tensor(t.shape, t.device, t.dtype)


def ones_like(t):
    return ones(t.shape, t.device, t.dtype)


def product(shape):
    p = 1
    for d in shape:
        p *= d
    return p


def sizeof(dtype):
    _check_dtype(dtype, "sizeof")
    return _SIZEOF[dtype]


def reshape(t, shape):
    return t.reshape(shape)


def transpose(t, axes=None):
    return t.transpose(axes)


def contiguous(t):
    return t.contiguous()


def broadcast_to(t, shape):
    return t.broadcast_to(shape)


def copy_data_to_from(dst, src, size=None, dst_offset=0, src_offset=0):
    """Copies size elements of src (from src_offset) into dst (at dst_offset)."""
    s = src.reshape(-1)
    d = dst.reshape(-1) if dst.is_contiguous() else None
    if d is None:
        raise ValueError(f"copy_data_to_from: destination of shape {dst.shape} is not contiguous")
    if size is None:
        size = src.size() - src_offset
    if src_offset + size > src.size() or dst_offset + size > dst.size():
        raise ValueError(f"copy_data_to_from: {size} elements from offset {src_offset} of "
                         f"shape {src.shape} into offset {dst_offset} of shape {dst.shape} "
                         "reach past the end")
    d[dst_offset:dst_offset + size] = s[src_offset:src_offset + size]
