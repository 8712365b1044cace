"""The Layer base class and Sequential.

A layer creates its parameters lazily, from the first input it sees
(``initialize(*inputs)`` runs once, before the first ``forward``), so the
input sizes never need spelling out: ``Linear(10)`` learns its fan-in from x.

Naming. Assigning a Layer to an attribute of another layer makes it a
sub-layer named after the attribute; a list or tuple of layers is registered
element by element (``blocks.0``, ``blocks.1``). Assigning a Tensor makes it
a parameter when it has ``stores_grad`` and a state otherwise (running
statistics); attributes whose names start with ``_`` are private scratch
and never registered. ``get_params`` / ``get_states`` return dicts keyed by
dotted paths relative to the layer asked (``"conv1.W"``), and every
registered tensor's ``name`` is its dotted path from the root layer, which
is what optimizers key their buffers by. ``get_params`` / ``get_states`` of
any layer key by those full names, as SINGA's do, so a sub-layer's dict can
be handed to the root's ``set_params`` (and a SINGA checkpoint's names are
the same). ``register_layers(*layers)`` registers layers as "0", "1", ...
(SINGA's way of adding a list of sub-layers).

As in SINGA, the metaclass ``LayerMeta`` wraps every ``initialize`` and
``forward`` a subclass defines: ``forward`` initialises the layer first if
it has not been, and ``initialize`` runs outside any graph being recorded,
then marks the layer initialised and names its tensors.
"""

import contextlib
import functools

import numpy as np

from singa import device as _device
from singa import tensor as _tensor
from singa.tensor import Tensor

__all__ = ["LayerMeta", "Layer", "Sequential"]


def _first_device(inputs):
    for x in inputs:
        if isinstance(x, Tensor):
            return x.device
        if isinstance(x, (list, tuple)):
            for y in x:
                if isinstance(y, Tensor):
                    return y.device
    return None


@contextlib.contextmanager
def _not_recorded(dev):
    """Parameters are made and filled once, even inside a step that a graph
    records (a replayed graph would refill them)."""
    unrecorded = getattr(_device, "unrecorded", None)
    if unrecorded is not None:
        with unrecorded(dev):
            yield
        return
    if dev is None or not hasattr(dev, "graph_enabled"):
        yield
        return
    flag = dev.graph_enabled()
    dev.EnableGraph(False)
    try:
        yield
    finally:
        dev.EnableGraph(flag)


class LayerMeta(type):
    """Wraps the ``initialize`` and ``forward`` that a class defines (see
    the module doc)."""

    @staticmethod
    def init_wrapper(func):
        @functools.wraps(func)
        def initialize(self, *args, **kwargs):
            with _not_recorded(_first_device(args)):
                func(self, *args, **kwargs)
            self.__dict__["_initialized"] = True
            self._name_tensors()
        initialize._singa_wrapped = True
        return initialize

    @staticmethod
    def forward_wrapper(func):
        @functools.wraps(func)
        def forward(self, *args, **kwargs):
            if not self.__dict__.get("_initialized", True):
                self._run_initialize(args, kwargs)
            return func(self, *args, **kwargs)
        forward._singa_wrapped = True
        return forward

    def __new__(mcs, name, bases, attrs):
        for key, wrap in (("initialize", LayerMeta.init_wrapper),
                          ("forward", LayerMeta.forward_wrapper)):
            fn = attrs.get(key)
            if callable(fn) and not getattr(fn, "_singa_wrapped", False):
                attrs[key] = wrap(fn)
        return super().__new__(mcs, name, bases, attrs)


def _as_numpy(value, name, where):
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (np.ndarray, np.number, int, float)) and not isinstance(value, bool):
        return np.asarray(value)
    raise TypeError(f"{where}: value for {name!r} must be a Tensor or a NumPy array, "
                    f"got {type(value).__name__}")


