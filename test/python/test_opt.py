"""Optimizers checked step by step against NumPy transcriptions of their
formulas, and against PyTorch's optimizers when torch is installed."""

import math

import numpy as np
import pytest

from singa import opt, tensor

STEPS = 6


def _param_and_grads(seed=0, shape=(4, 3)):
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(STEPS)]
    return p0, grads


def _run_singa(optimizer, p0, grads):
    p = tensor.from_numpy(p0)
    p.name = "w"
    out = []
    for g in grads:
        optimizer.apply(p.name, p, tensor.from_numpy(g))
        optimizer.step()
        out.append(p.numpy().copy())
    return out


# ---- NumPy references: one function per optimizer, the published formulas ----

def _np_sgd(p0, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, buf, out = p0.astype(np.float64), None, []
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def _np_rmsprop(p0, grads, lr, rho, eps, weight_decay=0.0):
    p, s, out = p0.astype(np.float64), 0.0, []
    for g in grads:
        g = g + weight_decay * p
        s = rho * s + (1 - rho) * g * g
        p = p - lr * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


def _np_adagrad(p0, grads, lr, eps, weight_decay=0.0):
    p, s, out = p0.astype(np.float64), 0.0, []
    for g in grads:
        g = g + weight_decay * p
        s = s + g * g
        p = p - lr * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


def _np_adam(p0, grads, lr, b1, b2, eps, weight_decay=0.0, decoupled=False):
    p, m, v, out = p0.astype(np.float64), 0.0, 0.0, []
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
        out.append(p)
    return out


CASES = [
    ("sgd", lambda: opt.SGD(lr=0.1),
     lambda p, g: _np_sgd(p, g, 0.1)),
    ("sgd-momentum", lambda: opt.SGD(lr=0.05, momentum=0.9),
     lambda p, g: _np_sgd(p, g, 0.05, momentum=0.9)),
    ("sgd-dampening-wd", lambda: opt.SGD(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
     lambda p, g: _np_sgd(p, g, 0.05, 0.8, 0.3, 0.01)),
    ("sgd-nesterov", lambda: opt.SGD(lr=0.05, momentum=0.9, weight_decay=0.1, nesterov=True),
     lambda p, g: _np_sgd(p, g, 0.05, 0.9, 0.0, 0.1, True)),
    ("rmsprop", lambda: opt.RMSProp(lr=0.01, rho=0.9, epsilon=1e-6, weight_decay=0.01),
     lambda p, g: _np_rmsprop(p, g, 0.01, 0.9, 1e-6, 0.01)),
    ("adagrad", lambda: opt.AdaGrad(lr=0.1, epsilon=1e-8, weight_decay=0.05),
     lambda p, g: _np_adagrad(p, g, 0.1, 1e-8, 0.05)),
    ("adam", lambda: opt.Adam(lr=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-7),
     lambda p, g: _np_adam(p, g, 0.01, 0.8, 0.99, 1e-7)),
    ("adam-wd", lambda: opt.Adam(lr=0.01, weight_decay=0.1),
     lambda p, g: _np_adam(p, g, 0.01, 0.9, 0.999, 1e-8, 0.1)),
    ("adamw", lambda: opt.AdamW(lr=0.01, weight_decay=0.1),
     lambda p, g: _np_adam(p, g, 0.01, 0.9, 0.999, 1e-8, 0.1, decoupled=True)),
]


@pytest.mark.parametrize("name,make,reference", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_formula(name, make, reference):
    p0, grads = _param_and_grads()
    got = _run_singa(make(), p0, grads)
    want = reference(p0, grads)
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{name} step {step}")


def _torch_cases(torch):
    return {
        "sgd": lambda p: torch.optim.SGD([p], lr=0.1),
        "sgd-momentum": lambda p: torch.optim.SGD([p], lr=0.05, momentum=0.9),
        "sgd-dampening-wd": lambda p: torch.optim.SGD([p], lr=0.05, momentum=0.8,
                                                      dampening=0.3, weight_decay=0.01),
        "sgd-nesterov": lambda p: torch.optim.SGD([p], lr=0.05, momentum=0.9,
                                                  weight_decay=0.1, nesterov=True),
        "rmsprop": lambda p: torch.optim.RMSprop([p], lr=0.01, alpha=0.9, eps=1e-6,
                                                 weight_decay=0.01),
        "adagrad": lambda p: torch.optim.Adagrad([p], lr=0.1, eps=1e-8, weight_decay=0.05),
        "adam": lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.99), eps=1e-7),
        "adam-wd": lambda p: torch.optim.Adam([p], lr=0.01, weight_decay=0.1),
        "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, weight_decay=0.1),
    }


@pytest.mark.parametrize("name,make", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_matches_pytorch(name, make, torch):
    p0, grads = _param_and_grads(seed=1)
    got = _run_singa(make(), p0, grads)
    tp = torch.nn.Parameter(torch.tensor(p0))
    topt = _torch_cases(torch)[name](tp)
    for step, g in enumerate(grads):
        tp.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(got[step], tp.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} step {step}")


def test_update_is_in_place():
    p = tensor.from_numpy(np.ones((3,), np.float32))
    p.name = "p"
    before = p.data
    opt.SGD(lr=0.5, momentum=0.9).apply("p", p, tensor.from_numpy(np.ones((3,), np.float32)))
    assert p.data is before
    np.testing.assert_allclose(p.numpy(), 0.5)


def test_grad_is_not_modified_by_weight_decay():
    p = tensor.from_numpy(np.ones((3,), np.float32))
    g = tensor.from_numpy(np.full((3,), 2.0, np.float32))
    opt.SGD(lr=0.1, weight_decay=0.5).apply("p", p, g)
    np.testing.assert_allclose(g.numpy(), 2.0)


def test_exponential_decay_schedule():
    sched = opt.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    assert sched(0) == pytest.approx(0.1)
    assert sched(1) == pytest.approx(0.1 * 0.5 ** 0.5)
    stair = opt.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5, staircase=True)
    assert [stair(s) for s in range(5)] == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.025])
    assert opt.Constant(0.3)(100) == pytest.approx(0.3)


