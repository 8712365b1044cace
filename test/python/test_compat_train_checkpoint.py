"""Reading checkpoints written by Apache SINGA's Model.save_states: a zip of
tensor_dict.npz (NumPy's savez) and states_attr.json. The fixtures are made
here with NumPy, zipfile and json, as SINGA writes them (never pickle),
including hostile ones that must raise clean errors."""

import io
import json
import struct
import zipfile

import numpy as np
import pytest

from singa import checkpoint, layer, model, opt, tensor

RNG = np.random.default_rng(7)


class Net(model.Model):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(4, 3, padding=1)
        self.bn1 = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)

    def forward(self, x):
        return self.fc(self.flat(self.relu(self.bn1(self.conv1(x)))))


def _x(n=2):
    return tensor.from_numpy(RNG.standard_normal((n, 2, 5, 5)).astype(np.float32))


def _net():
    m = Net()
    m.compile([_x()], is_train=False)
    return m


def _singa_states(m):
    """What SINGA's save_states would hold for m: new random values under the
    names SINGA gives (layer path + '.' + attribute)."""
    states = {k: RNG.standard_normal(v.shape).astype(np.float32)
              for k, v in m.get_states().items()}
    states["bn1.running_var"] = np.abs(states["bn1.running_var"]) + 0.5
    return states


# SINGA's dtype codes: kFloat32 = 0, kFloat16 = 1, kInt = 2.
_CODE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2}


def _write_singa(path, model_states, aux_states=(), attrs=None, npz_bytes=None,
                 compression=zipfile.ZIP_DEFLATED):
    aux_states = dict(aux_states)
    buf = io.BytesIO()
    np.savez(buf, **model_states, **aux_states)
    if attrs is None:
        attrs = {}
        for kind, group in ((0, model_states), (1, aux_states)):
            for k, v in group.items():
                attrs[k] = {"state_type": kind, "shape": list(v.shape), "dtype": _CODE[v.dtype]}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", npz_bytes if npz_bytes is not None else buf.getvalue(),
                    compress_type=compression)
        zf.writestr("states_attr.json", json.dumps(attrs), compress_type=compression)


def test_names_match_singa():
    m = _net()
    assert list(m.get_states()) == [
        "conv1.W", "conv1.b", "bn1.scale", "bn1.bias", "bn1.running_mean", "bn1.running_var",
        "fc.W", "fc.b"]


def test_loads_singa_checkpoint_and_returns_aux_tensors(tmp_path):
    m = _net()
    want = _singa_states(m)
    path = tmp_path / "singa.zip"
    _write_singa(path, want, {"epoch": np.array([7], np.int32),
                              "lr": np.array([0.05], np.float32)})
    assert checkpoint.is_singa_format(path)
    aux = m.load_states(path)
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(v.numpy(), want[k], err_msg=k)
    assert set(aux) == {"epoch", "lr"}
    assert all(isinstance(v, tensor.Tensor) for v in aux.values())
    assert tensor.to_numpy(aux["epoch"])[0] == 7
    np.testing.assert_allclose(tensor.to_numpy(aux["lr"]), [0.05])
    # The forward pass uses the loaded values (checked against NumPy).
    m.eval()
    x = _x(1)
    got = m(x).numpy()
    xn = x.numpy()
    w = want["conv1.W"]
    xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.einsum("nchw,ochw->no", np.lib.stride_tricks.sliding_window_view(
        xp, (3, 3), axis=(2, 3)).transpose(0, 2, 3, 1, 4, 5).reshape(25, 2, 3, 3), w)
    conv = conv.reshape(5, 5, 4).transpose(2, 0, 1)[None] + want["conv1.b"][None, :, None, None]
    bn = (conv - want["bn1.running_mean"][None, :, None, None]) / np.sqrt(
        want["bn1.running_var"][None, :, None, None] + 1e-5)
    bn = bn * want["bn1.scale"][None, :, None, None] + want["bn1.bias"][None, :, None, None]
    ref = np.maximum(bn, 0).reshape(1, -1) @ want["fc.W"] + want["fc.b"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_stored_uncompressed_and_big_endian_arrays_load(tmp_path):
    m = _net()
    want = _singa_states(m)
    big = {k: v.astype(">f4") for k, v in want.items()}
    attrs = {k: {"state_type": 0, "shape": list(v.shape), "dtype": 0} for k, v in want.items()}
    path = tmp_path / "s.zip"
    _write_singa(path, big, attrs=attrs, compression=zipfile.ZIP_STORED)
    m.load_states(path)
    np.testing.assert_array_equal(m.fc.W.numpy(), want["fc.W"])


def test_singa_checkpoint_mismatches_change_nothing(tmp_path):
    m = _net()
    before = {k: v.numpy().copy() for k, v in m.get_states().items()}
    states = _singa_states(m)
    missing = dict(states)
    del missing["bn1.running_var"]
    _write_singa(tmp_path / "a.zip", missing)
    with pytest.raises(ValueError, match="lacks 'bn1.running_var'"):
        m.load_states(tmp_path / "a.zip")
    wrong_shape = dict(states, **{"fc.W": np.zeros((3, 3), np.float32)})
    _write_singa(tmp_path / "b.zip", wrong_shape)
    with pytest.raises(ValueError, match=r"'fc\.W' has shape \(3, 3\).*\(100, 3\)"):
        m.load_states(tmp_path / "b.zip")
    wrong_dtype = dict(states, **{"fc.b": np.zeros(3, np.float16)})
    _write_singa(tmp_path / "c.zip", wrong_dtype)
    with pytest.raises(TypeError, match=r"'fc\.b' is float16.*float32"):
        m.load_states(tmp_path / "c.zip")
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)


