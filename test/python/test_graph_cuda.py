"""Graph mode and memory statistics on the CUDA device (skipped without a
GPU): the same recording, replay and accounting as on the CPU."""

import numpy as np
import pytest

from singa import device, opt, tensor
from singa import singa_wrap as cw

from test_graph import MODELS, _batches


def _gpus():
    n = device.get_num_gpus()
    if n == 0:
        why = ("this singa build has no CUDA" if not cw.USE_CUDA
               else "no CUDA device is visible")
        return [pytest.param(None, id="cuda", marks=pytest.mark.skip(reason=why))]
    return [pytest.param(i, id=f"cuda{i}") for i in range(n)]


@pytest.fixture(params=_gpus())
def gpu(request):
    d = device.create_cuda_gpu_on(request.param)
    yield d
    d.EnableGraph(False)
    d.ResetGraph()


def test_memory_stats_count_blocks_and_the_cache(gpu):
    gpu.Sync()
    base = gpu.memory_stats()
    t = tensor.from_raw_tensor(cw.Tensor((1000,), gpu, tensor.float32))
    assert gpu.memory_stats()["allocated"] == base["allocated"]  # no memory before use
    t.set_value(1.0)
    assert gpu.memory_stats()["allocated"] == base["allocated"] + 4000
    gpu.reset_peak_memory()
    big = tensor.Tensor((1 << 20,), gpu)
    big.set_value(2.0)
    cached_before = gpu.memory_stats()["cached"]
    del big
    after = gpu.memory_stats()
    assert after["allocated"] == base["allocated"] + 4000
    assert after["peak"] == base["allocated"] + 4000 + (4 << 20)
    # the caching allocator keeps the freed buffer (rounded up) for reuse
    assert after["cached"] >= cached_before + (4 << 20)
    np.testing.assert_allclose(t.numpy(), 1.0)


def test_graph_replay_on_the_gpu_frees_intermediates(gpu):
    x = tensor.from_numpy(np.ones((256, 256), np.float32), gpu)
    gpu.EnableGraph(True)
    y = x
    for _ in range(8):
        y = y * 1.5
    out = tensor.sum(y)
    gpu.EnableGraph(False)
    del y
    assert list(gpu.graph_block_counts())[1] >= 8  # the products at least
    # a first run sizes the kernels' scratch buffer, which the device keeps
    gpu.RunGraph(True)
    gpu.Sync()
    base = gpu.memory_stats()["allocated"]
    gpu.reset_peak_memory()
    gpu.RunGraph(True)
    gpu.Sync()
    stats = gpu.memory_stats()
    assert stats["allocated"] - base <= 64
    assert stats["peak"] - base <= 2 * 256 * 256 * 4 + 64
    np.testing.assert_allclose(out.numpy(), 256 * 256 * 1.5 ** 8, rtol=1e-5)


def _train_on(gpu, kind, mode, steps=12):
    gpu.SetRandSeed(0)
    np.random.seed(0)
    m = MODELS[kind]()
    m.set_optimizer(opt.Adam(lr=0.01, weight_decay=0.01))
    data = _batches(kind, steps)
    m.compile([tensor.from_numpy(data[0][0], gpu)], is_train=True,
              use_graph=mode is not None, sequential=mode == "serial")
    losses = []
    for xn, yn in data:
        _, loss = m(tensor.from_numpy(xn, gpu), tensor.from_numpy(yn, gpu))
        losses.append(float(loss))
    if mode is not None:
        assert gpu.graph_size() > 0, "the step was not recorded"
    return {k: v.numpy() for k, v in m.get_states().items()}, losses


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_replayed_training_on_the_gpu_equals_eager(gpu, kind):
    eager, eager_loss = _train_on(gpu, kind, None)
    for mode in ("deps", "serial"):
        got, got_loss = _train_on(gpu, kind, mode)
        np.testing.assert_allclose(got_loss, eager_loss, rtol=1e-5, atol=1e-6)
        for k in eager:
            np.testing.assert_allclose(got[k], eager[k], rtol=0, atol=1e-5,
                                       err_msg=f"{kind} {mode}: {k}")
