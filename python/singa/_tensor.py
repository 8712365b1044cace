"""The Tensor class and the functions that make, convert and reshape
tensors; ``singa.tensor`` re-exports them with the math of
``singa.tensor_ops``. It imports only ``singa_wrap`` and ``singa.device``,
so the modules that build on it import in any order.
"""

import itertools
import numbers
import re
import warnings

import numpy as np

from singa import singa_wrap as _cw
from singa import device as _device
from singa._tensor_index import Viewer, assign as _assign, index_view as _index_view

__all__ = [
    "CTensor", "float16", "float32", "int32", "dtype_name", "Tensor", "PlaceHolder",
    "from_raw_tensor",
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
_FROM_NUMPY = {np.dtype(np.float16): float16, np.dtype(np.float32): float32,
               np.dtype(np.int32): int32}
# Tensors get SINGA's default names Dummy#0, Dummy#1, ... when first asked.
_tensor_count = itertools.count()
_DUMMY_NAME = re.compile(r"Dummy#\d+")


def dtype_name(dtype):
    """'float32' for float32 and so on."""
    return _DTYPE_NAMES.get(dtype, f"dtype({dtype})")


# SINGA's spellings of a dtype besides its code: as_type('int'), ...
_DTYPE_ALIASES = {"int": int32, "int32": int32, "float": float32, "float32": float32,
                  "float16": float16, "half": float16}


def _is_int(x):
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _dtype(dtype, where):
    """The dtype code for SINGA's codes (float32, float16, int32), the
    strings 'float', 'int', 'float32', 'float16', 'int32', or NumPy's
    float32, float16 and int32."""
    if isinstance(dtype, str):
        code = _DTYPE_ALIASES.get(dtype)
    elif _is_int(dtype):
        code = int(dtype)
    else:
        try:
            code = _FROM_NUMPY.get(np.dtype(dtype))
        except TypeError:
            code = None
    if code not in _DTYPE_NAMES:
        extra = ("; singa stores float32, float16 and int32 only"
                 if code in (_cw.kChar, _cw.kDouble) else "")
        raise TypeError(f"{where}: unknown dtype {dtype!r}{extra}; use tensor.float16, "
                        "tensor.float32, tensor.int32, 'float' or 'int'")
    return code


def _check_dtype(dtype, where):
    _dtype(dtype, where)


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


def from_raw_tensor(t):
    """Wraps the SWIG CTensor t in a Tensor (shares storage)."""
    return _wrap(t)


def from_raw_tensors(tt):
    """Wraps each SWIG CTensor of the sequence tt in a Tensor."""
    return [_wrap(c) for c in tt]


class Tensor:
    """An n-dimensional array on a device.

    Args:
        shape: tuple of ints.
        device: a device from singa.device; the default CPU device if None.
        dtype: float32 (default), float16 or int32 (or 'float', 'int').
        data: a NumPy array (copied and converted to dtype, as in SINGA) or
            a CTensor (wrapped; it keeps its own dtype) to start from.
        requires_grad: autograd computes a gradient for this tensor.
        stores_grad: autograd hands this tensor's gradient to the optimizer.
        creator: the autograd operator that produced this tensor.
        name: the tensor's name (parameters use it in checkpoints and ONNX);
            SINGA's ``Dummy#<n>`` when none is given.
    """

    # Class-level defaults keep wrapping op results cheap: only data is set.
    requires_grad = True
    stores_grad = False
    creator = None
    __hash__ = object.__hash__
    # NumPy defers to the reflected operators (np.float32(2) * t is a Tensor).
    __array_ufunc__ = None

    def __init__(self, shape=(), device=None, dtype=float32, data=None,
                 requires_grad=True, stores_grad=False, creator=None, name=None):
        if isinstance(data, CTensor):
            self.data = data
        elif data is not None:
            arr = np.asarray(data).astype(_TO_NUMPY[_dtype(dtype, "Tensor")], copy=False)
            self.data = from_numpy(arr, device).data
        else:
            shape = _check_shape(shape, "Tensor")
            dtype = _dtype(dtype, "Tensor")
            if device is None:
                device = _device.default_device
            elif not isinstance(device, _cw.Device):
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
    def name(self):
        """The tensor's name; SINGA's ``Dummy#<n>`` unless one was given."""
        n = self.__dict__.get("_name")
        if n is None:
            n = self._name = f"Dummy#{next(_tensor_count)}"
        return n

    @name.setter
    def name(self, value):
        self._name = value

    @property
    def T(self):
        """The transpose (all axes reversed), as a view. Calling it, as in
        SINGA's ``t.T()``, gives the same view."""
        t = _new(_Transposed)
        t.data = self.data.Transpose()
        return t

    @property
    def view(self):
        """NumPy-style basic indexing: ``t.view[0, 1:3]`` is a view sharing
        t's storage (``t[0, 1:3]`` is SINGA's copy, see __getitem__)."""
        return Viewer(self)

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

    def is_empty(self):
        """True for a tensor with no elements or no axes (SINGA's Tensor())."""
        return self.data.nDim() == 0 or self.data.Size() == 0

    def is_dummy(self):
        """True while the tensor has SINGA's default name Dummy#<n>."""
        return _DUMMY_NAME.fullmatch(str(self.name)) is not None

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

    def reset_like(self, t):
        """Gives this tensor new zeroed storage of t's shape, dtype and device."""
        if not isinstance(t, Tensor):
            raise TypeError(f"reset_like: expected a Tensor, got {type(t).__name__}")
        self.data.ResetLike(t.data)

    # ---- dtype and device ----
    def as_type(self, dtype):
        """A copy converted to dtype (a code, 'float' or 'int')."""
        return _wrap(self.data.AsType(_dtype(dtype, "as_type")))

    def to_type(self, dtype):
        """Converts this tensor to dtype in place; returns self."""
        self.data.ToType(_dtype(dtype, "to_type"))
        return self

    def to_device(self, device):
        """Moves this tensor to device in place (a copy across devices);
        returns self."""
        if not isinstance(device, _cw.Device):
            raise TypeError(f"to_device: expected a singa device, got {type(device).__name__}")
        self.data.ToDevice(device)
        return self

    def to_host(self):
        """Moves this tensor to the CPU in place; returns self."""
        self.data.ToDevice(_cw.DefaultDevice())
        return self

    # ---- values ----
    def set_value(self, x, inplace=True):
        """Sets every element to the scalar x and returns self; with
        inplace=False returns a new tensor of x instead."""
        v = _scalar(x)
        if v is None:
            raise TypeError(f"set_value: expected a number, got {type(x).__name__}")
        t = self if inplace else Tensor(self.shape, self.device, self.dtype)
        t.data.SetValue(v)
        return t

    def copy_from_numpy(self, np_array, offset=0):
        """Copies a NumPy array's elements into this tensor from offset."""
        try:
            arr = np.asarray(np_array, dtype=_TO_NUMPY[self.dtype])
        except OverflowError as e:
            raise ValueError(f"copy_from_numpy: a value does not fit this tensor's dtype "
                             f"{dtype_name(self.dtype)}: {e}") from None
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        self.data.CopyDataFromHostPtr(arr, offset)

    def copy_from(self, t, offset=0):
        """Copies a Tensor's or a NumPy array's elements into this tensor,
        starting at element offset."""
        if isinstance(t, Tensor):
            copy_data_to_from(self, t, t.size(), offset, 0)
        elif isinstance(t, np.ndarray):
            self.copy_from_numpy(t, offset)
        else:
            raise TypeError(f"copy_from: expected a Tensor or a NumPy array, got "
                            f"{type(t).__name__}")

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
        if self.__dict__.get("_name") is not None and not self.is_dummy():
            t.name = self.name
        return t

    def copy(self):
        """A shallow copy: a new Tensor on the same storage (SINGA's copy)."""
        return _wrap(CTensor(self.data))

    def deepcopy(self):
        return self.clone()

    def repeat(self, repeats, axis):
        from singa.tensor_ops import repeat
        return repeat(self, repeats, axis)

    def _fill(self, inplace, fill, *args):
        t = self if inplace else Tensor(self.shape, self.device, self.dtype)
        fill(t.data, *(float(a) for a in args))
        return t

    def gaussian(self, mean, std, inplace=True):
        """Fills with normal samples (a new tensor when inplace is False)."""
        return self._fill(inplace, CTensor.Gaussian, mean, std)

    def uniform(self, low, high, inplace=True):
        """Fills with uniform samples from [low, high)."""
        return self._fill(inplace, CTensor.Uniform, low, high)

    def bernoulli(self, p, inplace=True):
        """Fills with 1 with probability p, else 0."""
        return self._fill(inplace, CTensor.Bernoulli, p)

    # SINGA's deprecated row and column helpers (use broadcasting instead):
    # each updates this matrix in place with a vector v and returns self.
    def _rowcol(self, fn, v):
        warnings.warn(f"Tensor.{fn.__name__}: use broadcasting instead", DeprecationWarning,
                      stacklevel=3)
        if not isinstance(v, Tensor):
            raise TypeError(f"{fn.__name__}: expected a Tensor, got {type(v).__name__}")
        fn(v.data, self.data)
        return self

    def add_column(self, v):
        return self._rowcol(_cw.AddColumn, v)

    def add_row(self, v):
        return self._rowcol(_cw.AddRow, v)

    def div_column(self, v):
        return self._rowcol(_cw.DivColumn, v)

    def div_row(self, v):
        return self._rowcol(_cw.DivRow, v)

    def mult_column(self, v):
        return self._rowcol(_cw.MultColumn, v)

    def mult_row(self, v):
        return self._rowcol(_cw.MultRow, v)

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

    # ---- indexing (singa._tensor_index) ----
    def __getitem__(self, keys):
        """SINGA's indexing: a copy in which an integer index keeps its axis
        with size 1; ``t.view[keys]`` is the NumPy-style view."""
        return _wrap(_index_view(self.data, keys, True).Clone())

    def __setitem__(self, key, value):
        _assign(self.data, key, value, _scalar, _as_ctensor)

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


class _Transposed(Tensor):
    """What ``t.T`` returns: the transposed view, which SINGA's method form
    ``t.T()`` calls to get the same view as a plain Tensor."""

    __slots__ = ()

    def __call__(self):
        return _wrap(self.data)


# SINGA's name for a tensor that stands for a model's input (the same class).
PlaceHolder = Tensor


def _as_ctensor(value, dev):
    """value's CTensor: a Tensor's own, else a copy of a NumPy array-like."""
    if isinstance(value, Tensor):
        return value.data
    return from_numpy(np.asarray(value), dev).data


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
    if dev is None:
        dev = _device.default_device
    elif not isinstance(dev, _cw.Device):
        raise TypeError(f"from_numpy: device must be a singa device, got {type(dev).__name__}")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    ct = CTensor(arr.shape, dev, dtype)
    ct.CopyDataFromHostPtr(arr)
    return _wrap(ct)


def _check_tensor(x, where):
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: expected a Tensor, got {type(x).__name__}")


def to_numpy(t):
    """A NumPy copy of t's values."""
    _check_tensor(t, "to_numpy")
    arr = np.empty(t.data.shape(), dtype=_TO_NUMPY[t.data.data_type()])
    t.data.CopyDataToHostPtr(arr)
    return arr


def to_host(t):
    """A copy of t on the CPU."""
    _check_tensor(t, "to_host")
    return _wrap(t.data.Clone(_cw.DefaultDevice()))


def zeros(shape, device=None, dtype=float32):
    return Tensor(shape, device, dtype)


def ones(shape, device=None, dtype=float32):
    return Tensor(shape, device, dtype).set_value(1.0)


def random(shape, device=None):
    """Uniform samples from [0, 1)."""
    return Tensor(shape, device).uniform(0.0, 1.0)


def zeros_like(t):
    _check_tensor(t, "zeros_like")
    return Tensor(t.shape, t.device, t.dtype)


def ones_like(t):
    _check_tensor(t, "ones_like")
    return ones(t.shape, t.device, t.dtype)


def product(shape):
    p = 1
    for d in shape:
        p *= d
    return p


def sizeof(dtype):
    """Bytes per element; SINGA's kChar (1) and kDouble (8) codes too."""
    if _is_int(dtype):
        return _cw.SizeOf(int(dtype))
    return _cw.SizeOf(_dtype(dtype, "sizeof"))


def reshape(tensor, shape):
    _check_tensor(tensor, "reshape")
    return tensor.reshape(shape)


def transpose(t, axes=None):
    _check_tensor(t, "transpose")
    return t.transpose(axes)


def contiguous(tensor):
    _check_tensor(tensor, "contiguous")
    return tensor.contiguous()


def broadcast_to(t, shape):
    _check_tensor(t, "broadcast_to")
    return t.broadcast_to(shape)


def copy_data_to_from(dst, src, size=None, dst_offset=0, src_offset=0):
    """Copies size elements of src (from src_offset, row-major) into dst
    (at dst_offset); size defaults to the rest of src."""
    for t, what in ((dst, "dst"), (src, "src")):
        _check_tensor(t, f"copy_data_to_from ({what})")
    if size is None:
        size = src.size() - src_offset
    _cw.CopyDataToFrom(dst.data, src.data, size, src_offset, dst_offset)
