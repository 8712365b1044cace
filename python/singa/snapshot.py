"""SINGA's Snapshot: named tensors written to, and read back from, one file.

    sn = snapshot.Snapshot("ckpt/model", True)     # write mode
    for name, p in m.get_params().items():
        sn.write(name, p)
    sn.close()                                     # or `with`, or dropping sn
    params = snapshot.Snapshot("ckpt/model", False).read()   # {name: Tensor}

As in SINGA, ``f`` is a prefix: the tensors go to ``f + ".bin"`` and a text
summary (one ``name dtype shape`` line per tensor) to ``f + ".desc"``.
The ``.bin`` file is singa's own format (SINGA's was protobuf records;
doc/compat.md says why singa does not read those). All numbers are
little-endian::

    header   b"SINGASNP"  u32 version (1)  u32 flags (0)
    record   u32 name length  name (UTF-8)  u8 dtype code  u8 rank
             u64 dims[rank]  u64 data length  data (C order)
             u32 CRC-32 of the record's bytes before it
    end      u32 0xFFFFFFFF  u64 number of records  u32 CRC-32 of both

dtype codes are singa_wrap's (kFloat32 0, kFloat16 1, kInt 2). Records are
written as they come, through a buffer of ``buffer_size`` MB, into a
temporary file that replaces ``f + ".bin"`` only when the snapshot is
closed, so an interrupted write never leaves a half file under the name.
Reading checks every length against the file's size before allocating and
every CRC; a file that is not a snapshot, truncated or corrupted raises
``SnapshotError`` (a ValueError) naming the file and the record.
"""

import os
import struct
import tempfile
import weakref
import zlib

import numpy as np

from singa import singa_wrap as _cw
from singa import tensor

__all__ = ["Snapshot", "SnapshotError"]

MAGIC = b"SINGASNP"
VERSION = 1
_HEADER = struct.Struct("<8sII")
_NAME_LEN = struct.Struct("<I")
_KIND = struct.Struct("<BB")
_U64 = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_END_MARK = 0xFFFFFFFF
_END = struct.Struct("<IQ")
_MAX_RANK = 64      # NumPy's limit

_CODES = {tensor.float32: _cw.kFloat32, tensor.float16: _cw.kFloat16, tensor.int32: _cw.kInt}
_NUMPY = {_cw.kFloat32: np.dtype("<f4"), _cw.kFloat16: np.dtype("<f2"),
          _cw.kInt: np.dtype("<i4")}


class SnapshotError(ValueError):
    """A snapshot file that cannot be read: not a snapshot, of a later
    version, truncated or corrupted."""


def _paths(f, where):
    if isinstance(f, bytes):
        f = os.fsdecode(f)
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"{where}: the file prefix must be a str or path, got "
                        f"{type(f).__name__}")
    f = os.fspath(f)
    if not f:
        raise ValueError(f"{where}: the file prefix is empty")
    return f + ".bin", f + ".desc"


def _check_mode(mode):
    if isinstance(mode, bool):
        return mode
    if isinstance(mode, int) and mode in (0, 1):
        return bool(mode)
    raise TypeError(f"Snapshot: mode must be True (write) or False (read), got {mode!r}")


