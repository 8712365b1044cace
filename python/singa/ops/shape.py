"""Shape and layout operators: reshape, flatten, transpose, squeeze,
unsqueeze, joining and splitting, slicing, tiling, expand, padding,
upsampling, and depth/space moves.

Layout ops return views where the C++ tensor can (reshape of contiguous
data, transpose, slice, split, expand); backward undoes the layout change
on dy.
"""

import builtins

import numbers

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import unbroadcast, zeros, norm_axis, norm_axes, int_list, product

__all__ = [
    "Reshape", "reshape", "Flatten", "flatten", "Transpose", "transpose",
    "Squeeze", "squeeze", "Unsqueeze", "unsqueeze", "Concat", "cat",
    "Split", "split", "Slice", "slice", "Tile", "tile", "Expand", "expand",
    "Pad", "pad", "UpSample", "upsample", "DepthToSpace", "depth_to_space",
    "SpaceToDepth", "space_to_depth",
]


def _flip(t, axis):
    """t reversed along axis, as a view (negative stride)."""
    strides = list(t.stride())
    offset = t.offset() + (t.shape(axis) - 1) * strides[axis] if t.shape(axis) else t.offset()
    strides[axis] = -strides[axis]
    return t.View(list(t.shape()), strides, offset)


class Reshape(Operator):
    """Reshape to shape (ONNX Reshape): a 0 copies the input's dimension at
    that position, one -1 is inferred."""

    def __init__(self, shape, name=None):
        super().__init__(name)
        self.shape = int_list(shape, "reshape", "shape")

    def forward(self, x):
        self._in_shape = x.shape()
        return x.Reshape(_target_shape(self.shape, x.shape()))

    def backward(self, dy):
        return dy.Reshape(list(self._in_shape))


