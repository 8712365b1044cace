"""Model: a Layer that trains itself and saves its states.

Subclass it, build layers in ``__init__``, compute in ``forward`` and write
one training step in ``train_one_batch``::

    class MLP(model.Model):
        def __init__(self):
            super().__init__()
            self.fc1 = layer.Linear(64)
            self.relu = layer.ReLU()
            self.fc2 = layer.Linear(2)
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss

    m = MLP()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m.compile([x], is_train=True)
    m.train()
    out, loss = m(x, y)          # train_one_batch
    m.eval()
    out = m(x)                   # forward

``train(mode=True)`` and ``eval()`` set ``autograd.training`` (globally, as
SINGA does), so a hand-written step outside ``train_one_batch`` (a GAN's)
records and trains; ``compile(..., is_train)`` sets it too. Calling the
model runs inside ``autograd.train_mode(self.training)`` as well, so the
model's own mode holds for its call whatever the flag says.

Checkpoints: ``save_states`` writes singa's format (singa.checkpoint);
``load_states`` reads it and also a checkpoint written by Apache SINGA's
``save_states`` (a zip of ``tensor_dict.npz`` and ``states_attr.json``),
whose model states are loaded and whose aux states are returned as Tensors.

Graph mode (SINGA's fast path): ``compile(inputs, use_graph=True)`` or
``graph(True)`` makes the first call record the whole step (forward,
backward and the optimizer's update) into the device's graph; later calls
with inputs of the same shapes copy the new inputs in and replay the step in
C++, in recorded order when ``sequential`` is set, else in any order the
dependencies allow. Intermediate buffers are freed after their last use in
each replay. The outputs returned are the same tensors each time, holding
the latest step's values (as in SINGA). Other shapes record again; a step
that reads values on the host mid-step falls back to eager execution with a
warning. See doc/graph.md.
"""

import functools
import json
import os

import numpy as np

from singa import autograd
from singa import checkpoint
from singa._graph_step import StepGraph
from singa import tensor as _tensor
from singa.layers.base import Layer, LayerMeta

__all__ = ["ModelMeta", "Model"]

_MODEL = "model/"
_OPT = "optimizer/"
_AUX = "aux/"


def _optimizer_kind(optimizer):
    """The optimizer class a checkpoint records: a DistOpt records the one
    it wraps, so that states saved in a distributed run load in a single
    process and back."""
    return type(getattr(optimizer, "opt", optimizer)).__name__


class ModelMeta(LayerMeta):
    """SINGA's metaclass of models: LayerMeta's wrapping, plus
    ``buffer_operation`` on the ``train_one_batch`` a class defines."""

    @staticmethod
    def buffer_operation(func):
        """Marks func as the step graph mode buffers. The recording and
        replay happen in ``Model.__call__``, which runs train_one_batch, so
        the function itself runs unchanged."""
        if getattr(func, "_singa_buffered", False):
            return func

        @functools.wraps(func)
        def train_one_batch(self, *args, **kwargs):
            return func(self, *args, **kwargs)
        train_one_batch._singa_buffered = True
        return train_one_batch

    def __new__(mcs, name, bases, attrs):
        fn = attrs.get("train_one_batch")
        if callable(fn):
            attrs["train_one_batch"] = ModelMeta.buffer_operation(fn)
        return super().__new__(mcs, name, bases, attrs)


