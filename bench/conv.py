"""CPU convolution, pooling and batch-norm speed, with the training-step and
inference comparisons of issue 12.

    PYTHONPATH=python python bench/conv.py [--threads 1 2] [--rounds 3]
        [--skip layers steps inference] [--quick] [--avx2]

Prints, for each thread count:
  1. the CPU (model, ISA flags, the kernel family singa runs) with its
     multiply-add peak, measured by singa itself: a loop of independent
     vector FMAs at that family's width (singa_wrap.CpuFmaPeak), and its
     memory bandwidth, a copy of 64 MiB at the start and end of each
     layer run (a layer that reads or writes tens of MB at a few FLOPs per
     byte follows it: on a shared host it moves by 1.5x within minutes);
  2. per layer, for LeNet and ResNet-18 (32x32 inputs) shapes at batch 64:
     GFLOP/s of the convolution forward, backward-data and backward-weight
     passes and their share of that peak; max pooling and batch norm move
     memory rather than compute, so they are given in GB/s (every input and
     output counted once) and as a share of a plain copy of the same bytes,
     with singa's time over PyTorch's for the same passes where PyTorch is
     installed;
  3. training steps against PyTorch (bench/train_step.py): LeNet,
     ResNet-18 (batch 32) and the MLP;
  4. ResNet-18 inference at batch 1 and 32 against onnxruntime running the
     model singa exports, singa eager and as a Model in graph mode.
Every side runs in a process of its own (bench/_harness.py); layer figures
are the best over repeats and rounds, step and inference figures medians.
Before and after each table it samples how long a cache line takes between
the first two CPUs (singa_wrap.CpuCoreToCoreNs), and the layer runs sample
it before every layer: on a virtual machine whose vCPUs the host moves
between dies, the two-thread figures change with it (doc/performance.md).
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

# name, (n, c, h, w), (oc, kh, kw), stride, pad
CONV_LAYERS = [
    ("lenet conv1", (64, 1, 28, 28), (20, 5, 5), 1, 0),
    ("lenet conv2", (64, 20, 12, 12), (50, 5, 5), 1, 0),
    ("r18 conv1", (64, 3, 32, 32), (64, 3, 3), 1, 1),
    ("r18 64@32", (64, 64, 32, 32), (64, 3, 3), 1, 1),
    ("r18 64->128 s2", (64, 64, 32, 32), (128, 3, 3), 2, 1),
    ("r18 1x1 64->128 s2", (64, 64, 32, 32), (128, 1, 1), 2, 0),
    ("r18 128@16", (64, 128, 16, 16), (128, 3, 3), 1, 1),
    ("r18 128->256 s2", (64, 128, 16, 16), (256, 3, 3), 2, 1),
    ("r18 256@8", (64, 256, 8, 8), (256, 3, 3), 1, 1),
    ("r18 256->512 s2", (64, 256, 8, 8), (512, 3, 3), 2, 1),
    ("r18 512@4", (64, 512, 4, 4), (512, 3, 3), 1, 1),
    ("5x5 64@16", (64, 64, 16, 16), (64, 5, 5), 1, 2),
    ("5x5 64->128 s2", (64, 64, 32, 32), (128, 5, 5), 2, 2),
]
POOL_LAYERS = [
    ("lenet pool1 2x2", (64, 20, 24, 24)),
    ("lenet pool2 2x2", (64, 50, 8, 8)),
]
BN_LAYERS = [
    ("r18 bn 64@32", (64, 64, 32, 32)),
    ("r18 bn 128@16", (64, 128, 16, 16)),
    ("r18 bn 256@8", (64, 256, 8, 8)),
]
INFER_BATCHES = (1, 32)
# --avx2: the environment that holds singa, PyTorch (ATen, oneDNN, MKL) and
# OpenBLAS to their AVX2 kernels, to check an AVX2 host's standing on an
# AVX-512 one (doc/performance.md). onnxruntime has no such switch.
AVX2_ENV = {"SINGA_CPU_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "OPENBLAS_CORETYPE": "Haswell"}
# A copy of this many floats (64 MiB, twice the largest L3 seen here) gives
# the memory bandwidth at the start and end of each layer run.
MEMORY_FLOATS = 16 << 20
PASSES = ("fwd", "bwd data", "bwd weight")


def _out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def conv_flops(x, w, s, p):
    n, c, h, wd = x
    oc, kh, kw = w
    return 2.0 * n * oc * _out(h, kh, s, p) * _out(wd, kw, s, p) * c * kh * kw


def _best(fn, reps, min_time=0.1):
    """Best seconds per call: `reps` timed calls, at least min_time in all."""
    now = _harness.clock()
    fn()
    best, spent, count = float("inf"), 0.0, 0
    while count < reps or spent < min_time:
        t0 = now()
        fn()
        dt = now() - t0
        best, spent, count = min(best, dt), spent + dt, count + 1
    return best


# ------------------------------------------------------- core-to-core probe

def _probe_cpus():
    """The first two CPUs this process may run on, or None."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cpus[:2] if len(cpus) >= 2 else None


