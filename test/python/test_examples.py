"""Smoke tests of the examples: each runs a few steps in a subprocess."""

import gzip
import importlib.util
import os
import struct
import subprocess
import sys
import urllib.error

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def run(script, *args, timeout=120):
    # The examples import singa the way this test process does: installed,
    # or from the tree through the PYTHONPATH the process inherits.
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def ok(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_mlp_native():
    out = ok(run("mlp/native.py", "--steps", 300))
    acc = float(out.rsplit("accuracy = ", 1)[1].split()[0])
    assert acc > 0.8, out


def test_mlp_model_api():
    out = ok(run("mlp/model.py", "--epochs", 5))
    assert "same predictions: True" in out, out


def _load_data_module():
    spec = importlib.util.spec_from_file_location("cnn_data", os.path.join(EXAMPLES, "cnn",
                                                                           "data.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("model", ["mlp", "cnn", "resnet", "alexnet"])
def test_train_cnn_models_on_digits(model):
    pytest.importorskip("sklearn")
    out = ok(run("cnn/train_cnn.py", model, "digits", "--epochs", 1, "--max-steps", 2,
                 "--batch-size", 16, "--no-progress"))
    assert "test accuracy" in out and "images/s" in out, out


def test_train_cnn_graph_mode_trains_as_eager_mode():
    pytest.importorskip("sklearn")
    args = ("cnn/train_cnn.py", "cnn", "digits", "--epochs", 1, "--max-steps", 6,
            "--batch-size", 16, "--no-progress")
    eager, graph = ok(run(*args)), ok(run(*args, "--graph"))

    def numbers(out):
        line = [s for s in out.splitlines() if s.startswith("epoch 1/1")][0]
        return line.split(", ")[:3]   # loss and accuracies, not the speed
    assert numbers(graph) == numbers(eager), (eager, graph)


def test_train_cnn_progress_bar_advances_with_the_loss():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    # tqdm reads TQDM_MININTERVAL: redraw on every update, so each state shows
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "cnn/train_cnn.py"), "mlp",
                           "digits", "--epochs", "1", "--max-steps", "4"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TQDM_MININTERVAL="0"))
    ok(proc)
    states = [s for s in proc.stderr.replace("\r", "\n").splitlines() if "loss=" in s]
    counts = [int(s.split("/23")[0].split()[-1]) for s in states]
    assert counts[:4] == [1, 2, 3, 4], proc.stderr


def _test_accuracy(out):
    return float(out.rsplit("test accuracy ", 1)[1].split(",")[0])


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_accuracy_on_gpu_matches_cpu(model):
    """The digits examples reach on the GPU the accuracy they reach on the
    CPU (the initial weights differ: each device has its own generator)."""
    pytest.importorskip("sklearn")
    from singa import device, singa_wrap
    if device.get_num_gpus() == 0:
        pytest.skip("this singa build has no CUDA" if not singa_wrap.USE_CUDA
                    else "no CUDA device is visible")
    args = ("cnn/train_cnn.py", model, "digits", "--no-progress", "--seed", 1)
    cpu = _test_accuracy(ok(run(*args, timeout=600)))
    gpu_out = ok(run(*args, "--device", "cuda", timeout=600))
    assert "device cuda" in gpu_out
    assert _test_accuracy(gpu_out) >= cpu - 0.02, (cpu, gpu_out)


def test_train_cnn_checkpoint_resume_and_plot(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    ckpt, png = tmp_path / "cnn.ckpt", tmp_path / "curves.png"
    ok(run("cnn/train_cnn.py", "mlp", "digits", "--epochs", 1, "--max-steps", 3,
           "--checkpoint", ckpt, "--no-progress"))
    assert ckpt.exists()
    out = ok(run("cnn/train_cnn.py", "mlp", "digits", "--epochs", 2, "--max-steps", 3,
                 "--resume", ckpt, "--plot", png, "--no-progress"))
    assert "resumed from" in out and "epoch 2/2" in out and "epoch 1/2" not in out, out
    assert png.stat().st_size > 0
    # A checkpoint of another model is refused with the parameter named.
    bad = run("cnn/train_cnn.py", "cnn", "digits", "--epochs", 1, "--resume", ckpt,
              "--no-progress")
    assert bad.returncode != 0 and "cannot resume" in bad.stderr, bad.stderr


def _write_idx(path, arr, gz):
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    raw = header + arr.astype(np.uint8).tobytes()
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(raw)


def _fake_mnist(d, n_train=40, n_test=20):
    rng = np.random.default_rng(0)
    for prefix, n, gz in (("train", n_train, True), ("t10k", n_test, False)):
        _write_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte" + (".gz" if gz else "")),
                   rng.integers(0, 256, (n, 28, 28)), gz)
        _write_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte" + (".gz" if gz else "")),
                   rng.integers(0, 10, n), gz)


def test_train_cnn_on_mnist_idx_files(tmp_path):
    _fake_mnist(tmp_path)
    out = ok(run("cnn/train_cnn.py", "cnn", "mnist", "--data-dir", tmp_path, "--epochs", 1,
                 "--max-steps", 1, "--batch-size", 8, "--no-progress"))
    assert "40 training and 20 test images of shape (1, 28, 28)" in out, out


def test_mnist_parsing_and_offline_errors(tmp_path, monkeypatch):
    data = _load_data_module()
    _fake_mnist(tmp_path)
    tx, ty, vx, vy = data.load_mnist(str(tmp_path), download=False)
    assert tx.shape == (40, 1, 28, 28) and ty.dtype == np.int32 and vx.shape[0] == 20
    # A truncated IDX file is reported with its path.
    path = tmp_path / "t10k-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(data.DataError, match="truncated"):
        data.load_mnist(str(tmp_path), download=False)

    def offline(*a, **k):
        raise urllib.error.URLError("no network (simulated)")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    empty = tmp_path / "empty"
    with pytest.raises(data.DataError, match="offline.*--data-dir.*digits"):
        data.load("mnist", str(empty))


def test_resize():
    data = _load_data_module()
    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 1, 8, 8)
    y = data.resize(x, 16)
    assert y.shape == (2, 1, 16, 16)
    np.testing.assert_array_equal(y[:, :, ::2, ::2], x)
    assert data.resize(x, 28).shape == (2, 1, 28, 28)
    assert data.resize(x, 8) is x
