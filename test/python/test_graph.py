"""Graph mode: recording through Device.Exec, replay, memory planning and
Model.compile(use_graph=True), checked against eager execution."""

import logging
import warnings

import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, tensor
from singa import singa_wrap as cw


@pytest.fixture
def dev(graph_dev):
    # Every test here records on a device of its own (conftest's dev
    # would be the shared default device).
    return graph_dev


def _t(arr, d):
    return tensor.from_numpy(np.asarray(arr, np.float32), d)


# ---- the device API ----

def test_recording_defers_work_and_run_graph_computes(dev):
    a, b = _t(np.ones((3, 4)), dev), _t(np.full((3, 4), 2.0), dev)
    dev.EnableGraph(True)
    assert dev.graph_enabled()
    c = a + b
    d = c * c - a
    dev.EnableGraph(False)
    assert dev.graph_size() == 3
    dev.RunGraph()
    np.testing.assert_allclose(d.numpy(), 8.0)
    a.copy_from_numpy(np.full((3, 4), 3.0, np.float32))
    dev.RunGraph(True)
    np.testing.assert_allclose(d.numpy(), 22.0)


def test_dependencies_come_from_blocks(dev):
    x = _t(np.ones(4), dev)
    y = _t(np.zeros(4), dev)
    dev.EnableGraph(True)
    t = x * 2.0           # 0: reads x
    y += t                # 1: reads t (0 wrote it), writes y
    x *= 3.0              # 2: overwrites x, which 0 read (write after read)
    z = x + y             # 3: reads x (2) and y (1)
    y.set_value(5.0)      # 4: overwrites y: after its writer 1 and its reader 3
    dev.EnableGraph(False)
    deps = [list(dev.graph_dependencies(i)) for i in range(dev.graph_size())]
    assert deps == [[], [0], [0], [1, 2], [1, 3]]
    dev.RunGraph()
    np.testing.assert_allclose(z.numpy(), 5.0)
    np.testing.assert_allclose(y.numpy(), 5.0)


def test_demand_order_runs_an_op_just_before_its_first_reader(dev):
    x = _t(np.arange(-3.0, 5.0), dev)
    dev.EnableGraph(True)
    a = x * 2.0               # 0
    mask = x > 0.0            # 1: needed only at the end
    for _ in range(3):
        a = a + 1.0           # 2, 3, 4
    out = a * mask            # 5
    dev.EnableGraph(False)
    del a, mask
    assert list(dev.graph_run_order(True)) == [0, 1, 2, 3, 4, 5]
    assert list(dev.graph_run_order(False)) == [0, 2, 3, 4, 1, 5]
    dev.RunGraph(False)
    xn = np.arange(-3.0, 5.0)
    np.testing.assert_allclose(out.numpy(), (2 * xn + 3) * (xn > 0))


def test_dependency_order_differs_from_recorded_order_but_agrees(dev):
    xs = [_t(np.full(5, i + 1.0), dev) for i in range(4)]
    dev.EnableGraph(True)
    chain = xs[0] * 2.0
    for _ in range(5):
        chain = chain + 1.0
    side = [x * 10.0 for x in xs[1:]]   # independent of the chain
    total = chain + side[0] + side[1] + side[2]
    dev.EnableGraph(False)
    dev.RunGraph(False)
    level = total.numpy().copy()
    dev.RunGraph(True)
    np.testing.assert_allclose(level, total.numpy())
    np.testing.assert_allclose(level, 2 + 5 + 20 + 30 + 40)


def test_intermediates_are_freed_after_last_use(dev):
    x = _t(np.ones((256, 256)), dev)     # 256 KiB
    dev.EnableGraph(True)
    y = x
    for _ in range(8):
        y = y * 1.5
    out = tensor.sum(y)
    dev.EnableGraph(False)
    del y
    blocks, intermediates = dev.graph_block_counts()
    assert intermediates == 8  # the products; x and out are kept
    base = dev.memory_stats()["allocated"]
    dev.reset_peak_memory()
    dev.RunGraph(True)
    stats = dev.memory_stats()
    # out (4 bytes) is the only new block still held
    assert stats["allocated"] - base <= 64
    # at most two products live at once
    assert stats["peak"] - base <= 2 * 256 * 256 * 4 + 64
    np.testing.assert_allclose(out.numpy(), 256 * 256 * 1.5 ** 8, rtol=1e-5)