def cross_core_side(threads, samples=40, gap=0.05):
    """Side function: `samples` one-way core-to-core latencies (ns) between
    the first two CPUs, `gap` seconds apart."""
    import time
    from singa import singa_wrap as cw

    cpus = _probe_cpus()
    out = {}
    for i in range(samples if cpus else 0):
        out[f"ns{i}"] = cw.CpuCoreToCoreNs(cpus[0], cpus[1], 0.002)
        time.sleep(gap)
    return out


def cross_core_line(label, values):
    """One line summing up core-to-core latency samples."""
    if not values:
        return f"cross-core latency {label}: not measured (fewer than two CPUs)"
    far = sum(v > 100 for v in values)
    return (f"cross-core latency {label}: {min(values):.0f}-{max(values):.0f} ns one way, "
            f"median {statistics.median(values):.0f} over {len(values)} samples, "
            f"{far} above 100 ns")


def print_cross_core(label, out=print):
    res = _harness.run_side(_harness.Side("probe", "conv:cross_core_side"), threads=1)
    out(cross_core_line(label, list(res.values())))


# ----------------------------------------------------------------- layer side

def layer_side(threads, quick=False):
    """Side function: peak, then seconds per pass of every layer."""
    import singa
    from singa import singa_wrap as cw
    from singa import tensor

    singa.set_num_threads(threads)
    reps = 2 if quick else 5
    out = {"peak": cw.CpuFmaPeak(threads, 0.1 if quick else 0.3)}
    rng = np.random.default_rng(0)
    cpus = _probe_cpus() if threads > 1 else None
    big = tensor.from_numpy(np.ones(MEMORY_FLOATS, np.float32)).data
    out["memory|start"] = 8 * MEMORY_FLOATS / _best(lambda: big.Clone(), reps)

    def probe(name):
        if cpus:
            out[name + "|c2c"] = cw.CpuCoreToCoreNs(cpus[0], cpus[1], 0.002)

    def t(shape):
        return tensor.from_numpy(rng.standard_normal(shape).astype(np.float32)).data

    for name, xs, ws, s, p in CONV_LAYERS:
        probe(name)
        x, w = t(xs), t((ws[0], xs[1]) + ws[1:])
        st, pads, dil = [s, s], [p] * 4, [1, 1]
        y = cw.Conv2dForward(x, w, cw.Tensor(), st, pads, dil, 1)
        dy = t(tuple(y.shape()))
        out[name + "|fwd"] = _best(
            lambda: cw.Conv2dForward(x, w, cw.Tensor(), st, pads, dil, 1), reps)
        out[name + "|bwd data"] = _best(
            lambda: cw.Conv2dBackwardData(dy, w, list(xs), st, pads, dil, 1), reps)
        out[name + "|bwd weight"] = _best(
            lambda: cw.Conv2dBackwardWeight(x, dy, list(w.shape()), st, pads, dil, 1),
            reps)
    for name, xs in POOL_LAYERS:
        probe(name)
        x = t(xs)
        y, arg = cw.MaxPool2dForward(x, [2, 2], [2, 2], [0] * 4, [1, 1], False)
        dy = t(tuple(y.shape()))
        out[name + "|copy"] = _best(lambda: x.Clone(), reps)
        out[name + "|fwd"] = _best(
            lambda: cw.MaxPool2dForward(x, [2, 2], [2, 2], [0] * 4, [1, 1], False), reps)
        out[name + "|bwd"] = _best(
            lambda: cw.MaxPool2dBackward(dy, arg, list(xs), [2, 2], [2, 2], [0] * 4,
                                         [1, 1], False), reps)
    for name, xs in BN_LAYERS:
        probe(name)
        x, dy = t(xs), t(xs)
        scale, bias = t((xs[1],)), t((xs[1],))
        y, mean, var = cw.BatchNormForwardTraining(x, scale, bias, 1e-5)
        out[name + "|copy"] = _best(lambda: x.Clone(), reps)
        out[name + "|fwd"] = _best(
            lambda: cw.BatchNormForwardTraining(x, scale, bias, 1e-5), reps)
        out[name + "|bwd"] = _best(
            lambda: cw.BatchNormBackward(x, dy, scale, mean, var, 1e-5), reps)
    out["memory|end"] = 8 * MEMORY_FLOATS / _best(lambda: big.Clone(), reps)
    return out


