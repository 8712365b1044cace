"""Automatic differentiation, in the style of Apache SINGA.

Recording
---------
While the module flag ``training`` is true, calling an :class:`Operator` on
singa Tensors records it: each output gets ``y.creator = op`` when any input
has ``requires_grad``. ``backward(y)`` then walks the recorded graph from
``y`` and yields ``(tensor, gradient)`` for every tensor with
``stores_grad`` (the parameters) that ``y`` depends on. ``training`` also
selects the training behaviour of dropout and batch normalisation, as in
SINGA. Switch it for a block with ``train_mode(flag)`` or ``no_grad()``::

    autograd.training = True          # SINGA style, global
    with autograd.no_grad():          # scoped; restored on exit
        y = model(x)

Graph layout (what graph walkers such as the ONNX exporter rely on)
--------------------------------------------------------------------
Every recorded Operator ``op`` has

* ``op.name``: a unique string such as ``"ReLU_12"``.
* ``op.src``: one entry per input, in call order, a tuple
  ``(src_op, output_index, tensor_or_None, stores_grad)``:

  - ``src_op`` is the Operator that produced the input. Inputs produced by
    no recorded op (data, parameters, constants) get a :class:`Dummy`
    operator whose ``.tensor`` is the input itself; one Dummy stands for
    one tensor for as long as the graph holds it, so a tensor used twice
    appears once.
  - ``output_index`` is which output of ``src_op`` the input is (always 0
    except for multi-output ops such as ``Split``).
  - ``tensor_or_None`` is the input tensor when it has ``stores_grad``.
  - ``stores_grad`` is the input's flag at the time of the call.
* its attributes as plain public instance fields, named after the ONNX
  attribute where an ONNX operator exists (``axis``, ``perm``,
  ``strides``, ``pads``, ``alpha`` ...); each class's docstring lists them
  and names the ONNX operator. SINGA's names are kept where SINGA had the
  op: ``Squeeze.axis`` / ``Unsqueeze.axis`` (ONNX axes), ``Split.parts``
  (ONNX split). ONNX inputs that are constants here are fields too
  (``Reshape.shape``, ``Slice.starts``, ``Clip.min``, ``Gather.indices``).
* ``op.requires_grad``: whether any input required a gradient.

A recorded output ``y`` has ``y.creator`` and, for multi-output ops,
``y.creator_index`` (read it as ``getattr(y, "creator_index", 0)``).
After ``backward`` the graph is released: every visited op drops what it
kept for backward and sets ``src`` to None, so memory does not grow across
steps (a kept loss pins nothing). Walking a released graph again raises
ValueError; a released intermediate used in a new graph is a constant.
"""

import builtins
import contextlib
import itertools
import numbers
import weakref

from singa import singa_wrap as _cw
from singa.tensor import Tensor, _wrap

CTensor = _cw.Tensor

# SINGA's switch: record graphs and use training behaviour (dropout, batch
# norm statistics). Read at call time, so assigning it works.
training = False

_op_ids = itertools.count()

# One Dummy per leaf tensor while a graph holds it (keyed by id; the Dummy
# holds the tensor, so the id cannot be reused while the entry lives).
_dummies = weakref.WeakValueDictionary()


@contextlib.contextmanager
def train_mode(flag=True):
    """Sets ``training`` to flag inside the block and restores it after."""
    global training
    old = training
    training = bool(flag)
    try:
        yield
    finally:
        training = old


def no_grad():
    """``train_mode(False)``: no graph is recorded inside the block."""
    return train_mode(False)


def is_training():
    return training