def test_blocks_held_outside_the_graph_are_kept(dev):
    x = _t(np.ones(8), dev)
    dev.EnableGraph(True)
    kept = x + 1.0
    tmp = kept * 2.0
    out = tmp + x
    dev.EnableGraph(False)
    del tmp
    assert list(dev.graph_block_counts()) == [4, 1]
    dev.RunGraph()
    np.testing.assert_allclose(kept.numpy(), 2.0)
    np.testing.assert_allclose(out.numpy(), 5.0)


def test_memory_stats_and_lazy_allocation(dev):
    stats = dev.memory_stats()
    assert set(stats) == {"allocated", "peak", "cached"}
    t = tensor.from_raw_tensor(cw.Tensor((1000,), dev, tensor.float32))
    assert dev.memory_stats()["allocated"] == stats["allocated"]  # no memory before use
    t.set_value(1.0)
    assert dev.memory_stats()["allocated"] == stats["allocated"] + 4000
    dev.reset_peak_memory()
    big = tensor.Tensor((1 << 20,), dev)
    del big
    after = dev.memory_stats()
    assert after["allocated"] == stats["allocated"] + 4000
    assert after["peak"] == stats["allocated"] + 4000 + (4 << 20)
    assert after["cached"] >= 4 << 20  # large buffers are kept for reuse
    dev.reset_peak_memory()
    assert dev.memory_stats()["peak"] == after["allocated"]


def _filled(n, value, dev):
    t = tensor.Tensor((n,), dev)
    t.set_value(value)
    return t


def test_freed_mid_size_buffers_are_kept_for_the_same_size(dev):
    n = 50000  # 200000 bytes, a multiple of 64
    base = dev.memory_stats()["cached"]
    a, b = _filled(n, 1.0, dev), _filled(n, 2.0, dev)
    del a, b
    assert dev.memory_stats()["cached"] == base + 2 * 4 * n
    other = _filled(n + 1000, 3.0, dev)  # another size takes fresh memory
    assert dev.memory_stats()["cached"] == base + 2 * 4 * n
    c = _filled(n, 4.0, dev)
    assert dev.memory_stats()["cached"] == base + 4 * n
    np.testing.assert_array_equal(c.numpy(), np.full(n, 4.0, np.float32))
    np.testing.assert_array_equal(other.numpy(), np.full(n + 1000, 3.0, np.float32))
    small = _filled(100, 5.0, dev)  # under 4 KiB: malloc's own
    del small
    assert dev.memory_stats()["cached"] == base + 4 * n


def test_mid_size_buffers_kept_are_bounded(dev):
    n = (3 << 20) // 4  # 3 MiB, under the large-buffer size
    base = dev.memory_stats()["cached"]
    held = [_filled(n, float(i), dev) for i in range(30)]  # 90 MiB
    del held
    kept = dev.memory_stats()["cached"] - base
    assert kept == 21 * (3 << 20)  # 64 MiB hold 21 of them; the rest went back


@pytest.mark.parametrize("read,name", [
    (lambda t: t.numpy(), "to_numpy"),
    (lambda t: cw.SumAll(t.data), "SumAll"),
    (lambda t: t.l2(), "l2"),
    (lambda t: cw.IndexSelect(t.data, cw.Tensor((2,), t.device, tensor.int32), 0), "IndexSelect"),
    (lambda t: memoryview(cw.HostBuffer(t.data)), "HostBuffer"),
])
def test_host_reads_while_recording_raise_graph_error(dev, read, name):
    t = _t(np.arange(4.0), dev)
    dev.EnableGraph(True)
    with pytest.raises(device.GraphError, match=rf"{name}: cannot read tensor values on the "
                                                rf"host while cpu:\d+ records a graph"):
        read(t + 1.0)
    dev.EnableGraph(False)
    assert issubclass(device.GraphError, RuntimeError)