def torch_norm_side(threads, quick=False):
    """Side function: seconds per pass of PyTorch's max pooling and batch
    norm (training) on the same shapes, for reference."""
    import torch

    torch.set_num_threads(threads)
    reps = 2 if quick else 5
    out = {}
    g = torch.Generator().manual_seed(0)
    aten = torch.ops.aten
    with torch.no_grad():
        for name, xs in POOL_LAYERS:
            x = torch.randn(xs, generator=g)
            y, idx = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
            dy = torch.randn(y.shape, generator=g)
            out[name + "|fwd"] = _best(
                lambda: aten.max_pool2d_with_indices(x, [2, 2], [2, 2]), reps)
            out[name + "|bwd"] = _best(
                lambda: aten.max_pool2d_with_indices_backward(
                    dy, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx), reps)
        for name, xs in BN_LAYERS:
            x, dy = torch.randn(xs, generator=g), torch.randn(xs, generator=g)
            w, b = torch.randn(xs[1], generator=g), torch.randn(xs[1], generator=g)
            rm, rv = torch.zeros(xs[1]), torch.ones(xs[1])
            y, mean, invstd = aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
            out[name + "|fwd"] = _best(
                lambda: aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5), reps)
            out[name + "|bwd"] = _best(
                lambda: aten.native_batch_norm_backward(
                    dy, x, w, rm, rv, mean, invstd, True, 1e-5, [True] * 3), reps)
    return out


def cpu_description():
    model, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("unknown", "", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl")
           if f in flags]
    return model, isa


def _singa_isa():
    import subprocess
    code = "from singa import singa_wrap as w; print(w.CpuIsa())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True).stdout.strip() or "?"