class _Writer:
    """The open temporary file of a snapshot being written; closing it
    finishes the file and moves it to its name. Kept apart from Snapshot so
    that a finalizer can close it when a Snapshot is dropped unclosed, as
    SINGA's destructor does."""

    def __init__(self, bin_path, desc_path, buffer_bytes):
        self.bin_path, self.desc_path = bin_path, desc_path
        folder, base = os.path.split(bin_path)
        fd, self.tmp_path = tempfile.mkstemp(prefix=base + ".", suffix=".tmp",
                                             dir=folder or ".")
        self.file = open(fd, "wb", buffering=buffer_bytes)
        self.file.write(_HEADER.pack(MAGIC, VERSION, 0))
        self.desc = []
        self.closed = False

    def add(self, name, arr, code):
        raw = name.encode("utf-8")
        head = _NAME_LEN.pack(len(raw)) + raw + _KIND.pack(code, arr.ndim) + \
            b"".join(_U64.pack(d) for d in arr.shape) + _U64.pack(arr.nbytes)
        data = arr.reshape(-1).view(np.uint8)        # the bytes, without a copy
        crc = zlib.crc32(data, zlib.crc32(head))
        self.file.write(head)
        self.file.write(data)
        self.file.write(_CRC.pack(crc))
        self.desc.append(f"{name} {np.dtype(arr.dtype).name} {list(arr.shape)}\n")

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            end = _END.pack(_END_MARK, len(self.desc))
            self.file.write(end + _CRC.pack(zlib.crc32(end)))
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp_path, self.bin_path)
            with open(self.desc_path, "w", encoding="utf-8") as d:
                d.writelines(self.desc)
        except BaseException:
            self.abort()
            raise

    def abort(self):
        """Drops the temporary file; a snapshot already under the name stays."""
        self.closed = True
        self.file.close()
        if os.path.exists(self.tmp_path):
            os.remove(self.tmp_path)


class Snapshot:
    """Named tensors in one file (see the module doc).

    Args:
        f: the file prefix; the data is in ``f + ".bin"``.
        mode: True to write a new snapshot (replacing one of that name when
            closed), False to read one.
        buffer_size: the write buffer in MB (SINGA's default, 10).
    """

    def __init__(self, f, mode, buffer_size=10):
        self.mode = _check_mode(mode)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise TypeError(f"Snapshot: buffer_size must be an int (MB), got "
                            f"{type(buffer_size).__name__}")
        if not 1 <= buffer_size <= 1024:
            # Python allocates the whole write buffer up front
            raise ValueError(f"Snapshot: buffer_size must be 1 to 1024 MB, got {buffer_size}")
        self.bin_path, self.desc_path = _paths(f, "Snapshot")
        self._names = set()
        self._writer = None
        if self.mode:
            self._writer = _Writer(self.bin_path, self.desc_path, buffer_size << 20)
            self._finalizer = weakref.finalize(self, _Writer.close, self._writer)
        elif not os.path.isfile(self.bin_path):
            raise FileNotFoundError(f"Snapshot: no snapshot file {self.bin_path!r}")

    # ---- writing ----
    def write(self, param_name, param_val):
        """Appends the tensor param_val under the name param_name (a str,
        once per snapshot)."""
        if not self.mode:
            raise ValueError(f"Snapshot.write: {self.bin_path!r} was opened for reading "
                             "(mode False)")
        if self._writer.closed:
            raise ValueError(f"Snapshot.write: {self.bin_path!r} is closed")
        if not isinstance(param_name, str):
            raise TypeError(f"Snapshot.write: param_name must be a str, got "
                            f"{type(param_name).__name__}")
        if not isinstance(param_val, tensor.Tensor):
            raise TypeError(f"Snapshot.write: param_val for {param_name!r} must be a singa "
                            f"Tensor, got {type(param_val).__name__}")
        if len(param_name.encode("utf-8")) >= _END_MARK:
            raise ValueError(f"Snapshot.write: a name of {len(param_name)} characters is too "
                             "long")
        if param_name in self._names:
            raise ValueError(f"Snapshot.write: {param_name!r} is already in the snapshot")
        code = _CODES.get(param_val.dtype)
        if code is None:
            raise TypeError(f"Snapshot.write: {param_name!r} has dtype "
                            f"{tensor.dtype_name(param_val.dtype)}, which a snapshot does "
                            "not hold")
        arr = np.ascontiguousarray(tensor.to_numpy(param_val), dtype=_NUMPY[code])
        self._writer.add(param_name, arr, code)
        self._names.add(param_name)

    def close(self):
        """Finishes a snapshot being written (the file appears under its
        name); nothing for one being read. Called again, does nothing."""
        if self._writer is not None:
            self._finalizer.detach()
            self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._writer is not None and exc_type is not None:
            # an interrupted write leaves the previous snapshot in place
            self._finalizer.detach()
            self._writer.abort()
            return
        self.close()

    # ---- reading ----
    def read(self):
        """All the tensors of the snapshot: a dict name -> Tensor (on the
        default device), in the order they were written."""
        if self.mode:
            raise ValueError(f"Snapshot.read: {self.bin_path!r} was opened for writing "
                             "(mode True)")
        with open(self.bin_path, "rb") as fh:
            return _Reader(fh, self.bin_path).read_all()


