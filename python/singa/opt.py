"""Optimizers and learning-rate schedules.

An optimizer updates parameters in place from their gradients::

    sgd = opt.SGD(lr=0.1, momentum=0.9)
    loss = autograd.softmax_cross_entropy(model(x), y)
    sgd(loss)                    # backward, update every parameter, step()

``apply(name, param, grad)`` updates one parameter; ``step()`` advances the
step counter that schedules and bias corrections read. Every update runs as
C++ tensor ops in place (axpy, ``*Into`` functions) on the parameter's
device; nothing is staged through NumPy.

``get_states()`` returns the step counter and the per-parameter buffers
(momentum, moments) keyed ``"<kind>/<param name>"``, so a checkpoint can
hold them next to the parameters. Buffers are keyed by the parameter's
name; parameters without a name are named after their ``id`` (stable only
for the life of the process, so name parameters that you checkpoint).
"""

import math
import numbers

import numpy as np

from singa import singa_wrap as _cw
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
    """A value that depends on the training step: ``sched(step) -> float``."""

    def __init__(self, init_value):
        self.init_value = float(init_value)

    def __call__(self, step):
        raise NotImplementedError


class Constant(DecayScheduler):
    """The same value at every step."""

    def __call__(self, step):
        return self.init_value


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

    def __call__(self, step):
        e = step / self.decay_steps
        if self.staircase:
            e = math.floor(e)
        return self.init_value * self.decay_rate ** e


def _as_scheduler(value, what):
    if isinstance(value, DecayScheduler):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{what} must be >= 0, got {value}")
        return Constant(value)
    if callable(value):
        return value
    raise TypeError(f"{what} must be a number or a scheduler, got {type(value).__name__}")


def _check_range(name, value, low, high, where):
    if not low <= value <= high:
        raise ValueError(f"{where}: {name} must be in [{low}, {high}], got {value}")


# ---- optimizers ----

