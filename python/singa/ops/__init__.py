"""singa's autograd operators, by family.

Each family module (see FAMILIES) defines Operator classes and a function
form per class (``ReLU`` and ``relu``); ``singa.autograd`` re-exports all
of them. The helpers below are shared by the families and are defined
before the families are imported, which they import from here.
"""

import numbers

from singa import singa_wrap as _cw
from singa.tensor import Tensor, _wrap

CTensor = _cw.Tensor


def unbroadcast(g, shape):
    """Sums gradient g down to shape, undoing NumPy broadcasting."""
    gshape = g.shape()
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = list(range(lead))
    for i, d in enumerate(shape):
        if d == 1 and gshape[lead + i] != 1:
            axes.append(lead + i)
    if axes:
        g = _cw.Sum(g, axes, True)
    return g.Reshape(list(shape))


def constant(value, like):
    """A 0-d CTensor holding value, on like's device with like's dtype."""
    c = CTensor((), like.device(), like.data_type())
    c.SetValue(float(value))
    return c


def zeros(shape, like):
    """A zero CTensor of shape on like's device with like's dtype."""
    z = CTensor(tuple(shape), like.device(), like.data_type())
    z.SetValue(0.0)
    return z


def norm_axis(axis, ndim, where, shape):
    """axis in [0, ndim), or IndexError naming the shape."""
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"{where}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise IndexError(f"{where}: axis {axis} is out of range for shape {tuple(shape)}")
    return int(axis) % ndim


def norm_axes(axes, ndim, where, shape):
    """A sorted list of distinct axes in [0, ndim)."""
    if isinstance(axes, numbers.Integral):
        axes = [axes]
    out = sorted({norm_axis(a, ndim, where, shape) for a in axes})
    if len(out) != len(list(axes)):
        raise ValueError(f"{where}: repeated axis in {list(axes)}")
    return out


def int_list(values, where, name):
    """values (an int or a sequence of ints) as a list of Python ints."""
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        return [int(values)]
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be ints, got {values!r}") from None
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{where}: {name} must be ints, got {values!r}")
    return out


def product(shape):
    p = 1
    for d in shape:
        p *= d
    return p


def operands(where, a, b):
    """a and b as Tensors; a number becomes a 0-d constant (no gradient)
    with the other operand's dtype and device, so the graph stays made of
    tensors."""
    a_t, b_t = isinstance(a, Tensor), isinstance(b, Tensor)
    if a_t and b_t:
        return a, b
    if a_t and _is_number(b):
        return a, _const_tensor(b, a)
    if b_t and _is_number(a):
        return _const_tensor(a, b), b
    raise TypeError(f"{where}: expected Tensors or numbers, got "
                    f"{type(a).__name__} and {type(b).__name__}")


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _const_tensor(value, like):
    t = _wrap(constant(value, like.data))
    t.requires_grad = False
    return t


# The families, in the order their names are gathered; a new family module
# is added here and nowhere else.
FAMILIES = ("generated", "activation", "unary", "elementwise", "linalg", "reduce", "shape",
            "indexing", "conv", "norm", "loss")

# singa.autograd defines the Operator engine and then imports every family
# (which import the helpers above from this package). Importing it here,
# before the families, gives one order whichever module is imported first.
import singa.autograd  # noqa: E402,F401


def _gather():
    """Every family's __all__, copied into this package. The families are
    looked up with importlib: the function ``shape`` replaces the submodule
    of that name here."""
    import importlib
    names = []
    for family in FAMILIES:
        module = importlib.import_module(f"singa.ops.{family}")
        for n in module.__all__:
            globals()[n] = getattr(module, n)
        names += module.__all__
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ImportError(f"singa.ops: {twice} defined by more than one family")
    return names


__all__ = _gather()
