"""Indexing and shape-valued ops: gather, embedding, scatter_elements,
onehot, and shape, constant_of_shape, nonzero.

Index lists are read on the host, since the positions decide which slices
to take; the data stays on its device (gathers are IndexSelect, their
gradients IndexAdd, both with a kernel per backend). nonzero and
constant_of_shape read their input on the host: their output shapes
depend on its values.
"""

import numpy as np

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.tensor import Tensor, from_numpy, to_numpy
from singa.ops import zeros, norm_axis

__all__ = [
    "Gather", "gather", "Embedding", "embedding", "ScatterElements", "scatter_elements",
    "OneHot", "onehot", "Shape", "shape", "ConstantOfShape", "constant_of_shape",
    "NonZero", "nonzero",
]


def _host_ints(indices, where):
    """Integer positions as a NumPy int64 array (from a Tensor, an array,
    a list or an int)."""
    if isinstance(indices, Tensor):
        arr = to_numpy(indices)
    else:
        arr = np.asarray(indices)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.floor(arr)):
            raise ValueError(f"{where}: indices must be whole numbers")
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: indices must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _positions(flat, device):
    """flat (NumPy ints, already in range) as an int32 CTensor on device."""
    return from_numpy(np.ascontiguousarray(flat, dtype=np.int32), device).data


def _take(x, axis, flat):
    """x's slices at the positions flat along axis (a gather, in C++)."""
    return _cw.IndexSelect(x, _positions(flat, x.device()), axis)


def _untake(dy, axis, flat, like, in_shape):
    """The gradient of _take: dy's slices added back at their positions."""
    dx = zeros(in_shape, like)
    _cw.IndexAdd(dx, _positions(flat, like.device()), dy, axis)
    return dx


def _check_positions(idx, n, where, shape, axis):
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"{where}: index {int(idx.min() if idx.min() < -n else idx.max())} "
                         f"is out of range for axis {axis} of shape {tuple(shape)}")
    return np.where(idx < 0, idx + n, idx)


class Gather(Operator):
    """Takes x's entries at indices along axis (ONNX Gather): the output
    shape is shape[:axis] + indices.shape + shape[axis+1:]. indices is an
    int, a list, an array or an int Tensor."""

    def __init__(self, axis, indices, name=None):
        super().__init__(name)
        self.axis = int(axis)
        self.indices = _host_ints(indices, "gather")

    def forward(self, x):
        s = x.shape()
        axis = norm_axis(self.axis, len(s), "gather", s)
        flat = _check_positions(self.indices.reshape(-1), s[axis], "gather", s, axis)
        self._axis, self._flat, self._like, self._in_shape = axis, flat, x, s
        if flat.size == 0:
            out = list(s)
            out[axis] = 0
            y = zeros(out, x)
        else:
            y = _take(x, axis, flat)
        return y.Reshape(list(s[:axis]) + list(self.indices.shape) + list(s[axis + 1:]))

    def backward(self, dy):
        s = list(self._in_shape)
        s[self._axis] = len(self._flat)
        return _untake(dy.Reshape(s), self._axis, self._flat, self._like, self._in_shape)


def gather(x, axis, indices):
    return Gather(axis, indices)(x)[0]


class Embedding(Operator):
    """Rows of the table w at the positions in x: (*x.shape, D) for w of
    shape (V, D) (SINGA's embedding; ONNX Gather on axis 0 of w). x holds
    integer positions, as int32 or whole floats, and gets no gradient."""

    def forward(self, x, w):
        if w.nDim() != 2:
            raise ValueError(f"embedding: the table must be 2-D, got shape {w.shape()}")
        flat = _check_positions(_host_ints(_to_host(x), "embedding").reshape(-1), w.shape(0),
                                "embedding", w.shape(), 0)
        self._flat, self._w = flat, w
        out = list(x.shape()) + [w.shape(1)]
        return (_take(w, 0, flat) if flat.size else zeros((0, w.shape(1)), w)).Reshape(out)

    def backward(self, dy):
        w = self._w
        g = dy.Reshape([len(self._flat), w.shape(1)])
        return None, _untake(g, 0, self._flat, w, w.shape())


