"""Data sets for the CNN examples, as float32 NCHW images and int32 labels.

* ``digits``: scikit-learn's bundled 8x8 handwritten digits (1797 images,
  no download). A fixed stratified split keeps 360 images for testing.
* ``mnist``: the IDX files (``train-images-idx3-ubyte`` etc., plain or
  ``.gz``) from a directory; missing files are downloaded when the machine
  is online and checked against their published MD5 sums.

Pixels are scaled to [0, 1] and then standardised with the training set's
mean and standard deviation.
"""

import gzip
import hashlib
import os
import struct
import urllib.error
import urllib.request

import numpy as np

MNIST_FILES = {
    # name: MD5 of the .gz file, as published with the data set
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)


class DataError(RuntimeError):
    """A data set could not be found, fetched or parsed."""


def load(name, data_dir=None, download=True):
    """(train_x, train_y, test_x, test_y) for 'digits' or 'mnist'."""
    if name == "digits":
        return load_digits()
    if name == "mnist":
        return load_mnist(data_dir or os.path.join(os.path.expanduser("~"), ".singa", "mnist"),
                          download)
    raise ValueError(f"unknown data set {name!r}; use 'digits' or 'mnist'")


def _standardise(train_x, test_x):
    mean, std = train_x.mean(), train_x.std()
    return (train_x - mean) / std, (test_x - mean) / std


def load_digits(test_size=360, seed=0):
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        raise DataError("the 'digits' data set needs scikit-learn: "
                        "pip install scikit-learn") from None
    bunch = sk_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = bunch.target.astype(np.int32)
    # Stratified split: the same share of each class in the test set.
    rng = np.random.default_rng(seed)
    test_idx = []
    for c in range(10):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        test_idx.extend(idx[:int(round(test_size * len(idx) / len(y)))])
    test_mask = np.zeros(len(y), bool)
    test_mask[test_idx] = True
    train_x, test_x = _standardise(x[~test_mask], x[test_mask])
    return train_x, y[~test_mask], test_x, y[test_mask]


# ---- MNIST ----

def parse_idx(raw, what):
    """The array in an IDX byte string (unsigned bytes, 1 or 3 dimensions)."""
    if len(raw) < 8:
        raise DataError(f"{what}: {len(raw)} bytes is too short for an IDX file")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or ndim not in (1, 3):
        raise DataError(f"{what}: not an unsigned-byte IDX file of 1 or 3 dimensions "
                        f"(magic {raw[:4].hex()})")
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = raw[4 + 4 * ndim:]
    size = int(np.prod(dims))
    if len(body) != size:
        raise DataError(f"{what}: header says {dims} ({size} bytes) but {len(body)} "
                        "bytes follow: truncated or corrupted")
    return np.frombuffer(body, np.uint8).reshape(dims)


def _read_idx(data_dir, name):
    for path, opener in ((os.path.join(data_dir, name), open),
                         (os.path.join(data_dir, name + ".gz"), gzip.open)):
        if os.path.exists(path):
            try:
                with opener(path, "rb") as f:
                    return parse_idx(f.read(), path)
            except (OSError, EOFError) as e:
                raise DataError(f"{path}: cannot read ({e})") from None
    return None


def _md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_mnist(data_dir, timeout=10):
    """Fetches the missing .gz files into data_dir, checking MD5 sums."""
    os.makedirs(data_dir, exist_ok=True)
    for name, md5 in MNIST_FILES.items():
        target = os.path.join(data_dir, name + ".gz")
        if os.path.exists(os.path.join(data_dir, name)) or os.path.exists(target):
            continue
        errors = []
        for mirror in MNIST_MIRRORS:
            tmp = target + ".part"
            try:
                with urllib.request.urlopen(mirror + name + ".gz", timeout=timeout) as r, \
                        open(tmp, "wb") as f:
                    f.write(r.read())
            except (urllib.error.URLError, OSError, ValueError) as e:
                errors.append(f"{mirror}: {e}")
                continue
            got = _md5(tmp)
            if got != md5:
                os.unlink(tmp)
                errors.append(f"{mirror}: checksum {got} != {md5}")
                continue
            os.replace(tmp, target)
            break
        else:
            raise DataError(
                f"could not download {name}.gz ({'; '.join(errors)}). This machine may be "
                f"offline: copy the four MNIST IDX files ({', '.join(MNIST_FILES)}, plain "
                f"or .gz) into {data_dir} and pass --data-dir {data_dir}, or use "
                "the offline data set 'digits'.")


def load_mnist(data_dir, download=True):
    missing = [n for n in MNIST_FILES if not (os.path.exists(os.path.join(data_dir, n)) or
                                              os.path.exists(os.path.join(data_dir, n + ".gz")))]
    if missing:
        if not download:
            raise DataError(f"MNIST files {missing} are not in {data_dir}")
        download_mnist(data_dir)
    arrays = [_read_idx(data_dir, n) for n in MNIST_FILES]
    train_x, train_y, test_x, test_y = arrays
    if len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise DataError(f"{data_dir}: image and label counts differ "
                        f"({len(train_x)}/{len(train_y)}, {len(test_x)}/{len(test_y)})")
    train_x = (train_x.astype(np.float32) / 255.0)[:, None]
    test_x = (test_x.astype(np.float32) / 255.0)[:, None]
    train_x, test_x = _standardise(train_x, test_x)
    return train_x, train_y.astype(np.int32), test_x, test_y.astype(np.int32)


def resize(x, size):
    """Nearest-neighbour resize of NCHW images to size x size (whole-pixel
    repeats, then a centred crop or zero pad for the remainder)."""
    h = x.shape[2]
    if h == size:
        return x
    k = max(size // h, 1)
    if k > 1:
        x = x.repeat(k, axis=2).repeat(k, axis=3)
    h = x.shape[2]
    if h < size:
        lo = (size - h) // 2
        fill = x.min()
        x = np.pad(x, ((0, 0), (0, 0), (lo, size - h - lo), (lo, size - h - lo)),
                   constant_values=fill)
    elif h > size:
        lo = (h - size) // 2
        x = x[:, :, lo:lo + size, lo:lo + size]
    return np.ascontiguousarray(x)


def random_shift(x, max_shift, rng):
    """Each image moved by up to max_shift pixels in each direction, the
    uncovered border filled with the background (the minimum value): a
    cheap augmentation that makes small data sets generalise better."""
    if max_shift <= 0:
        return x
    n, _, h, w = x.shape
    s = max_shift
    padded = np.pad(x, ((0, 0), (0, 0), (s, s), (s, s)), constant_values=x.min())
    dy = rng.integers(0, 2 * s + 1, n)
    dx = rng.integers(0, 2 * s + 1, n)
    out = np.empty_like(x)
    for i in range(n):
        out[i] = padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w]
    return out
