"""Optimizers and learning-rate schedules.

An optimizer updates parameters in place from their gradients::

    sgd = opt.SGD(lr=0.1, momentum=0.9)
    loss = autograd.softmax_cross_entropy(model(x), y)
    sgd(loss)                    # backward, update every parameter, step()

``apply(name, param, grad)`` updates one parameter; ``step()`` advances the
step counter. The counter, ``step_counter``, and the learning rate at the
current step, ``lr_value``, are tensors of shape (1,) on the parameters'
device, and so are the other values that change with the step (Adam's bias
corrections). ``step()`` advances them in place with tensor ops and every
update reads them from their tensors (``AxpyTensor`` scales by a tensor),
so a training step needs no value from the device and a recorded graph
(``Model.compile(use_graph=True)``) uses the current learning rate each
time it is replayed. Every update runs as C++ tensor ops in place on the
parameter's device; nothing is staged through NumPy.

Momentum, dampening and weight decay (SGD) and weight decay (the others)
may be schedulers too; their current values are the tensors ``mom_value``,
``dam_value`` and ``decay_value``. A constant is applied as a plain scalar.

``get_states()`` uses SINGA's keys: ``{"step_counter": n, "moments":
{param name: Tensor}}`` for SGD with momentum, ``running_average`` for
RMSProp, ``history`` for AdaGrad, ``m`` and ``v`` for Adam. ``set_states``
takes that form, or the flat ``"<kind>/<param name>"`` keys a checkpoint
stores. Buffers are keyed by the parameter's name; parameters without a
name are named after their ``id`` (stable only for the life of the
process, so name parameters that you checkpoint).

``__call__(loss)`` is ``call(loss)`` (backward and ``apply`` for every
parameter) followed by ``step()``. ``update(param, grad)`` and
``backward_and_update(loss)`` are SINGA's deprecated spellings of
``apply(param.name, param, grad)`` and ``__call__(loss)``.
"""

import math
import numbers
import sys
import warnings

import numpy as np

from singa import singa_wrap as _cw
from singa import device as _device
from singa import tensor as _tensor

__all__ = ["DecayScheduler", "Constant", "ExponentialDecay", "Optimizer",
           "SGD", "RMSProp", "AdaGrad", "Adam", "AdamW"]
__all__ += ["DistOpt"]


def __getattr__(name):
    # DistOpt lives in singa._dist and is imported on first use, so that
    # importing singa.opt never loads the distributed machinery.
    if name == "DistOpt":
        from singa._dist.distopt import DistOpt
        return DistOpt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- learning-rate schedules ----

class DecayScheduler:
    """A value that depends on the training step.

    ``sched(step)`` with the step counter (a Tensor of shape (1,)) returns a
    Tensor of that shape, computed with tensor ops on its device (SINGA's
    ``call(step)``); with a plain number it returns a float (handy to print
    or plot a schedule). A SINGA-style subclass overrides ``call(step)``;
    singa's own define ``value(step)`` on floats and ``tensor_value(step)``.
    """

    # A constant needs no recomputing when the step advances.
    is_constant = False

    def __init__(self, init_value):
        self.init_value = float(init_value)

    def __call__(self, step):
        if isinstance(step, _tensor.Tensor):
            return self.call(step)
        if type(self).value is not DecayScheduler.value:
            return float(self.value(float(step)))
        t = _tensor.Tensor((1,), requires_grad=False).set_value(float(step))
        return float(self.call(t))

    def call(self, step):
        """The value at step (a Tensor), as a Tensor."""
        return self.tensor_value(step)

    def value(self, step):
        raise NotImplementedError(f"{type(self).__name__}.value")

    def tensor_value(self, step):
        raise NotImplementedError(f"{type(self).__name__}.call")


class Constant(DecayScheduler):
    """The same value at every step."""

    is_constant = True

    def value(self, step):
        return self.init_value

    def tensor_value(self, step):
        return _filled(step, self.init_value)


