"""singa.snapshot: SINGA's Snapshot(f, mode, buffer_size) with write(name,
tensor) and read(). Round trips against NumPy values, the file layout the
module doc gives (decoded and encoded here with struct, independently of
the module), and typed errors for misuse and for bad files."""

import gc
import os
import struct
import zlib

import numpy as np
import pytest

from singa import snapshot, tensor
from singa.snapshot import Snapshot, SnapshotError

CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2}
DTYPES = {v: k for k, v in CODES.items()}


def encode(records, version=1, count=None):
    """A snapshot file, written from the documented layout."""
    out = [b"SINGASNP" + struct.pack("<II", version, 0)]
    for name, arr in records:
        raw = name.encode("utf-8")
        head = struct.pack("<I", len(raw)) + raw + struct.pack("<BB", CODES[arr.dtype],
                                                               arr.ndim)
        head += b"".join(struct.pack("<Q", d) for d in arr.shape)
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        head += struct.pack("<Q", len(data))
        out.append(head + data + struct.pack("<I", zlib.crc32(head + data)))
    end = struct.pack("<IQ", 0xFFFFFFFF, len(records) if count is None else count)
    out.append(end + struct.pack("<I", zlib.crc32(end)))
    return b"".join(out)


def decode(blob):
    """The records of a snapshot file, read from the documented layout."""
    assert blob[:8] == b"SINGASNP" and struct.unpack_from("<II", blob, 8) == (1, 0)
    pos, out = 16, []
    while True:
        (n,) = struct.unpack_from("<I", blob, pos)
        if n == 0xFFFFFFFF:
            (count,) = struct.unpack_from("<Q", blob, pos + 4)
            assert count == len(out) and pos + 16 == len(blob)
            return out
        start = pos
        name = blob[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        code, rank = struct.unpack_from("<BB", blob, pos)
        pos += 2
        dims = struct.unpack_from(f"<{rank}Q", blob, pos)
        pos += 8 * rank
        (nbytes,) = struct.unpack_from("<Q", blob, pos)
        pos += 8
        arr = np.frombuffer(blob[pos:pos + nbytes], DTYPES[code].newbyteorder("<"))
        pos += nbytes
        assert struct.unpack_from("<I", blob, pos)[0] == zlib.crc32(blob[start:pos])
        pos += 4
        out.append((name, arr.reshape(dims)))


@pytest.fixture
def values(rng):
    return {
        "conv1.W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "conv1.b": rng.standard_normal(4).astype(np.float32),
        "bn.running_var": rng.random((1, 4, 1, 1)).astype(np.float32),
        "embed.idx": rng.integers(-2**31, 2**31 - 1, (3, 5), dtype=np.int64).astype(np.int32),
        "half": rng.standard_normal((2, 7)).astype(np.float16),
        "empty": np.zeros((0, 3), np.float32),
        "ünïcode name": np.array([np.inf, -np.inf, np.nan, -0.0], np.float32),
    }


def write_all(prefix, values, **kw):
    sn = Snapshot(prefix, True, **kw)
    for name, arr in values.items():
        sn.write(name, tensor.from_numpy(arr))
    sn.close()


def test_round_trip_keeps_names_order_dtypes_and_values(tmp_path, values):
    prefix = str(tmp_path / "model")
    write_all(prefix, values)
    got = Snapshot(prefix, False).read()
    assert list(got) == list(values)
    for name, arr in values.items():
        t = got[name]
        assert isinstance(t, tensor.Tensor)
        out = tensor.to_numpy(t)
        assert out.dtype == arr.dtype and out.shape == arr.shape, name
        np.testing.assert_array_equal(out, arr)
        assert np.array_equal(np.signbit(out), np.signbit(arr)), name
    # the file is the documented layout, byte for byte as encoded here
    blob = (tmp_path / "model.bin").read_bytes()
    assert blob == encode(list(values.items()))
    for (name, arr), (n2, a2) in zip(values.items(), decode(blob)):
        assert name == n2
        np.testing.assert_array_equal(arr, a2)
    desc = (tmp_path / "model.desc").read_text(encoding="utf-8").splitlines()
    assert desc[0] == "conv1.W float32 [4, 3, 3, 3]" and len(desc) == len(values)


def test_reads_a_file_encoded_independently(tmp_path, rng):
    recs = [("w", rng.standard_normal((3, 2)).astype(np.float32)),
            ("i", np.arange(-4, 4, dtype=np.int32))]
    (tmp_path / "x.bin").write_bytes(encode(recs))
    got = Snapshot(str(tmp_path / "x"), False).read()
    for name, arr in recs:
        np.testing.assert_array_equal(tensor.to_numpy(got[name]), arr)


def test_writes_through_a_small_buffer_and_from_any_device(tmp_path, rng, dev):
    big = rng.standard_normal((3, 1 << 18)).astype(np.float32)     # 3 MB
    sn = Snapshot(tmp_path / "big", True, buffer_size=1)
    sn.write("big", tensor.from_numpy(big, dev))
    sn.write("t", tensor.from_numpy(big[:, :5], dev).T())          # a transposed view
    sn.close()
    got = Snapshot(tmp_path / "big", False).read()
    np.testing.assert_array_equal(tensor.to_numpy(got["big"]), big)
    np.testing.assert_array_equal(tensor.to_numpy(got["t"]), big[:, :5].T)


def test_file_appears_on_close_and_replaces_the_old_one(tmp_path, rng):
    prefix = str(tmp_path / "m")
    a = rng.standard_normal(3).astype(np.float32)
    write_all(prefix, {"a": a})
    sn = Snapshot(prefix, True)
    sn.write("b", tensor.from_numpy(a * 2))
    # until closed, the previous snapshot is what a reader sees
    assert list(Snapshot(prefix, False).read()) == ["a"]
    sn.close()
    sn.close()                              # again: nothing
    got = Snapshot(prefix, False).read()
    assert list(got) == ["b"]
    np.testing.assert_array_equal(tensor.to_numpy(got["b"]), a * 2)
    assert sorted(os.listdir(tmp_path)) == ["m.bin", "m.desc"]


def test_dropping_an_unclosed_snapshot_finishes_it(tmp_path):
    # SINGA's scripts never close: its C++ destructor finishes the file
    sn = Snapshot(str(tmp_path / "m"), True)
    sn.write("x", tensor.from_numpy(np.arange(4, dtype=np.float32)))
    del sn
    gc.collect()
    got = Snapshot(str(tmp_path / "m"), False).read()
    np.testing.assert_array_equal(tensor.to_numpy(got["x"]), np.arange(4))


def test_with_block_closes_and_an_error_inside_keeps_the_old_file(tmp_path):
    prefix = tmp_path / "m"
    with Snapshot(prefix, True) as sn:
        sn.write("x", tensor.from_numpy(np.ones(2, np.float32)))
    with pytest.raises(KeyError):
        with Snapshot(prefix, True) as sn:
            sn.write("y", tensor.from_numpy(np.zeros(2, np.float32)))
            raise KeyError("interrupted")
    assert list(Snapshot(prefix, False).read()) == ["x"]
    assert sorted(os.listdir(tmp_path)) == ["m.bin", "m.desc"]


def test_misuse_raises_typed_errors(tmp_path):
    prefix = str(tmp_path / "m")
    t = tensor.from_numpy(np.ones(2, np.float32))
    with pytest.raises(FileNotFoundError, match="m.bin"):
        Snapshot(prefix, False)
    with pytest.raises(TypeError, match="mode"):
        Snapshot(prefix, "w")
    with pytest.raises(TypeError, match="buffer_size"):
        Snapshot(prefix, True, buffer_size=1.5)
    for bad in (0, 1025):
        with pytest.raises(ValueError, match="buffer_size must be 1 to 1024 MB"):
            Snapshot(prefix, True, buffer_size=bad)
    with pytest.raises(TypeError, match="prefix"):
        Snapshot(3, True)
    sn = Snapshot(prefix, True)
    with pytest.raises(TypeError, match="param_name"):
        sn.write(b"x", t)
    with pytest.raises(TypeError, match="'x'.*ndarray"):
        sn.write("x", np.ones(2))
    sn.write("x", t)
    with pytest.raises(ValueError, match="'x' is already"):
        sn.write("x", t)
    with pytest.raises(ValueError, match="opened for writing"):
        sn.read()
    sn.close()
    with pytest.raises(ValueError, match="closed"):
        sn.write("y", t)
    with pytest.raises(ValueError, match="opened for reading"):
        Snapshot(prefix, False).write("y", t)


def write_bin(tmp_path, blob):
    (tmp_path / "bad.bin").write_bytes(blob)
    return Snapshot(str(tmp_path / "bad"), False)


@pytest.mark.parametrize("blob, match", [
    (b"", "header needs 16 bytes"),
    (b"\x0a\x04name" + bytes(40), "not a singa snapshot"),
    (b"SINGASNP" + struct.pack("<II", 2, 0), "version 2"),
    (encode([("w", np.ones(2, np.float32))])[:-3], "end mark"),
    (encode([("w", np.ones(2, np.float32))]) + b"\0", "1 bytes after the end mark"),
    (encode([("w", np.ones(2, np.float32))], count=5), "says 5 records, read 1"),
    (encode([("a", np.ones(2, np.float32)), ("a", np.zeros(1, np.float32))]),
     "'a' appears twice"),
])
def test_bad_files_raise_snapshot_errors(tmp_path, blob, match):
    with pytest.raises(SnapshotError, match=match):
        write_bin(tmp_path, blob).read()


def test_every_truncation_and_every_flipped_byte_is_detected(tmp_path):
    blob = encode([("w", np.arange(6, dtype=np.float32).reshape(2, 3)),
                   ("i", np.arange(3, dtype=np.int32))])
    for n in range(len(blob)):
        with pytest.raises(SnapshotError):
            write_bin(tmp_path, blob[:n]).read()
    for k in range(len(blob)):
        bad = bytearray(blob)
        bad[k] ^= 0x10
        with pytest.raises(SnapshotError):
            write_bin(tmp_path, bytes(bad)).read()


def test_forged_sizes_are_refused_before_allocating(tmp_path):
    head = b"SINGASNP" + struct.pack("<II", 1, 0)
    rec = struct.pack("<I", 1) + b"w" + struct.pack("<BB", 0, 2)
    huge = head + rec + struct.pack("<QQQ", 1 << 30, 1 << 30, 1 << 62)
    with pytest.raises(SnapshotError, match="needs 4611686018427387904 bytes"):
        write_bin(tmp_path, huge).read()
    mismatch = head + rec + struct.pack("<QQQ", 2, 3, 20) + bytes(24)
    with pytest.raises(SnapshotError, match="20 data bytes do not hold shape \\(2, 3\\)"):
        write_bin(tmp_path, mismatch).read()
    code = head + struct.pack("<I", 1) + b"w" + struct.pack("<BB", 9, 0) + bytes(20)
    with pytest.raises(SnapshotError, match="unknown dtype code 9"):
        write_bin(tmp_path, code).read()
    rank = head + struct.pack("<I", 1) + b"w" + struct.pack("<BB", 0, 200) + bytes(20)
    with pytest.raises(SnapshotError, match="rank 200"):
        write_bin(tmp_path, rank).read()
    name = head + struct.pack("<I", 1 << 31) + bytes(20)
    with pytest.raises(SnapshotError, match="record 0's name needs 2147483648 bytes"):
        write_bin(tmp_path, name).read()
    assert issubclass(SnapshotError, ValueError) and snapshot.SnapshotError is SnapshotError


def test_a_models_parameters_through_a_snapshot(tmp_path, rng):
    # SINGA's pattern: write get_params() one by one, read them into a new
    # model of the same structure with set_params; both then compute alike
    from singa import layer
    x = tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    a, b = layer.Linear(3), layer.Linear(3)
    a(x), b(x)
    sn = Snapshot(str(tmp_path / "lin"), True)
    for name, p in a.get_params().items():
        sn.write(name, p)
    del sn
    b.set_params(Snapshot(str(tmp_path / "lin"), False).read())
    pa = {k: tensor.to_numpy(v) for k, v in a.get_params().items()}
    want = tensor.to_numpy(x) @ pa["W"] + pa["b"]
    np.testing.assert_allclose(tensor.to_numpy(b(x)), want, rtol=1e-5, atol=1e-6)