def embedding(x, w):
    return Embedding()(x, w)[0]


class ScatterElements(Operator):
    """A copy of x with x[.., indices[i, j], ..] = updates[i, j] along axis
    (ONNX ScatterElements, no reduction), in SINGA's form
    ``ScatterElements(indices, updates, axis)(x)``. indices is kept as an
    attribute; updates becomes the op's second input: a Tensor gets a
    gradient, a NumPy array or list is a constant.

    The positions come from indices alone, so they are worked out on the
    host and the data stays on its device: the updates are placed with
    IndexAdd into zeros and merged with x by Where. Duplicate positions are
    undefined in ONNX; here the last update wins.
    """

    def __init__(self, indices, updates, axis=0, name=None):
        super().__init__(name)
        self.indices = _host_ints(indices, "scatter_elements")
        self.updates = updates
        self.axis = int(axis)

    def __call__(self, x):
        u = self.updates
        if not isinstance(u, Tensor):
            if not isinstance(x, Tensor):
                raise TypeError(f"ScatterElements: inputs must be singa Tensors, got "
                                f"{type(x).__name__}")
            u = from_numpy(np.asarray(u, dtype=_NUMPY_TYPE[x.dtype]), x.device)
            u.requires_grad = False
        return super().__call__(x, u)

    def forward(self, x, updates=None):
        if updates is None:     # called directly, SINGA style: forward(x)
            u = self.updates
            updates = u.data if isinstance(u, Tensor) else _from_host(
                np.asarray(u), x.device(), x.data_type())
        s = x.shape()
        axis = norm_axis(self.axis, len(s), "scatter_elements", s)
        if tuple(self.indices.shape) != updates.shape() or len(s) != self.indices.ndim:
            raise ValueError(f"scatter_elements: indices of shape {self.indices.shape} and "
                             f"updates of shape {updates.shape()} must match, with the rank "
                             f"of data of shape {s}")
        idx = _check_positions(self.indices, s[axis], "scatter_elements", s, axis)
        # Flat position in x of every update (row-major), and the last
        # update written to each position.
        coords = list(np.indices(idx.shape))
        coords[axis] = idx
        flat = np.ravel_multi_index(coords, s).reshape(-1) if idx.size else np.zeros(0, np.int64)
        rev_first = np.unique(flat[::-1], return_index=True)[1]
        last = len(flat) - 1 - rev_first
        dev, dtype = x.device(), x.data_type()
        mask = np.ones(int(np.prod(s)), dtype=np.int32)
        mask[flat] = 0
        self._keep = _from_host(mask.reshape(s), dev, _cw.kInt)
        self._flat, self._ushape = flat, updates.shape()
        placed = _cw.Tensor([int(np.prod(s))], dev, _cw.kFloat32 if dtype == _cw.kFloat16 else dtype)
        placed.SetValue(0.0)
        if last.size:
            u = updates.Reshape([updates.Size()])
            picked = _cw.IndexSelect(u, _positions(last, dev), 0)
            if dtype == _cw.kFloat16:
                picked = picked.AsType(_cw.kFloat32)
            _cw.IndexAdd(placed, _positions(flat[last], dev), picked, 0)
        if dtype == _cw.kFloat16:
            placed = placed.AsType(dtype)
        return _cw.Where(self._keep, x, placed.Reshape(list(s)))

    def backward(self, dy):
        g = dy.Reshape([dy.Size()])
        if self._flat.size:
            dupdates = _cw.IndexSelect(g, _positions(self._flat, dy.device()), 0)
        else:
            dupdates = _cw.Tensor([0], dy.device(), dy.data_type())
        dx = _cw.Where(self._keep, dy, zeros(dy.shape(), dy))
        return dx, dupdates.Reshape(list(self._ushape))