class ExponentialDecay(DecayScheduler):
    """init_value * decay_rate ** (step / decay_steps).

    With staircase the exponent is rounded down, so the value drops once
    every decay_steps steps.
    """

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super().__init__(init_value)
        if decay_steps <= 0:
            raise ValueError(f"ExponentialDecay: decay_steps must be > 0, got {decay_steps}")
        if decay_rate <= 0:
            raise ValueError(f"ExponentialDecay: decay_rate must be > 0, got {decay_rate}")
        self.decay_steps = decay_steps
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)

    def value(self, step):
        e = step / self.decay_steps
        if self.staircase:
            e = math.floor(e)
        return self.init_value * self.decay_rate ** e

    def tensor_value(self, step):
        # A division (not a multiplication by 1 / decay_steps) keeps whole
        # multiples of decay_steps exact, so the staircase steps on time.
        e = step / float(self.decay_steps)
        if self.staircase:
            e = _tensor.floor(e)
        return self.init_value * (self.decay_rate ** e)


def _filled(like, value):
    """A tensor shaped like like, on its device, filled with value."""
    t = _tensor.from_raw_tensor(_cw.Tensor(like.shape, like.device, like.dtype))
    return t.set_value(value)


def _as_scheduler(value, what, low=0.0, high=math.inf, allow_callable=False):
    """A DecayScheduler for value (a number is a Constant, checked to lie
    in [low, high]; a scheduler's init_value is checked too)."""
    if isinstance(value, DecayScheduler):
        start = value.init_value
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        start = float(value)
        value = Constant(start)
    elif allow_callable and callable(value):
        return value
    else:
        raise TypeError(f"{what} must be a number or a scheduler, got {type(value).__name__}")
    if not low <= start <= high:
        bound = f"in [{low}, {high}]" if high != math.inf else f">= {low}"
        raise ValueError(f"{what} must be {bound}, got {start}")
    return value


def _constant(sched):
    """The value of a constant scheduler, else None."""
    return sched.init_value if getattr(sched, "is_constant", False) else None


def _deprecated(what, instead):
    # singa's own callers (DistOpt drives optimizers through update, as the
    # design's contract says) are not warned; user code is.
    caller = sys._getframe(2).f_globals.get("__name__", "")
    if caller == "singa" or caller.startswith("singa."):
        return
    warnings.warn(f"{what} is deprecated; use {instead}", DeprecationWarning, stacklevel=3)


def _check_range(name, value, low, high, where):
    if isinstance(value, DecayScheduler) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{where}: {name} must be in [{low}, {high}], got {value}")


# ---- optimizers ----

