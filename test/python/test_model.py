"""Model: compile, training and evaluation modes, and checkpoints (round
trip with optimizer state, atomic save, damaged or mismatched files)."""

import os

import numpy as np
import pytest

from singa import autograd, checkpoint, layer, model, opt, tensor


class MLP(model.Model):
    def __init__(self, hidden=8, classes=3, dropout=0.0):
        super().__init__()
        self.fc1 = layer.Linear(hidden)
        self.bn = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.drop = layer.Dropout(dropout)
        self.fc2 = layer.Linear(classes)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc2(self.drop(self.relu(self.bn(self.fc1(x)))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = (np.argmax(x[:, :3], axis=1)).astype(np.int32)
    return x, y


def _trained(steps=20, optimizer=None, seed=0):
    x, y = _data(seed=seed)
    m = MLP()
    m.set_optimizer(optimizer or opt.SGD(lr=0.1, momentum=0.9))
    m.compile([tensor.from_numpy(x)], is_train=True)
    for _ in range(steps):
        m(tensor.from_numpy(x), tensor.from_numpy(y))
    return m, x, y


def test_compile_creates_named_params_without_side_effects():
    x, _ = _data()
    m = MLP()
    m.compile([tensor.from_numpy(x)], is_train=True, use_graph=True, sequential=True)
    assert m.graph_mode and m.sequential and m.training
    assert list(m.get_params()) == ["fc1.W", "fc1.b", "bn.scale", "bn.bias", "fc2.W", "fc2.b"]
    # The compile pass must not move batch-norm running statistics.
    np.testing.assert_array_equal(m.bn.running_mean.numpy(), 0.0)
    # compile(is_train=True) switches autograd to training, as SINGA's does.
    assert autograd.training is True
    m.compile([tensor.from_numpy(x)], is_train=False)
    assert autograd.training is False and not m.training
    with pytest.raises(TypeError, match="input 0 is a ndarray"):
        m.compile([x])
    with pytest.raises(TypeError, match="list of Tensors"):
        m.compile("x")


def test_training_lowers_loss_and_modes_dispatch():
    x, y = _data()
    m = MLP()
    m.set_optimizer(opt.Adam(lr=0.05))
    m.compile([tensor.from_numpy(x)])
    losses = [m(tensor.from_numpy(x), tensor.from_numpy(y))[1].item() for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0]
    assert autograd.training is True
    m.eval()
    assert autograd.training is False
    out = m(tensor.from_numpy(x))
    assert out.shape == (64, 3)
    acc = np.mean(np.argmax(out.numpy(), 1) == y)
    assert acc > 0.85
    # Evaluation on a different batch size.
    assert m(tensor.from_numpy(x[:7])).shape == (7, 3)


def test_save_load_round_trip_with_optimizer_state(tmp_path):
    m, x, y = _trained()
    path = tmp_path / "m.ckpt"
    m.save_states(path, aux_states={"epoch": 3, "best": 0.5,
                                    "lr_trace": np.array([0.1, 0.05], np.float32),
                                    "t": tensor.from_numpy(np.ones(2, np.float32))})
    m2 = MLP()
    m2.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m2.compile([tensor.from_numpy(x[:4])])
    aux = m2.load_states(path)
    assert aux["epoch"] == 3 and aux["best"] == 0.5
    np.testing.assert_allclose(aux["lr_trace"], [0.1, 0.05])
    assert isinstance(aux["t"], tensor.Tensor)
    np.testing.assert_allclose(aux["t"].numpy(), 1.0)
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(m2.get_states()[k].numpy(), v.numpy(), err_msg=k)
    assert float(m2.optimizer.step_counter) == float(m.optimizer.step_counter) == 20
    # Continuing training from the original and from the copy agrees, which
    # needs the momentum buffers to have been restored.
    for mm in (m, m2):
        for _ in range(3):
            mm(tensor.from_numpy(x), tensor.from_numpy(y))
    for k, v in m.get_params().items():
        np.testing.assert_allclose(m2.get_params()[k].numpy(), v.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=k)


def test_crash_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    m, x, y = _trained(steps=2)
    path = tmp_path / "m.ckpt"
    m.save_states(path, {"epoch": 1})
    before = path.read_bytes()
    m(tensor.from_numpy(x), tensor.from_numpy(y))
    real = np.lib.format.write_array
    count = [0]

    def crash(f, arr, **kw):
        count[0] += 1
        if count[0] == 3:
            raise RuntimeError("power cut (simulated)")
        return real(f, arr, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        m.save_states(path, {"epoch": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["m.ckpt"]
    assert MLP_loaded(path, x)["epoch"] == 1


def MLP_loaded(path, x):
    m = MLP()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m.compile([tensor.from_numpy(x)])
    return m.load_states(path)


def test_truncated_checkpoint_raises(tmp_path):
    m, x, _ = _trained(steps=1)
    path = tmp_path / "m.ckpt"
    m.save_states(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ValueError, match="truncated"):
        MLP_loaded(path, x)


def test_corrupted_checkpoint_names_the_parameter(tmp_path):
    m, x, _ = _trained(steps=1)
    path = tmp_path / "m.ckpt"
    m.save_states(path)
    data = bytearray(path.read_bytes())
    i = bytes(data).find(m.fc2.W.numpy().tobytes())
    assert i > 0
    data[i + 3] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"fc2\.W.*corrupted"):
        MLP_loaded(path, x)


def test_mismatched_checkpoint_names_the_parameter(tmp_path):
    m, x, _ = _trained(steps=1)
    path = tmp_path / "m.ckpt"
    m.save_states(path)
    other = MLP(hidden=16)
    other.compile([tensor.from_numpy(x)])
    before = other.fc1.W.numpy()
    with pytest.raises(ValueError, match=r"'fc1\.W' has shape \(5, 8\).*\(5, 16\)"):
        other.load_states(path)
    np.testing.assert_array_equal(other.fc1.W.numpy(), before)

    class Smaller(MLP):
        def __init__(self):
            super().__init__()
            del self.bn
            self.bn = layer.ReLU()

    s = Smaller()
    s.compile([tensor.from_numpy(x)])
    with pytest.raises(ValueError, match="bn.bias|bn.running_mean|bn.scale|bn.running_var"):
        s.load_states(path)


def test_optimizer_state_mismatch_is_reported(tmp_path):
    m, x, _ = _trained(steps=1)
    path = tmp_path / "m.ckpt"
    m.save_states(path)
    m2 = MLP()
    m2.set_optimizer(opt.Adam())
    m2.compile([tensor.from_numpy(x)])
    with pytest.raises(ValueError, match="SGD.*Adam"):
        m2.load_states(path)


def test_checkpoint_is_plain_arrays_and_json(tmp_path):
    m, _, _ = _trained(steps=1)
    path = tmp_path / "m.ckpt"
    m.save_states(path, {"epoch": 4})
    arrays, meta = checkpoint.load(path)
    assert meta["aux"] == {"epoch": 4} and meta["optimizer"] == "SGD"
    assert "model/fc1.W" in arrays and "optimizer/moments/fc1.W" in arrays
    assert all(a.dtype != object for a in arrays.values())


def test_load_and_save_before_compile_raise(tmp_path):
    with pytest.raises(ValueError, match="compile"):
        MLP().load_states(tmp_path / "missing")
    with pytest.raises(ValueError, match="compile"):
        MLP().save_states(tmp_path / "x")
    with pytest.raises(TypeError, match="Optimizer"):
        MLP().set_optimizer("sgd")


def test_aux_states_must_be_serialisable(tmp_path):
    m, _, _ = _trained(steps=1)
    with pytest.raises(TypeError, match="'fn'"):
        m.save_states(tmp_path / "m", {"fn": print})
