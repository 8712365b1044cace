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


# ---- checkpoints written by Apache SINGA's Model.save_states ----
#
# SINGA writes a zip holding two members: "tensor_dict.npz" (NumPy's savez of
# name -> array) and "states_attr.json" (name -> {"state_type": 0 for a model
# state, 1 for an aux state, "shape": [...], "dtype": SINGA's dtype code}).
# Nothing of it is trusted: every declared size is checked against the
# others before memory is taken, object and structured dtypes are refused,
# and nothing is unpickled.

SINGA_TENSORS = "tensor_dict.npz"
SINGA_ATTRS = "states_attr.json"
MODEL_STATE, AUX_STATE = 0, 1
# SINGA's dtype codes (kFloat32, kFloat16, kInt, kChar, kDouble).
_SINGA_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32),
                 3: np.dtype(np.int8), 4: np.dtype(np.float64)}
# DEFLATE cannot expand data more than about 1032 times; a member declaring
# more than this ratio is a forged header or a zip bomb.
_MAX_RATIO = 1100
_MAX_ATTRS_BYTES = 64 << 20


def is_singa_format(fpath):
    """Whether fpath is a zip holding SINGA's two checkpoint members."""
    try:
        with zipfile.ZipFile(os.fspath(fpath)) as zf:
            names = set(zf.namelist())
    except _READ_ERRORS:
        return False
    return SINGA_TENSORS in names and SINGA_ATTRS in names