class Optimizer:
    """Base class. Subclasses implement ``apply``.

    Args:
        lr: the learning rate, a number or a scheduler called with the
            step counter (or any function of the counter tensor).
        dtype: the dtype of the parameters (float32 or float16). The step
            counter and the scheduled values are float32 either way (float16
            parameters are updated in float32 arithmetic, as singa computes
            float16).

    Subclasses with values of their own that follow the step keep them as
    tensors listed by ``_schedule_tensors`` and recompute them in
    ``_schedule``; state that ``step()`` advances goes in ``_advance``.
    """

    def __init__(self, lr, dtype=_tensor.float32):
        self.lr = _as_scheduler(lr, f"{type(self).__name__}: lr", allow_callable=True)
        if dtype not in (_tensor.float32, _tensor.float16):
            raise TypeError(f"{type(self).__name__}: dtype must be tensor.float32 or "
                            f"tensor.float16, got {dtype!r}")
        self.dtype = dtype
        self._states = {}    # "<kind>/<param name>" -> Tensor
        self._scratch_cache = {}
        self._grads_owned = False
        # Scheduled values start on the default device and follow the
        # parameters to theirs on the first update. They are made here,
        # outside any recorded step, so a graph never refills them.
        dev = _device.get_default_device()
        self._device_id = dev.id()
        for name in self._schedule_tensors():
            setattr(self, name, _tensor.Tensor((1,), dev, _tensor.float32, requires_grad=False))
        self._restart()

    # -- driving --

    def __call__(self, loss):
        """Backward from loss, an update of every parameter, then step()."""
        self.call(loss)
        self.step()

    def call(self, loss):
        """Runs backward from loss and applies every gradient (no step())."""
        from singa import autograd  # only needed when the optimizer runs backward
        # backward hands out gradients the caller owns, so weight decay may
        # be added to them in place instead of into a copy.
        self._grads_owned = True
        try:
            for p, g in autograd.backward(loss):
                self.apply(self._name_of(p), p, g)
        finally:
            self._grads_owned = False

    def backward_and_update(self, loss):
        """Deprecated (SINGA): ``self(loss)``."""
        _deprecated("Optimizer.backward_and_update(loss)", "optimizer(loss)")
        self(loss)

    def update(self, param, grad):
        """Deprecated (SINGA): ``apply(param.name, param, grad)``."""
        _deprecated("Optimizer.update(param, grad)", "apply(param.name, param, grad)")
        self.apply(self._name_of(param), param, grad)

    def device_check(self, *inputs):
        """Moves every tensor to the first one's device, in place (SINGA)."""
        inputs = [x for x in inputs if x is not None]
        for i, x in enumerate(inputs):
            if not isinstance(x, _tensor.Tensor):
                raise TypeError(f"{type(self).__name__}.device_check: argument {i} is a "
                                f"{type(x).__name__}, not a Tensor")
        if not inputs:
            return
        dev = inputs[0].device
        for x in inputs[1:]:
            if x.device.id() != dev.id():
                x.to_device(dev)

    def apply(self, param_name, param_value, param_grad):
        """Updates param_value in place from param_grad (the buffers are
        kept under param_name)."""
        raise NotImplementedError(f"{type(self).__name__}.apply")

    def step(self):
        """Advances step_counter and the values scheduled on it, in place."""
        self.step_counter += 1.0
        self._advance()
        self._schedule()

    # -- scheduled values --

    def _schedule_tensors(self):
        """Names of the attributes holding scheduled values, shape (1,)."""
        names = ["step_counter", "lr_value"]
        if getattr(self, "weight_decay", None) is not None:
            names.append("decay_value")
        return names

    def _advance(self):
        """Advances state kept alongside the counter (none by default)."""

    def _schedule(self, initial=False):
        """Recomputes lr_value (and subclasses' values) from the counter."""
        self._recompute(self.lr, self.lr_value, initial)
        if getattr(self, "weight_decay", None) is not None:
            self._recompute(self.weight_decay, self.decay_value, initial)

    def _recompute(self, sched, target, initial):
        """target (a (1,) tensor) = sched(step_counter), in place."""
        if initial or not getattr(sched, "is_constant", False):
            value = sched(self.step_counter)
            if isinstance(value, _tensor.Tensor):
                if value.dtype != target.dtype:
                    value = value.as_type(target.dtype)
                target.copy_data(value)
            else:
                target.set_value(value)

    def _ensure_device(self, dev):
        """Moves the scheduled values to dev (the parameters' device)."""
        if dev.id() == self._device_id:
            return
        with _device.unrecorded(dev):
            for name in self._schedule_tensors():
                getattr(self, name).to_device(dev)
        self._device_id = dev.id()

    # -- states --

    # SINGA's names for this optimizer's per-parameter buffers.
    _kinds = ()

    def get_states(self):
        """SINGA's form: {"step_counter": n, "<kind>": {param name: Tensor}}
        (kinds: see the module doc). The buffers are the optimizer's own."""
        states = {"step_counter": np.float32(self.step_counter.numpy()[0])}
        for kind in self._kinds:
            states[kind] = self._buffers(kind)
        return states

    def _buffers(self, kind):
        head = kind + "/"
        return {k[len(head):]: v for k, v in self._states.items() if k.startswith(head)}

    def set_states(self, states):
        """Restores what get_states returned (Tensors or NumPy arrays), or
        the flat "<kind>/<param name>" form a checkpoint holds."""
        where = f"{type(self).__name__}.set_states"
        if not isinstance(states, dict):
            raise TypeError(f"{where}: expected a dict, got {type(states).__name__}")
        flat = {}
        for key, value in states.items():
            if key == "step_counter":
                continue
            if key in self._kinds:
                if not isinstance(value, dict):
                    raise TypeError(f"{where}: {key!r} must map parameter names to values, "
                                    f"got {type(value).__name__}")
                for pname, v in value.items():
                    flat[f"{key}/{pname}"] = v
                continue
            kind, sep, pname = str(key).partition("/")
            kind = self._legacy_kinds.get(kind, kind)
            if not sep or kind not in self._kinds:
                raise ValueError(f"{where}: unknown state {key!r}; {type(self).__name__} keeps "
                                 f"step_counter{''.join(', ' + k for k in self._kinds)}")
            flat[f"{kind}/{pname}"] = value
        arrays = {}
        for key, value in flat.items():
            arr = value.numpy() if isinstance(value, _tensor.Tensor) else np.asarray(value)
            if arr.dtype.kind != "f":
                raise TypeError(f"{where}: state {key!r} has dtype {arr.dtype}; expected floats")
            arrays[key] = arr
        step = None
        if "step_counter" in states:
            step = states["step_counter"]
            if isinstance(step, _tensor.Tensor):
                step = step.numpy()
            step = np.asarray(step, dtype=np.float64)
            if step.size != 1 or not np.isfinite(step).all() or step.reshape(()) < 0:
                raise ValueError(f"{where}: step_counter must be one number >= 0, got {step!r}")
        # Everything was checked; now change state.
        if step is not None:
            self.step_counter.set_value(float(step.reshape(())))
            self._restart()
        for key, arr in arrays.items():
            old = self._states.get(key)
            if old is not None and tuple(old.shape) == arr.shape:
                old.copy_from_numpy(arr)
            else:
                np_dtype = np.float16 if self.dtype == _tensor.float16 else np.float32
                self._states[key] = _tensor.from_numpy(arr.astype(np_dtype))

    # Kinds older singa checkpoints used.
    _legacy_kinds = {"momentum": "moments"}

    def _restart(self):
        """Recomputes every scheduled value after the counter was set."""
        self._schedule(initial=True)

    # -- helpers for subclasses --

    @staticmethod
    def _name_of(param):
        if param.name is None:
            param.name = str(id(param))
        return param.name

    def _check(self, param_name, param, grad):
        if not isinstance(param, _tensor.Tensor) or not isinstance(grad, _tensor.Tensor):
            raise TypeError(f"{type(self).__name__}: param and grad of {param_name!r} must be "
                            f"Tensors, got {type(param).__name__} and {type(grad).__name__}")
        pd, gd = param.data, grad.data
        if pd.shape() != gd.shape():
            raise ValueError(f"{type(self).__name__}: gradient of shape {grad.shape} does not "
                             f"match parameter {param_name!r} of shape {param.shape}")
        if pd.data_type() != gd.data_type():
            raise TypeError(f"{type(self).__name__}: gradient dtype "
                            f"{_tensor.dtype_name(grad.dtype)} differs from parameter "
                            f"{param_name!r} dtype {_tensor.dtype_name(param.dtype)}")
        dev = pd.device()
        if dev.id() != self._device_id:
            self._ensure_device(dev)

    def _state(self, kind, param_name, param):
        """The buffer kind/param_name (zeros on the first call)."""
        key = f"{kind}/{param_name}"
        buf = self._states.get(key)
        if buf is None:
            # Made and zeroed now even inside a recorded step: a graph that
            # zeroed it would do so at every replay.
            dev = param.device
            with _device.unrecorded(dev):
                buf = _tensor.Tensor(param.shape, dev, param.dtype)
            self._states[key] = buf
        else:
            bd, pd = buf.data, param.data
            if bd.shape() != pd.shape():
                raise ValueError(f"{type(self).__name__}: state {key!r} has shape {buf.shape} "
                                 f"but parameter {param_name!r} has shape {param.shape}")
            if bd.device().id() != pd.device().id():
                with _device.unrecorded(param.device):
                    buf.to_device(param.device)
        return buf

    def _scratch(self, param, slot):
        """A temporary buffer shaped like param, reused across parameters and
        steps (slot tells apart buffers needed at the same time)."""
        key = (slot, tuple(param.shape), param.device.id(), param.dtype)
        buf = self._scratch_cache.get(key)
        if buf is None:
            with _device.unrecorded(param.device):
                buf = _tensor.Tensor(param.shape, param.device, param.dtype)
            self._scratch_cache[key] = buf
        return buf

    def _decayed(self, param, grad):
        """grad + weight_decay * param; grad itself changes only when it is
        one that backward handed to this optimizer."""
        wd = _constant(self.weight_decay)
        if wd == 0:
            return grad
        if self._grads_owned:
            g = grad
        else:
            g = self._scratch(param, 0)
            g.data.CopyData(grad.data)
        if wd is None:
            _cw.AxpyTensor(1.0, self.decay_value.data, param.data, g.data)
        else:
            _cw.Axpy(wd, param.data, g.data)
        return g

    def _fused_decay(self, param, grad):
        """(gradient, weight decay) for a one-pass C++ step: a constant decay
        goes to the step as a number; a scheduled one is a tensor, added to
        the gradient here."""
        wd = _constant(self.weight_decay)
        if wd is None:
            return self._decayed(param, grad), 0.0
        return grad, wd

    def _step_by(self, scale, direction, param):
        """param += scale * lr_value * direction."""
        _cw.AxpyTensor(scale, self.lr_value.data, direction.data, param.data)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as PyTorch's SGD::

        g = grad + weight_decay * p
        buf = g                                   (first step)
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    momentum, dampening and weight_decay may be schedulers; their values are
    ``mom_value``, ``dam_value`` and ``decay_value``. The buffer starts at
    zero, so "buf = g" on the first step is the general formula with the g
    coefficient 1 at step 0 (a scheduled value when dampening is used): no
    step is special-cased in Python.
    """

    def __init__(self, lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 dtype=_tensor.float32):
        self.momentum = _as_scheduler(momentum, "SGD: momentum", 0.0, 1.0)
        self.dampening = _as_scheduler(dampening, "SGD: dampening", 0.0, 1.0)
        self.weight_decay = _as_scheduler(weight_decay, "SGD: weight_decay")
        self.nesterov = bool(nesterov)
        if nesterov and (self.momentum.init_value <= 0 or _constant(self.dampening) != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening == 0")
        super().__init__(lr, dtype)

    @property
    def _kinds(self):
        return () if _constant(self.momentum) == 0 else ("moments",)

    @property
    def moments(self):
        """{param name: momentum buffer} (SINGA's attribute)."""
        return self._buffers("moments")

    def _uses_coef(self):
        return _constant(self.momentum) != 0 and _constant(self.dampening) != 0

    def _schedule_tensors(self):
        names = super()._schedule_tensors() + ["mom_value", "dam_value"]
        if self._uses_coef():
            names.append("_grad_coef")
        if self.nesterov and _constant(self.momentum) is None:
            names.append("_lr_mom")
        return names

    def _schedule(self, initial=False):
        super()._schedule(initial)
        self._recompute(self.momentum, self.mom_value, initial)
        self._recompute(self.dampening, self.dam_value, initial)
        if self._uses_coef():
            # 1 at step 0, 1 - dampening after: 1 - dampening * min(step, 1)
            c = self._grad_coef.data
            _cw.MinimumScalarInto(self.step_counter.data, 1.0, c)
            d = _constant(self.dampening)
            if d is None:
                _cw.MulInto(c, self.dam_value.data, c)
                _cw.MulScalarInto(c, -1.0, c)
            else:
                _cw.MulScalarInto(c, -d, c)
            _cw.AddScalarInto(c, 1.0, c)
        if self.nesterov and _constant(self.momentum) is None:
            _cw.MulInto(self.lr_value.data, self.mom_value.data, self._lr_mom.data)

    def apply(self, param_name, param_value, param_grad):
        param, grad = param_value, param_grad
        self._check(param_name, param, grad)
        mom = _constant(self.momentum)
        if mom and _constant(self.dampening) == 0:
            wd = _constant(self.weight_decay)
            if wd is not None:
                # constant momentum and decay, no dampening: one C++ pass
                # (the steps below, rounded alike; grad is left as it is)
                buf = self._state("moments", param_name, param)
                _cw.SGDMomentumStep(self.lr_value.data, mom, wd, self.nesterov, grad.data,
                                    buf.data, param.data)
                return
        g = self._decayed(param, grad)
        if mom != 0:
            buf = self._state("moments", param_name, param)
            if mom is not None and not self._uses_coef():
                _cw.Axpby(1.0, g.data, mom, buf.data)   # one pass: buf = mom * buf + g
            else:
                if mom is None:
                    _cw.MulInto(buf.data, self.mom_value.data, buf.data)
                else:
                    _cw.MulScalarInto(buf.data, mom, buf.data)
                if self._uses_coef():
                    _cw.AxpyTensor(1.0, self._grad_coef.data, g.data, buf.data)
                else:
                    _cw.AddInto(buf.data, g.data, buf.data)
            if self.nesterov:
                self._step_by(-1.0, g, param)
                if mom is None:
                    _cw.AxpyTensor(-1.0, self._lr_mom.data, buf.data, param.data)
                else:
                    self._step_by(-mom, buf, param)
                return
            g = buf
        self._step_by(-1.0, g, param)


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton), as PyTorch's with alpha = rho::

        s = rho * s + (1 - rho) * g^2
        p = p - lr * g / (sqrt(s) + epsilon)
    """

    _kinds = ("running_average",)

    def __init__(self, lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0, dtype=_tensor.float32):
        _check_range("rho", rho, 0.0, 1.0, "RMSProp")
        if not isinstance(epsilon, numbers.Real) or epsilon <= 0:
            raise ValueError(f"RMSProp: epsilon must be > 0, got {epsilon!r}")
        self.rho = float(rho)
        self.epsilon = float(epsilon)
        self.weight_decay = _as_scheduler(weight_decay, "RMSProp: weight_decay")
        super().__init__(lr, dtype)

    @property
    def running_average(self):
        return self._buffers("running_average")

    def apply(self, param_name, param_value, param_grad):
        param, grad = param_value, param_grad
        self._check(param_name, param, grad)
        g, wd = self._fused_decay(param, grad)
        s = self._state("running_average", param_name, param)
        # one C++ pass (the separate passes for other dtypes and devices)
        _cw.RMSPropStep(self.lr_value.data, self.rho, self.epsilon, wd, g.data, s.data,
                        param.data)


class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011), as PyTorch's::

        s = s + g^2
        p = p - lr * g / (sqrt(s) + epsilon)
    """

    _kinds = ("history",)

    def __init__(self, lr=0.1, epsilon=1e-8, weight_decay=0, dtype=_tensor.float32):
        if not isinstance(epsilon, numbers.Real) or epsilon <= 0:
            raise ValueError(f"AdaGrad: epsilon must be > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.weight_decay = _as_scheduler(weight_decay, "AdaGrad: weight_decay")
        super().__init__(lr, dtype)

    @property
    def history(self):
        return self._buffers("history")

    def apply(self, param_name, param_value, param_grad):
        param, grad = param_value, param_grad
        self._check(param_name, param, grad)
        g, wd = self._fused_decay(param, grad)
        s = self._state("history", param_name, param)
        # one C++ pass (the separate passes for other dtypes and devices)
        _cw.AdaGradStep(self.lr_value.data, self.epsilon, wd, g.data, s.data, param.data)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), as PyTorch's, with t = step + 1::

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        p = p - lr / (1 - beta_1^t) * m / (sqrt(v / (1 - beta_2^t)) + epsilon)

    weight_decay adds weight_decay * p to the gradient (L2, not AdamW).

    The bias corrections are tensors that follow the step. 1 - beta^t is
    kept as (1 - beta) * S_t with S_t = 1 + beta * S_(t-1), a sum that
    float32 holds to full precision, where 1 - beta^t itself would lose
    digits to cancellation (beta_2 = 0.999 is not exact in float32).
    """

    _kinds = ("m", "v")

    def __init__(self, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0,
                 dtype=_tensor.float32):
        where = type(self).__name__
        _check_range("beta_1", beta_1, 0.0, 1.0 - 1e-12, where)
        _check_range("beta_2", beta_2, 0.0, 1.0 - 1e-12, where)
        if not isinstance(epsilon, numbers.Real) or epsilon <= 0:
            raise ValueError(f"{where}: epsilon must be > 0, got {epsilon!r}")
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.weight_decay = _as_scheduler(weight_decay, f"{where}: weight_decay")
        super().__init__(lr, dtype)

    @property
    def m(self):
        return self._buffers("m")

    @property
    def v(self):
        return self._buffers("v")

    def _schedule_tensors(self):
        # _sum1, _sum2: S_t for beta_1, beta_2. _step_size: lr / (1 - beta_1^t).
        # _v_scale: 1 / sqrt(1 - beta_2^t).
        return super()._schedule_tensors() + ["_sum1", "_sum2", "_step_size", "_v_scale"]

    def _restart(self):
        t = int(self.step_counter.numpy()[0]) + 1
        for s, b in ((self._sum1, self.beta_1), (self._sum2, self.beta_2)):
            s.set_value((1.0 - b ** t) / (1.0 - b) if b < 1.0 else float(t))
        super()._restart()

    def _advance(self):
        for s, b in ((self._sum1, self.beta_1), (self._sum2, self.beta_2)):
            _cw.MulScalarInto(s.data, b, s.data)
            _cw.AddScalarInto(s.data, 1.0, s.data)

    def _schedule(self, initial=False):
        super()._schedule(initial)
        a, v = self._step_size.data, self._v_scale.data
        _cw.MulScalarInto(self._sum1.data, 1.0 - self.beta_1, a)
        _cw.DivInto(self.lr_value.data, a, a)
        _cw.MulScalarInto(self._sum2.data, 1.0 - self.beta_2, v)
        _cw.PowScalarInto(v, -0.5, v)

    def _adam_step(self, param_name, param, grad, weight_decay, decay):
        # one C++ pass (the separate passes for other dtypes and devices):
        # param *= decay (when given), d = grad + weight_decay * param,
        # m and v updated from d, param -= step_size * m / (sqrt(v) * v_scale + epsilon)
        m = self._state("m", param_name, param)
        v = self._state("v", param_name, param)
        _cw.AdamStep(self._step_size.data, self._v_scale.data,
                     _cw.Tensor() if decay is None else decay, self.beta_1, self.beta_2,
                     self.epsilon, weight_decay, grad.data, m.data, v.data, param.data)

    def apply(self, param_name, param_value, param_grad):
        param, grad = param_value, param_grad
        self._check(param_name, param, grad)
        g, wd = self._fused_decay(param, grad)
        self._adam_step(param_name, param, g, wd, None)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as
    PyTorch's AdamW: p = p * (1 - lr * weight_decay) before the Adam step.
    (Not in SINGA; its defaults are PyTorch's.)"""

    def __init__(self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01,
                 dtype=_tensor.float32):
        super().__init__(lr, beta_1, beta_2, epsilon, weight_decay, dtype)

    def _schedule_tensors(self):
        # _decay: 1 - lr * weight_decay
        return super()._schedule_tensors() + ["_decay"]

    def _schedule(self, initial=False):
        super()._schedule(initial)
        d = self._decay.data
        wd = _constant(self.weight_decay)
        if wd is None:
            _cw.MulInto(self.lr_value.data, self.decay_value.data, d)
            _cw.MulScalarInto(d, -1.0, d)
        else:
            _cw.MulScalarInto(self.lr_value.data, -wd, d)
        _cw.AddScalarInto(d, 1.0, d)

    def apply(self, param_name, param_value, param_grad):
        param, grad = param_value, param_grad
        self._check(param_name, param, grad)
        decoupled = _constant(self.weight_decay) != 0
        self._adam_step(param_name, param, grad, 0.0, self._decay.data if decoupled else None)