def layer_tables(threads, rounds, quick, out=print):
    res, ref = {}, {}
    for n in threads:
        both = _harness.compare([_harness.Side("singa", "conv:layer_side", {"quick": quick}),
                                 _harness.Side("pytorch", "conv:torch_norm_side",
                                               {"quick": quick}, needs="torch")],
                                threads=n, rounds=rounds)
        res[n], ref[n] = both["singa"], both.get("pytorch")
    out("\nCPU peak, measured: a loop of independent vector FMAs at singa's width")
    for n in threads:
        out(f"  {n} thread(s): {res[n].max('peak'):.1f} GFLOP/s")
    out("memory, measured: a copy of 64 MiB (GB/s read + written), at the start and end of "
        "each round's layers")
    for n in threads:
        rates = [v * 1e-9 for k in ("start", "end") for v in res[n].values("memory|" + k)]
        out(f"  {n} thread(s): {min(rates):.1f}-{max(rates):.1f} GB/s, median "
            f"{statistics.median(rates):.1f}")

    def pct(v, peak):
        return f"{v:7.1f} {100 * v / peak:4.0f}%"

    header = f"{'conv layer (batch 64)':22} {'shape':>24} {'GFLOP':>6} {'thr':>3} " + \
        " ".join(f"{p + ' GF/s':>12}" for p in PASSES)
    out(f"\nconvolution: GFLOP/s and % of the measured FMA peak (best of repeats, "
        f"{_harness.clock_name()})")
    out(header)
    out("-" * len(header))
    below = []
    for name, xs, ws, s, p in CONV_LAYERS:
        gf = conv_flops(xs, ws, s, p) * 1e-9
        shape = f"{xs[1]}x{xs[2]}x{xs[3]}>{ws[0]} {ws[1]}x{ws[2]}/{s}"
        for n in threads:
            peak = res[n].max("peak")
            cells = []
            for ps in PASSES:
                v = gf / res[n].min(f"{name}|{ps}")
                cells.append(pct(v, peak))
                if v < 0.5 * peak:
                    below.append(f"{name} {ps} ({n} thr)")
            out(f"{name:22} {shape:>24} {gf:6.3f} {n:3d} " + " ".join(f"{c:>12}" for c in cells))
    out("\nmax pooling and batch norm (training): GB/s of inputs + outputs, and % of a "
        "copy of the input" + ("; singa's time / PyTorch's (fwd, bwd)" if ref[threads[0]]
                               else ""))
    header = f"{'layer (batch 64)':22} {'shape':>14} {'thr':>3} {'fwd GB/s':>12} " \
        f"{'bwd GB/s':>12}" + (f" {'vs PyTorch':>12}" if ref[threads[0]] else "")
    out(header)
    out("-" * len(header))
    for name, xs in POOL_LAYERS + BN_LAYERS:
        size = int(np.prod(xs))
        if "pool" in name:
            osz = size // 4
            fwd_bytes = 4 * (size + 2 * osz)   # x; y and argmax
            bwd_bytes = 4 * (2 * osz + size)   # dy and argmax; dx
        else:
            fwd_bytes = 4 * 2 * size           # x; y
            bwd_bytes = 4 * 3 * size           # x, dy; dx
        for n in threads:
            r = res[n]
            copy = 8 * size / r.min(name + "|copy")
            cells = [f"{b / r.min(name + '|' + k) * 1e-9:7.1f} "
                     f"{100 * b / r.min(name + '|' + k) / copy:4.0f}%"
                     for k, b in (("fwd", fwd_bytes), ("bwd", bwd_bytes))]
            if ref[n]:
                cells.append(" ".join(f"{r.min(name + '|' + k) / ref[n].min(name + '|' + k):.2f}"
                                      for k in ("fwd", "bwd")))
            out(f"{name:22} {'x'.join(map(str, xs[1:])):>14} {n:3d} " +
                " ".join(f"{c:>12}" for c in cells))
    if below:
        out("\nbelow 50% of peak: " + ", ".join(below))
    else:
        out("\nevery convolution pass reaches 50% of the measured peak")
    for n in threads:
        samples = [v for k in res[n].metrics() if k.endswith("|c2c") for v in res[n].values(k)]
        if samples:
            out(cross_core_line(f"before each layer ({n} threads)", samples))


# ------------------------------------------------------------------ inference

def _seeded_resnet():
    from singa import device
    import train_step
    device.get_default_device().SetRandSeed(0)
    return train_step.singa_model("resnet")


def export_side(threads, path, batch):
    """Side function: writes the ONNX export of the seeded ResNet-18."""
    import singa
    from singa import autograd, sonnx, tensor
    singa.set_num_threads(threads)
    net = _seeded_resnet()
    x = tensor.from_numpy(np.random.default_rng(1).standard_normal(
        (batch, 3, 32, 32)).astype(np.float32))
    with autograd.train_mode(False):
        net(x)
    import onnx
    onnx.save(sonnx.export_model(net, [x]), path)
    return {"ok": 1.0}


def singa_infer(threads, batch, iters, graph=False):
    """Side function: ms per forward of the seeded ResNet-18 in evaluation
    mode, eager (every layer called from Python) or, with graph, as a
    Model in graph mode (SINGA's fast path: the first call records the
    forward, later ones replay it in C++). The graph side checks its output
    against an eager forward of the same input first."""
    import singa
    from singa import autograd, model, tensor
    singa.set_num_threads(threads)
    layers = _seeded_resnet()
    x = tensor.from_numpy(np.random.default_rng(1).standard_normal(
        (batch, 3, 32, 32)).astype(np.float32))
    net, out = layers, {}
    if graph:
        class Inference(model.Model):
            def __init__(self):
                super().__init__()
                self.net = layers

            def forward(self, x):
                return self.net(x)

        with autograd.train_mode(False):
            want = tensor.to_numpy(layers(x))
        net = Inference()
        net.eval()
        net.graph(True)
    times, now = [], _harness.clock()
    with autograd.train_mode(False):
        net(x).data.device().Sync()
        for _ in range(iters):
            t0 = now()
            y = net(x)
            y.data.device().Sync()
            times.append(now() - t0)
    out["ms"] = 1e3 * statistics.median(times)
    if graph:  # the last replay's output
        got = tensor.to_numpy(y)
        out["max_diff"] = float(np.abs(got - want).max())
        if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise RuntimeError(f"graph-mode forward differs from eager by {out['max_diff']}")
    return out


