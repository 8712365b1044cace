"""Automatic differentiation, in the style of Apache SINGA.

Recording
---------
Every call of an :class:`Operator` on singa Tensors records it, whatever
``training`` says: each output gets ``y.creator = op`` and the op lists its
inputs in ``op.src``, so the graph of any forward pass can be exported
(``sonnx.to_onnx``) or walked. The module flag ``training`` decides two
things: whether operators keep what their backward needs (they keep it
only while ``training`` is on and an input requires a gradient), and the
training behaviour of dropout and batch normalisation. Switch it for a
block with ``train_mode(flag)`` or ``no_grad()``::

    autograd.training = True          # SINGA style, global
    with autograd.no_grad():          # scoped; restored on exit
        y = model(x)

``Operator(...)(*xs)`` returns a tuple of output Tensors, even for one
output, as in SINGA; the functions (``relu(x)``, ``matmul(a, b)``) return
what the operator computes: one Tensor, or a tuple for several outputs.

``backward(y)`` walks the recorded graph from ``y`` and yields
``(tensor, gradient)`` for every tensor with ``stores_grad`` (the
parameters) that ``y`` depends on. Backward through an operator that ran
with ``training`` off raises ValueError naming it.

Graph lifetime
--------------
A graph lives as long as its outputs do. backward leaves it intact, so
``backward`` (or ``gradients``) may run again on the same loss, or on
another loss that shares part of the graph, as in SINGA. The graphs that
backward passes walked are released at the next operator call that keeps
tensors for backward (``training`` on): every such op drops what it kept
and sets ``src`` to None. So memory does not grow across training steps,
and a kept loss pins nothing once the next step has started. Walking a
released graph raises ValueError; a released intermediate used in a new
graph is a constant.

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
    except for multi-output ops such as ``Split``). SINGA keeps the
    input's ``id`` here; ``op.output_name(i)`` names an output instead.
  - ``tensor_or_None`` is the input tensor when it has ``stores_grad``.
  - ``stores_grad`` is the input's flag at the time of the call.
* its attributes as plain public instance fields, named after the ONNX
  attribute where an ONNX operator exists (``axis``, ``perm``,
  ``strides``, ``pads``, ``alpha`` ...); each class's docstring lists them
  and names the ONNX operator. SINGA's names are kept where SINGA had the
  op: ``Squeeze.axis`` / ``Unsqueeze.axis`` (ONNX axes), ``Split.parts``
  (ONNX split). ONNX inputs that are constants here are fields too
  (``Reshape.shape``, ``Slice.starts``, ``Clip.min``, ``Gather.indices``,
  and batch norm's ``running_mean`` / ``running_var`` Tensors).
* ``op.requires_grad``: whether any input required a gradient.

A recorded output ``y`` has ``y.creator`` and, for multi-output ops,
``y.creator_index`` (read it as ``getattr(y, "creator_index", 0)``).
"""

import builtins
import collections
import contextlib
import itertools
import numbers
import weakref

from singa import singa_wrap as _cw
from singa.tensor import Tensor, _wrap

CTensor = _cw.Tensor

# SINGA's switch: operators keep what backward needs, and dropout and batch
# norm use their training behaviour. Read at call time, so assigning it
# works.
training = False

_op_ids = itertools.count()

