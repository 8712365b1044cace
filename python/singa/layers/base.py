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
is what optimizers key their buffers by.
"""

import numpy as np

from singa import device as _device
from singa import tensor as _tensor
from singa.tensor import Tensor

__all__ = ["Layer", "Sequential"]


def _as_numpy(value, name, where):
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (np.ndarray, np.number, int, float)) and not isinstance(value, bool):
        return np.asarray(value)
    raise TypeError(f"{where}: value for {name!r} must be a Tensor or a NumPy array, "
                    f"got {type(value).__name__}")


class Layer:
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
            for i, v in enumerate(value):
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

    def _add_layer(self, key, layer):
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
        # Parameters are made and filled once, even inside a step that a
        # graph records (a graph would refill them at every replay).
        dev = next((x.device for x in inputs if isinstance(x, Tensor)), None)
        with _device.unrecorded(dev):
            self.initialize(*inputs, **kwargs)
        self.__dict__["_initialized"] = True
        self._name_tensors()

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

    def get_params(self):
        """{dotted name: Tensor} of the trainable parameters."""
        return self._collect(False)

    def get_states(self):
        """{dotted name: Tensor} of parameters and states (running statistics)."""
        return self._collect(True)

    def set_params(self, parameters):
        """Copies values (Tensors or NumPy arrays) into the named parameters."""
        self._assign(parameters, self.get_params(), "set_params")

    def set_states(self, states):
        """Copies values into the named parameters and states."""
        self._assign(states, self.get_states(), "set_states")

    def _assign(self, values, targets, where):
        where = f"{type(self).__name__}.{where}"
        if not isinstance(values, dict):
            raise TypeError(f"{where}: expected a dict of name -> value, "
                            f"got {type(values).__name__}")
        staged = []
        # Check every entry before copying any, so a bad dict changes nothing.
        for name, value in values.items():
            t = targets.get(name)
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

    def device_check(self, *inputs):
        """Raises ValueError unless all inputs share the first one's device."""
        dev = inputs[0].device
        for x in inputs[1:]:
            if x.device.id() != dev.id():
                raise ValueError(f"{type(self).__name__}: inputs are on different devices "
                                 f"({dev.name()} and {x.device.name()})")

    def dtype_check(self, *inputs):
        """Raises TypeError unless all inputs share the first one's dtype."""
        dt = inputs[0].dtype
        for x in inputs[1:]:
            if x.dtype != dt:
                raise TypeError(f"{type(self).__name__}: inputs have dtypes "
                                f"{_tensor.dtype_name(dt)} and {_tensor.dtype_name(x.dtype)}")


def check_input(layer, x, ndim=None, what="input", dtype=None):
    """Raises unless x is a Tensor (of ndim dimensions, and of dtype, when
    given). dtype may be a parameter tensor, whose dtype x must share, or
    the string "float", which rejects integer inputs."""
    name = type(layer).__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: {what} must be a singa Tensor, got {type(x).__name__}")
    if dtype == "float":
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
