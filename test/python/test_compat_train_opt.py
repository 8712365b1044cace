"""SINGA's optimizer API (SINGA_API.md "singa.opt"): defaults, schedulers
for momentum, dampening and weight decay, SINGA-style schedulers, state
keys, the deprecated forms; values against NumPy."""

import inspect

import numpy as np
import pytest

from singa import autograd, opt, tensor

RNG = np.random.default_rng(3)


def _param(shape=(3, 2), name="w"):
    p = tensor.from_numpy(RNG.standard_normal(shape).astype(np.float32))
    p.name = name
    return p


def _grads(n=5, shape=(3, 2)):
    return [RNG.standard_normal(shape).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("cls,defaults", [
    (opt.SGD, dict(lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False)),
    (opt.RMSProp, dict(lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0)),
    (opt.AdaGrad, dict(lr=0.1, epsilon=1e-8, weight_decay=0)),
    (opt.Adam, dict(lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0)),
])
def test_singa_signatures_and_defaults(cls, defaults):
    sig = inspect.signature(cls)
    got = {k: v.default for k, v in sig.parameters.items() if k != "dtype"}
    assert got == defaults
    assert sig.parameters["dtype"].default == tensor.float32
    o = cls()
    assert float(o.lr_value) == pytest.approx(0.1)


def test_default_sgd_step_matches_numpy():
    p = _param()
    p0 = p.numpy().copy()
    g = _grads(1)[0]
    opt.SGD().apply("w", p, tensor.from_numpy(g))
    np.testing.assert_allclose(p.numpy(), p0 - 0.1 * g, rtol=1e-6)


class Halving(opt.DecayScheduler):
    """A SINGA-style scheduler: overrides call(step) on tensors."""

    def call(self, step):
        return self.init_value * (0.5 ** step)


def test_scheduled_momentum_dampening_and_weight_decay_match_numpy():
    mom = opt.ExponentialDecay(0.9, decay_steps=2, decay_rate=0.5)
    damp = Halving(0.4)
    wd = opt.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5, staircase=True)
    o = opt.SGD(lr=0.05, momentum=mom, dampening=damp, weight_decay=wd)
    assert isinstance(o.mom_value, tensor.Tensor) and o.mom_value.shape == (1,)
    p = _param()
    ref = p.numpy().astype(np.float64)
    buf = np.zeros_like(ref)
    for t, g in enumerate(_grads(6)):
        o.apply("w", p, tensor.from_numpy(g))
        o.step()
        m_t, d_t, wd_t = 0.9 * 0.5 ** (t / 2), 0.4 * 0.5 ** t, 0.1 * 0.5 ** t
        gd = g + wd_t * ref
        buf = gd if t == 0 else m_t * buf + (1 - d_t) * gd
        ref = ref - 0.05 * buf
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6, err_msg=f"step {t}")
    np.testing.assert_allclose(float(o.mom_value), 0.9 * 0.5 ** 3, rtol=1e-6)
    np.testing.assert_allclose(float(o.decay_value), 0.1 * 0.5 ** 6, rtol=1e-6)


def test_scheduled_nesterov_and_adam_weight_decay():
    mom = opt.ExponentialDecay(0.9, 1, 0.9)
    o = opt.SGD(lr=0.1, momentum=mom, nesterov=True)
    p = _param()
    ref = p.numpy().astype(np.float64)
    buf = np.zeros_like(ref)
    for t, g in enumerate(_grads(4)):
        o.apply("w", p, tensor.from_numpy(g))
        o.step()
        m_t = 0.9 * 0.9 ** t
        buf = m_t * buf + g
        ref = ref - 0.1 * (g + m_t * buf)
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6)
    a = opt.Adam(lr=0.01, weight_decay=Halving(0.2))
    p = _param()
    ref = p.numpy().astype(np.float64)
    m = v = 0.0
    for t, g in enumerate(_grads(4), start=1):
        a.apply("w", p, tensor.from_numpy(g))
        a.step()
        gd = g + 0.2 * 0.5 ** (t - 1) * ref
        m = 0.9 * m + 0.1 * gd
        v = 0.999 * v + 0.001 * gd * gd
        ref = ref - 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-4, atol=1e-6)