# Weak references to the operators that finished backward passes walked
# (a set: walking a graph twice adds nothing); released by the next
# operator call that keeps tensors for backward.
_walked = set()


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
    """``train_mode(False)``: operators inside the block keep nothing for
    backward (their graph is still recorded, e.g. for export)."""
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
      gradient is a function of it). When nothing will be needed (training
      off, or no input requires a gradient) ``self.saved`` is False during
      forward and the engine deletes every underscore attribute right
      after it; it does so again when the graph is released.
    * Attributes (axis, stride, ...) are public instance fields set in
      ``__init__``, so that the graph can be exported.
    * ``backward(*dys)`` receives one CTensor per output (``None`` for an
      output of a multi-output op that received no gradient) and returns
      one gradient per input (a CTensor, or ``None`` for an input with no
      gradient, e.g. integer indices), as a tuple when there are several
      inputs. A gradient must have its input's shape: an op that
      broadcasts reduces the gradient back (see ``ops.unbroadcast``).
      ``self.needs_grad(i)`` tells whether input i's gradient will be used,
      so a costly one can be skipped (returned as None). backward must not
      modify what forward kept: a second backward reuses it.
    * ``__call__(*xs)`` takes singa Tensors, validates them, runs forward,
      records the op and returns a tuple of Tensors (one per output).
    """

    # Class-level defaults keep op construction cheap.
    src = ()
    requires_grad = False
    n_outputs = 1
    # saved: False when forward runs without keeping anything for backward
    # (training off or no input requiring a gradient). An op class whose
    # forward reads it and keeps nothing then sets saves_only_when_told, so
    # the engine need not clear its attributes after forward.
    saved = True
    saves_only_when_told = False
    _needs_grad = ()

    def __init__(self, name=None):
        if name is not None:
            self.__dict__["name_"] = name

    @property
    def name(self):
        """A unique name, ``"<Class>_<n>"`` unless one was given. Numbered
        when first read, so ops nobody names cost no string work."""
        d = self.__dict__
        n = d.get("name_")
        if n is None:
            n = d["name_"] = f"{type(self).__name__}_{next(_op_ids)}"
        return n

    @name.setter
    def name(self, value):
        self.__dict__["name_"] = value

    @classmethod
    def _prepared(cls, **attrs):
        """An instance holding attrs, made without calling __init__: for a
        layer that builds the same op on every call from arguments its own
        constructor has already checked and normalised into the form
        __init__ would produce, which __init__ would parse again."""
        op = _new(cls)
        op.__dict__.update(attrs)
        return op

    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, *dys):
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def __call__(self, *xs):
        datas, src = [], []
        requires_grad = False
        for x in xs:
            if not isinstance(x, Tensor):
                raise TypeError(f"{type(self).__name__}: inputs must be singa Tensors, "
                                f"got {type(x).__name__}")
            datas.append(x.data)
            if x.requires_grad:
                requires_grad = True
            # the src entry (see _source, inlined: this is the hot path)
            op, d = x.creator, x.__dict__
            if op is not None and (op.src or type(op) is Dummy):
                src.append((op, d.get("creator_index", 0), x if x.stores_grad else None,
                            x.stores_grad))
            else:
                src.append(_leaf(x, d))
        keep = training and requires_grad
        if not keep:
            self.saved = False
        elif _walked:
            # the first recording op of a step: release what earlier
            # backward passes walked; an input made there is now a leaf
            _release_walked()
            src = [_source(x) for x in xs]
        ys = self.forward(*datas)
        if keep:
            self.requires_grad = True
        else:
            if requires_grad:
                self.requires_grad = True
            if not self.saves_only_when_told:
                self._forget()
        self.src = src
        if type(ys) is tuple:
            self.n_outputs = len(ys)
            outs = tuple(_wrap(y) for y in ys)
            for i, y in enumerate(outs):
                y.creator = self
                y.creator_index = i
                if not requires_grad:
                    y.requires_grad = False
            return outs
        y = _wrap(ys)
        y.creator = self
        if not requires_grad:
            y.requires_grad = False
        return (y,)

    def needs_grad(self, i):
        """Whether the gradient for input i will be used (the engine sets
        ``_needs_grad`` before backward; True outside it). Ops with costly
        gradients (matmul, conv) skip the ones nobody uses, e.g. the input
        data's."""
        return not self._needs_grad or self._needs_grad[i]

    def output_name(self, idx):
        """The name of output idx, ``"<op name>:<idx>"`` (as SINGA)."""
        return f"{self.name}:{idx}"

    def grad_name(self, idx):
        """The name of output idx's gradient, ``"<output name>_g"``."""
        return f"{self.output_name(idx)}_g"

    def get_params(self):
        """The op's own parameters ({} for operators; layers have them)."""
        return {}

    def _forget(self):
        """Drops everything kept for backward (the underscore attributes)."""
        d = self.__dict__
        for k in [k for k in d if k[0] == "_"]:
            del d[k]

    def _release(self):
        """Drops the graph edges and everything kept for backward. src
        becomes None, which marks the op as released."""
        self._forget()
        self.src = None

    def __repr__(self):
        return f"<{self.name}>"


Operation = Operator  # SINGA's other name for it


class Dummy(Operator):
    """The source of a leaf tensor (data, parameter or constant) in a graph.

    ``tensor`` is the leaf itself; ``name`` is the tensor's name when it has
    one.
    """

    def __init__(self, tensor, name=None):
        super().__init__(name)
        self.tensor = tensor
        self.requires_grad = tensor.requires_grad

    @property
    def name(self):
        d = self.__dict__
        n = d.get("name_")
        if n is None:
            n = d["name_"] = self.tensor.name or f"Dummy_{next(_op_ids)}"
        return n

    @name.setter
    def name(self, value):
        self.__dict__["name_"] = value

    @property
    def stores_grad(self):
        return self.tensor.stores_grad

    def output_name(self, idx):
        return self.name

    def grad_name(self, idx):
        return f"{self.name}_g"

    def forward(self, *xs):
        raise TypeError("Dummy stands for a leaf tensor and cannot be called")