def _target_shape(shape, in_shape):
    out = []
    for i, d in enumerate(shape):
        if d == 0:
            if i >= len(in_shape):
                raise ValueError(f"reshape: 0 at position {i} of {shape} has no "
                                 f"dimension to copy in shape {in_shape}")
            d = in_shape[i]
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ValueError(f"reshape: bad target shape {shape} for input shape {in_shape}")
    size = product(in_shape)
    if -1 in out:
        known = product(d for d in out if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape {in_shape} to {shape}")
        out[out.index(-1)] = size // known
    if product(out) != size:
        raise ValueError(f"reshape: cannot reshape {in_shape} ({size} elements) to {shape}")
    return out


def reshape(x, shape):
    return Reshape(shape)(x)[0]


class Flatten(Operator):
    """To 2-D: (prod(shape[:axis]), prod(shape[axis:])) (ONNX Flatten)."""

    def __init__(self, axis=1, name=None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, x):
        n = x.nDim()
        if not -n <= self.axis <= n:
            raise IndexError(f"flatten: axis {self.axis} is out of range for shape {x.shape()}")
        a = self.axis % n if self.axis != n else n
        self._in_shape = s = x.shape()
        return x.Reshape([product(s[:a]), product(s[a:])])

    def backward(self, dy):
        return dy.Reshape(list(self._in_shape))


def flatten(x, axis=1):
    return Flatten(axis)(x)[0]


class Transpose(Operator):
    """Permutes the axes by perm; reverses them when perm is None (ONNX
    Transpose). The output is a view."""

    def __init__(self, perm=None, name=None):
        super().__init__(name)
        self.perm = None if perm is None else int_list(perm, "transpose", "perm")

    def forward(self, x):
        n = x.nDim()
        perm = list(range(n - 1, -1, -1)) if self.perm is None else self.perm
        if len(perm) != n or any(not -n <= a < n for a in perm) or \
                sorted(a % n for a in perm) != list(range(n)):
            raise ValueError(f"transpose: perm {perm} is not a permutation of the axes "
                             f"of shape {x.shape()}")
        self._perm = perm = [a % n for a in perm]
        return x.Transpose(perm)

    def backward(self, dy):
        inverse = [0] * len(self._perm)
        for i, a in enumerate(self._perm):
            inverse[a] = i
        return dy.Transpose(inverse)


def transpose(x, shape=None):
    """x with its axes permuted by shape (SINGA's name for the permutation);
    reversed when None."""
    return Transpose(shape)(x)[0]


class Squeeze(Operator):
    """Removes the size-1 axes listed in axis, or all of them when axis is
    empty (SINGA's default) or None (ONNX Squeeze, attribute axes)."""

    def __init__(self, axis=[], name=None):  # noqa: B006 (SINGA's default, never mutated)
        super().__init__(name)
        if axis is not None and not isinstance(axis, numbers.Integral) and len(axis) == 0:
            axis = None
        self.axis = None if axis is None else int_list(axis, "squeeze", "axis")

    def forward(self, x):
        s = x.shape()
        if self.axis is None:
            drop = [i for i, d in enumerate(s) if d == 1]
        else:
            drop = norm_axes(self.axis, len(s), "squeeze", s)
            for a in drop:
                if s[a] != 1:
                    raise ValueError(f"squeeze: axis {a} of shape {s} has size {s[a]}, not 1")
        self._in_shape = s
        return x.Reshape([d for i, d in enumerate(s) if i not in drop])

    def backward(self, dy):
        return dy.Reshape(list(self._in_shape))


def squeeze(x, axis=[]):  # noqa: B006
    return Squeeze(axis)(x)[0]


class Unsqueeze(Operator):
    """Inserts size-1 axes at the positions axis of the output (ONNX
    Unsqueeze, attribute axes)."""

    def __init__(self, axis, name=None):
        super().__init__(name)
        self.axis = int_list(axis, "unsqueeze", "axis")

    def forward(self, x):
        s = list(x.shape())
        n = len(s) + len(self.axis)
        out = s[:]
        for a in norm_axes(self.axis, n, "unsqueeze", s):
            out.insert(a, 1)
        self._in_shape = s
        return x.Reshape(out)

    def backward(self, dy):
        return dy.Reshape(self._in_shape)


def unsqueeze(x, axis=-1):
    return Unsqueeze(axis)(x)[0]


class Concat(Operator):
    """Joins the inputs along axis (ONNX Concat)."""

    def __init__(self, axis=0, name=None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, *xs):
        if not xs:
            raise ValueError("cat: needs at least one tensor")
        self._axis = norm_axis(self.axis, xs[0].nDim(), "cat", xs[0].shape())
        y = _cw.ConcatOn(list(xs), self._axis)
        self._sizes = [x.shape(self._axis) for x in xs]
        return y

    def backward(self, dy):
        grads, start = [], 0
        for n in self._sizes:
            grads.append(dy.Slice(self._axis, start, start + n))
            start += n
        return tuple(grads)


def cat(xs, axis=0):
    return Concat(axis)(*xs)[0]


class Split(Operator):
    """Splits x along axis into pieces of the sizes in parts, or into
    num_output equal pieces when parts is None (ONNX Split, attribute
    split). The outputs are views."""

    def __init__(self, axis, parts=None, num_output=None, name=None):
        super().__init__(name)
        self.axis = int(axis)
        if parts is None and num_output is None:
            raise ValueError("split: give parts (piece sizes) or num_output")
        self.parts = None if parts is None else int_list(parts, "split", "parts")
        self.num_output = num_output

    def forward(self, x):
        axis = norm_axis(self.axis, x.nDim(), "split", x.shape())
        n = x.shape(axis)
        parts = self.parts
        if parts is None:
            if self.num_output <= 0 or n % self.num_output:
                raise ValueError(f"split: axis {axis} of shape {x.shape()} does not split "
                                 f"into {self.num_output} equal parts")
            parts = [n // self.num_output] * self.num_output
        if sum(parts) != n or any(p < 0 for p in parts):
            raise ValueError(f"split: parts {parts} do not add up to {n}, the size of "
                             f"axis {axis} of shape {x.shape()}")
        self._axis, self._parts, self._like = axis, parts, x
        ys, start = [], 0
        for p in parts:
            ys.append(x.Slice(axis, start, start + p))
            start += p
        return tuple(ys)

    def backward(self, *dys):
        pieces = []
        for dy, p in zip(dys, self._parts):
            if dy is None:
                s = list(self._like.shape())
                s[self._axis] = p
                dy = zeros(s, self._like)
            pieces.append(dy)
        return _cw.ConcatOn(pieces, self._axis)


def split(x, axis, parts, num_output=None):
    return Split(axis, parts, num_output)(x)


class Slice(Operator):
    """x[starts:ends:steps] along axes (ONNX Slice): negative positions
    count from the end and out-of-range ones are clamped. The output is a
    view."""

    def __init__(self, starts, ends, axes=None, steps=None, name=None):
        super().__init__(name)
        self.starts = int_list(starts, "slice", "starts")
        self.ends = int_list(ends, "slice", "ends")
        self.axes = None if axes is None else int_list(axes, "slice", "axes")
        self.steps = None if steps is None else int_list(steps, "slice", "steps")
        k = len(self.starts)
        lengths = {len(v) for v in (self.ends, self.axes, self.steps) if v is not None}
        if lengths - {k}:
            raise ValueError("slice: starts, ends, axes and steps differ in length")
        if self.steps is not None and 0 in self.steps:
            raise ValueError("slice: a step cannot be 0")

    def forward(self, x):
        s = x.shape()
        axes = list(range(len(self.starts))) if self.axes is None else \
            [norm_axis(a, len(s), "slice", s) for a in self.axes]
        key = [builtins.slice(None)] * len(s)
        steps = self.steps or [1] * len(axes)
        for a, b, e, st in zip(axes, self.starts, self.ends, steps):
            # Python slices clamp exactly as ONNX does
            key[a] = builtins.slice(b, e, st)
        self._in_shape, self._key, self._like = s, key, x
        return _view(x, key)

    def backward(self, dy):
        dx = zeros(self._in_shape, self._like)
        _view(dx, self._key).CopyData(dy)
        return dx


def _view(t, key):
    """The view t[key] for a list of Python slices, one per axis."""
    shape, strides, offset = [], [], t.offset()
    for n, st, k in zip(t.shape(), t.stride(), key):
        start, stop, step = k.indices(n)
        m = len(range(start, stop, step))
        if m:
            offset += start * st
        shape.append(m)
        strides.append(st * step)
    return t.View(shape, strides, offset)


def slice(x, starts, ends, axes=None, steps=None):
    return Slice(starts, ends, axes, steps)(x)[0]


class Tile(Operator):
    """Repeats x repeats[i] times along each axis i (ONNX Tile)."""

    def __init__(self, repeats, name=None):
        super().__init__(name)
        self.repeats = int_list(repeats, "tile", "repeats")

    def forward(self, x):
        s = x.shape()
        if len(self.repeats) != len(s) or any(r < 0 for r in self.repeats):
            raise ValueError(f"tile: repeats {self.repeats} must give one count >= 0 per "
                             f"axis of shape {s}")
        self._in_shape = s
        return _cw.Tile(x, self.repeats)

    def backward(self, dy):
        # view dy as (r0, s0, r1, s1, ...) and sum over the r axes
        split = []
        for r, d in zip(self.repeats, self._in_shape):
            split += [r, d]
        return _cw.Sum(dy.Reshape(split), list(range(0, len(split), 2)), False)


def tile(x, repeats):
    return Tile(repeats)(x)[0]


class Expand(Operator):
    """Broadcasts x and shape together (ONNX Expand); a view."""

    def __init__(self, shape, name=None):
        super().__init__(name)
        self.shape = int_list(shape, "expand", "shape")

    def forward(self, x):
        s = list(x.shape())
        n = max(len(s), len(self.shape))
        a = [1] * (n - len(s)) + s
        b = [1] * (n - len(self.shape)) + self.shape
        out = []
        for da, db in zip(a, b):
            if da != db and 1 not in (da, db):
                raise ValueError(f"expand: shape {tuple(s)} cannot be broadcast to {self.shape}")
            out.append(db if da == 1 else da)
        self._in_shape = x.shape()
        return x.Reshape(a).Broadcast(out)

    def backward(self, dy):
        return unbroadcast(dy, self._in_shape)


def expand(x, shape):
    return Expand(shape)(x)[0]


class Pad(Operator):
    """Pads x (ONNX Pad): pads = [x1_begin, x2_begin, ..., x1_end, x2_end]
    (non-negative), mode 'constant' (with constant), 'reflect' (mirror
    without repeating the edge; a pad must be smaller than its axis) or
    'edge' (repeat the edge)."""

    def __init__(self, mode, pads, constant=0.0, name=None):
        super().__init__(name)
        if mode not in ("constant", "reflect", "edge"):
            raise ValueError(f"pad: mode must be 'constant', 'reflect' or 'edge', got {mode!r}")
        self.mode = mode
        self.pads = int_list(pads, "pad", "pads")
        self.constant = float(constant)
        if any(p < 0 for p in self.pads):
            raise ValueError(f"pad: negative pads {self.pads} are not supported")

    def forward(self, x):
        s = x.shape()
        n = len(s)
        if len(self.pads) != 2 * n:
            raise ValueError(f"pad: pads {self.pads} must hold 2 values per axis of shape {s}")
        self._in_shape, self._like = s, x
        begin, end = self.pads[:n], self.pads[n:]
        if self.mode == "constant":
            y = _cw.Tensor([d + b + e for d, b, e in zip(s, begin, end)],
                           x.device(), x.data_type())
            y.SetValue(self.constant)
            _view(y, [_range(b, d) for b, d in zip(begin, s)]).CopyData(x)
            return y
        y = x
        for a in range(n):
            b, e, d = begin[a], end[a], s[a]
            if not b and not e:
                continue
            if self.mode == "reflect":
                if b >= d or e >= d:
                    raise ValueError(f"pad: reflect pads ({b}, {e}) on axis {a} must be "
                                     f"smaller than its size in shape {s}")
                left, right = _flip(y.Slice(a, 1, b + 1), a), _flip(y.Slice(a, d - 1 - e, d - 1), a)
            else:
                if d == 0:
                    raise ValueError(f"pad: cannot edge-pad the empty axis {a} of shape {s}")
                left = _stretch(y.Slice(a, 0, 1), a, b)
                right = _stretch(y.Slice(a, d - 1, d), a, e)
            y = _cw.ConcatOn([left, y, right], a)
        return y

    def backward(self, dy):
        s, n = self._in_shape, len(self._in_shape)
        begin = self.pads[:n]
        if self.mode == "constant":
            return _view(dy, [_range(b, d) for b, d in zip(begin, s)])
        g = dy
        for a in range(n - 1, -1, -1):
            b, e, d = begin[a], self.pads[n + a], s[a]
            if not b and not e:
                continue
            core = g.Slice(a, b, b + d).Clone()
            lead, tail = g.Slice(a, 0, b), g.Slice(a, b + d, b + d + e)
            if self.mode == "reflect":
                dst_l = _flip(core.Slice(a, 1, b + 1), a)
                dst_r = _flip(core.Slice(a, d - 1 - e, d - 1), a)
            else:
                dst_l, dst_r = core.Slice(a, 0, 1), core.Slice(a, d - 1, d)
                lead, tail = _cw.Sum(lead, [a], True), _cw.Sum(tail, [a], True)
            if b:
                _cw.AddInto(dst_l, lead, dst_l)
            if e:
                _cw.AddInto(dst_r, tail, dst_r)
            g = core
        return g


def _range(begin, size):
    return builtins.slice(begin, begin + size)


def _stretch(t, axis, k):
    """t (size 1 along axis) repeated k times along axis, as a view."""
    s = list(t.shape())
    s[axis] = k
    return t.Broadcast(s)


def pad(x, mode, pads, constant=0.0):
    return Pad(mode, pads, constant)(x)[0]


class UpSample(Operator):
    """Nearest-neighbour upsampling by whole-number scales, one per axis
    (ONNX Upsample, mode 'nearest')."""

    def __init__(self, mode, scales, name=None):
        super().__init__(name)
        if mode != "nearest":
            raise ValueError(f"upsample: only mode 'nearest' is supported, got {mode!r}")
        self.mode = mode
        self.scales = [float(v) for v in scales]
        if any(v < 1 or v != int(v) for v in self.scales):
            raise ValueError(f"upsample: scales must be whole numbers >= 1, got {self.scales}")

    def forward(self, x):
        s = x.shape()
        if len(self.scales) != len(s):
            raise ValueError(f"upsample: {len(self.scales)} scales for shape {s}")
        self._in_shape = s
        y = x
        for a, k in enumerate(self.scales):
            if k != 1:
                y = _cw.Repeat(y, [int(k)], a)
        return y

    def backward(self, dy):
        # each input cell fed a k0 x k1 x ... block: view dy as (d0, k0, d1,
        # k1, ...) and sum over the k axes
        split = []
        for d, k in zip(self._in_shape, self.scales):
            split += [d, int(k)]
        return _cw.Sum(dy.Reshape(split), list(range(1, len(split), 2)), False)


def upsample(x, mode, scales):
    return UpSample(mode, scales)(x)[0]


class _Rearrange(Operator):
    """reshape -> transpose -> reshape, undone in reverse by backward."""

    def _plan(self, s):
        raise NotImplementedError

    def forward(self, x):
        s = x.shape()
        if len(s) != 4:
            raise ValueError(f"{type(self).__name__}: expected an NCHW input, got shape {s}")
        split, perm, out = self._plan(s)
        self._in_shape, self._perm = s, perm
        t = x.Reshape(split).Transpose(perm)
        self._mid = t.shape()
        return t.Reshape(out)

    def backward(self, dy):
        inverse = [0] * len(self._perm)
        for i, a in enumerate(self._perm):
            inverse[a] = i
        return dy.Reshape(list(self._mid)).Transpose(inverse).Reshape(list(self._in_shape))


class DepthToSpace(_Rearrange):
    """Moves channel blocks into blocksize x blocksize spatial tiles (ONNX
    DepthToSpace, modes 'DCR' and 'CRD')."""

    def __init__(self, blocksize, mode="DCR", name=None):
        super().__init__(name)
        if mode not in ("DCR", "CRD"):
            raise ValueError(f"depth_to_space: mode must be 'DCR' or 'CRD', got {mode!r}")
        self.blocksize, self.mode = int(blocksize), mode

    def _plan(self, s):
        n, c, h, w = s
        b = self.blocksize
        if b < 1 or c % (b * b):
            raise ValueError(f"depth_to_space: channels of shape {s} are not a multiple "
                             f"of blocksize^2 = {b * b}")
        out = [n, c // (b * b), h * b, w * b]
        if self.mode == "DCR":
            return [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out
        return [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out


def depth_to_space(x, blocksize, mode="DCR"):
    return DepthToSpace(blocksize, mode)(x)[0]


class SpaceToDepth(_Rearrange):
    """Moves blocksize x blocksize spatial tiles into channels: the inverse
    of DepthToSpace in the same mode, 'DCR' (ONNX SpaceToDepth) or 'CRD'."""

    def __init__(self, blocksize, mode="DCR", name=None):
        super().__init__(name)
        if mode not in ("DCR", "CRD"):
            raise ValueError(f"space_to_depth: mode must be 'DCR' or 'CRD', got {mode!r}")
        self.blocksize, self.mode = int(blocksize), mode

    def _plan(self, s):
        n, c, h, w = s
        b = self.blocksize
        if b < 1 or h % b or w % b:
            raise ValueError(f"space_to_depth: spatial size of shape {s} is not a multiple "
                             f"of blocksize {b}")
        out = [n, c * b * b, h // b, w // b]
        if self.mode == "DCR":
            return [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4], out
        return [n, c, h // b, b, w // b, b], [0, 1, 3, 5, 2, 4], out


def space_to_depth(x, blocksize, mode="DCR"):
    return SpaceToDepth(blocksize, mode)(x)[0]