def test_recordings_can_be_kept_and_held_again(dev):
    a = _t(np.ones(3), dev)
    dev.EnableGraph(True)
    b = a * 2.0
    dev.EnableGraph(False)
    first = dev.CurrentGraph()
    assert first.id() == dev.graph_id() != 0 and first.size() == 1
    dev.ResetGraph()
    assert dev.graph_id() == 0 and dev.CurrentGraph() is None
    dev.EnableGraph(True)
    c = a + 5.0
    dev.EnableGraph(False)
    second = dev.CurrentGraph()
    dev.AttachGraph(first)
    a.copy_from_numpy(np.full(3, 4.0, np.float32))
    dev.RunGraph()
    np.testing.assert_allclose(b.numpy(), 8.0)
    dev.AttachGraph(second)
    dev.RunGraph()
    np.testing.assert_allclose(c.numpy(), 9.0)
    with pytest.raises(RuntimeError, match="recorded on another device than cpu:"):
        device.create_separate_cpu_device().AttachGraph(first)
    dev.EnableGraph(True)
    with pytest.raises(device.GraphError, match="AttachGraph: cpu:.* is recording"):
        dev.AttachGraph(first)


def test_run_graph_while_recording_is_an_error(dev):
    dev.EnableGraph(True)
    with pytest.raises(RuntimeError, match="still recording"):
        dev.RunGraph()


def test_host_copy_in_a_graph_uses_the_bytes_of_the_call(dev):
    src = np.arange(6, dtype=np.float32)
    t = tensor.Tensor((6,), dev)
    dev.EnableGraph(True)
    t.copy_from_numpy(src)
    u = t * 2.0
    dev.EnableGraph(False)
    src[:] = -1
    dev.RunGraph()
    np.testing.assert_allclose(u.numpy(), 2 * np.arange(6))


def test_copies_between_devices_while_one_records(dev):
    other = device.create_separate_cpu_device()
    src = _t(np.arange(6.0), other)
    # into the recording device: a snapshot of the source, written by each run
    dst = tensor.Tensor((6,), dev)
    dev.EnableGraph(True)
    dst.copy_data(src)
    u = dst * 2.0
    dev.EnableGraph(False)
    assert dev.graph_size() == 2  # the copy and the product
    src.copy_from_numpy(np.full(6, -1.0, np.float32))
    dst.copy_from_numpy(np.zeros(6, np.float32))
    dev.RunGraph()
    np.testing.assert_allclose(dst.numpy(), np.arange(6.0))
    np.testing.assert_allclose(u.numpy(), 2 * np.arange(6.0))
    # out of the recording device: its values are not there yet
    dev.ResetGraph()
    dev.EnableGraph(True)
    with pytest.raises(device.GraphError, match=r"copy_data from cpu:\d+ to cpu:\d+: cannot "
                                                r"read tensor values on the host"):
        tensor.Tensor((6,), other).copy_data(dst + 1.0)
    dev.EnableGraph(False)


def test_random_ops_draw_new_numbers_each_replay_in_eager_order(dev):
    def draws():
        a = tensor.Tensor((50,), dev).gaussian(0.0, 1.0)
        b = tensor.Tensor((50,), dev).uniform(0.0, 1.0)
        return a, b

    dev.SetRandSeed(7)
    eager = [np.concatenate([x.numpy() for x in draws()]) for _ in range(2)]
    for serial in (True, False):
        dev.SetRandSeed(7)
        dev.ResetGraph()
        dev.EnableGraph(True)
        a, b = draws()
        b2 = b * 1.0
        dev.EnableGraph(False)
        got = []
        for _ in range(2):
            dev.RunGraph(serial)
            got.append(np.concatenate([a.numpy(), b2.numpy()]))
        np.testing.assert_array_equal(got[0], eager[0])
        np.testing.assert_array_equal(got[1], eager[1])
        assert not np.array_equal(got[0], got[1])


