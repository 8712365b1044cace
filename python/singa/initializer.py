"""Weight initialisers: each fills a tensor in place and returns it.

Fan-in and fan-out follow SINGA's rules (``_compute_fans``):

* 2-D tensors are Linear weights of shape (in_features, out_features),
  because singa's Linear computes ``x @ W``: fan_in = shape[0],
  fan_out = shape[1].
* 3-D to 5-D tensors are convolution weights in OIHW (or OIW, OIDHW)
  order: fan_in = I * receptive field, fan_out = O * receptive field, where
  the receptive field is the product of the trailing (kernel) dimensions.
* Any other rank: fan_in = fan_out = sqrt(number of elements).

``gaussian(t, fan_in, fan_out)``, ``xavier``, ``glorot`` and ``msra`` are
SINGA's deprecated forms, with SINGA's formulas (they warn with a
DeprecationWarning); ``gaussian(t, mean=..., std=...)`` fills N(mean, std^2).

The random draws use the tensor's device generator (``Device.SetRandSeed``),
so nothing is staged through NumPy except for ``orthogonal``, which needs a
QR decomposition.
"""

import math
import warnings

import numpy as np

from singa import tensor as _tensor

__all__ = [
    "calculate_fans", "gaussian", "uniform", "constant", "zeros", "ones",
    "xavier", "glorot", "glorot_uniform", "glorot_normal", "xavier_uniform",
    "xavier_normal", "he_uniform", "he_normal", "msra", "msra_uniform",
    "msra_normal", "lecun_uniform", "lecun_normal", "orthogonal", "eye",
]


def _check(t, where):
    if not isinstance(t, _tensor.Tensor):
        raise TypeError(f"{where}: expected a singa Tensor, got {type(t).__name__}")
    if t.dtype == _tensor.int32:
        raise TypeError(f"{where}: cannot fill an int32 tensor of shape {t.shape} "
                        "with random floats")


def calculate_fans(shape):
    """(fan_in, fan_out) of a weight with this shape (see the module doc)."""
    shape = tuple(shape)
    if len(shape) == 0:
        raise ValueError("calculate_fans: a 0-d tensor has no fan-in or fan-out")
    if len(shape) == 2:
        return shape[0], shape[1]
    if 3 <= len(shape) <= 5:
        receptive = 1
        for d in shape[2:]:
            receptive *= d
        return shape[1] * receptive, shape[0] * receptive
    n = math.sqrt(math.prod(shape))
    return n, n


def _deprecated(name, instead):
    warnings.warn(f"initializer.{name} is deprecated; use {instead}", DeprecationWarning,
                  stacklevel=3)