_new = object.__new__


def _source(x):
    """The src entry for input tensor x."""
    op = x.creator
    if op is not None and (op.src or type(op) is Dummy):
        return (op, x.__dict__.get("creator_index", 0), x if x.stores_grad else None,
                x.stores_grad)
    return _leaf(x, x.__dict__)


def _leaf(x, d):
    """The src entry of a leaf x (or the output of an op whose graph was
    released): one Dummy per tensor while a graph holds it, found through
    a weak reference on the tensor (a strong one would be a cycle)."""
    ref = d.get("_dummy")
    dummy = ref() if ref is not None else None
    if dummy is None:
        dummy = _new(Dummy)
        dummy.tensor = x
        if x.requires_grad:
            dummy.requires_grad = True
        x._dummy = weakref.ref(dummy)
    return (dummy, 0, x if x.stores_grad else None, x.stores_grad)


def _release_walked():
    """Releases the operators walked by finished backward passes."""
    global _walked
    refs, _walked = _walked, set()
    for r in refs:
        op = r()
        if op is not None and op.src is not None:
            op._release()


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
    pass runs. Each gradient is contiguous, has ``requires_grad`` off and
    shares no elements with another yielded gradient, so an optimizer may
    update it in place. Gradients are computed only along paths to such
    tensors. A parameter reached only through operations with no gradient
    (ceil, comparisons, ...) gets zeros. dy is y's gradient (a Tensor or a
    number; ones by default). The graph stays intact until the next
    operator call that keeps tensors for backward (see the module doc).
    """
    if not isinstance(y, Tensor):
        raise TypeError(f"backward: expected a Tensor, got {type(y).__name__}")
    root = y.creator
    if root is not None and root.src is None:
        raise ValueError(_RELEASED.format(root.name))
    if root is None or not (root.src or isinstance(root, Dummy)):
        raise ValueError("backward: y was not produced by an autograd operator (or "
                         "was made from inputs none of which requires grad)")
    g0 = _initial_grad(y, dy)
    root_index = y.__dict__.get("creator_index", 0)
    if isinstance(root, Dummy):
        if root.tensor.stores_grad:
            yield root.tensor, _owned(g0, root.tensor, {})
        return
    if not root.requires_grad:
        raise ValueError(f"backward: none of the inputs of {root.name} requires grad, "
                         "so y has no gradient to propagate")
    # This pass adopts the graphs earlier passes walked, so an operator
    # called inside the loop over its pairs cannot release what it walks.
    global _walked
    adopted, _walked = _walked, set()
    walked = []
    try:
        deps = _plan(root, walked)
        yield from _propagate(root, root_index, g0, deps)
    finally:
        _walked |= {r for r in adopted if r() is not None}
        _walked.update(weakref.ref(op) for op in walked)


def _propagate(root, root_index, g0, deps):
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
        if stored:
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


_RELEASED = ("backward: the graph through {} was released (graphs are kept after a "
             "backward only until the next operator call that records for backward); "
             "call every backward of a step before running the next step's operators, "
             "or add the losses and call backward once")
_NOT_SAVED = ("backward: {} ran with autograd.training off, so it kept nothing for "
              "backward; set autograd.training = True (or call model.train()) before "
              "the forward pass")


def _plan(root, walked):
    """Marks the edges that gradients must flow along; returns, for each op
    they reach, how many such edges feed it. Appends every operator it
    visits to walked.

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
                if isinstance(src_op, Dummy):
                    # a leaf: visited here, without a stack entry
                    done.add(src_op)
                    if src_op.tensor.stores_grad:
                        needed.add(src_op)
                    continue
                if src_op.src is None:
                    raise ValueError(_RELEASED.format(src_op.name))
                stack.append((src_op, iter(src_op.src)))
                break
        else:
            stack.pop()
            done.add(op)
            walked.append(op)
            needs = []
            for src_op, _, _, stores_grad in op.src:
                need = src_op.requires_grad and (stores_grad or src_op in needed)
                if need:
                    # an intermediate with stores_grad is handed out even
                    # when nothing before it needs a gradient
                    needed.add(src_op)
                    deps[src_op] = deps.get(src_op, 0) + 1
                needs.append(need)
            if True in needs:
                if not op.saved:
                    raise ValueError(_NOT_SAVED.format(op.name))
                needed.add(op)
            op._needs_grad = tuple(needs)
    return deps


def _owned(g, t, handed):
    """g as a Tensor the caller may modify in place (zeros when None)."""
    if g is None:
        g = CTensor(t.data.shape(), t.data.device(), t.data.data_type())
        g.SetValue(0.0)
    elif id(g) in handed or not g.IsContiguous():
        g = g.Clone()
    handed[id(g)] = g
    out = _wrap(g)
    out.requires_grad = False
    return out