def test_time_profiling(dev, capfd):
    x = _t(np.ones((64, 64)), dev)
    dev.EnableGraph(True)
    y = tensor.exp(x) @ x
    dev.EnableGraph(False)
    dev.SetVerbosity(1)
    dev.SetSkipIteration(1)
    for _ in range(3):
        dev.RunGraph()
    dev.PrintTimeProfiling()
    text = capfd.readouterr().out
    assert "2 ops, 2 timed runs" in text
    assert "UnaryInto<Exp>" in text and "Mult" in text
    dev.SetVerbosity(2)
    assert "     1  Mult" in dev.TimeProfiling()
    with pytest.raises(ValueError, match="verbosity"):
        dev.SetVerbosity(-1)
    np.testing.assert_allclose(y.numpy(), np.exp(1.0) * 64, rtol=1e-5)


# ---- Model.compile(use_graph=True) ----

class _MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.fc1, self.relu, self.fc2 = layer.Linear(16), layer.ReLU(), layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


class _CNN(_MLP):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(4, 3, padding=1)
        self.bn = layer.BatchNorm2d()
        self.pool = layer.MaxPool2d(2)
        self.drop = layer.Dropout(0.3)
        self.flat = layer.Flatten()

    def forward(self, x):
        y = self.pool(self.relu(self.bn(self.conv(x))))
        return self.fc2(self.drop(self.flat(y)))


class _LSTM(_MLP):
    def __init__(self):
        super().__init__()
        self.lstm = layer.LSTM(8)

    def forward(self, x):
        _, h, _ = self.lstm(x)      # outputs, last h, last c
        return self.fc2(h)


def _batches(kind, n, batch=6, seed=0):
    rng = np.random.default_rng(seed)
    shape = {"mlp": (batch, 12), "cnn": (batch, 2, 6, 6), "lstm": (5, batch, 3)}[kind]
    out = []
    for _ in range(n):
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, 5, batch).astype(np.int32)
        out.append((x, y))
    return out


MODELS = {"mlp": _MLP, "cnn": _CNN, "lstm": _LSTM}
OPTIMIZERS = {
    "sgd": lambda: opt.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd-dampening": lambda: opt.SGD(lr=0.05, momentum=0.8, dampening=0.2),
    "adam": lambda: opt.Adam(lr=0.01, weight_decay=0.01),
    "rmsprop": lambda: opt.RMSProp(lr=0.01, weight_decay=0.01),
    "adagrad": lambda: opt.AdaGrad(lr=0.05),
    "sgd-schedule": lambda: opt.SGD(lr=opt.ExponentialDecay(0.1, 3, 0.7, staircase=True),
                                    momentum=0.9),
}


def _train(kind, make_opt, mode, steps=20, seed=0):
    """Parameters, states and per-step losses after training; mode is None
    (eager), "serial" or "deps"."""
    dev = device.create_separate_cpu_device()
    dev.SetRandSeed(seed)
    np.random.seed(seed)
    m = MODELS[kind]()
    m.set_optimizer(make_opt())
    data = _batches(kind, steps)
    x, y = tensor.from_numpy(data[0][0], dev), tensor.from_numpy(data[0][1], dev)
    m.compile([x], is_train=True, use_graph=mode is not None, sequential=mode == "serial")
    losses = []
    for xn, yn in data:
        # new tensors each step: the model copies them into its recorded inputs
        out, loss = m(tensor.from_numpy(xn, dev), tensor.from_numpy(yn, dev))
        losses.append(float(loss))
    states = {k: v.numpy() for k, v in m.get_states().items()}
    states["lr"] = m.optimizer.lr_value.numpy()
    if mode is not None:
        assert dev.graph_size() > 0, "the step was not recorded"
    return states, losses


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_replayed_training_equals_eager(kind, opt_name):
    make = OPTIMIZERS[opt_name]
    eager, eager_loss = _train(kind, make, None)
    for mode in ("deps", "serial"):
        got, got_loss = _train(kind, make, mode)
        np.testing.assert_allclose(got_loss, eager_loss, rtol=1e-6, atol=1e-6)
        for k in eager:
            np.testing.assert_allclose(got[k], eager[k], rtol=0, atol=1e-6,
                                       err_msg=f"{kind} {opt_name} {mode}: {k}")