class Optimizer:
    """Base class. Subclasses implement ``apply``.

    Args:
        lr: the learning rate, a number or a scheduler called with the step.
    """

    def __init__(self, lr):
        self.lr = _as_scheduler(lr, f"{type(self).__name__}: lr")
        self.step_counter = 0
        self._states = {}    # "<kind>/<param name>" -> Tensor
        self._scratch_cache = {}
        self._grads_owned = False

    # -- driving --

    def __call__(self, loss):
        self.call(loss)

    def call(self, loss):
        """Runs backward from loss, updates every parameter, then step()."""
        from singa import autograd  # only needed when the optimizer runs backward
        # backward hands out gradients the caller owns, so weight decay may
        # be added to them in place instead of into a copy.
        self._grads_owned = True
        try:
            for p, g in autograd.backward(loss):
                self.update(p, g)
        finally:
            self._grads_owned = False
        self.step()

    backward_and_update = call

    def update(self, param, grad):
        """Updates param from grad (named after the parameter)."""
        self.apply(self._name_of(param), param, grad)

    def apply(self, param_name, param, grad):
        raise NotImplementedError

    def step(self):
        """Advances the step counter read by schedules and bias corrections."""
        self.step_counter += 1

    def lr_value(self):
        """The learning rate at the current step."""
        return float(self.lr(self.step_counter))

    # -- states --

    def get_states(self):
        """{"step_counter": ndarray, "<kind>/<param>": Tensor, ...}."""
        states = {"step_counter": np.array(self.step_counter, dtype=np.int64)}
        states.update(self._states)
        return states

    def set_states(self, states):
        """Restores what get_states returned (Tensors or NumPy arrays)."""
        states = dict(states)
        if "step_counter" in states:
            step = states.pop("step_counter")
            if isinstance(step, _tensor.Tensor):
                step = step.numpy()
            self.step_counter = int(np.asarray(step).reshape(()))
        for key, value in states.items():
            if "/" not in key:
                raise ValueError(f"{type(self).__name__}.set_states: unknown state {key!r}")
            arr = value.numpy() if isinstance(value, _tensor.Tensor) else np.asarray(value)
            old = self._states.get(key)
            if old is not None and tuple(old.shape) == arr.shape:
                old.copy_from_numpy(arr.astype(np.float32))
            else:
                self._states[key] = _tensor.from_numpy(arr.astype(np.float32))

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
        if tuple(param.shape) != tuple(grad.shape):
            raise ValueError(f"{type(self).__name__}: gradient of shape {grad.shape} does not "
                             f"match parameter {param_name!r} of shape {param.shape}")
        if param.dtype != grad.dtype:
            raise TypeError(f"{type(self).__name__}: gradient dtype "
                            f"{_tensor.dtype_name(grad.dtype)} differs from parameter "
                            f"{param_name!r} dtype {_tensor.dtype_name(param.dtype)}")

    def _state(self, kind, param_name, param):
        """The buffer kind/param_name (zeros on the first call)."""
        key = f"{kind}/{param_name}"
        buf = self._states.get(key)
        if buf is None:
            buf = _tensor.Tensor(param.shape, param.device, param.dtype)
            self._states[key] = buf
        elif tuple(buf.shape) != tuple(param.shape):
            raise ValueError(f"{type(self).__name__}: state {key!r} has shape {buf.shape} but "
                             f"parameter {param_name!r} has shape {param.shape}")
        elif buf.device.id() != param.device.id():
            buf.to_device(param.device)
        return buf

    def _scratch(self, param, slot):
        """A temporary buffer shaped like param, reused across parameters and
        steps (slot tells apart buffers needed at the same time)."""
        key = (slot, tuple(param.shape), param.device.id(), param.dtype)
        buf = self._scratch_cache.get(key)
        if buf is None:
            buf = self._scratch_cache[key] = _tensor.Tensor(param.shape, param.device, param.dtype)
        return buf

    def _decayed(self, param, grad, weight_decay):
        """grad + weight_decay * param; grad itself changes only when it is
        one that backward handed to this optimizer."""
        if not weight_decay:
            return grad
        if self._grads_owned:
            _cw.Axpy(weight_decay, param.data, grad.data)
            return grad
        g = self._scratch(param, 0)
        g.data.CopyData(grad.data)
        _cw.Axpy(weight_decay, param.data, g.data)
        return g


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as PyTorch's SGD::

        g = grad + weight_decay * p
        buf = g                                   (first step)
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    """

    def __init__(self, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(lr)
        _check_range("momentum", momentum, 0.0, 1.0, "SGD")
        _check_range("dampening", dampening, 0.0, 1.0, "SGD")
        if weight_decay < 0:
            raise ValueError(f"SGD: weight_decay must be >= 0, got {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening == 0")
        self.momentum = float(momentum)
        self.dampening = float(dampening)
        self.weight_decay = float(weight_decay)
        self.nesterov = bool(nesterov)

    def apply(self, param_name, param, grad):
        self._check(param_name, param, grad)
        lr = self.lr_value()
        g = self._decayed(param, grad, self.weight_decay)
        if self.momentum:
            key = f"momentum/{param_name}"
            fresh = key not in self._states
            buf = self._state("momentum", param_name, param)
            if fresh:
                buf.data.CopyData(g.data)
            else:
                _cw.MulScalarInto(buf.data, self.momentum, buf.data)
                _cw.Axpy(1.0 - self.dampening, g.data, buf.data)
            if self.nesterov:
                _cw.Axpy(-lr, g.data, param.data)
                _cw.Axpy(-lr * self.momentum, buf.data, param.data)
                return
            g = buf
        _cw.Axpy(-lr, g.data, param.data)


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton), as PyTorch's with alpha = rho::

        s = rho * s + (1 - rho) * g^2
        p = p - lr * g / (sqrt(s) + epsilon)
    """

    def __init__(self, lr=0.01, rho=0.9, epsilon=1e-8, weight_decay=0.0):
        super().__init__(lr)
        _check_range("rho", rho, 0.0, 1.0, "RMSProp")
        if epsilon <= 0 or weight_decay < 0:
            raise ValueError(f"RMSProp: need epsilon > 0 and weight_decay >= 0, got "
                             f"{epsilon} and {weight_decay}")
        self.rho = float(rho)
        self.epsilon = float(epsilon)
        self.weight_decay = float(weight_decay)

    def apply(self, param_name, param, grad):
        self._check(param_name, param, grad)
        g = self._decayed(param, grad, self.weight_decay)
        s = self._state("running_average", param_name, param)
        _cw.MulScalarInto(s.data, self.rho, s.data)
        tmp = self._scratch(param, 1)
        _cw.SquareInto(g.data, tmp.data)
        _cw.Axpy(1.0 - self.rho, tmp.data, s.data)
        _cw.SqrtInto(s.data, tmp.data)
        _cw.AddScalarInto(tmp.data, self.epsilon, tmp.data)
        _cw.DivInto(g.data, tmp.data, tmp.data)
        _cw.Axpy(-self.lr_value(), tmp.data, param.data)