def test_scheduled_lr_drives_sgd():
    p0, grads = _param_and_grads()
    sched = opt.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    got = _run_singa(opt.SGD(lr=sched), p0, grads)
    p = p0.astype(np.float64)
    for step, g in enumerate(grads):
        p = p - 0.1 * 0.5 ** step * g
        np.testing.assert_allclose(got[step], p, rtol=1e-5, atol=1e-6)


def test_states_round_trip_continues_identically():
    p0, grads = _param_and_grads()
    a = opt.Adam(lr=0.01)
    pa = tensor.from_numpy(p0)
    pa.name = "w"
    for g in grads[:3]:
        a.apply(pa.name, pa, tensor.from_numpy(g))
        a.step()
    states = a.get_states()
    # SINGA's keys: the counter and one dict of buffers per kind.
    assert set(states) == {"step_counter", "m", "v"} and states["step_counter"] == 3
    assert set(states["m"]) == {"w"} and set(states["v"]) == {"w"}
    states = {"step_counter": states["step_counter"],
              "m": {"w": states["m"]["w"].numpy()}, "v": {"w": states["v"]["w"].numpy()}}
    b = opt.Adam(lr=0.01)
    b.set_states(states)
    pb = tensor.from_numpy(pa.numpy())
    pb.name = "w"
    for g in grads[3:]:
        for o, p in ((a, pa), (b, pb)):
            o.apply(p.name, p, tensor.from_numpy(g))
            o.step()
    np.testing.assert_allclose(pa.numpy(), pb.numpy(), rtol=1e-6)


def test_errors_name_shapes_and_params():
    p = tensor.Tensor((2, 3))
    p.name = "fc.W"
    with pytest.raises(ValueError, match=r"fc\.W.*\(2, 3\)"):
        opt.SGD(0.1).apply(p.name, p, tensor.Tensor((3, 2)))
    with pytest.raises(TypeError, match="lr"):
        opt.SGD(lr="fast")
    with pytest.raises(ValueError, match="momentum"):
        opt.SGD(lr=0.1, momentum=1.5)
    with pytest.raises(ValueError, match="nesterov"):
        opt.SGD(lr=0.1, nesterov=True)
    o = opt.SGD(0.1, momentum=0.9)
    o.set_states({"moments": {"fc.W": np.zeros((5,), np.float32)}})
    with pytest.raises(ValueError, match=r"moments/fc\.W"):
        o.apply(p.name, p, tensor.Tensor((2, 3)))