def test_schedulers_singa_style():
    step = tensor.from_numpy(np.array([2.0], np.float32))
    out = Halving(0.8)(step)
    assert isinstance(out, tensor.Tensor)
    np.testing.assert_allclose(tensor.to_numpy(out), [0.2])
    assert Halving(0.8)(3) == pytest.approx(0.1)
    c = opt.Constant(0.3).call(step)
    assert isinstance(c, tensor.Tensor) and c.shape == (1,)
    e = opt.ExponentialDecay(1.0, 2, 0.5, staircase=True).call(
        tensor.from_numpy(np.array([3.0], np.float32)))
    np.testing.assert_allclose(e.numpy(), [0.5])
    with pytest.raises(TypeError, match="momentum"):
        opt.SGD(momentum="high")
    with pytest.raises(ValueError, match="momentum must be in"):
        opt.SGD(momentum=opt.Constant(1.5))


def test_singa_state_keys_and_nested_set_states():
    o = opt.SGD(lr=0.1, momentum=0.9)
    p, q = _param(name="fc.W"), _param((2,), name="fc.b")
    for g in _grads(2):
        o.apply(p.name, p, tensor.from_numpy(g))
        o.apply(q.name, q, tensor.from_numpy(g[0, :2]))
        o.step()
    st = o.get_states()
    assert set(st) == {"step_counter", "moments"} and st["step_counter"] == 2
    assert set(st["moments"]) == {"fc.W", "fc.b"} and o.moments.keys() == st["moments"].keys()
    assert set(opt.SGD().get_states()) == {"step_counter"}  # no momentum, no moments
    assert set(opt.RMSProp().get_states()) == {"step_counter", "running_average"}
    assert set(opt.AdaGrad().get_states()) == {"step_counter", "history"}
    assert set(opt.Adam().get_states()) == {"step_counter", "m", "v"}
    fresh = opt.SGD(lr=0.1, momentum=0.9)
    fresh.set_states({"step_counter": 2,
                      "moments": {k: v.numpy() for k, v in st["moments"].items()}})
    assert float(fresh.step_counter) == 2
    np.testing.assert_array_equal(fresh.moments["fc.W"].numpy(), st["moments"]["fc.W"].numpy())
    with pytest.raises(ValueError, match="unknown state 'm/fc.W'"):
        fresh.set_states({"m/fc.W": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match="step_counter"):
        fresh.set_states({"step_counter": -1})
    assert float(fresh.step_counter) == 2


def _tiny_loss(w):
    autograd.training = True
    x = tensor.from_numpy(np.ones((1, 3), np.float32))
    return autograd.mse_loss(autograd.matmul(x, w),
                             tensor.from_numpy(np.zeros((1, 2), np.float32)))


def test_call_applies_without_stepping_and_call_operator_steps():
    w = _param((3, 2))
    w.requires_grad = w.stores_grad = True
    o = opt.SGD(lr=0.1)
    before = w.numpy().copy()
    o.call(_tiny_loss(w))
    assert float(o.step_counter) == 0 and not np.allclose(w.numpy(), before)
    o(_tiny_loss(w))
    assert float(o.step_counter) == 1


def test_deprecated_forms_warn_and_work():
    w = _param((3, 2))
    w.requires_grad = w.stores_grad = True
    o = opt.SGD(lr=0.1)
    g = np.ones((3, 2), np.float32)
    before = w.numpy().copy()
    with pytest.warns(DeprecationWarning, match="apply"):
        o.update(w, tensor.from_numpy(g))
    np.testing.assert_allclose(w.numpy(), before - 0.1, rtol=1e-6)
    with pytest.warns(DeprecationWarning, match="optimizer\\(loss\\)"):
        o.backward_and_update(_tiny_loss(w))
    assert float(o.step_counter) == 1


def test_device_check_moves_to_the_first_device():
    from singa import device
    other = device.create_separate_cpu_device()
    t = tensor.from_numpy(np.ones(2, np.float32), other)
    p = _param()
    opt.SGD().device_check(p, t)
    assert t.device.id() == p.device.id()


def test_float16_parameters_with_dtype():
    o = opt.SGD(lr=0.5, dtype=tensor.float16)
    p = tensor.from_numpy(np.ones(4, np.float16))
    o.apply("h", p, tensor.from_numpy(np.full(4, 0.5, np.float16)))
    np.testing.assert_allclose(p.numpy(), 0.75)
    with pytest.raises(TypeError, match="dtype"):
        opt.SGD(dtype=tensor.int32)