def ort_infer(threads, batch, iters, path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = np.random.default_rng(1).standard_normal((batch, 3, 32, 32)).astype(np.float32)
    sess.run(None, {name: x})
    times, now = [], _harness.clock()
    for _ in range(iters):
        t0 = now()
        sess.run(None, {name: x})
        times.append(now() - t0)
    return {"ms": 1e3 * statistics.median(times)}


def inference_table(threads, rounds, quick, out=print):
    import importlib.util
    if importlib.util.find_spec("onnxruntime") is None or \
            importlib.util.find_spec("onnx") is None:
        out("\n(onnx or onnxruntime is not installed: no inference table)")
        return
    out("\nResNet-18 inference (32x32 inputs), ms per forward: median over rounds of "
        "each process's median")
    out("(" + _harness.describe(rounds) + "; singa runs eager (each layer called from Python) "
        "and as a Model in graph mode (recorded once, replayed in C++; its output checked "
        "against eager); onnxruntime runs singa's ONNX export; ratio: singa's time over "
        "onnxruntime's; " + _harness.PAIRED_NOTE + ")")
    header = (f"{'batch':>5} {'thr':>3} {'eager':>7} {'graph':>7} {'onnxruntime':>12} "
              f"{'ratio':>6} {'paired':>6} {'best':>6} {'graph':>6} {'paired':>6} "
              f"{'best':>6} {'target':>6}")
    out(header)
    out("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for batch in INFER_BATCHES:
            path = os.path.join(tmp, f"resnet18_b{batch}.onnx")
            _harness.run_side(_harness.Side("export", "conv:export_side",
                                            {"path": path, "batch": batch}), threads=1)
            iters = (20 if batch == 1 else 5) if quick else (100 if batch == 1 else 20)
            for n in threads:
                res = _harness.compare(
                    [_harness.Side("singa", "conv:singa_infer", {"batch": batch, "iters": iters}),
                     _harness.Side("graph", "conv:singa_infer",
                                   {"batch": batch, "iters": iters, "graph": True}),
                     _harness.Side("onnxruntime", "conv:ort_infer",
                                   {"batch": batch, "iters": iters, "path": path},
                                   needs="onnxruntime")],
                    threads=n, rounds=rounds)
                ort = res["onnxruntime"]
                cells = []
                for side in ("singa", "graph"):
                    ms = res[side].median("ms")
                    cells.append((ms, ms / ort.median("ms")) +
                                 _harness.ratios(res[side], ort, "ms"))
                (s, r, p, b), (g, gr, gp, gb) = cells
                out(f"{batch:5d} {n:3d} {s:7.2f} {g:7.2f} {ort.median('ms'):12.2f} "
                    f"{r:6.2f} {p:6.2f} {b:6.2f} {gr:6.2f} {gp:6.2f} {gb:6.2f} {1.2:6.2f}")


# ----------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["layers", "steps", "inference"])
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with process CPU time (1-thread figures on a busy machine)")
    ap.add_argument("--avx2", action="store_true",
                    help="hold singa, PyTorch and OpenBLAS to AVX2 kernels (onnxruntime "
                         "cannot be held)")
    args = ap.parse_args(argv)
    _harness.use_cpu_time(args.cpu_time)
    if args.avx2:
        # every side runs in a child process, which inherits this environment
        os.environ.update(AVX2_ENV)
        print("held to AVX2 kernels: " + " ".join(f"{k}={v}" for k, v in AVX2_ENV.items()) +
              " (onnxruntime cannot be held: its inference figures are its own ISA's)")
    model, isa = cpu_description()
    print(f"CPU: {model}; {os.cpu_count()} logical CPU(s); ISA flags: {' '.join(isa)}; "
          f"singa kernels: {_singa_isa()}")
    try:
        print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
              f"{os.getloadavg()[2]:.2f}")
    except OSError:
        pass
    print_cross_core("at the start")
    if "layers" not in args.skip:
        layer_tables(args.threads, max(1, args.rounds - 1), args.quick)
    if "steps" not in args.skip:
        import train_step
        print()
        train_step.step_table(["cnn", "resnet", "mlp"], args.threads, args.rounds,
                              steps=(3 if args.quick else None))
        print_cross_core("after the steps")
    if "inference" not in args.skip:
        inference_table(args.threads, args.rounds, args.quick)
        print_cross_core("after inference")


if __name__ == "__main__":
    main()
