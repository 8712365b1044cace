"""The per-rank side of test_dist.py, launched as

    mpiexec -n 2 python dist_worker.py SCENARIO OUTDIR

Each rank writes what it computed to OUTDIR/SCENARIO_<rank>.npz; the tests
compare that with NumPy and with a single process trained on the full
batch. The model, data and settings here are shared with the tests, which
build their references from them without DistOpt.
"""

import os
import sys

import numpy as np

import singa
from singa import autograd, device, layer, model, opt, tensor

STEPS = 10
LOCAL_BATCH = 8
RANKS = 2

# name -> (optimizer factory, DistOpt method, threshold, buffSize)
TRAIN_CONFIGS = {
    "sgd_unfused": ("sgd", "backward_and_update", 0, 4194304),
    "sgd_fused": ("sgd", "backward_and_update", 10 ** 9, 4194304),
    "sgd_mixed": ("sgd", "backward_and_update", 50, 4194304),
    "sgd_small_buffers": ("sgd", "backward_and_update", 10 ** 9, 500),
    "adam_unfused": ("adam", "backward_and_update", 0, 4194304),
    "adam_fused": ("adam", "backward_and_update", 10 ** 9, 4194304),
    "half_unfused": ("sgd", "backward_and_update_half", 0, 4194304),
    "half_fused": ("sgd", "backward_and_update_half", 10 ** 9, 4194304),
}
PARTIAL_THRESHOLD = 50


def make_optimizer(kind):
    if kind == "sgd":
        return opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3)
    return opt.Adam(lr=0.01)


class Net(model.Model):
    """conv(4, 3x3) relu, linear(10): 1,530 parameters in four tensors."""

    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(1, 4, 3)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(10)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(self.flatten(self.relu(self.conv(x))))


def batches():
    """STEPS full batches of RANKS * LOCAL_BATCH images and labels."""
    rng = np.random.default_rng(7)
    n = RANKS * LOCAL_BATCH
    xs = rng.standard_normal((STEPS, n, 1, 8, 8)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, n)).astype(np.int32)
    return xs, ys


def build_model(optimizer, x):
    """Net with fixed initial parameters (the same on every rank)."""
    m = Net()
    m.set_optimizer(optimizer)
    m.compile([tensor.from_numpy(x)], is_train=True)
    rng = np.random.default_rng(3)
    params = m.get_params()
    m.set_params({name: (0.3 * rng.standard_normal(params[name].shape)).astype(np.float32)
                  for name in sorted(params)})
    return m


def loss_of(m, x, y):
    with autograd.train_mode(True):
        return m.loss_fn(m.forward(tensor.from_numpy(x)), tensor.from_numpy(y))


def params_of(m):
    return {name: t.numpy() for name, t in m.get_params().items()}


def shard(a, rank):
    return a[rank * LOCAL_BATCH:(rank + 1) * LOCAL_BATCH]


# ---- scenarios ----

def rank_inputs(rank):
    """The tensors each rank feeds to the collectives (the tests rebuild them)."""
    rng = np.random.default_rng(100 + rank)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "i32": rng.integers(-100, 100, 7).astype(np.int32),
        "f16": rng.standard_normal(6).astype(np.float16),
        "strided": rng.standard_normal((4, 3)).astype(np.float32),
        "half": rng.standard_normal(9).astype(np.float32),
        "fused": [rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (7,), (3, 3), (12,))],
        "sparse": [rng.standard_normal(40).astype(np.float32) for _ in range(3)],
        "fused_sparse": [rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (10,))],
    }


def collectives(dist, rank):
    inp = rank_inputs(rank)
    out = {}
    for key in ("f32", "i32", "f16"):
        t = tensor.from_numpy(inp[key])
        dist.all_reduce(t)
        out[key] = t.numpy()
    t = tensor.from_numpy(inp["strided"]).T           # a transposed view
    dist.all_reduce(t)
    out["strided"] = t.numpy()
    t = tensor.from_numpy(inp["half"])
    dist.all_reduce_half(t.data)                       # SINGA passes CTensors
    out["half"] = t.numpy()
    # SINGA's protocol (pack with send=False, then send the same list) with
    # buffers of 16 elements, so the 30 elements span three of them.
    small = opt.DistOpt(opt.SGD(), buffSize=16)
    ts = [tensor.from_numpy(a) for a in inp["fused"]]
    for t in ts:
        small.fused_all_reduce([t.data], send=False)
    small.fused_all_reduce([t.data for t in ts])
    out.update({f"fused{i}": t.numpy() for i, t in enumerate(ts)})
    ts = [tensor.from_numpy(a) for a in inp["fused"]]
    small.fused_all_reduce_half(ts)                    # nothing packed: pack and send
    out.update({f"fused_half{i}": t.numpy() for i, t in enumerate(ts)})
    # Three steps of top-10% sparsification with a residual, then one by
    # threshold without.
    acc = tensor.zeros((40,))
    for i, a in enumerate(inp["sparse"]):
        t = tensor.from_numpy(a)
        dist.sparsification(t, acc, 0.1, True)
        out[f"topk{i}"], out[f"topk_acc{i}"] = t.numpy(), acc.numpy()
    t = tensor.from_numpy(inp["sparse"][0])
    dist.sparsification(t, None, 1.0, False)
    out["threshold"] = t.numpy()
    acc = tensor.zeros((30,))
    ts = [tensor.from_numpy(a) for a in inp["fused_sparse"]]
    dist.fused_sparsification(ts, acc, 0.2, True)
    out.update({f"fused_sparse{i}": t.numpy() for i, t in enumerate(ts)})
    out["fused_sparse_acc"] = acc.numpy()
    return out