class Operator:
    """Base of every differentiable operation.

    The contract, for writers of new operators:

    * ``forward(*xs)`` receives the inputs' SWIG tensors (``CTensor``,
      ``t.data``) and returns one CTensor, or a tuple for several outputs.
      It should use the C++ ops of ``singa_wrap`` and no NumPy round trips.
    * What backward needs is kept in instance attributes whose names start
      with an underscore (``self._mask = ...``), and only that: keep the
      smallest thing (a mask rather than the input, the output when the
      gradient is a function of it). The engine deletes every underscore
      attribute after backward.
    * Attributes (axis, stride, ...) are public instance fields set in
      ``__init__``, so that the graph can be exported.
    * ``backward(*dys)`` receives one CTensor per output (``None`` for an
      output of a multi-output op that received no gradient) and returns
      one gradient per input (a CTensor, or ``None`` for an input with no
      gradient, e.g. integer indices), as a tuple when there are several
      inputs. A gradient must have its input's shape: an op that
      broadcasts reduces the gradient back (see ``ops.unbroadcast``).
      ``self.needs_grad(i)`` tells whether input i's gradient will be used,
      so a costly one can be skipped (returned as None).
    * ``__call__(*xs)`` takes singa Tensors, validates them, runs forward
      and records the op when ``training`` is on and any input requires a
      gradient. It returns one Tensor or a tuple of Tensors.
    """

    # Class-level defaults keep op construction cheap.
    src = ()
    requires_grad = False
    n_outputs = 1
    _needs_grad = ()

    def __init__(self, name=None):
        self.name = name if name is not None else f"{type(self).__name__}_{next(_op_ids)}"

    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, *dys):
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def __call__(self, *xs):
        for x in xs:
            if not isinstance(x, Tensor):
                raise TypeError(f"{type(self).__name__}: inputs must be singa Tensors, "
                                f"got {type(x).__name__}")
        ys = self.forward(*[x.data for x in xs])
        requires_grad = False
        for x in xs:
            if x.requires_grad:
                requires_grad = True
                break
        record = training and requires_grad
        if record:
            self.requires_grad = True
            self.src = [_source(x) for x in xs]
        if type(ys) is tuple:
            self.n_outputs = len(ys)
            outs = tuple(_wrap(y) for y in ys)
            for i, y in enumerate(outs):
                if record:
                    y.creator = self
                    y.creator_index = i
                elif not requires_grad:
                    y.requires_grad = False
            return outs
        y = _wrap(ys)
        if record:
            y.creator = self
        elif not requires_grad:
            y.requires_grad = False
        return y

    def needs_grad(self, i):
        """Whether the gradient for input i will be used (the engine sets
        ``_needs_grad`` before backward; True outside it). Ops with costly
        gradients (matmul, conv) skip the ones nobody uses, e.g. the input
        data's."""
        return not self._needs_grad or self._needs_grad[i]

    def _release(self):
        """Drops the graph edges and everything kept for backward. src
        becomes None, which marks the op as released."""
        d = self.__dict__
        for k in [k for k in d if k[0] == "_"]:
            del d[k]
        self.src = None

    def __repr__(self):
        return f"<{self.name}>"


class Dummy(Operator):
    """The source of a leaf tensor (data, parameter or constant) in a graph.

    ``tensor`` is the leaf itself; ``name`` is the tensor's name when it has
    one.
    """

    def __init__(self, tensor, name=None):
        super().__init__(name if name is not None else tensor.name)
        self.tensor = tensor
        self.requires_grad = tensor.requires_grad

    def forward(self, *xs):
        raise TypeError("Dummy stands for a leaf tensor and cannot be called")


def _source(x):
    """The src entry for input tensor x."""
    op = x.creator
    if op is not None and (op.src or isinstance(op, Dummy)):
        return (op, getattr(x, "creator_index", 0), x if x.stores_grad else None,
                x.stores_grad)
    # A leaf, or the output of an op whose graph was already released.
    d = _dummies.get(id(x))
    if d is None or d.tensor is not x:
        d = Dummy(x)
        _dummies[id(x)] = d
    return (d, 0, x if x.stores_grad else None, x.stores_grad)


def _initial_grad(y, dy):
    if dy is None:
        g = CTensor(y.data.shape(), y.data.device(), y.data.data_type())
        g.SetValue(1.0)
        return g
    if isinstance(dy, numbers.Real) and not isinstance(dy, bool):
        g = CTensor(y.data.shape(), y.data.device(), y.data.data_type())
        g.SetValue(float(dy))
        return g
    if isinstance(dy, Tensor):
        dy = dy.data
    if not isinstance(dy, CTensor):
        raise TypeError(f"backward: dy must be a Tensor or a number, got {type(dy).__name__}")
    if dy.shape() != y.data.shape():
        raise ValueError(f"backward: dy of shape {dy.shape()} does not match y of "
                         f"shape {y.data.shape()}")
    return dy