class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011), as PyTorch's::

        s = s + g^2
        p = p - lr * g / (sqrt(s) + epsilon)
    """

    def __init__(self, lr=0.01, epsilon=1e-10, weight_decay=0.0):
        super().__init__(lr)
        if epsilon <= 0 or weight_decay < 0:
            raise ValueError(f"AdaGrad: need epsilon > 0 and weight_decay >= 0, got "
                             f"{epsilon} and {weight_decay}")
        self.epsilon = float(epsilon)
        self.weight_decay = float(weight_decay)

    def apply(self, param_name, param, grad):
        self._check(param_name, param, grad)
        g = self._decayed(param, grad, self.weight_decay)
        s = self._state("history", param_name, param)
        tmp = self._scratch(param, 1)
        _cw.SquareInto(g.data, tmp.data)
        _cw.AddInto(s.data, tmp.data, s.data)
        _cw.SqrtInto(s.data, tmp.data)
        _cw.AddScalarInto(tmp.data, self.epsilon, tmp.data)
        _cw.DivInto(g.data, tmp.data, tmp.data)
        _cw.Axpy(-self.lr_value(), tmp.data, param.data)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), as PyTorch's, with t = step + 1::

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        p = p - lr / (1 - beta_1^t) * m / (sqrt(v / (1 - beta_2^t)) + epsilon)

    weight_decay adds weight_decay * p to the gradient (L2, not AdamW).
    """

    def __init__(self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.0):
        super().__init__(lr)
        where = type(self).__name__
        _check_range("beta_1", beta_1, 0.0, 1.0 - 1e-12, where)
        _check_range("beta_2", beta_2, 0.0, 1.0 - 1e-12, where)
        if epsilon <= 0 or weight_decay < 0:
            raise ValueError(f"{where}: need epsilon > 0 and weight_decay >= 0, got "
                             f"{epsilon} and {weight_decay}")
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.weight_decay = float(weight_decay)

    def _adam_step(self, param_name, param, g, lr):
        t = self.step_counter + 1
        bc1 = 1.0 - self.beta_1 ** t
        bc2 = 1.0 - self.beta_2 ** t
        m = self._state("m", param_name, param)
        v = self._state("v", param_name, param)
        _cw.MulScalarInto(m.data, self.beta_1, m.data)
        _cw.Axpy(1.0 - self.beta_1, g.data, m.data)
        tmp = self._scratch(param, 1)
        _cw.SquareInto(g.data, tmp.data)
        _cw.MulScalarInto(v.data, self.beta_2, v.data)
        _cw.Axpy(1.0 - self.beta_2, tmp.data, v.data)
        _cw.SqrtInto(v.data, tmp.data)
        _cw.MulScalarInto(tmp.data, 1.0 / math.sqrt(bc2), tmp.data)
        _cw.AddScalarInto(tmp.data, self.epsilon, tmp.data)
        _cw.DivInto(m.data, tmp.data, tmp.data)
        _cw.Axpy(-lr / bc1, tmp.data, param.data)

    def apply(self, param_name, param, grad):
        self._check(param_name, param, grad)
        g = self._decayed(param, grad, self.weight_decay)
        self._adam_step(param_name, param, g, self.lr_value())


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as
    PyTorch's AdamW: p = p * (1 - lr * weight_decay) before the Adam step."""

    def __init__(self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01):
        super().__init__(lr, beta_1, beta_2, epsilon, weight_decay)

    def apply(self, param_name, param, grad):
        self._check(param_name, param, grad)
        lr = self.lr_value()
        if self.weight_decay:
            _cw.MulScalarInto(param.data, 1.0 - lr * self.weight_decay, param.data)
        self._adam_step(param_name, param, grad, lr)