def test_bias_correction_uses_step_counter():
    # Two parameters updated in the same step share t; the counter only
    # moves on step().
    o = opt.Adam(lr=0.1)
    x, y = tensor.from_numpy(np.zeros(2, np.float32)), tensor.from_numpy(np.zeros(2, np.float32))
    x.name, y.name = "x", "y"
    g = tensor.from_numpy(np.ones(2, np.float32))
    o.apply(x.name, x, g)
    o.apply(y.name, y, g)
    np.testing.assert_allclose(x.numpy(), y.numpy())
    # At t = 1 Adam moves each weight by lr (up to epsilon).
    np.testing.assert_allclose(x.numpy(), -0.1, rtol=1e-5)
    assert float(o.step_counter) == 0
    o.step()
    assert float(o.step_counter) == 1
    assert math.isclose(float(o.lr_value), 0.1, rel_tol=1e-7)


# ---- scheduled values are device tensors (doc/design.md "Optimizers") ----

def test_axpy_forms_match_numpy():
    from singa import singa_wrap as cw
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = rng.standard_normal((5, 7)).astype(np.float32)
    for alpha, scale in ((0.25, -1.0), (-3.0, 0.5)):
        ty, tx = tensor.from_numpy(y), tensor.from_numpy(x)
        cw.AxpyTensor(scale, tensor.from_numpy(np.array([alpha], np.float32)).data,
                      tx.data, ty.data)
        np.testing.assert_allclose(ty.numpy(), y + scale * alpha * x, rtol=1e-6, atol=1e-6)
    ty = tensor.from_numpy(y)
    cw.Axpby(0.3, tensor.from_numpy(x).data, 0.9, ty.data)
    np.testing.assert_allclose(ty.numpy(), 0.3 * x + 0.9 * y, rtol=1e-6, atol=1e-6)
    ti = tensor.from_numpy(np.arange(6, dtype=np.int32))
    cw.Axpby(2.0, tensor.from_numpy(np.ones(6, np.int32)).data, 3.0, ti.data)
    np.testing.assert_array_equal(ti.numpy(), 3 * np.arange(6) + 2)
    # a transposed x and a float16 y take the general path
    ty = tensor.from_numpy(y.T.copy())
    cw.AxpyTensor(2.0, tensor.from_numpy(np.array([0.5], np.float32)).data,
                  tensor.from_numpy(x).T.data, ty.data)
    np.testing.assert_allclose(ty.numpy(), (y + x).T, rtol=1e-6, atol=1e-6)
    h = tensor.from_numpy(y.astype(np.float16))
    cw.AxpyTensor(1.0, tensor.from_numpy(np.array([2.0], np.float32)).data,
                  tensor.from_numpy(x.astype(np.float16)).data, h.data)
    np.testing.assert_allclose(h.numpy(), (y.astype(np.float16) + 2 * x.astype(np.float16)),
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("shape", [(7,), (32769,), (33, 1031), (256, 300)])
@pytest.mark.parametrize("wd,nesterov", [(0.0, False), (0.01, False), (0.1, True)])
def test_sgd_momentum_step_matches_float64(shape, wd, nesterov, threads):
    # the fused pass against the formulas in float64, over odd sizes (SIMD
    # tails) and sizes that split across threads; the separate passes
    # (float16 and transposed views take them) against it
    from singa import singa_wrap as cw
    rng = np.random.default_rng(5)
    p0, g, b0 = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    lr, mom = 0.05, 0.9
    d = g.astype(np.float64) + wd * p0.astype(np.float64)
    b_want = mom * b0.astype(np.float64) + d
    step = d + mom * b_want if nesterov else b_want
    p_want = p0.astype(np.float64) - lr * step
    tp, tb, tg = (tensor.from_numpy(a) for a in (p0, b0, g))
    rate = tensor.from_numpy(np.array([lr], np.float32))
    cw.SGDMomentumStep(rate.data, mom, wd, nesterov, tg.data, tb.data, tp.data)
    np.testing.assert_allclose(tb.numpy(), b_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(tg.numpy(), g)
    if len(shape) == 2:
        tp, tb = tensor.from_numpy(p0), tensor.from_numpy(b0)
        tg = tensor.from_numpy(np.ascontiguousarray(g.T)).T
        cw.SGDMomentumStep(rate.data, mom, wd, nesterov, tg.data, tb.data, tp.data)
        np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
    hp, hb = tensor.from_numpy(p0.astype(np.float16)), tensor.from_numpy(b0.astype(np.float16))
    cw.SGDMomentumStep(rate.data, mom, wd, nesterov, tensor.from_numpy(g.astype(np.float16)).data,
                       hb.data, hp.data)
    np.testing.assert_allclose(hp.numpy(), p_want, rtol=5e-3, atol=5e-3)


def test_sgd_momentum_step_errors():
    from singa import singa_wrap as cw
    p, b = tensor.Tensor((2, 3)), tensor.Tensor((2, 3))
    lr = tensor.from_numpy(np.array([0.1], np.float32))
    with pytest.raises(ValueError, match=r"differ in size"):
        cw.SGDMomentumStep(lr.data, 0.9, 0.0, False, tensor.Tensor((4,)).data, b.data, p.data)
    with pytest.raises(ValueError, match=r"lr must have one element"):
        cw.SGDMomentumStep(tensor.Tensor((2,)).data, 0.9, 0.0, False, p.data, b.data, p.data)
    with pytest.raises(TypeError, match=r"int32"):
        cw.SGDMomentumStep(lr.data, 0.9, 0.0, False, tensor.Tensor((2, 3), dtype=tensor.int32).data,
                           b.data, p.data)


def _adam_want(p0, g, m0, v0, ss, vs, decay, wd, b1=0.9, b2=0.999, eps=1e-8):
    p, g, m, v = (a.astype(np.float64) for a in (p0, g, m0, v0))
    if decay is not None:
        p = p * decay
    d = g + wd * p
    m = b1 * m + (1 - b1) * d
    v = b2 * v + (1 - b2) * d * d
    return p - ss * m / (np.sqrt(v) * vs + eps), m, v


@pytest.mark.parametrize("shape", [(7,), (32769,), (33, 1031), (256, 300)])
@pytest.mark.parametrize("wd,decay", [(0.0, None), (0.01, None), (0.0, 0.995)])
def test_adam_step_matches_float64(shape, wd, decay, threads):
    # the fused pass (L2 decay, AdamW's decoupled decay, neither) against
    # the formulas in float64 over odd sizes and sizes split across
    # threads; transposed and float16 operands take the separate passes
    from singa import singa_wrap as cw
    rng = np.random.default_rng(6)
    p0, g, m0 = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    v0 = np.abs(rng.standard_normal(shape)).astype(np.float32)
    ss, vs = 0.01 / (1 - 0.9 ** 3), 1 / np.sqrt(1 - 0.999 ** 3)
    p_want, m_want, v_want = _adam_want(p0, g, m0, v0, ss, vs, decay, wd)

    def scalar(x):
        return tensor.from_numpy(np.array([x], np.float32)).data

    def run(tp, tg, tm, tv):
        cw.AdamStep(scalar(ss), scalar(vs), cw.Tensor() if decay is None else scalar(decay),
                    0.9, 0.999, 1e-8, wd, tg.data, tm.data, tv.data, tp.data)

    tp, tg, tm, tv = (tensor.from_numpy(a) for a in (p0, g, m0, v0))
    run(tp, tg, tm, tv)
    np.testing.assert_allclose(tm.numpy(), m_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tv.numpy(), v_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(tg.numpy(), g)
    if len(shape) == 2:
        tp, tm, tv = (tensor.from_numpy(a) for a in (p0, m0, v0))
        run(tp, tensor.from_numpy(np.ascontiguousarray(g.T)).T, tm, tv)
        np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(tv.numpy(), v_want, rtol=1e-6, atol=1e-6)
    half = [tensor.from_numpy(a.astype(np.float16)) for a in (p0, g, m0, v0)]
    run(*half)
    np.testing.assert_allclose(half[2].numpy(), m_want, rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(half[0].numpy(), p_want, rtol=5e-3, atol=5e-3)


def test_adam_step_errors():
    from singa import singa_wrap as cw
    p, m, v = tensor.Tensor((2, 3)), tensor.Tensor((2, 3)), tensor.Tensor((2, 3))
    one = tensor.from_numpy(np.array([0.1], np.float32)).data

    def step(ss=one, vs=one, decay=None, g=p.data, m=m.data, v=v.data):
        cw.AdamStep(ss, vs, cw.Tensor() if decay is None else decay, 0.9, 0.999, 1e-8, 0.0,
                    g, m, v, p.data)

    with pytest.raises(ValueError, match=r"grad \(4,\) and parameter \(2, 3\) differ in size"):
        step(g=tensor.Tensor((4,)).data)
    with pytest.raises(ValueError, match=r"state buffer \(3, 2, 2\) and parameter"):
        step(v=tensor.Tensor((3, 2, 2)).data)
    with pytest.raises(ValueError, match=r"step_size must have one element, got shape \(2,\)"):
        step(ss=tensor.Tensor((2,)).data)
    with pytest.raises(TypeError, match=r"decay must be float32, got int32"):
        step(decay=tensor.Tensor((1,), dtype=tensor.int32).data)
    with pytest.raises(TypeError, match=r"int32"):
        step(m=tensor.Tensor((2, 3), dtype=tensor.int32).data)


@pytest.mark.parametrize("shape", [(7,), (32769,), (33, 1031)])
@pytest.mark.parametrize("kind", ["rmsprop", "adagrad"])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_root_mean_steps_match_float64(kind, shape, wd, threads):
    # RMSPropStep and AdaGradStep against the formulas in float64; a
    # transposed gradient and float16 take the separate passes
    from singa import singa_wrap as cw
    rng = np.random.default_rng(7)
    p0, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    s0 = np.abs(rng.standard_normal(shape)).astype(np.float32)
    lr, rho, eps = 0.01, 0.9, 1e-7
    d = g.astype(np.float64) + wd * p0.astype(np.float64)
    keep, add = (rho, 1 - rho) if kind == "rmsprop" else (1.0, 1.0)
    s_want = keep * s0.astype(np.float64) + add * d * d
    p_want = p0.astype(np.float64) - lr * d / (np.sqrt(s_want) + eps)
    rate = tensor.from_numpy(np.array([lr], np.float32)).data

    def run(tp, tg, ts):
        if kind == "rmsprop":
            cw.RMSPropStep(rate, rho, eps, wd, tg.data, ts.data, tp.data)
        else:
            cw.AdaGradStep(rate, eps, wd, tg.data, ts.data, tp.data)

    tp, tg, ts = (tensor.from_numpy(a) for a in (p0, g, s0))
    run(tp, tg, ts)
    np.testing.assert_allclose(ts.numpy(), s_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(tg.numpy(), g)
    if len(shape) == 2:
        tp, ts = tensor.from_numpy(p0), tensor.from_numpy(s0)
        run(tp, tensor.from_numpy(np.ascontiguousarray(g.T)).T, ts)
        np.testing.assert_allclose(tp.numpy(), p_want, rtol=1e-6, atol=1e-6)
    half = [tensor.from_numpy(a.astype(np.float16)) for a in (p0, g, s0)]
    run(*half)
    np.testing.assert_allclose(half[0].numpy(), p_want, rtol=5e-3, atol=5e-3)


def test_root_mean_step_errors():
    from singa import singa_wrap as cw
    p, s = tensor.Tensor((2, 3)), tensor.Tensor((2, 3))
    lr = tensor.from_numpy(np.array([0.1], np.float32)).data
    with pytest.raises(ValueError, match=r"RMSPropStep: grad \(5,\) and parameter"):
        cw.RMSPropStep(lr, 0.9, 1e-8, 0.0, tensor.Tensor((5,)).data, s.data, p.data)
    with pytest.raises(ValueError, match=r"AdaGradStep: state buffer \(7,\) and parameter"):
        cw.AdaGradStep(lr, 1e-8, 0.0, p.data, tensor.Tensor((7,)).data, p.data)
    with pytest.raises(TypeError, match=r"lr must be float32, got int32"):
        cw.AdaGradStep(tensor.Tensor((1,), dtype=tensor.int32).data, 1e-8, 0.0, p.data, s.data,
                       p.data)


def test_axpy_tensor_errors():
    from singa import singa_wrap as cw
    y = tensor.Tensor((2, 3))
    with pytest.raises(ValueError, match=r"alpha must have one element, got shape \(2,\)"):
        cw.AxpyTensor(1.0, tensor.Tensor((2,)).data, tensor.Tensor((2, 3)).data, y.data)
    with pytest.raises(TypeError, match="alpha must be float32, got int32"):
        cw.AxpyTensor(1.0, tensor.Tensor((1,), dtype=tensor.int32).data,
                      tensor.Tensor((2, 3)).data, y.data)
    with pytest.raises(ValueError, match="differ in size"):
        cw.AxpyTensor(1.0, tensor.Tensor((1,)).data, tensor.Tensor((4,)).data, y.data)


def test_scheduled_values_are_tensors_that_step_in_place():
    sched = opt.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5, staircase=True)
    o = opt.SGD(lr=sched)
    counter, lr = o.step_counter, o.lr_value
    assert isinstance(counter, tensor.Tensor) and tuple(counter.shape) == (1,)
    assert isinstance(lr, tensor.Tensor) and tuple(lr.shape) == (1,)
    seen = []
    for _ in range(5):
        seen.append(float(o.lr_value))
        o.step()
    assert o.step_counter is counter and o.lr_value is lr
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.05, 0.05, 0.025], rtol=1e-7)
    assert float(counter) == 5


def test_schedulers_take_and_return_tensors():
    step = tensor.from_numpy(np.array([3.0], np.float32))
    for sched in (opt.Constant(0.3), opt.ExponentialDecay(0.2, 2, 0.5),
                  opt.ExponentialDecay(0.2, 2, 0.5, staircase=True)):
        out = sched(step)
        assert isinstance(out, tensor.Tensor) and tuple(out.shape) == (1,)
        np.testing.assert_allclose(out.numpy(), [sched(3)], rtol=1e-6)


def test_scheduled_values_follow_parameters_to_their_device():
    from singa import device
    dev = device.create_separate_cpu_device()
    o = opt.Adam(lr=0.01)
    p = tensor.from_numpy(np.ones((3,), np.float32), dev)
    p.name = "p"
    o.apply(p.name, p, tensor.from_numpy(np.ones((3,), np.float32), dev))
    o.step()
    assert o.step_counter.device.id() == dev.id() and o.lr_value.device.id() == dev.id()
    np.testing.assert_allclose(p.numpy(), 1 - 0.01, rtol=1e-5)


def test_callable_lr_gets_the_counter_tensor():
    o = opt.SGD(lr=lambda step: 0.5 * 0.9 ** step)
    got = []
    for _ in range(3):
        got.append(float(o.lr_value))
        o.step()
    np.testing.assert_allclose(got, [0.5, 0.45, 0.405], rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: opt.SGD(lr=0.05, momentum=0.8, dampening=0.3),
    lambda: opt.Adam(lr=0.01, beta_1=0.8, beta_2=0.99),
    lambda: opt.AdamW(lr=opt.ExponentialDecay(0.01, 2, 0.7), weight_decay=0.1),
], ids=["sgd-dampening", "adam", "adamw-scheduled"])
def test_set_states_restores_scheduled_values(make):
    p0, grads = _param_and_grads(seed=2)
    a = make()
    pa = tensor.from_numpy(p0)
    pa.name = "w"
    for g in grads[:3]:
        a.apply(pa.name, pa, tensor.from_numpy(g))
        a.step()
    b = make()
    b.set_states(a.get_states())
    pb = tensor.from_numpy(pa.numpy())
    pb.name = "w"
    for g in grads[3:]:
        for o, p in ((a, pa), (b, pb)):
            o.apply(p.name, p, tensor.from_numpy(g))
            o.step()
    np.testing.assert_allclose(pa.numpy(), pb.numpy(), rtol=1e-6)


def test_adam_bias_correction_holds_over_many_steps(torch):
    rng = np.random.default_rng(5)
    p0 = rng.standard_normal((6,)).astype(np.float32)
    o = opt.Adam(lr=0.01)
    p = tensor.from_numpy(p0)
    p.name = "w"
    tp = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    topt = torch.optim.Adam([tp], lr=0.01)
    for _ in range(300):
        g = rng.standard_normal((6,)).astype(np.float32)
        o.apply(p.name, p, tensor.from_numpy(g))
        o.step()
        tp.grad = torch.tensor(g, dtype=torch.float64)
        topt.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=2e-6)