class Layer(metaclass=LayerMeta):
    """Base class of layers and models.

    Subclasses call ``super().__init__()`` first, create parameters in
    ``initialize(*inputs)`` (shapes from the inputs, device and dtype from
    the first input) and compute in ``forward(*inputs)``.
    """

    sep = "."

    def __init__(self):
        d = self.__dict__
        d["name"] = None
        d["_initialized"] = False
        d["_parent"] = None
        d["_layers"] = {}
        d["_param_names"] = []
        d["_state_names"] = []

    # ---- registration ----

    def __setattr__(self, attr, value):
        d = self.__dict__
        if "_layers" not in d:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before "
                                 f"setting attribute {attr!r}")
        if attr.startswith("_") or attr == "name":
            object.__setattr__(self, attr, value)
            return
        self._unregister(attr)
        if isinstance(value, Layer):
            self._add_layer(attr, value)
        elif isinstance(value, (list, tuple)) and value and \
                all(isinstance(v, Layer) for v in value):
            # A layer that already has a name here keeps it: SINGA code keeps
            # lists of layers that it registers by attribute or with
            # register_layers.
            for i, v in enumerate(value):
                if self._key_of(v) is None:
                    self._add_layer(f"{attr}{self.sep}{i}", v)
        elif isinstance(value, Tensor):
            names = self._param_names if value.stores_grad else self._state_names
            names.append(attr)
            if self._initialized:
                value.name = self._prefix() + attr
        object.__setattr__(self, attr, value)

    def __delattr__(self, attr):
        self._unregister(attr)
        object.__delattr__(self, attr)

    def _unregister(self, attr):
        layers = self._layers
        for key in [k for k in layers if k == attr or k.startswith(attr + self.sep)]:
            del layers[key]
        for names in (self._param_names, self._state_names):
            if attr in names:
                names.remove(attr)

    def _key_of(self, layer):
        for key, sub in self._layers.items():
            if sub is layer:
                return key
        return None

    def _add_layer(self, key, layer):
        # One name per sub-layer: registering it again renames it.
        old = self._key_of(layer)
        if old is not None and old != key:
            del self._layers[old]
        self._layers[key] = layer
        layer.__dict__["_parent"] = self
        layer.__dict__["name"] = key
        if layer._initialized:
            layer._name_tensors()

    def _prefix(self):
        """This layer's dotted path from the root plus a separator ('' at the root)."""
        parts = []
        layer = self
        while layer._parent is not None:
            parts.append(layer.name)
            layer = layer._parent
        return "".join(p + self.sep for p in reversed(parts))

    def _name_tensors(self):
        prefix = self._prefix()
        for n in self._param_names + self._state_names:
            getattr(self, n).name = prefix + n
        for sub in self._layers.values():
            if sub._initialized:
                sub._name_tensors()

    # ---- calling ----

    def initialize(self, *inputs, **kwargs):
        """Creates parameters from the first inputs (nothing by default)."""

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __call__(self, *inputs, **kwargs):
        if not self._initialized:
            self._run_initialize(inputs, kwargs)
        return self.forward(*inputs, **kwargs)

    def _run_initialize(self, inputs, kwargs):
        # initialize is wrapped by LayerMeta: it runs unrecorded, marks the
        # layer initialised and names its tensors.
        self.initialize(*inputs, **kwargs)

    def register_layers(self, *layers):
        """Registers layers as sub-layers named "0", "1", ... (SINGA's form
        for a list of layers; a single list argument works too)."""
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"{type(self).__name__}.register_layers: item {i} is a "
                                f"{type(layer).__name__}, not a Layer")
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"

    # ---- parameters and states ----

    def _collect(self, with_states):
        out = {}
        for n in self._param_names:
            out[n] = getattr(self, n)
        if with_states:
            for n in self._state_names:
                out[n] = getattr(self, n)
        for key, sub in self._layers.items():
            for n, t in sub._collect(with_states).items():
                out[key + self.sep + n] = t
        return out

    def _collect_named(self, with_states):
        prefix = self._prefix()
        return {prefix + k: t for k, t in self._collect(with_states).items()}

    def get_params(self):
        """{name: Tensor} of the trainable parameters, keyed by their full
        dotted names from the root layer (as SINGA does)."""
        return self._collect_named(False)

    def get_states(self):
        """{name: Tensor} of parameters and states (running statistics)."""
        return self._collect_named(True)

    def set_params(self, parameters):
        """Copies values (Tensors or NumPy arrays) into the named parameters.

        Names are the full names get_params gives; on a sub-layer, names
        relative to it work too. Every entry is checked before any is copied.
        """
        self._assign(parameters, self.get_params(), "set_params")

    def set_states(self, states):
        """Copies values into the named parameters and states."""
        self._assign(states, self.get_states(), "set_states")

    def set_attribute(self, attribute, attribute_value):
        """Copies a Tensor's or NumPy array's values into the tensor
        attribute (SINGA's helper for set_params)."""
        where = f"{type(self).__name__}.set_attribute"
        if not isinstance(attribute, Tensor):
            raise TypeError(f"{where}: the attribute must be a Tensor, got "
                            f"{type(attribute).__name__}")
        arr = _as_numpy(attribute_value, attribute.name, where)
        if tuple(arr.shape) != tuple(attribute.shape):
            raise ValueError(f"{where}: {attribute.name!r} has shape {tuple(attribute.shape)}, "
                             f"got a value of shape {tuple(arr.shape)}")
        attribute.copy_from_numpy(arr)

    def _assign(self, values, targets, where):
        where = f"{type(self).__name__}.{where}"
        if not isinstance(values, dict):
            raise TypeError(f"{where}: expected a dict of name -> value, "
                            f"got {type(values).__name__}")
        staged = []
        prefix = self._prefix()
        # Check every entry before copying any, so a bad dict changes nothing.
        for name, value in values.items():
            t = targets.get(name)
            if t is None and prefix and isinstance(name, str):
                t = targets.get(prefix + name)
            if t is None:
                hint = ("" if targets else "; the layer has no parameters yet: call it on "
                        "an input (or Model.compile) first")
                raise ValueError(f"{where}: unknown name {name!r}{hint}; known: "
                                 f"{sorted(targets)}")
            arr = _as_numpy(value, name, where)
            if tuple(arr.shape) != tuple(t.shape):
                raise ValueError(f"{where}: {name!r} has shape {tuple(t.shape)}, "
                                 f"got a value of shape {tuple(arr.shape)}")
            if arr.dtype.kind not in "fiub":
                raise TypeError(f"{where}: {name!r} got a value of dtype {arr.dtype}")
            staged.append((t, arr))
        for t, arr in staged:
            t.copy_from_numpy(arr)

    # ---- checks for subclasses ----

    def _checked_tensors(self, inputs, where):
        inputs = [x for x in inputs if x is not None]
        for i, x in enumerate(inputs):
            if not isinstance(x, Tensor):
                raise TypeError(f"{type(self).__name__}.{where}: argument {i} is a "
                                f"{type(x).__name__}, not a Tensor")
        return inputs

    def device_check(self, *inputs):
        """Moves every tensor to the first one's device, in place (SINGA's
        explicit way of moving a layer's parameters to its input's device)."""
        inputs = self._checked_tensors(inputs, "device_check")
        if not inputs:
            return
        dev = inputs[0].device
        with _not_recorded(dev):
            for x in inputs[1:]:
                if x.device.id() != dev.id():
                    x.to_device(dev)

    def dtype_check(self, *inputs):
        """Converts every tensor to the first one's dtype, in place (SINGA's
        explicit cast; singa's own layers raise TypeError on mixed dtypes
        instead of calling it)."""
        inputs = self._checked_tensors(inputs, "dtype_check")
        if not inputs:
            return
        dt = inputs[0].dtype
        with _not_recorded(inputs[0].device):
            for x in inputs[1:]:
                if x.dtype != dt:
                    x.to_type(dt)