def test_scheduler_advances_in_the_replayed_graph():
    states, _ = _train("mlp", OPTIMIZERS["sgd-schedule"], "deps", steps=7)
    np.testing.assert_allclose(states["lr"], [0.1 * 0.7 ** 2], rtol=1e-6)


def test_outputs_are_the_recorded_tensors_holding_the_latest_step():
    dev = device.create_separate_cpu_device()
    m = _MLP()
    m.set_optimizer(opt.SGD(lr=0.1))
    data = _batches("mlp", 3)
    m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=True)
    first = m(tensor.from_numpy(data[0][0], dev), tensor.from_numpy(data[0][1], dev))
    w1, b1, w2, b2 = (t.numpy() for t in (m.fc1.W, m.fc1.b, m.fc2.W, m.fc2.b))
    second = m(tensor.from_numpy(data[1][0], dev), tensor.from_numpy(data[1][1], dev))
    assert second[0] is first[0] and second[1] is first[1]
    want = np.maximum(data[1][0] @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(second[0].numpy(), want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(m.fc2.W.numpy(), w2)  # the update ran too


def test_eval_forward_is_replayed_on_new_inputs():
    dev = device.create_separate_cpu_device()
    m = _MLP()
    data = _batches("mlp", 3)
    m.compile([tensor.from_numpy(data[0][0], dev)], is_train=False, use_graph=True)
    outs = [m(tensor.from_numpy(x, dev)).numpy().copy() for x, _ in data]
    m.graph(False)
    for (x, _), got in zip(data, outs):
        np.testing.assert_allclose(got, m(tensor.from_numpy(x, dev)).numpy(), rtol=1e-6)
    assert dev.graph_size() == 0  # graph(False) dropped it


def test_a_new_batch_shape_records_again_and_both_are_kept(caplog):
    dev = device.create_separate_cpu_device()
    m = _MLP()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    big, small = _batches("mlp", 2, batch=6), _batches("mlp", 2, batch=4, seed=1)
    m.compile([tensor.from_numpy(big[0][0], dev)], use_graph=True)
    ref = _MLP()
    ref.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    ref.compile([tensor.from_numpy(big[0][0], dev)])
    ref.set_states({k: v.numpy() for k, v in m.get_states().items()})
    with caplog.at_level(logging.DEBUG, logger="singa.model"):
        for x, y in big + small + big:
            for net in (m, ref):
                net(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
    msgs = [r.getMessage() for r in caplog.records]
    assert any("recording the graph again" in s and "(4, 12)" in s and "(6, 12)" in s
               for s in msgs), msgs
    # the first shape's recording is kept and replayed when it comes back
    assert sum("recording" in s for s in msgs) == 2
    for k, v in ref.get_states().items():
        np.testing.assert_allclose(m.get_states()[k].numpy(), v.numpy(), atol=1e-6)


def test_training_and_evaluation_steps_of_two_models_share_a_device(caplog):
    dev = device.create_separate_cpu_device()
    data = _batches("mlp", 6)
    nets, refs = [], []
    for seed in (1, 2):
        for graph, out in ((True, nets), (False, refs)):
            dev.SetRandSeed(seed)
            m = _MLP()
            m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
            m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=graph)
            out.append(m)
    with caplog.at_level(logging.DEBUG, logger="singa.model"):
        for x, y in data:
            for group in (nets, refs):
                for m in group:
                    m.train()
                    m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
                    m.eval()
                    m(tensor.from_numpy(x, dev))
    # each model recorded one training and one evaluation step
    assert sum("recording" in r.getMessage() for r in caplog.records) == 4
    for m, ref in zip(nets, refs):
        for k, v in ref.get_states().items():
            np.testing.assert_array_equal(m.get_states()[k].numpy(), v.numpy())
        np.testing.assert_array_equal(m(tensor.from_numpy(data[0][0], dev)).numpy(),
                                      ref(tensor.from_numpy(data[0][0], dev)).numpy())


def test_a_model_keeps_a_few_recordings():
    from singa._graph_step import StepGraph
    dev = device.create_separate_cpu_device()
    m = _MLP()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([tensor.from_numpy(_batches("mlp", 1)[0][0], dev)], use_graph=True)
    for batch in range(2, 2 + StepGraph.KEEP + 2):
        (x, y), = _batches("mlp", 1, batch=batch)
        m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
    assert len(m._graph.recordings) == StepGraph.KEEP
    m.graph(False)
    assert not m._graph.recordings and dev.graph_size() == 0


def test_a_new_dtype_records_again(caplog):
    dev = device.create_separate_cpu_device()
    m = _MLP()
    m.set_optimizer(opt.SGD(lr=0.1))
    (x, y), = _batches("mlp", 1)
    m.compile([tensor.from_numpy(x, dev)], use_graph=True)
    with caplog.at_level(logging.DEBUG, logger="singa.model"):
        m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
        m(tensor.from_numpy(x, dev), tensor.from_numpy(y.astype(np.float32), dev))
    assert any("recording the graph again" in r.getMessage() and "float32" in r.getMessage()
               for r in caplog.records)


class _ReadsMidStep(_MLP):
    """A step that reads the loss on the host before the update."""

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.seen = loss.item()
        self.optimizer(loss)
        return out, loss


class _NonZeroMidStep(_MLP):
    def train_one_batch(self, x, y):
        out = self.forward(autograd.mul(x, autograd.nonzero(x).shape[1] / 72.0))
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.mark.parametrize("cls,name", [(_ReadsMidStep, r"train_one_batch \(test_graph.py"),
                                      (_NonZeroMidStep, "NonZero")])
def test_a_host_read_mid_step_falls_back_to_eager_with_a_warning(cls, name):
    data = _batches("mlp", 4)
    results = []
    for graph in (True, False):
        dev = device.create_separate_cpu_device()
        dev.SetRandSeed(0)
        m = cls()
        m.set_optimizer(opt.Adam(lr=0.01))
        m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=graph)
        if graph:
            with pytest.warns(RuntimeWarning, match=rf"graph mode cannot record {name}.*"
                                                    r"to_numpy: cannot read tensor values.*"
                                                    r"runs eagerly from now on"):
                m(tensor.from_numpy(data[0][0], dev), tensor.from_numpy(data[0][1], dev))
            rest = data[1:]
        else:
            rest = data
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # warned once, not at every step
            for x, y in rest:
                m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
        results.append({k: v.numpy() for k, v in m.get_states().items()})
        assert dev.graph_size() == 0
    for k in results[1]:
        np.testing.assert_allclose(results[0][k], results[1][k], atol=1e-6)


def test_an_error_while_recording_leaves_the_device_clean():
    dev = device.create_separate_cpu_device()
    m = _MLP()
    m.set_optimizer(opt.SGD(lr=0.1))
    (x, y), = _batches("mlp", 1)
    m.compile([tensor.from_numpy(x, dev)], use_graph=True)
    with pytest.raises(ValueError, match="targets of shape"):
        m(tensor.from_numpy(x, dev), tensor.from_numpy(np.zeros((6, 2), np.int32), dev))
    assert not dev.graph_enabled() and dev.graph_size() == 0
    out, loss = m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
    assert np.isfinite(float(loss))


def test_replays_free_their_intermediates():
    peaks, held = {}, {}
    data = _batches("cnn", 4, batch=32)
    for graph in (False, True):
        dev = device.create_separate_cpu_device()
        m = _CNN()
        m.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
        m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=graph)
        batches = [(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)) for x, y in data]
        m(*batches[0])
        before = dev.memory_stats()["allocated"]
        dev.reset_peak_memory()
        for x, y in batches[1:]:
            m(x, y)
            assert dev.memory_stats()["allocated"] == before  # nothing accumulates
        peaks[graph] = dev.memory_stats()["peak"] - before
        held[graph] = before
    # the graph keeps its own copies of the inputs; its step needs no more
    # than an eager step
    copies = sum(x.nbytes + y.nbytes for x, y in data[:1])
    assert held[True] <= held[False] + copies + 1024
    assert peaks[True] <= peaks[False]