class _Reader:
    def __init__(self, fh, path):
        self.fh, self.path = fh, path
        self.left = os.fstat(fh.fileno()).st_size

    def error(self, what):
        return SnapshotError(f"snapshot {self.path!r}: {what}")

    def take(self, n, what):
        if n > self.left:
            raise self.error(f"{what} needs {n} bytes, the file has {self.left} left "
                             "(truncated or corrupted)")
        data = self.fh.read(n)
        if len(data) != n:
            raise self.error(f"{what}: the file ended early")
        self.left -= n
        return data

    def read_all(self):
        head = self.take(_HEADER.size, "the header")
        magic, version, flags = _HEADER.unpack(head)
        if magic != MAGIC:
            raise self.error(f"not a singa snapshot (starts with {head[:8]!r}, expected "
                             f"{MAGIC!r}); files written by Apache SINGA's Snapshot are not "
                             "read (doc/compat.md)")
        if version != VERSION or flags != 0:
            raise self.error(f"format version {version} (flags {flags}) is not supported; "
                             f"this singa reads version {VERSION}")
        out = {}
        while True:
            i = len(out)
            raw_len = self.take(_NAME_LEN.size, f"record {i}")
            (n,) = _NAME_LEN.unpack(raw_len)
            if n == _END_MARK:
                rest = self.take(_END.size - _NAME_LEN.size + _CRC.size, "the end mark")
                (count,) = _U64.unpack(rest[:_U64.size])
                (crc,) = _CRC.unpack(rest[_U64.size:])
                if zlib.crc32(raw_len + rest[:_U64.size]) != crc or count != i:
                    raise self.error(f"the end mark is corrupted (says {count} records, "
                                     f"read {i})")
                if self.left:
                    raise self.error(f"{self.left} bytes after the end mark")
                return out
            out_name, t = self.record(i, raw_len, n)
            if out_name in out:
                raise self.error(f"record {i}: name {out_name!r} appears twice")
            out[out_name] = t

    def record(self, i, raw_len, n):
        raw_name = self.take(n, f"record {i}'s name")
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"record {i}: the name is not UTF-8") from None
        where = f"record {i} ({name!r})"
        kind = self.take(_KIND.size, where)
        code, rank = _KIND.unpack(kind)
        if code not in _NUMPY:
            raise self.error(f"{where}: unknown dtype code {code}")
        if rank > _MAX_RANK:
            raise self.error(f"{where}: rank {rank} exceeds {_MAX_RANK}")
        dims_raw = self.take(_U64.size * (rank + 1), where)
        dims = [_U64.unpack_from(dims_raw, k * _U64.size)[0] for k in range(rank)]
        (nbytes,) = _U64.unpack_from(dims_raw, rank * _U64.size)
        dt = _NUMPY[code]
        if nbytes != int(np.prod(dims, dtype=object)) * dt.itemsize:
            raise self.error(f"{where}: {nbytes} data bytes do not hold shape {tuple(dims)} "
                             f"of {dt.name}")
        data = self.take(nbytes, where)
        (crc,) = _CRC.unpack(self.take(_CRC.size, where))
        head = raw_len + raw_name + kind + dims_raw
        if zlib.crc32(data, zlib.crc32(head)) != crc:
            raise self.error(f"{where}: checksum mismatch (corrupted)")
        arr = np.frombuffer(data, dt).reshape(dims).astype(dt.newbyteorder("="))
        return name, tensor.from_numpy(arr)