def train(name, rank, outdir):
    kind, method, threshold, buff = TRAIN_CONFIGS[name]
    xs, ys = batches()
    dist = opt.DistOpt(make_optimizer(kind), buffSize=buff)
    m = build_model(dist, shard(xs[0], rank))
    for x, y in zip(xs, ys):
        getattr(dist, method)(loss_of(m, shard(x, rank), shard(y, rank)), threshold=threshold)
    if name == "sgd_fused" and rank == 0:
        m.save_states(os.path.join(outdir, "sgd_fused.ckpt"))
    return params_of(m)


def partial(rank):
    xs, ys = batches()
    dist = opt.DistOpt(make_optimizer("sgd"))
    m = build_model(dist, shard(xs[0], rank))
    for x, y in zip(xs, ys):
        dist.backward_and_partial_update(loss_of(m, shard(x, rank), shard(y, rank)),
                                         threshold=PARTIAL_THRESHOLD)
    return params_of(m)


def fail(dist, rank):
    xs, ys = batches()
    m = build_model(dist, shard(xs[0], rank))
    for step, (x, y) in enumerate(zip(xs, ys)):
        if rank == 1 and step == 3:
            raise RuntimeError("rank 1 fails on purpose at step 3")
        dist(loss_of(m, shard(x, rank), shard(y, rank)))
    return {}


def errors(dist):
    """What misuse raises, as 'TypeName: message' strings."""
    big = opt.DistOpt(opt.SGD(), buffSize=4)
    cases = {
        "fused_float16": lambda: dist.fused_all_reduce([tensor.zeros((3,), dtype=tensor.float16)]),
        "too_big": lambda: big.fused_all_reduce([tensor.zeros((5,))], send=False),
        "not_a_tensor": lambda: dist.all_reduce(np.zeros(3, np.float32)),
        "bad_spars": lambda: dist.sparsification(tensor.zeros((4,)), None, 0.0, True),
        "bad_acc": lambda: dist.sparsification(tensor.zeros((4,)), tensor.zeros((3,)), 0.5,
                                               True),
        "bad_threshold": lambda: dist.backward_and_update(tensor.zeros((1,)), threshold=-1),
        "empty_list": lambda: dist.fused_all_reduce([]),
    }
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = "no error"
        except Exception as e:  # noqa: BLE001  (the test reads the type)
            out[name] = f"{type(e).__name__}: {e}"
    # Packed tensors and the tensors to receive them must match.
    big.fused_all_reduce([tensor.zeros((2,))], send=False)
    try:
        big.fused_all_reduce([tensor.zeros((3,))])
        out["mismatch"] = "no error"
    except Exception as e:  # noqa: BLE001
        out["mismatch"] = f"{type(e).__name__}: {e}"
    return {k: np.array(v) for k, v in out.items()}


def main(scenario, outdir):
    dist = opt.DistOpt(opt.SGD())
    rank = dist.global_rank
    out = {"world_size": np.array(dist.world_size), "local_rank": np.array(dist.local_rank),
           "threads": np.array(singa.get_num_threads()),
           "cores": np.array(len(os.sched_getaffinity(0)))}
    if scenario == "fail":
        fail(dist, rank)
    elif scenario == "collectives":
        out.update({f"coll/{k}": v for k, v in collectives(dist, rank).items()})
    elif scenario == "all":
        out.update({f"coll/{k}": v for k, v in collectives(dist, rank).items()})
        out.update({f"err/{k}": v for k, v in errors(dist).items()})
        for name in TRAIN_CONFIGS:
            out.update({f"{name}/{k}": v for k, v in train(name, rank, outdir).items()})
        out.update({f"partial/{k}": v for k, v in partial(rank).items()})
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    np.savez(os.path.join(outdir, f"{scenario}_{rank}.npz"), **out)


if __name__ == "__main__":
    device.get_default_device().SetRandSeed(0)
    main(sys.argv[1], sys.argv[2])