def _resnet_block_model():
    class Block(model.Model):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = layer.Conv2d(6, 3, padding=1), layer.BatchNorm2d()
            self.c2, self.b2 = layer.Conv2d(6, 3, padding=1), layer.BatchNorm2d()
            self.relu = layer.ReLU()
            self.flat, self.fc = layer.Flatten(), layer.Linear(5)
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            y = self.relu(self.b1(self.c1(x)))
            y = self.relu(autograd.add(self.b2(self.c2(y)), y))
            return self.fc(self.flat(y))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss
    return Block()


@pytest.mark.parametrize("sequential", [True, False])
def test_recomputing_intermediates_saves_memory_and_changes_no_value(sequential):
    rng = np.random.default_rng(4)
    data = [(rng.standard_normal((8, 6, 10, 10)).astype(np.float32),
             rng.integers(0, 5, 8).astype(np.int32)) for _ in range(6)]
    results = {}
    for budget in (None, 0.0, 1.0):
        dev = device.create_separate_cpu_device()
        dev.SetRandSeed(0)
        if budget is not None:
            dev.SetRecomputeBudget(budget)
        m = _resnet_block_model()
        m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
        m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=budget is not None,
                  sequential=sequential)
        peaks = []
        for x, y in data:
            dev.reset_peak_memory()
            m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
            peaks.append(dev.memory_stats()["peak"])
        states = {k: v.numpy() for k, v in m.get_states().items()}
        arena = dev.graph_arena_bytes(sequential) if budget is not None else 0
        results[budget] = (states, peaks, arena, dev.graph_recomputed(sequential))
    eager, plain, remat = results[None], results[0.0], results[1.0]
    for k in eager[0]:
        np.testing.assert_array_equal(plain[0][k], eager[0][k])
        np.testing.assert_array_equal(remat[0][k], eager[0][k])
    assert plain[3] == 0 and remat[3] > 0
    assert remat[2] < plain[2]
    # recomputation starts once the first runs have been timed; the graph
    # also holds its own copies of the inputs
    copies = data[0][0].nbytes + data[0][1].nbytes
    assert remat[1][0] == plain[1][0] and remat[1][-1] < plain[1][-1]
    assert plain[1][-1] <= eager[1][-1] + copies