def check_input(layer, x, ndim=None, what="input", dtype=None):
    """Raises unless x is a Tensor (of ndim dimensions, and of dtype, when
    given). dtype may be a parameter tensor, whose dtype x must share, or
    the string "float", which rejects integer inputs."""
    name = type(layer).__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: {what} must be a singa Tensor, got {type(x).__name__}")
    # dtype is "float" or a parameter Tensor, whose == is element-wise (and
    # slow to decline a str)
    if type(dtype) is str:
        if x.dtype == _tensor.int32:
            raise TypeError(f"{name}: {what} of shape {tuple(x.shape)} is int32; this layer "
                            "needs a float16 or float32 input")
    elif dtype is not None and x.dtype != dtype.dtype:
        raise TypeError(f"{name}: {what} of shape {tuple(x.shape)} is "
                        f"{_tensor.dtype_name(x.dtype)} but the layer's parameters are "
                        f"{_tensor.dtype_name(dtype.dtype)}")
    if ndim is not None:
        nds = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim() not in nds:
            raise ValueError(f"{name}: expected a {' or '.join(map(str, nds))}-D {what}, "
                             f"got shape {tuple(x.shape)}")
    return x


def new_param(shape, like, init=None, value=None, dtype=None):
    """A parameter (stores_grad) on like's device, with like's dtype unless
    dtype is given, filled by init (a function of the tensor) or set to
    value."""
    dtype = like.dtype if dtype is None else dtype
    t = Tensor(tuple(shape), like.device, dtype, requires_grad=True, stores_grad=True)
    if init is not None:
        init(t)
    elif value is not None:
        t.set_value(value)
    return t


def new_state(shape, like, value=0.0):
    """A non-trainable state tensor (running statistics)."""
    t = Tensor(tuple(shape), like.device, like.dtype, requires_grad=False)
    t.set_value(value)
    return t


class Sequential(Layer):
    """Calls its layers in order; they are named "0", "1", ..."""

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not a Layer")
            setattr(self, str(i), layer)
        self.__dict__["_order"] = list(layers)

    def __len__(self):
        return len(self._order)

    def __getitem__(self, i):
        return self._order[i]

    def forward(self, x):
        for layer in self._order:
            x = layer(x)
        return x