def _fan(shape, mode, where):
    fan_in, fan_out = calculate_fans(shape)
    if mode == "fan_in":
        fan = fan_in
    elif mode == "fan_out":
        fan = fan_out
    elif mode == "fan_avg":
        fan = (fan_in + fan_out) / 2.0
    else:
        raise ValueError(f"{where}: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if fan <= 0:
        raise ValueError(f"{where}: shape {tuple(shape)} has a zero fan")
    return fan


def _scaled(t, scale, mode, distribution, where):
    """Variance-scaling fill: Var(w) = scale / fan."""
    _check(t, where)
    std = math.sqrt(scale / _fan(t.shape, mode, where))
    if distribution == "normal":
        t.gaussian(0.0, std)
    else:
        # U(-a, a) has variance a^2 / 3.
        a = math.sqrt(3.0) * std
        t.uniform(-a, a)
    return t


def gaussian(t, fan_in=0, fan_out=0, *, mean=0.0, std=None):
    """With std: fills t with samples of N(mean, std^2).

    Without (SINGA's deprecated form): N(0, 2 avg / (fan_in + fan_out)),
    avg = 2 when both fans are given and 1 otherwise (He et al.).
    """
    _check(t, "gaussian")
    if std is not None:
        if std < 0:
            raise ValueError(f"gaussian: std must be >= 0, got {std}")
        return t.gaussian(mean, std)
    if fan_in < 0 or fan_out < 0 or fan_in + fan_out <= 0:
        raise ValueError(f"gaussian: give fan_in or fan_out (> 0), got {fan_in} and {fan_out}")
    _deprecated("gaussian(t, fan_in, fan_out)", "he_normal or glorot_normal")
    avg = 1 if fan_in * fan_out == 0 else 2
    return t.gaussian(0.0, math.sqrt(2.0 * avg / (fan_in + fan_out)))


def uniform(t, low=-1.0, high=1.0):
    """Fills t with samples of U(low, high)."""
    _check(t, "uniform")
    if high < low:
        raise ValueError(f"uniform: high ({high}) is below low ({low})")
    return t.uniform(low, high)


def constant(t, value):
    _check(t, "constant")
    return t.set_value(value)


def zeros(t):
    return constant(t, 0.0)


def ones(t):
    return constant(t, 1.0)


def glorot_uniform(t, gain=1.0):
    """Glorot & Bengio (2010): U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    return _scaled(t, gain * gain, "fan_avg", "uniform", "glorot_uniform")


def glorot_normal(t, gain=1.0):
    """Glorot & Bengio (2010): N(0, gain^2 * 2 / (fan_in + fan_out))."""
    return _scaled(t, gain * gain, "fan_avg", "normal", "glorot_normal")


def he_uniform(t, mode="fan_in"):
    """He et al. (2015), for ReLU nets: U(-a, a), a = sqrt(6 / fan)."""
    return _scaled(t, 2.0, mode, "uniform", "he_uniform")


def he_normal(t, mode="fan_in"):
    """He et al. (2015), for ReLU nets: N(0, 2 / fan)."""
    return _scaled(t, 2.0, mode, "normal", "he_normal")


def lecun_uniform(t):
    """LeCun (1998): U(-a, a), a = sqrt(3 / fan_in)."""
    return _scaled(t, 1.0, "fan_in", "uniform", "lecun_uniform")


def lecun_normal(t):
    """LeCun (1998): N(0, 1 / fan_in)."""
    return _scaled(t, 1.0, "fan_in", "normal", "lecun_normal")


def _matrix_dims(t, where):
    _check(t, where)
    if t.ndim() < 2:
        raise ValueError(f"{where}: needs a tensor of 2 or more dimensions, got shape {t.shape}")
    return t.shape[0], t.shape[1]


def xavier(t):
    """SINGA's deprecated form: U(-a, a), a = sqrt(6 / (shape[0] + shape[1]))."""
    rows, cols = _matrix_dims(t, "xavier")
    _deprecated("xavier", "glorot_uniform")
    a = math.sqrt(6.0 / (rows + cols))
    return t.uniform(-a, a)


def glorot(t):
    """SINGA's deprecated form: N(0, 2 / (shape[0] + shape[1]))."""
    rows, cols = _matrix_dims(t, "glorot")
    _deprecated("glorot", "glorot_normal")
    return t.gaussian(0.0, math.sqrt(2.0 / (rows + cols)))


def msra(t):
    """SINGA's deprecated form: N(0, 2 / shape[0])."""
    rows, _ = _matrix_dims(t, "msra")
    _deprecated("msra", "he_normal")
    return t.gaussian(0.0, math.sqrt(2.0 / rows))


# Other names for the variance-scaling fills.
xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
msra_normal = he_normal
msra_uniform = he_uniform


def orthogonal(t, gain=1.0):
    """Saxe et al. (2014): a (semi-)orthogonal matrix times gain.

    Tensors with more than two dimensions are treated as a matrix of
    shape[0] rows; the QR sign fix makes the result uniformly distributed.
    """
    _check(t, "orthogonal")
    if t.ndim() < 2:
        raise ValueError(f"orthogonal: needs a tensor of 2 or more dimensions, got shape {t.shape}")
    rows = t.shape[0]
    cols = t.size() // rows
    a = _tensor.Tensor((max(rows, cols), min(rows, cols)), t.device).gaussian(0.0, 1.0)
    q, r = np.linalg.qr(_tensor.to_numpy(a).astype(np.float64))
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    t.copy_from_numpy((gain * q).astype(np.float32).reshape(t.shape))
    return t


def eye(t):
    """The identity matrix (ones on the diagonal of a 2-D tensor)."""
    _check(t, "eye")
    if t.ndim() != 2:
        raise ValueError(f"eye: needs a 2-D tensor, got shape {t.shape}")
    t.set_value(0.0)
    n, step = min(t.shape), t.shape[1] + 1
    flat = t if t.is_contiguous() else _tensor.Tensor(t.shape, t.device, t.dtype)
    # The diagonal is a strided view over the flat storage.
    flat.reshape(-1)[0:n * step:step] = 1.0
    if flat is not t:
        t.copy_data(flat)
    return t