def test_recompute_budget_is_checked(dev):
    with pytest.raises(ValueError, match=r"share of the run time in \[0, 1\], got 2"):
        dev.SetRecomputeBudget(2.0)


_DISTOPT_SCRIPT = r"""
import sys, warnings
sys.path.insert(0, sys.argv[1])
import numpy as np
from test_graph import _MLP, _batches
from singa import device, opt, tensor
res = []
for graph in (True, False):
    dev = device.create_separate_cpu_device()
    dev.SetRandSeed(0)
    m = _MLP()
    m.set_optimizer(opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9)))
    data = _batches("mlp", 4)
    m.compile([tensor.from_numpy(data[0][0], dev)], use_graph=graph)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for x, y in data:
            m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
    res.append(({k: v.numpy() for k, v in m.get_states().items()},
                [str(x.message) for x in w]))
(g, gw), (e, ew) = res
assert ew == [] and len(gw) == 1, (gw, ew)
assert "cannot record DistOpt's all-reduce" in gw[0] and "runs eagerly" in gw[0], gw
for k in e:
    np.testing.assert_array_equal(g[k], e[k])
print("ok")
"""


def test_a_distopt_step_runs_eagerly_with_a_warning():
    # in a process of its own: MPI is initialised once per process
    import os
    import subprocess
    import sys
    pytest.importorskip("mpi4py")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", _DISTOPT_SCRIPT, here], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