class Model(Layer, metaclass=ModelMeta):
    """Base class of trainable models (see the module doc)."""

    def __init__(self):
        super().__init__()
        self.__dict__.update(training=True, graph_mode=False, sequential=False,
                             optimizer=None, _compiled=False, _graph=StepGraph())

    # ---- modes ----

    def compile(self, inputs, is_train=True, use_graph=False, sequential=False):
        """Creates every parameter by running forward once on inputs.

        inputs is a list of Tensors shaped like a real batch. The run uses
        evaluation behaviour (no dropout, no running-statistics update) and
        records no graph, so it changes nothing but the parameters' creation.
        use_graph turns on graph mode and sequential its in-order replay
        (see the module doc).
        """
        if isinstance(inputs, _tensor.Tensor):
            inputs = [inputs]
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError(f"Model.compile: inputs must be a non-empty list of Tensors, "
                            f"got {type(inputs).__name__}")
        for i, x in enumerate(inputs):
            if not isinstance(x, _tensor.Tensor):
                raise TypeError(f"Model.compile: input {i} is a {type(x).__name__}, "
                                "not a singa Tensor")
        self.graph(False)
        self.graph(use_graph, sequential)
        with autograd.train_mode(False):
            self._init_once(*inputs)
            self.forward(*inputs)
        self.train(is_train)
        self.__dict__["_compiled"] = True

    def _init_for_call(self, inputs):
        # A model that overrides initialize gets forward's inputs (LayerMeta's
        # forward wrapper calls it, as in SINGA): train_one_batch's arguments
        # (x, y, ...) need not be what initialize takes.
        if self._initialized or (self.training and _overrides_initialize(type(self))):
            return
        self._init_once(*inputs)

    def _init_once(self, *inputs):
        if not self._initialized:
            self._run_initialize(inputs, {})

    def train(self, mode=True):
        """Training behaviour on (mode=True) or off, for this model and for
        autograd (``autograd.training``, as SINGA); returns self."""
        self.__dict__["training"] = bool(mode)
        autograd.training = bool(mode)
        return self

    def eval(self):
        """Evaluation behaviour: calling the model runs forward, and
        ``autograd.training`` is off."""
        return self.train(False)

    def graph(self, mode=True, sequential=False):
        """Graph mode on or off, and in-order (sequential) replay; returns
        self. Turning it off drops the recorded graph."""
        self.__dict__["graph_mode"] = bool(mode)
        self.__dict__["sequential"] = bool(sequential)
        if not mode:
            self._graph.drop()
        return self

    def set_optimizer(self, optimizer):
        from singa import opt
        if not isinstance(optimizer, (opt.Optimizer, opt.DistOpt)):
            raise TypeError(f"Model.set_optimizer: expected a singa.opt.Optimizer or DistOpt, "
                            f"got {type(optimizer).__name__}")
        self.__dict__["optimizer"] = optimizer
        self._graph.drop()  # a recorded step updates through the old one

    # ---- running ----

    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def train_one_batch(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.train_one_batch")

    def __call__(self, *inputs, **kwargs):
        """train_one_batch in training mode, forward in evaluation mode."""
        with autograd.train_mode(self.training):
            self._init_for_call(inputs)
            step = self.train_one_batch if self.training else self.forward
            if self.graph_mode:
                return self._graph.call(self, step, inputs, kwargs, self.sequential)
            return step(*inputs, **kwargs)

    # ---- checkpoints ----

    def to_onnx(self, inputs, **kwargs):
        """This model as an onnx.ModelProto, traced from example inputs
        (see singa.sonnx.export_model for the keyword arguments)."""
        from singa import sonnx  # onnx is an optional dependency
        return sonnx.export_model(self, inputs, **kwargs)

    def save_states(self, fpath, aux_states={}):  # noqa: B006 (SINGA's signature; not mutated)
        """Saves parameters, states, the optimizer's states and aux_states.

        aux_states maps names to Tensors, NumPy arrays or JSON values (epoch
        numbers, settings). The write is atomic (see singa.checkpoint); an
        existing file is replaced.
        """
        if not self._initialized:
            raise ValueError(f"{type(self).__name__}.save_states: the model has no parameters "
                             "yet; call compile() or run a batch first")
        arrays = {}
        for name, t in self.get_states().items():
            arrays[_MODEL + name] = t.numpy()
        opt_meta = None
        if self.optimizer is not None:
            opt_meta = _optimizer_kind(self.optimizer)
            for key, v in _flatten(self.optimizer.get_states()).items():
                arrays[_OPT + key] = v.numpy() if isinstance(v, _tensor.Tensor) else np.asarray(v)
        aux_json, aux_tensors = {}, []
        for key, v in (aux_states or {}).items():
            if not isinstance(key, str):
                raise TypeError(f"save_states: aux_states keys must be strings, got {key!r}")
            if isinstance(v, _tensor.Tensor):
                arrays[_AUX + key] = v.numpy()
                aux_tensors.append(key)
            elif isinstance(v, np.ndarray):
                arrays[_AUX + key] = v
            else:
                try:
                    json.dumps(v)
                except (TypeError, ValueError):
                    raise TypeError(f"save_states: aux state {key!r} is a {type(v).__name__}; "
                                    "use a Tensor, a NumPy array or a JSON value") from None
                aux_json[key] = v
        meta = {"model": type(self).__name__, "optimizer": opt_meta, "aux": aux_json,
                "aux_tensors": aux_tensors}
        checkpoint.save(fpath, arrays, meta)

    def load_states(self, fpath):
        """Loads what save_states wrote, or a checkpoint written by Apache
        SINGA's save_states; returns the aux states (Tensors for tensors,
        NumPy arrays for arrays, JSON values as they were; a SINGA
        checkpoint's aux states are Tensors).

        Every entry is checked against the model before anything is copied:
        a missing, unexpected or mis-shaped parameter raises ValueError
        naming it and leaves the model unchanged.
        """
        if not self._initialized:
            raise ValueError(f"{type(self).__name__}.load_states: the model has no parameters "
                             "yet; call compile() with a sample batch first")
        fpath = os.fspath(fpath)
        if checkpoint.is_singa_format(fpath):
            return self._load_singa_states(fpath)
        arrays, meta = checkpoint.load(fpath)
        if not isinstance(meta, dict):
            raise ValueError(f"checkpoint {fpath!r} has no model metadata")
        model_vals = {k[len(_MODEL):]: v for k, v in arrays.items() if k.startswith(_MODEL)}
        opt_vals = {k[len(_OPT):]: v for k, v in arrays.items() if k.startswith(_OPT)}
        aux = {k[len(_AUX):]: v for k, v in arrays.items() if k.startswith(_AUX)}
        for key in meta.get("aux_tensors") or ():
            if key in aux:
                aux[key] = _tensor.from_numpy(aux[key])
        aux.update(meta.get("aux") or {})

        self._check_model_states(fpath, model_vals)
        if self.optimizer is not None and opt_vals:
            self._check_optimizer_states(fpath, opt_vals, meta.get("optimizer"))
        self.set_states(model_vals)
        if self.optimizer is not None and opt_vals:
            self.optimizer.set_states(opt_vals)
            self._graph.drop()  # set_states may replace buffers a recorded step holds
        return aux

    def _load_singa_states(self, fpath):
        model_vals, aux = checkpoint.load_singa(fpath)
        self._check_model_states(fpath, model_vals)
        self.set_states(model_vals)
        return {k: _tensor.from_numpy(v) for k, v in aux.items()}

    def _check_model_states(self, fpath, model_vals):
        states = self.get_states()
        missing = sorted(set(states) - set(model_vals))
        extra = sorted(set(model_vals) - set(states))
        if missing:
            raise ValueError(f"checkpoint {fpath!r} lacks {missing[0]!r}"
                             f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} "
                             f"of {type(self).__name__}")
        if extra:
            raise ValueError(f"checkpoint {fpath!r} holds {extra[0]!r}, which "
                             f"{type(self).__name__} does not have")
        bad = [n for n in states if tuple(model_vals[n].shape) != tuple(states[n].shape)]
        if bad:
            n = bad[0]
            more = f" ({len(bad) - 1} more mismatched)" if len(bad) > 1 else ""
            raise ValueError(f"checkpoint {fpath!r}: {n!r} has shape "
                             f"{tuple(model_vals[n].shape)} but the model's has shape "
                             f"{tuple(states[n].shape)}{more}")
        want = {np.float32: _tensor.float32, np.float16: _tensor.float16,
                np.int32: _tensor.int32}
        for n, arr in model_vals.items():
            if want.get(arr.dtype.type) != states[n].dtype:
                raise TypeError(f"checkpoint {fpath!r}: {n!r} is {arr.dtype} but the model's "
                                f"is {_tensor.dtype_name(states[n].dtype)}")

    def _check_optimizer_states(self, fpath, opt_vals, saved_class):
        kind = _optimizer_kind(self.optimizer)
        if saved_class is not None and saved_class != kind:
            raise ValueError(f"checkpoint {fpath!r} holds {saved_class} states but the model's "
                             f"optimizer is {kind}")
        params = {t.name: t for t in self.get_params().values()}
        for key, arr in opt_vals.items():
            if key == "step_counter":
                continue
            _, _, pname = key.partition("/")
            p = params.get(pname)
            if p is None:
                raise ValueError(f"checkpoint {fpath!r}: optimizer state {key!r} is for a "
                                 f"parameter {pname!r} the model does not have")
            if tuple(arr.shape) != tuple(p.shape):
                raise ValueError(f"checkpoint {fpath!r}: optimizer state {key!r} has shape "
                                 f"{tuple(arr.shape)} but parameter {pname!r} has shape "
                                 f"{tuple(p.shape)}")


def _overrides_initialize(cls):
    return any("initialize" in vars(c) for c in cls.__mro__
               if c not in (Model, Layer, object))


def _flatten(states, prefix=""):
    """{"step_counter": n, "m": {"fc.W": t}} -> {"step_counter": n, "m/fc.W": t}."""
    flat = {}
    for key, value in states.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}/"))
        else:
            flat[prefix + key] = value
    return flat
