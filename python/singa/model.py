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

Training mode is scoped: calling the model (and ``compile``) runs inside
``autograd.train_mode(self.training)``, so the global ``autograd.training``
flag is left as it was.

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

import json
import os

import numpy as np

from singa import autograd
from singa import checkpoint
from singa._graph_step import StepGraph
from singa import tensor as _tensor
from singa.layers.base import Layer

__all__ = ["Model"]

_MODEL = "model/"
_OPT = "optimizer/"
_AUX = "aux/"


def _optimizer_kind(optimizer):
    """The optimizer class a checkpoint records: a DistOpt records the one
    it wraps, so that states saved in a distributed run load in a single
    process and back."""
    return type(getattr(optimizer, "opt", optimizer)).__name__


class Model(Layer):
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

    def _init_once(self, *inputs):
        if not self._initialized:
            self._run_initialize(inputs, {})

    def train(self, mode=True):
        """Training behaviour on (mode=True) or off; returns self."""
        self.__dict__["training"] = bool(mode)
        return self

    def eval(self):
        """Evaluation behaviour: calling the model runs forward."""
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
            self._init_once(*inputs)
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

    def save_states(self, fpath, aux_states=None):
        """Saves parameters, states, the optimizer's states and aux_states.

        aux_states maps names to Tensors, NumPy arrays or JSON values (epoch
        numbers, settings). The write is atomic (see singa.checkpoint).
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
            for key, v in self.optimizer.get_states().items():
                arrays[_OPT + key] = v.numpy() if isinstance(v, _tensor.Tensor) else np.asarray(v)
        aux_json = {}
        for key, v in (aux_states or {}).items():
            if not isinstance(key, str):
                raise TypeError(f"save_states: aux_states keys must be strings, got {key!r}")
            if isinstance(v, _tensor.Tensor):
                arrays[_AUX + key] = v.numpy()
            elif isinstance(v, np.ndarray):
                arrays[_AUX + key] = v
            else:
                try:
                    json.dumps(v)
                except (TypeError, ValueError):
                    raise TypeError(f"save_states: aux state {key!r} is a {type(v).__name__}; "
                                    "use a Tensor, a NumPy array or a JSON value") from None
                aux_json[key] = v
        meta = {"model": type(self).__name__, "optimizer": opt_meta, "aux": aux_json}
        checkpoint.save(fpath, arrays, meta)

    def load_states(self, fpath):
        """Loads what save_states wrote; returns the aux states (NumPy arrays
        for tensors and arrays, JSON values as they were).

        Every entry is checked against the model before anything is copied:
        a missing, unexpected or mis-shaped parameter raises ValueError
        naming it and leaves the model unchanged.
        """
        if not self._initialized:
            raise ValueError(f"{type(self).__name__}.load_states: the model has no parameters "
                             "yet; call compile() with a sample batch first")
        fpath = os.fspath(fpath)
        arrays, meta = checkpoint.load(fpath)
        if not isinstance(meta, dict):
            raise ValueError(f"checkpoint {fpath!r} has no model metadata")
        model_vals = {k[len(_MODEL):]: v for k, v in arrays.items() if k.startswith(_MODEL)}
        opt_vals = {k[len(_OPT):]: v for k, v in arrays.items() if k.startswith(_OPT)}
        aux = {k[len(_AUX):]: v for k, v in arrays.items() if k.startswith(_AUX)}
        aux.update(meta.get("aux") or {})

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
        if self.optimizer is not None and opt_vals:
            self._check_optimizer_states(fpath, opt_vals, meta.get("optimizer"))
        self.set_states(model_vals)
        if self.optimizer is not None and opt_vals:
            self.optimizer.set_states(opt_vals)
            self._graph.drop()  # set_states may replace buffers a recorded step holds
        return aux

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
