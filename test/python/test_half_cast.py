"""float32 <-> float16 casts on the CPU: every ISA family this machine runs
(the scalar baseline, F16C in AVX2 and AVX-512) gives NumPy's astype bits for
every value but NaN, NaN stays NaN, and the families agree bit for bit, NaN
included. The sizes cross the threading threshold and leave vector tails."""

import numpy as np
import pytest

from singa import singa_wrap as cw
from singa import tensor

from test_cpu_isa import available


def cast_each_family(a, dtype):
    """{family: the bits singa's cast of a gives}, a copy per family."""
    current = cw.CpuIsa()
    out = {}
    try:
        for name in available():
            cw.SetCpuIsa(name)
            y = tensor.to_numpy(tensor.from_numpy(a).as_type(dtype))
            out[name] = y.view(np.uint16 if y.dtype == np.float16 else np.uint32).copy()
    finally:
        cw.SetCpuIsa(current)
    return out


def check(a, got, ref):
    """got (bits) against NumPy's ref: equal bits off NaN, NaN where NaN."""
    nan = np.isnan(ref)
    bits = ref.view(got.dtype)
    bad = np.flatnonzero(got[~nan] != bits[~nan])
    assert bad.size == 0, (a[~nan][bad[:5]], got[~nan][bad[:5]], bits[~nan][bad[:5]])
    assert np.isnan(got.view(ref.dtype)[nan]).all()


def float32_cases():
    rng = np.random.default_rng(11)
    # Every half's float32 value and the midpoints between neighbouring
    # halves (ties: round to the even one), the subnormal halves included.
    h = np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = ((h[:-1] + h[1:]) / 2).astype(np.float32)
    parts = [h.astype(np.float32), mid, np.nextafter(mid, np.float32(0)),
             np.nextafter(mid, np.float32(np.inf))]
    # Random bit patterns: NaNs with payloads, infinities, float32 subnormals.
    parts.append(rng.integers(0, 1 << 32, 100003, dtype=np.uint64).astype(np.uint32)
                 .view(np.float32))
    parts.append(rng.integers(1, 1 << 23, 5001, dtype=np.uint32).view(np.float32))
    # Around the largest half (65504) and where rounding overflows to inf.
    parts.append(np.array([65504, 65519, 65519.996, 65520, 65520.004, 65536, 1e5, 3.4e38,
                           np.inf, np.nan, 0.0, 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25,
                           2.0 ** -26, 6.1e-5, 6.1035156e-05], np.float32))
    parts.append(rng.standard_normal(40009).astype(np.float32) * 1e-4)
    pos = np.concatenate(parts)
    return np.concatenate([pos, -pos])


def test_every_half_to_float32():
    a = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    a = np.concatenate([a, a[:13]])  # 65549: leaves a tail after the vectors
    ref = a.astype(np.float32)
    outs = cast_each_family(a, tensor.float32)
    for name, got in outs.items():
        check(a, got, ref)
        np.testing.assert_array_equal(got, outs["baseline"], err_msg=name)


def test_float32_to_half():
    a = float32_cases()
    with np.errstate(over="ignore"):
        ref = a.astype(np.float16)
    outs = cast_each_family(a, tensor.float16)
    for name, got in outs.items():
        check(a, got, ref)
        np.testing.assert_array_equal(got, outs["baseline"], err_msg=name)
    assert outs["baseline"][np.flatnonzero(a == 65520)[0]] == 0x7c00  # the tie overflows
    assert outs["baseline"][np.flatnonzero(np.signbit(a) & (a == 0))[0]] == 0x8000


@pytest.mark.parametrize("n", [1, 7, 8, 15, 17, 40000])
def test_round_trip_and_strided(n):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal((n, 3)) * 100).astype(np.float32)
    t = tensor.from_numpy(a)
    for name in available():
        current = cw.CpuIsa()
        cw.SetCpuIsa(name)
        try:
            h = t.as_type(tensor.float16)
            np.testing.assert_array_equal(tensor.to_numpy(h), a.astype(np.float16))
            back = tensor.to_numpy(h.as_type(tensor.float32))
            np.testing.assert_array_equal(back, a.astype(np.float16).astype(np.float32))
            ht = t.T.as_type(tensor.float16)  # strided source: the element loop
            np.testing.assert_array_equal(tensor.to_numpy(ht), a.T.astype(np.float16))
        finally:
            cw.SetCpuIsa(current)
