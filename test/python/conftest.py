"""Shared fixtures.

`dev` runs a test on the CPU and on every visible GPU; `other` on a second
device that is not the default one (a separate CPU device, and every visible
GPU), for tests that compare it with the default CPU device. GPU cases skip
with the reason when there is none. `torch` is PyTorch for the tests that
compare against it (skipped when it is not installed; such tests are marked
`torch`, so CI can run them alone after installing it: `pytest -m torch`).
`threads` runs a test at 1 and 2 CPU threads (a test that parametrizes
`threads` itself overrides it). Every test starts the default device's
random generator from the same seed (`_seeded_generator`).
"""

import numpy as np
import pytest

import singa
from singa import device, singa_wrap


def _no_gpu_reason():
    if not singa_wrap.USE_CUDA:
        return "this singa build has no CUDA (build with -Ccmake.define.USE_CUDA=ON)"
    return "no CUDA device is visible"


def _gpu_params():
    n = device.get_num_gpus()
    if n == 0:
        return [pytest.param(None, id="cuda", marks=pytest.mark.skip(reason=_no_gpu_reason()))]
    return [pytest.param(i, id=f"cuda{i}" if n > 1 else "cuda") for i in range(n)]


def _make(which):
    if which == "cpu":
        return singa_wrap.DefaultDevice()
    if which == "cpu2":
        return device.create_separate_cpu_device()
    return device.create_cuda_gpu_on(which)


@pytest.fixture(autouse=True)
def _seeded_generator():
    """Layers draw their initial weights from the default device's
    generator, so without a seed a test's weights would depend on how many
    draws the tests before it made: adding a test could tip a training
    check elsewhere."""
    device.get_default_device().SetRandSeed(0)


@pytest.fixture(params=[pytest.param("cpu", id="cpu")] + _gpu_params())
def dev(request):
    return _make(request.param)


@pytest.fixture
def graph_dev():
    """A CPU device of its own for recording graphs; its graph is dropped
    afterwards."""
    d = device.create_separate_cpu_device()
    yield d
    d.EnableGraph(False)
    d.ResetGraph()


@pytest.fixture(scope="module", params=[pytest.param("cpu2", id="cpu2")] + _gpu_params())
def other(request):
    return _make(request.param)


@pytest.fixture(autouse=True)
def _reset_autograd_training():
    """Model.train()/eval()/compile() set autograd.training globally (as in
    SINGA), and so may a module-scoped fixture that trains a model: every
    test leaves the flag at its default, off."""
    from singa import autograd
    yield
    autograd.training = False


@pytest.fixture(params=[1, 2])
def threads(request):
    """singa's CPU thread count for the test, restored after it."""
    before = singa.get_num_threads()
    singa.set_num_threads(request.param)
    yield request.param
    singa.set_num_threads(before)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def pytest_collection_modifyitems(items):
    for item in items:
        if "torch" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.torch)