class _Gradients(dict):
    """{id(tensor): gradient}, as SINGA's gradients() returns; looking up
    by the tensor itself works too."""

    def __getitem__(self, key):
        return dict.__getitem__(self, key if type(key) is int else id(key))

    def __contains__(self, key):
        return dict.__contains__(self, key if type(key) is int else id(key))

    def get(self, key, default=None):
        return dict.get(self, key if type(key) is int else id(key), default)


def gradients(y, dy=None):
    """{id(tensor): gradient} for every stores_grad tensor y depends on (as
    SINGA); ``grads[tensor]`` works as well as ``grads[id(tensor)]``."""
    grads = _Gradients()
    for p, g in backward(y, dy):
        dict.__setitem__(grads, id(p), g)
    return grads


def infer_dependency(op):
    """How often each operator's outputs, and each output, are used in the
    graph that ends at op (SINGA's helper): a pair of Counters, operator ->
    number of uses of its outputs, and ``src_op.output_name(i)`` -> number
    of uses of that output."""
    if not isinstance(op, Operator):
        raise TypeError(f"infer_dependency: expected an Operator (a tensor's creator), got "
                        f"{type(op).__name__}")
    op_count = collections.Counter()
    tensor_count = collections.Counter()
    if op.src is None:
        raise ValueError(_RELEASED.format(op.name))
    stack = [op]
    while stack:
        cur = stack.pop()
        for src_op, idx, _, _ in cur.src or ():
            if src_op not in op_count:
                stack.append(src_op)
            op_count[src_op] += 1
            tensor_count[src_op.output_name(idx)] += 1
    return op_count, tensor_count


def ctensor2numpy(x):
    """A NumPy copy of a CTensor's values."""
    if not isinstance(x, CTensor):
        raise TypeError(f"ctensor2numpy: expected a CTensor, got {type(x).__name__}")
    from singa.tensor import to_numpy
    return to_numpy(_wrap(x))


def axis_helper(y_shape, x_shape):
    """The axes of y_shape along which x_shape was broadcast (NumPy rules,
    aligned from the right)."""
    res = []
    j = len(x_shape) - 1
    for i in range(len(y_shape) - 1, -1, -1):
        if j < 0 or x_shape[j] != y_shape[i]:
            res.append(i)
        j -= 1
    return tuple(res[::-1])


def back_broadcast(y_shape, x_shape, x):
    """The CTensor x of shape y_shape summed back to x_shape (undoing a
    broadcast); a Tensor x gives a Tensor."""
    if isinstance(x, Tensor):
        return _wrap(back_broadcast(y_shape, x_shape, x.data))
    if not isinstance(x, CTensor):
        raise TypeError(f"back_broadcast: x must be a singa_wrap.Tensor or a Tensor, got "
                        f"{type(x).__name__}")
    y_shape, x_shape = tuple(y_shape), tuple(x_shape)
    if y_shape == x_shape:
        return x
    axes = list(axis_helper(y_shape, x_shape))
    if axes:
        x = _cw.Sum(x, axes, True)
    return x.Reshape(list(x_shape))


def add_all(*xs):
    """xs[0] + xs[1] + ... as a chain of recorded additions."""
    if not xs:
        raise ValueError("add_all: needs at least one tensor")
    y = xs[0]
    for x in xs[1:]:
        y = add(y, x)  # noqa: F821 (the generated Add's function)
    return y


# The layers SINGA's autograd re-exports (autograd.Linear, ...): looked up
# in singa.layer on first use, since singa.layer imports this module.
_LAYER_ALIASES = ("Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN",
                  "LSTM")


def __getattr__(name):
    if name in _LAYER_ALIASES:
        from singa import layer
        if hasattr(layer, name):
            return getattr(layer, name)
    raise AttributeError(f"module 'singa.autograd' has no attribute {name!r}")


def __dir__():
    from singa import layer
    return sorted(set(globals()) | {n for n in _LAYER_ALIASES if hasattr(layer, n)})


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


_ENGINE = ["training", "train_mode", "no_grad", "is_training", "Operator", "Operation",
           "Dummy", "backward", "gradients", "CTensor", "infer_dependency", "ctensor2numpy",
           "axis_helper", "back_broadcast", "add_all"]
# Names that would shadow Python builtins (abs, sum, max, ...) are left out
# of ``from singa.autograd import *``; call them as autograd.sum(...).
__all__ = [n for n in _ENGINE + _import_operators() if not hasattr(builtins, n)]