def backward(y, dy=None):
    """Back-propagates from y; yields (tensor, gradient) pairs.

    Every tensor with ``stores_grad`` that y depends on is yielded once, as
    soon as its gradient is complete (contributions from several uses are
    summed), so an optimizer can update it while the rest of the backward
    pass runs. Each gradient is contiguous and shares no elements with
    another yielded gradient, so an optimizer may update it in place.
    Gradients are computed only along paths to such tensors. A parameter
    reached only through operations with no gradient (ceil, comparisons,
    ...) gets zeros. dy is y's gradient (a Tensor or a number; ones by
    default). The graph is released as it is walked.
    """
    if not isinstance(y, Tensor):
        raise TypeError(f"backward: expected a Tensor, got {type(y).__name__}")
    root = y.creator
    if root is not None and root.src is None:
        raise ValueError(_RELEASED.format(root.name))
    if root is None or not (root.src or isinstance(root, Dummy)):
        raise ValueError("backward: y was not produced by a recorded operation; "
                         "set autograd.training = True (or use train_mode()) and "
                         "make sure an input requires grad")
    g0 = _initial_grad(y, dy)
    root_index = getattr(y, "creator_index", 0)
    if isinstance(root, Dummy):
        if root.tensor.stores_grad:
            yield root.tensor, _wrap(g0)
        return

    deps = _plan(root)
    grads = {root: {root_index: g0}}
    stored = {}      # non-leaf stores_grad tensors: op -> {index: tensor}
    handed = {}      # id -> CTensor already yielded (kept so ids stay unique)
    ready = [root]
    while ready:
        op = ready.pop()
        gs = grads.pop(op, None)
        if isinstance(op, Dummy):
            t = op.tensor
            if t.stores_grad:
                yield t, _owned(gs.get(0) if gs else None, t, handed)
            continue
        for i, t in stored.pop(op, {}).items():
            yield t, _owned(gs.get(i) if gs else None, t, handed)
        src, needs = op.src, op._needs_grad
        if gs and True in needs:
            if op.n_outputs == 1:
                dxs = op.backward(gs[0])
            else:
                dxs = op.backward(*[gs.get(i) for i in range(op.n_outputs)])
            if type(dxs) is not tuple:
                dxs = (dxs,)
            if len(dxs) != len(src):
                raise RuntimeError(f"{op.name}: backward returned {len(dxs)} gradients "
                                   f"for {len(src)} inputs")
        else:
            dxs = (None,) * len(src)
        op._release()
        for (src_op, idx, t, sg), dx, need in zip(src, dxs, needs):
            if not need:
                continue
            if dx is not None:
                acc = grads.get(src_op)
                if acc is None:
                    grads[src_op] = {idx: dx}
                else:
                    prev = acc.get(idx)
                    acc[idx] = dx if prev is None else _cw.Add(prev, dx)
            if sg and not isinstance(src_op, Dummy):
                stored.setdefault(src_op, {})[idx] = t
            n = deps[src_op] - 1
            deps[src_op] = n
            if n == 0:
                ready.append(src_op)


_RELEASED = ("backward: the graph through {} was released by an earlier backward; "
             "add the losses and call backward once")


def _plan(root):
    """Marks the edges that gradients must flow along; returns, for each op
    they reach, how many such edges feed it.

    An edge (input i of op) is needed when the input has stores_grad or its
    creator has a needed edge itself: gradients flow only on paths to
    tensors that are handed out, so a data input, which requires grad by
    default, costs nothing. Each op gets ``_needs_grad``, one bool per input.
    Ops are visited in post-order (inputs first) without recursion, so deep
    graphs cannot overflow the stack.
    """
    needed = set()
    deps = {}
    done = set()
    stack = [(root, iter(root.src))]
    while stack:
        op, it = stack[-1]
        for s in it:
            src_op = s[0]
            if src_op.requires_grad and src_op not in done:
                if src_op.src is None:
                    raise ValueError(_RELEASED.format(src_op.name))
                stack.append((src_op, iter(src_op.src)))
                break
        else:
            stack.pop()
            done.add(op)
            if isinstance(op, Dummy):
                if op.tensor.stores_grad:
                    needed.add(op)
                continue
            needs = []
            for src_op, _, _, stores_grad in op.src:
                need = src_op.requires_grad and (stores_grad or src_op in needed)
                if need:
                    # an intermediate with stores_grad is handed out even
                    # when nothing before it needs a gradient
                    needed.add(src_op)
                    deps[src_op] = deps.get(src_op, 0) + 1
                needs.append(need)
            op._needs_grad = tuple(needs)
            if True in needs:
                needed.add(op)
    return deps


def _owned(g, t, handed):
    """g as a Tensor the caller may modify in place (zeros when None)."""
    if g is None:
        g = CTensor(t.data.shape(), t.data.device(), t.data.data_type())
        g.SetValue(0.0)
    elif id(g) in handed or not g.IsContiguous():
        g = g.Clone()
    handed[id(g)] = g
    return _wrap(g)


def gradients(y, dy=None):
    """{tensor: gradient} for every stores_grad tensor y depends on."""
    return dict(backward(y, dy))


def _import_operators():
    """Copies the operators and functions of singa.ops into this module.
    singa.ops imports this module before its families, so when it is
    imported first it is still half-initialised here: its families are then
    imported one by one (a star import would silently bring nothing)."""
    import importlib
    ops = importlib.import_module("singa.ops")
    names = []
    for family in ops.FAMILIES:
        module = importlib.import_module(f"singa.ops.{family}")
        for n in module.__all__:
            globals()[n] = getattr(module, n)
        names += module.__all__
    return names


_ENGINE = ["training", "train_mode", "no_grad", "is_training", "Operator", "Dummy",
           "backward", "gradients", "CTensor"]
# Names that would shadow Python builtins (abs, sum, max, ...) are left out
# of ``from singa.autograd import *``; call them as autograd.sum(...).
__all__ = [n for n in _ENGINE + _import_operators() if not hasattr(builtins, n)]
