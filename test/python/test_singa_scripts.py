"""SINGA-style scripts (test/python/singa_scripts/), written as SINGA's
examples are, run unchanged on the CPU, each in its own interpreter; each
prints a RESULT line that is checked for a real outcome (the loss falls,
accuracy passes a bar, values agree with NumPy or onnxruntime).

A script asks for a GPU whenever the build has CUDA (as SINGA's examples
do), so on a CUDA build without a visible GPU the cases skip."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "singa_scripts")


def _needs_gpu_if_cuda():
    from singa import device, singa_wrap
    return pytest.mark.skipif(bool(singa_wrap.USE_CUDA) and device.get_num_gpus() == 0,
                              reason="a CUDA build: the script asks for a GPU and none is visible")


def run_script(name, timeout=600):
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, os.path.join(HERE, name)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=HERE)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"{name} printed no RESULT line:\n{proc.stdout[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


@_needs_gpu_if_cuda()
def test_autograd_mlp():
    r = run_script("mlp_autograd.py")
    assert r["losses"][-1] < 0.3 * r["losses"][0]
    assert r["accuracy"] >= 0.95
    # The trained weights, run in NumPy on the script's data, classify as
    # the script measured.
    np.random.seed(0)
    x = np.random.uniform(-1, 1, 400)
    y = 5 * x + 1 + 2 * np.random.randn(len(x))
    label = (5 * x + 1 > y).astype(int)
    p = {k: np.asarray(v) for k, v in r["params"].items()}
    h = np.maximum(np.stack([x, y], 1) @ p["w0"] + p["b0"], 0)
    assert np.mean(np.argmax(h @ p["w1"] + p["b1"], 1) == label) == pytest.approx(
        r["accuracy"], abs=1e-6)


@_needs_gpu_if_cuda()
def test_model_api_cnn():
    h = run_script("cnn_model.py")["history"]
    assert h[-1]["loss"] < 0.3 * h[0]["loss"]
    assert h[-1]["val_acc"] >= 0.9


@_needs_gpu_if_cuda()
def test_lstm_char_model():
    r = run_script("char_lstm.py")
    assert r["losses"][-1] < 0.2 * r["losses"][0]
    assert r["next_char_accuracy"] >= 0.8
    # SINGA's parameter names, plus the model's own hx / cx states.
    assert {"rnn.Wx_i", "rnn.Wh_g", "rnn.Bx_o", "rnn.Bh_f", "dense.W", "hx", "cx"} <= \
        set(r["state_names"])


@_needs_gpu_if_cuda()
def test_gan_step_with_two_optimizers():
    r = run_script("gan_two_optimizers.py")
    center = np.array(r["center"])
    start = np.linalg.norm(np.array(r["start_mean"]) - center)
    end = np.linalg.norm(np.array(r["end_mean"]) - center)
    assert end < 0.5 and end < 0.3 * start
    assert r["gen_steps"] == 400 and r["dis_steps"] == 800
    # The discriminator ends near chance on a generator that matches the data.
    assert abs(np.mean(r["d_losses"]) - 2 * np.log(2)) < 0.2


@_needs_gpu_if_cuda()
def test_onnx_export_and_reimport_after_eval():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    r = run_script("onnx_round_trip.py")
    assert r["ort_diff"] < 1e-4 and r["singa_diff"] < 1e-4
    assert r["states_unchanged"] and r["eval_again_diff"] == 0
    assert "BatchNormalization" in r["ops"] and "Conv" in r["ops"]
