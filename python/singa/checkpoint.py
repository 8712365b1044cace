"""Checkpoint files: named arrays plus JSON metadata, nothing executable.

A checkpoint is a zip archive readable by ``np.load(path, allow_pickle=False)``:

* ``meta.json``: ``{"format": "singa-checkpoint", "version": 1,
  "arrays": {name: {"file": ..., "shape": [...], "dtype": ...}},
  "meta": <caller's JSON>}``;
* one ``.npy`` member per array. Members are numbered (``a0.npy``) rather
  than named after the array, so any name is safe inside the archive.

Loading never unpickles: array headers are parsed without pickle (object
dtypes are refused) and the metadata is read with ``json``. Every size a
file declares (zip member sizes, .npy headers) is checked against the
index and against the bytes really present before anything is allocated,
and the zip CRC of every member is checked on read, so a truncated,
corrupted or forged file raises ``ValueError`` naming the entry.

Saving is atomic: the archive is written to a temporary file in the target's
directory, flushed to disk, then renamed over the target with
``os.replace``. A crash mid-save leaves the previous file untouched.
"""

import json
import os
import tempfile
import zipfile
import zlib

import numpy as np

FORMAT = "singa-checkpoint"
VERSION = 1
_META = "meta.json"
_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "bool")


def _write_archive(f, arrays, meta):
    index = {}
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for i, (name, arr) in enumerate(arrays.items()):
            member = f"a{i}.npy"
            index[name] = {"file": member, "shape": list(arr.shape), "dtype": str(arr.dtype)}
            with zf.open(member, "w", force_zip64=True) as out:
                np.lib.format.write_array(out, arr, allow_pickle=False)
        doc = {"format": FORMAT, "version": VERSION, "arrays": index, "meta": meta}
        zf.writestr(_META, json.dumps(doc, sort_keys=True))


def save(fpath, arrays, meta=None):
    """Writes arrays ({name: ndarray}) and meta (JSON-able) to fpath atomically."""
    fpath = os.fspath(fpath)
    clean = {}
    for name, arr in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"checkpoint.save: array names must be strings, got {name!r}")
        a = np.ascontiguousarray(arr)
        if a.dtype.name not in _DTYPES:
            raise TypeError(f"checkpoint.save: array {name!r} has dtype {a.dtype}; "
                            f"supported: {', '.join(_DTYPES)}")
        clean[name] = a
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as e:
        raise TypeError(f"checkpoint.save: metadata is not JSON-serialisable: {e}") from None
    directory = os.path.dirname(os.path.abspath(fpath))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(fpath)}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            _write_archive(f, clean, meta)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, fpath)
    except BaseException:
        # Whatever went wrong (including KeyboardInterrupt), the target is
        # untouched; only the partial temporary file needs removing.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory):
    """Makes the rename durable where the OS allows opening directories."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_READ_ERRORS = (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, KeyError)
# meta.json is small: a larger declared size means a damaged or hostile file.
_MAX_META_BYTES = 64 << 20
# Data is read in pieces this large, so memory follows what the archive
# really holds, whatever its headers claim.
_CHUNK = 1 << 20


def load(fpath):
    """Returns (arrays, meta) from a checkpoint written by save.

    Raises FileNotFoundError for a missing file and ValueError for anything
    that is not an intact checkpoint, naming the entry at fault.
    """
    fpath = os.fspath(fpath)
    if not os.path.exists(fpath):
        raise FileNotFoundError(f"checkpoint {fpath!r} does not exist")
    try:
        npz = np.load(fpath, allow_pickle=False)
    except _READ_ERRORS as e:
        raise ValueError(f"checkpoint {fpath!r} is truncated or not a singa checkpoint "
                         f"(not a readable zip archive: {e})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"checkpoint {fpath!r} is not a singa checkpoint (a bare .npy file)")
    with npz:
        _check_member_sizes(npz, fpath)
        doc = _read_meta(npz, fpath)
        arrays = {}
        for name, entry in doc["arrays"].items():
            arrays[name] = _read_array(npz, fpath, name, entry)
    return arrays, doc["meta"]


def _check_member_sizes(npz, fpath):
    """ValueError for a member whose stored size is larger than the file."""
    total = os.path.getsize(fpath)
    for info in npz.zip.infolist():
        if info.compress_size > total or (info.compress_type == zipfile.ZIP_STORED
                                          and info.file_size != info.compress_size):
            raise ValueError(f"checkpoint {fpath!r}: member {info.filename!r} declares "
                             f"{info.file_size} bytes ({info.compress_size} stored) in a "
                             f"file of {total} bytes; the file is damaged")


def _read_meta(npz, fpath):
    try:
        size = npz.zip.getinfo(_META).file_size
        if size > _MAX_META_BYTES:
            raise ValueError(f"{size} bytes is more than a checkpoint's metadata can be")
        with npz.zip.open(_META) as f:
            raw = _read_exactly(f, size)
        doc = json.loads(bytes(raw).decode("utf-8"))
    except _READ_ERRORS + (UnicodeDecodeError,) as e:
        raise ValueError(f"checkpoint {fpath!r}: metadata entry {_META!r} is missing or "
                         f"corrupted ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"checkpoint {fpath!r} is not a singa checkpoint (format tag missing)")
    if doc.get("version") != VERSION:
        raise ValueError(f"checkpoint {fpath!r} has version {doc.get('version')!r}; "
                         f"this singa reads version {VERSION}")
    if not isinstance(doc.get("arrays"), dict):
        raise ValueError(f"checkpoint {fpath!r}: metadata has no array index")
    return doc


def _read_array(npz, fpath, name, entry):
    where = f"checkpoint {fpath!r}: entry for {name!r}"

    def corrupted(e):
        return ValueError(f"{where} is truncated or corrupted ({e})")

    try:
        f = npz.zip.open(entry["file"])
    except _READ_ERRORS + (TypeError,) as e:
        raise corrupted(e) from None
    with f:
        try:
            shape, fortran, dtype = _read_npy_header(f)
        except _READ_ERRORS as e:
            raise corrupted(e) from None
        # The index and the header must agree before anything is allocated.
        want_shape, want_dtype = entry.get("shape", []), entry.get("dtype")
        if list(shape) != list(want_shape) or str(dtype) != want_dtype:
            raise ValueError(f"{where} holds {dtype} {shape} but the index says "
                             f"{want_dtype} {want_shape}")
        need = dtype.itemsize
        for d in shape:
            need *= d
        try:
            data = _read_exactly(f, need)
        except _READ_ERRORS as e:
            raise corrupted(e) from None
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _read_npy_header(f):
    """(shape, fortran_order, dtype) of a .npy member, read before its data."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f".npy format version {version} is not supported")
    if dtype.hasobject:
        raise ValueError(f"dtype {dtype} holds Python objects, which are never unpickled")
    return shape, fortran, dtype


def _read_exactly(f, need):
    """need bytes from f, which must then be at its end. Read in pieces, so
    memory follows what the archive holds rather than what it claims."""
    data = bytearray()
    while len(data) <= need:
        piece = f.read(min(_CHUNK, need + 1 - len(data)))
        if not piece:
            break
        data += piece
    if len(data) != need:
        got = "more" if len(data) > need else len(data)
        raise ValueError(f"the header declares {need} bytes of data, the member holds {got}")
    # Reading to the end makes zipfile verify the member's CRC.
    f.read(1)
    return data