def _model_and_states(tmp_path):
    m = _net()
    return m, _singa_states(m), tmp_path / "bad.zip"


def test_attrs_that_disagree_with_the_arrays_are_refused(tmp_path):
    m, states, path = _model_and_states(tmp_path)
    attrs = {k: {"state_type": 0, "shape": list(v.shape), "dtype": 0} for k, v in states.items()}
    bad = dict(attrs, **{"fc.b": {"state_type": 0, "shape": [4], "dtype": 0}})
    _write_singa(path, states, attrs=bad)
    with pytest.raises(ValueError, match=r"'fc\.b' holds float32 \(3,\).*says float32 \(4,\)"):
        m.load_states(path)
    bad = dict(attrs, **{"fc.b": {"state_type": 0, "shape": [3], "dtype": 4}})
    _write_singa(path, states, attrs=bad)
    with pytest.raises(ValueError, match=r"'fc\.b' holds float32.*says float64"):
        m.load_states(path)
    for field, value, msg in (("state_type", 5, "state_type 5"), ("dtype", 9, "dtype 9"),
                              ("shape", [-1], "shape"), ("shape", "3", "shape")):
        bad = dict(attrs, **{"fc.b": dict(attrs["fc.b"], **{field: value})})
        _write_singa(path, states, attrs=bad)
        with pytest.raises(ValueError, match=msg):
            m.load_states(path)
    extra = dict(attrs, ghost={"state_type": 1, "shape": [1], "dtype": 0})
    _write_singa(path, states, attrs=extra)
    with pytest.raises(ValueError, match="disagree about 'ghost'"):
        m.load_states(path)


def _npy_with_header(shape, dtype="<f4", payload=b""):
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode("latin1")
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def _npz_with(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name + ".npy", data)
    return buf.getvalue()


def test_huge_declared_array_is_refused_before_allocating(tmp_path):
    m, states, path = _model_and_states(tmp_path)
    shape = (1 << 40,)
    attrs = {"x": {"state_type": 1, "shape": list(shape), "dtype": 0}}
    _write_singa(path, {}, attrs=attrs,
                 npz_bytes=_npz_with({"x": _npy_with_header(shape, payload=b"\0" * 64)}))
    with pytest.raises(ValueError, match=r"'x' declares 4398046511104 bytes"):
        checkpoint.load_singa(path)


def test_forged_zip_sizes_are_refused(tmp_path):
    path = tmp_path / "bomb.zip"
    _write_singa(path, {"a": np.zeros(4, np.float32)})
    data = bytearray(path.read_bytes())
    # Make the central directory claim a 64 GiB states_attr.json.
    i = data.rfind(b"PK\x01\x02")
    while i >= 0:
        name_len = struct.unpack_from("<H", data, i + 28)[0]
        if data[i + 46:i + 46 + name_len] == b"states_attr.json":
            struct.pack_into("<I", data, i + 24, 0xFFFFFFF0)
        i = data.rfind(b"PK\x01\x02", 0, i)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="states_attr.json.*declares"):
        checkpoint.load_singa(path)


def test_pickled_object_arrays_are_never_unpickled(tmp_path, monkeypatch):
    import pickle
    calls = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: calls.append(a))
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    attrs = {"obj": {"state_type": 1, "shape": [1], "dtype": 0}}
    path = tmp_path / "evil.zip"
    _write_singa(path, {}, attrs=attrs, npz_bytes=_npz_with({"obj": buf.getvalue()}))
    with pytest.raises(TypeError, match="'obj' has dtype object.*unpickled"):
        checkpoint.load_singa(path)
    assert calls == []


def test_truncated_and_garbled_files(tmp_path):
    m, states, path = _model_and_states(tmp_path)
    _write_singa(path, states)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError):
        m.load_states(path)
    npz = io.BytesIO()
    np.savez(npz, **states)
    raw = bytearray(npz.getvalue())
    j = bytes(raw).find(states["fc.W"].tobytes())
    raw[j + 5] ^= 0xFF
    _write_singa(path, states, npz_bytes=bytes(raw), compression=zipfile.ZIP_STORED)
    with pytest.raises(ValueError, match=r"'fc\.W'.*corrupted"):
        m.load_states(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", b"not a zip")
        zf.writestr("states_attr.json", "{}")
    with pytest.raises(ValueError, match="not a readable npz"):
        m.load_states(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", _npz_with({}))
        zf.writestr("states_attr.json", "[not json")
    with pytest.raises(ValueError, match="states_attr.json is corrupted"):
        m.load_states(path)
    with pytest.raises(FileNotFoundError):
        checkpoint.load_singa(tmp_path / "missing.zip")


def test_singa_own_format_still_round_trips_with_sgd_states(tmp_path):
    x = _x(4)
    m = _net()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m.train()
    for _ in range(2):
        m.optimizer(autograd_loss(m, x))
    m.save_states(tmp_path / "own.zip", aux_states={"epoch": tensor.from_numpy(
        np.array([2], np.int32))})
    assert not checkpoint.is_singa_format(tmp_path / "own.zip")
    m2 = _net()
    m2.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    aux = m2.load_states(tmp_path / "own.zip")
    assert tensor.to_numpy(aux["epoch"])[0] == 2
    assert set(m2.optimizer.get_states()["moments"]) == set(m.get_params())
    for k, v in m.optimizer.get_states()["moments"].items():
        np.testing.assert_array_equal(m2.optimizer.get_states()["moments"][k].numpy(),
                                      v.numpy())


def autograd_loss(m, x):
    from singa import autograd
    y = tensor.from_numpy(np.array([0, 1, 2, 0][:x.shape[0]], np.int32))
    return autograd.softmax_cross_entropy(m.forward(x), y)
