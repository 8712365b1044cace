"""The checkpoint file format: arrays + JSON, atomic writes, clear errors."""

import io
import json
import os
import zipfile

import numpy as np
import pytest

from singa import checkpoint


def _arrays():
    return {"fc.W": np.arange(12, dtype=np.float32).reshape(3, 4),
            "fc.b": np.ones(4, np.float32),
            "odd/name with spaces": np.array(7, dtype=np.int64)}


def test_round_trip(tmp_path):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), {"epoch": 3, "note": "hi"})
    arrays, meta = checkpoint.load(path)
    assert meta == {"epoch": 3, "note": "hi"}
    assert set(arrays) == set(_arrays())
    for k, v in _arrays().items():
        np.testing.assert_array_equal(arrays[k], v)
        assert arrays[k].dtype == v.dtype


def test_readable_by_numpy_without_pickle(tmp_path):
    path = tmp_path / "ck.npz"
    checkpoint.save(path, _arrays(), None)
    with np.load(path, allow_pickle=False) as npz:
        doc = json.loads(npz.zip.read("meta.json"))
        assert doc["format"] == "singa-checkpoint"
        member = doc["arrays"]["fc.W"]["file"][:-len(".npy")]
        np.testing.assert_array_equal(npz[member], _arrays()["fc.W"])


def test_refuses_object_arrays_on_save(tmp_path):
    with pytest.raises(TypeError, match="dtype object"):
        checkpoint.save(tmp_path / "x", {"a": np.array([{"x": 1}], dtype=object)})
    with pytest.raises(TypeError, match="JSON"):
        checkpoint.save(tmp_path / "x", {}, {"f": lambda: 0})


def _forge(path, members, meta):
    with zipfile.ZipFile(path, "w") as zf:
        for name, arr in members.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=True)
            zf.writestr(name, buf.getvalue())
        zf.writestr("meta.json", json.dumps(meta))


def test_never_unpickles(tmp_path):
    # A hand-made archive whose member is a pickled object array: loading
    # must refuse it rather than run pickle.
    path = tmp_path / "evil.zip"
    arr = np.array([{"payload": 1}], dtype=object)
    _forge(path, {"a0.npy": arr}, {"format": "singa-checkpoint", "version": 1, "meta": None,
                                   "arrays": {"w": {"file": "a0.npy", "shape": [1],
                                                    "dtype": "object"}}})
    with pytest.raises(ValueError, match="'w'"):
        checkpoint.load(path)


def test_crash_mid_save_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), {"epoch": 1})
    before = path.read_bytes()
    real = np.lib.format.write_array
    calls = []

    def dying_write(f, arr, **kw):
        calls.append(1)
        if len(calls) == 2:
            f.write(b"\0" * 10)
            raise OSError("disk full (simulated)")
        return real(f, arr, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", dying_write)
    with pytest.raises(OSError, match="simulated"):
        checkpoint.save(path, {k: v * 2 for k, v in _arrays().items()}, {"epoch": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.zip"], "the temporary file was left behind"
    assert checkpoint.load(path)[1] == {"epoch": 1}


def test_interrupt_mid_save_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), {"epoch": 1})

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(path, _arrays(), {"epoch": 2})
    monkeypatch.undo()
    assert checkpoint.load(path)[1] == {"epoch": 1}
    assert os.listdir(tmp_path) == ["ck.zip"]


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, 0.9])
def test_truncated_file_raises_value_error(tmp_path, keep):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), {"epoch": 1})
    data = path.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    path.write_bytes(data[:n])
    with pytest.raises(ValueError, match="truncated|not a singa checkpoint"):
        checkpoint.load(path)


def test_corrupted_array_names_the_entry(tmp_path):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), None)
    data = bytearray(path.read_bytes())
    i = bytes(data).find(_arrays()["fc.W"].tobytes())
    data[i + 9] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"'fc\.W'.*corrupted"):
        checkpoint.load(path)


def test_corrupted_metadata(tmp_path):
    path = tmp_path / "ck.zip"
    checkpoint.save(path, _arrays(), {"epoch": 1})
    data = bytearray(path.read_bytes())
    i = bytes(data).find(b'"format"')
    data[i + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="meta"):
        checkpoint.load(path)


def test_other_files_are_rejected(tmp_path):
    plain = tmp_path / "plain.npy"
    np.save(plain, np.zeros(3))
    with pytest.raises(ValueError, match="not a singa checkpoint"):
        checkpoint.load(plain)
    text = tmp_path / "text.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a singa checkpoint"):
        checkpoint.load(text)
    npz = tmp_path / "other.npz"
    np.savez(npz, a=np.zeros(2))
    with pytest.raises(ValueError, match="metadata"):
        checkpoint.load(npz)
    with pytest.raises(FileNotFoundError):
        checkpoint.load(tmp_path / "missing.zip")
