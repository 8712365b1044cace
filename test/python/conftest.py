"""Shared fixtures: `dev` runs a test on every device this build has;
`torch` is PyTorch for the tests that compare against it (skipped when it
is not installed; such tests are marked `torch`, so CI can run them alone
after installing it: `pytest -m torch`)."""

import numpy as np
import pytest

from singa import device


def _devices():
    devs = [pytest.param(device.get_default_device(), id="cpu")]
    if device.get_num_gpus() > 0:
        devs.append(pytest.param(device.create_cuda_gpu(), id="cuda"))
    return devs


@pytest.fixture(params=_devices())
def dev(request):
    return request.param


@pytest.fixture(autouse=True)
def _reset_autograd_training():
    """Model.train()/eval()/compile() set autograd.training globally (as in
    SINGA), and so may a module-scoped fixture that trains a model: every
    test leaves the flag at its default, off."""
    from singa import autograd
    yield
    autograd.training = False


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