_NUMPY_TYPE = {_cw.kFloat16: np.float16, _cw.kFloat32: np.float32, _cw.kInt: np.int32}


def _to_host(ct):
    arr = np.empty(ct.shape(), dtype=_NUMPY_TYPE[ct.data_type()])
    (ct if ct.IsContiguous() else ct.Contiguous()).CopyDataToHostPtr(arr)
    return arr


def _from_host(arr, device, dtype):
    ct = _cw.Tensor(arr.shape, device, dtype)
    ct.CopyDataFromHostPtr(np.ascontiguousarray(arr, dtype=_NUMPY_TYPE[dtype]))
    return ct


def scatter_elements(x, indices, updates, axis=0):
    return ScatterElements(indices, updates, axis)(x)[0]


class Shape(Operator):
    """x's shape as a 1-D int32 tensor (ONNX Shape); no gradient."""

    def forward(self, x):
        return _from_host(np.array(x.shape()), x.device(), _cw.kInt)

    def backward(self, dy):
        return None


def shape(x):
    return Shape()(x)[0]


class ConstantOfShape(Operator):
    """A float32 tensor filled with value, of the shape held by the 1-D
    input (ONNX ConstantOfShape); no gradient."""

    def __init__(self, value=0.0, name=None):
        super().__init__(name)
        self.value = float(value)

    def forward(self, x):
        if x.nDim() != 1:
            raise ValueError(f"constant_of_shape: the input must be 1-D, got shape {x.shape()}")
        dims = [int(d) for d in _to_host(x)]
        if any(d < 0 for d in dims):
            raise ValueError(f"constant_of_shape: negative dimension in {dims}")
        y = _cw.Tensor(dims, x.device(), _cw.kFloat32)
        y.SetValue(self.value)
        return y

    def backward(self, dy):
        return None


def constant_of_shape(x, value=0.0):
    return ConstantOfShape(value)(x)[0]


class NonZero(Operator):
    """Positions of the nonzero elements, int32 of shape (ndim, count)
    (ONNX NonZero, which uses int64); no gradient. The count depends on
    the data, so it is computed on the host."""

    def forward(self, x):
        pos = np.array(np.nonzero(_to_host(x))).reshape(x.nDim(), -1)
        return _from_host(pos, x.device(), _cw.kInt)

    def backward(self, dy):
        return None


def nonzero(x):
    return NonZero()(x)[0]


class OneHot(Operator):
    """One-hot encoding along a new axis of length depth (ONNX OneHot):
    values = (off, on). Indices in [-depth, depth) count from the end when
    negative; others give an all-off row. float32 output, no gradient."""

    def __init__(self, axis, depth, values=(0.0, 1.0), name=None):
        super().__init__(name)
        self.axis = int(axis)
        self.depth = int(depth)
        self.values = [float(v) for v in values]
        if self.depth < 1 or len(self.values) != 2:
            raise ValueError(f"onehot: need depth >= 1 and values (off, on), got "
                             f"{self.depth} and {values}")

    def forward(self, indices):
        x = indices
        n = x.nDim() + 1
        axis = norm_axis(self.axis, n, "onehot", list(x.shape()) + ["depth"])
        idx = x.AsType(_cw.kFloat32) if x.data_type() != _cw.kFloat32 else x
        idx = _cw.Add(idx, _cw.MulScalar(_cw.LessScalar(idx, 0.0), float(self.depth)))
        ar_shape = [1] * n
        ar_shape[axis] = self.depth
        positions = _from_host(np.arange(self.depth).reshape(ar_shape), x.device(), _cw.kFloat32)
        s = list(x.shape())
        s.insert(axis, 1)
        hot = _cw.Equal(idx.Reshape(s), positions)
        off, on = self.values
        return _cw.AddScalar(_cw.MulScalar(hot, on - off), off)

    def backward(self, dy):
        return None


def onehot(axis, indices, depth, values=(0.0, 1.0)):
    return OneHot(axis, depth, values)(indices)[0]