def _member_info(zf, name, fpath, limit=None):
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ValueError(f"checkpoint {fpath!r} has no member {name!r}") from None
    if info.flag_bits & 0x1:
        raise ValueError(f"checkpoint {fpath!r}: member {name!r} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED:
        plausible = info.file_size == info.compress_size
    else:
        plausible = info.file_size <= max(info.compress_size, 1) * _MAX_RATIO
    if not plausible:
        raise ValueError(f"checkpoint {fpath!r}: member {name!r} declares {info.file_size} "
                         f"bytes from {info.compress_size} stored bytes (forged sizes or a "
                         f"zip bomb)")
    if limit is not None and info.file_size > limit:
        raise ValueError(f"checkpoint {fpath!r}: member {name!r} declares {info.file_size} "
                         f"bytes, more than the {limit} allowed")
    return info


def _read_attrs(zf, fpath):
    info = _member_info(zf, SINGA_ATTRS, fpath, _MAX_ATTRS_BYTES)
    try:
        doc = json.loads(zf.read(info).decode("utf-8"))
    except _READ_ERRORS + (UnicodeDecodeError,) as e:
        raise ValueError(f"checkpoint {fpath!r}: {SINGA_ATTRS} is corrupted ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"checkpoint {fpath!r}: {SINGA_ATTRS} is not a JSON object")
    attrs = {}
    for name, a in doc.items():
        where = f"checkpoint {fpath!r}: entry {name!r} of {SINGA_ATTRS}"
        if not isinstance(a, dict):
            raise ValueError(f"{where} is not an object")
        kind, shape, code = a.get("state_type"), a.get("shape"), a.get("dtype")
        if kind not in (MODEL_STATE, AUX_STATE) or isinstance(kind, bool):
            raise ValueError(f"{where} has state_type {kind!r}; expected 0 (model) or 1 (aux)")
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"{where} has shape {shape!r}; expected a list of sizes")
        if code not in _SINGA_DTYPES or isinstance(code, bool):
            raise ValueError(f"{where} has dtype {code!r}; expected one of SINGA's codes "
                             f"{sorted(_SINGA_DTYPES)}")
        attrs[name] = (kind, tuple(shape), _SINGA_DTYPES[code])
    return attrs


def _copy_member(zf, info, fpath):
    """The member's bytes in a temporary file (memory below 64 MiB), read
    in chunks up to its declared size; the zip CRC is checked at the end."""
    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    try:
        with zf.open(info) as src:
            left = info.file_size
            while left > 0:
                chunk = src.read(min(_CHUNK, left))
                if not chunk:
                    raise ValueError("member ends early")
                out.write(chunk)
                left -= len(chunk)
            if src.read(1):
                raise ValueError("member is longer than declared")
    except _READ_ERRORS as e:
        out.close()
        raise ValueError(f"checkpoint {fpath!r}: member {info.filename!r} is truncated or "
                         f"corrupted ({e})") from None
    out.seek(0)
    return out


def _read_npy(npz, name, want, fpath):
    """The array stored as name.npy in the inner archive, checked against
    want = (kind, shape, dtype) from the attributes before it is read."""
    where = f"checkpoint {fpath!r}: array {name!r}"
    info = _member_info(npz, name + ".npy", fpath)
    _, shape, dtype = want
    try:
        with npz.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                hshape, fortran, hdtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                hshape, fortran, hdtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if hdtype.hasobject or hdtype.fields is not None or hdtype.subdtype is not None:
                raise TypeError(f"{where} has dtype {hdtype}; only plain numeric arrays load "
                                "(nothing is unpickled)")
            if tuple(hshape) != shape or hdtype.newbyteorder("=") != dtype:
                raise ValueError(f"{where} holds {hdtype} {tuple(hshape)} but "
                                 f"{SINGA_ATTRS} says {dtype} {shape}")
            count = 1
            for d in shape:
                count *= d
            nbytes = count * dtype.itemsize
            header_end = f.tell()
            if nbytes > info.file_size - header_end:
                raise ValueError(f"{where} declares {nbytes} bytes of data but its member "
                                 f"holds {info.file_size} bytes")
            data = f.read(nbytes)
            if len(data) != nbytes:
                raise ValueError(f"{where} is truncated")
            if f.read(1):
                raise ValueError(f"{where} has trailing bytes after its data")
    except (TypeError, ValueError) as e:
        if str(e).startswith(where):
            raise
        raise ValueError(f"{where} is corrupted ({e})") from None
    except _READ_ERRORS as e:
        raise ValueError(f"{where} is truncated or corrupted ({e})") from None
    arr = np.frombuffer(data, dtype=hdtype, count=count)
    arr = arr.reshape(shape, order="F" if fortran else "C")
    return np.ascontiguousarray(arr.astype(dtype, copy=False))


def load_singa(fpath):
    """Reads a checkpoint written by Apache SINGA's ``Model.save_states``.

    Returns (model_states, aux_states), each {name: ndarray}. Raises
    FileNotFoundError for a missing file and ValueError (TypeError for an
    object or structured array) naming the entry for anything else wrong;
    nothing is allocated before its size is checked.
    """
    fpath = os.fspath(fpath)
    if not os.path.exists(fpath):
        raise FileNotFoundError(f"checkpoint {fpath!r} does not exist")
    try:
        zf = zipfile.ZipFile(fpath)
    except _READ_ERRORS as e:
        raise ValueError(f"checkpoint {fpath!r} is not a readable zip archive ({e})") from None
    with zf:
        attrs = _read_attrs(zf, fpath)
        info = _member_info(zf, SINGA_TENSORS, fpath)
        with _copy_member(zf, info, fpath) as inner:
            try:
                npz = zipfile.ZipFile(inner)
            except _READ_ERRORS as e:
                raise ValueError(f"checkpoint {fpath!r}: {SINGA_TENSORS} is not a readable "
                                 f"npz archive ({e})") from None
            with npz:
                stored = {n[:-4] for n in npz.namelist() if n.endswith(".npy")}
                others = [n for n in npz.namelist() if not n.endswith(".npy")]
                if others or stored != set(attrs):
                    odd = sorted(stored ^ set(attrs)) + others
                    raise ValueError(f"checkpoint {fpath!r}: {SINGA_TENSORS} and {SINGA_ATTRS} "
                                     f"disagree about {odd[0]!r}")
                model, aux = {}, {}
                for name, want in attrs.items():
                    arr = _read_npy(npz, name, want, fpath)
                    (model if want[0] == MODEL_STATE else aux)[name] = arr
    return model, aux
