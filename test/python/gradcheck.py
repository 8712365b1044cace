"""Finite-difference gradient checks for singa.autograd operators.

``check_grad(fn, inputs)`` runs ``fn`` (a function of singa Tensors, such
as ``autograd.tanh``) on float32 copies of the NumPy ``inputs`` and
compares the analytic gradient of the projection ``L = sum(r * fn(...))``
(r a fixed random tensor, so that errors cannot cancel out) with central
differences of the same singa forward:

    dL/dx[i] ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)

L is accumulated in float64 from the float32 outputs. With eps = 1e-3 the
truncation error is ~eps^2 and the rounding error ~1e-7 |y| / eps, both far
below the default tolerance (atol 2e-3, rtol 1e-2), while a wrong factor,
sign or term in a gradient formula shows up as an O(1) difference.

``layout`` builds the inputs as contiguous tensors or as non-contiguous
views ("transposed": the storage holds the transpose; "sliced": every
other element of a wider tensor), so ops are also checked on strided data.
"""

import numpy as np

from singa import autograd, tensor

LAYOUTS = ("contiguous", "transposed", "sliced")


def make_tensor(arr, layout="contiguous", dev=None):
    """A singa Tensor with arr's values (float32 / int32) in the given layout."""
    arr = np.asarray(arr)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    if layout == "transposed" and sum(d > 1 for d in arr.shape) >= 2:
        t = tensor.from_numpy(np.ascontiguousarray(arr.T), dev).transpose()
        assert not t.is_contiguous()
    elif layout in ("sliced", "transposed") and arr.size > 1:
        wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), dtype=arr.dtype)
        wide[..., ::2] = arr
        t = tensor.from_numpy(wide, dev).view[..., ::2]
        assert not t.is_contiguous()
    else:
        t = tensor.from_numpy(arr, dev)
    assert t.shape == arr.shape
    return t


def _objective(fn, arrays, layout, r, dev, train):
    with autograd.train_mode(train):
        y = fn(*[make_tensor(a, layout, dev) for a in arrays])
    return float(np.sum(tensor.to_numpy(y).astype(np.float64) * r))


def analytic_grads(fn, arrays, layout="contiguous", r=None, dev=None, wrt=None):
    """(output, {index: gradient}) from singa's backward with dy = r."""
    wrt = _float_inputs(arrays) if wrt is None else wrt
    ts = []
    for i, a in enumerate(arrays):
        t = make_tensor(a, layout, dev)
        t.requires_grad = i in wrt
        t.stores_grad = i in wrt
        ts.append(t)
    with autograd.train_mode(True):
        y = fn(*ts)
        y_np = tensor.to_numpy(y)
        dy = None if r is None else tensor.from_numpy(r.astype(np.float32), dev)
        grads = autograd.gradients(y, dy)
    out = {}
    for i in wrt:
        g = grads.get(ts[i])
        assert g is not None, f"no gradient for input {i}"
        out[i] = tensor.to_numpy(g)
    return y_np, out


def numeric_grad(fn, arrays, i, layout="contiguous", r=None, eps=1e-3, dev=None, train=False):
    """Central differences of sum(r * fn(...)) with respect to arrays[i]."""
    arrays = [np.array(a, copy=True) for a in arrays]
    x = arrays[i].astype(np.float64)
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for k in range(flat.size):
        orig = flat[k]
        flat[k] = orig + eps
        arrays[i] = x.astype(np.float32)
        up = _objective(fn, arrays, layout, r, dev, train)
        flat[k] = orig - eps
        arrays[i] = x.astype(np.float32)
        down = _objective(fn, arrays, layout, r, dev, train)
        flat[k] = orig
        gflat[k] = (up - down) / (2 * eps)
    return g


def _float_inputs(arrays):
    return [i for i, a in enumerate(arrays) if np.asarray(a).dtype.kind == "f"]


def check_grad(fn, inputs, layout="contiguous", wrt=None, eps=1e-3, atol=2e-3, rtol=1e-2,
               seed=0, dev=None, train=False):
    """Asserts that singa's gradients of fn match central differences for
    every float input (or the indices in wrt). Returns the forward output.
    train=True evaluates the finite differences in training mode too (for
    ops such as batch norm whose forward depends on it)."""
    arrays = [np.asarray(a) for a in inputs]
    arrays = [a.astype(np.float32) if a.dtype == np.float64 else a for a in arrays]
    wrt = _float_inputs(arrays) if wrt is None else list(wrt)
    with autograd.train_mode(train):
        y0 = tensor.to_numpy(fn(*[make_tensor(a, layout, dev) for a in arrays]))
    r = np.random.default_rng(seed).uniform(0.5, 1.5, size=y0.shape) * \
        np.where(np.random.default_rng(seed + 1).random(y0.shape) < 0.5, -1.0, 1.0)
    r = np.asarray(r, dtype=np.float64).astype(np.float32).astype(np.float64)
    y, grads = analytic_grads(fn, arrays, layout, r, dev, wrt)
    for i in wrt:
        num = numeric_grad(fn, arrays, i, layout, r, eps, dev, train)
        np.testing.assert_allclose(
            grads[i], num, atol=atol, rtol=rtol,
            err_msg=f"gradient of input {i} (shape {arrays[i].shape}, layout {layout})")
    return y
