"""Data-parallel training speed on this machine, with DistOpt over MPI.

    PYTHONPATH=python python3 bench/dist.py [--steps 40] [--repeat 10] [--no-torch]

Prints two tables:

1. Samples per second of the digits CNN (examples/cnn, 16x16 inputs, global
   batch 64, SGD with momentum) for one process without DistOpt, one rank,
   and two ranks of one thread each.
2. Milliseconds per step to all-reduce a ResNet-18-size set of gradients
   (62 tensors, 11.7M float32 values) through DistOpt's real step
   (backward_and_update and backward_and_update_half with a stand-in
   backward that hands out the gradients), unfused (threshold 0) and fused
   (the default threshold), next to the same messages sent by MPI_Allreduce
   from C++ (bench/dist_allreduce.cc, built with the mpich wheel's mpicxx),
   the same all-reduce through NumPy copies instead of zero-copy buffers,
   and PyTorch's gloo backend (each framework in its own processes).

Every run is launched with the mpiexec beside this interpreter, two ranks
on this host.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def resnet18_grad_sizes():
    """Element counts of ResNet-18's parameters (ImageNet head), in the
    order backward produces them (last layer first)."""
    sizes = [64 * 3 * 7 * 7, 64, 64]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            first_in = cin if block == 0 else cout
            sizes += [cout * first_in * 9, cout, cout, cout * cout * 9, cout, cout]
            if block == 0 and (stride != 1 or cin != cout):
                sizes += [cout * cin, cout, cout]
        cin = cout
    sizes += [512 * 1000, 1000]
    return sizes[::-1]


# ---- workers (run under mpiexec) ----

def _emit(obj):
    print("RESULT " + json.dumps(obj), flush=True)


def worker_cnn(args):
    import singa
    from singa import autograd, opt, tensor
    sys.path.insert(0, os.path.join(ROOT, "examples", "cnn"))
    import data
    from models import cnn

    singa.set_num_threads(args.threads)
    sgd = opt.SGD(lr=0.05, momentum=0.9)
    dist = opt.DistOpt(sgd) if args.mode == "dist" else None
    rank = dist.global_rank if dist else 0
    world = dist.world_size if dist else 1
    bs = 64 // world
    x_all, y_all, _, _ = data.load("digits")
    x_all = data.resize(x_all, 16)
    m = cnn.create_model(num_classes=10, num_channels=1, image_size=16)
    m.set_optimizer(dist or sgd)
    m.compile([tensor.from_numpy(x_all[:bs])], is_train=True)
    step = dist.backward_and_update if dist else sgd
    rng = np.random.default_rng(0)

    def run(n):
        for _ in range(n):
            idx = rng.choice(len(x_all), 64, replace=False)[rank * bs:(rank + 1) * bs]
            x, y = tensor.from_numpy(x_all[idx]), tensor.from_numpy(y_all[idx])
            with autograd.train_mode(True):
                step(m.loss_fn(m.forward(x), y))

    run(3)
    if dist:
        dist.communicator.barrier()
    t0 = time.perf_counter()
    run(args.steps)
    if dist:
        dist.communicator.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        _emit({"samples_per_s": args.steps * 64 / dt})


class _NoUpdate:
    """An optimizer that applies nothing: the step then costs only DistOpt's
    communication (and its division by the number of ranks)."""

    def update(self, param, grad):
        pass

    def step(self):
        pass


def _resnet18_distopt():
    """A DistOpt whose backward hands out ResNet-18-size gradients (ones),
    and the messages its default step sends: [("direct" or "packed",
    [CTensor, ...]), ...], read off its calls to the communicator."""
    from singa import opt, tensor
    from singa._dist import distopt

    pairs = [(tensor.ones((n,)), tensor.ones((n,))) for n in resnet18_grad_sizes()]
    distopt.autograd.backward = lambda loss: iter(pairs)   # a stand-in backward
    dist = opt.DistOpt(_NoUpdate())
    comm = dist.communicator
    messages, pending = [], []
    synch, fused = comm.synch, comm.fusedSynch

    def log_synch(t):
        messages.append(("direct", [t]))
        synch(t)

    def log_fused(ts, send=True):
        if not send:
            pending.extend(ts)
        else:
            messages.append(("packed", pending[:] or list(ts)))
            pending.clear()
        fused(ts, send)

    comm.synch, comm.fusedSynch = log_synch, log_fused
    dist.backward_and_update(None)
    comm.synch, comm.fusedSynch = synch, fused
    return dist, pairs, messages


def worker_plan(args):
    """The sizes of the messages of DistOpt's default step."""
    _, _, messages = _resnet18_distopt()
    _emit({"buckets": [[t.Size() for t in ts] for _, ts in messages]})


def worker_allreduce(args):
    import singa
    from mpi4py import MPI

    singa.set_num_threads(1)
    dist, pairs, messages = _resnet18_distopt()
    comm = dist.communicator

    def per_tensor():
        for _, g in pairs:
            comm.synch(g.data)

    def through_numpy():   # what a binding without zero-copy buffers does
        for _, g in pairs:
            a = g.numpy()
            comm.comm.Allreduce(MPI.IN_PLACE, a)
            g.copy_from_numpy(a)

    def bucketed():
        for kind, ts in messages:
            if kind == "direct":
                comm.synch(ts[0])
            else:
                comm.fusedSynch(ts)

    out = {
        "per tensor": _best(per_tensor, comm, args.repeat),
        "per tensor via NumPy copies": _best(through_numpy, comm, args.repeat),
        "fused buckets": _best(bucketed, comm, args.repeat),
        "step unfused float32": _best(lambda: dist.backward_and_update(None, 0), comm,
                                      args.repeat),
        "step fused float32": _best(lambda: dist.backward_and_update(None), comm, args.repeat),
        "step unfused float16": _best(lambda: dist.backward_and_update_half(None, 0), comm,
                                      args.repeat),
        "step fused float16": _best(lambda: dist.backward_and_update_half(None), comm,
                                    args.repeat),
    }
    if dist.global_rank == 0:
        _emit(out)


def _best(fn, comm, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        comm.barrier()
        best = min(best, time.perf_counter() - t0)
    return best


def worker_torch(args):
    import torch
    import torch.distributed as tdist

    torch.set_num_threads(1)
    rank = int(os.environ["PMI_RANK"])
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                             world_size=2)
    grads = [torch.ones(n) for n in resnet18_grad_sizes()]

    def each():
        for g in grads:
            tdist.all_reduce(g)

    # DDP's default: 25 MB buckets, packed, reduced and unpacked.
    bucket_bytes, buckets, cur, size = 25 * 2 ** 20, [], [], 0
    for g in grads:
        cur.append(g)
        size += g.numel() * 4
        if size >= bucket_bytes:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)

    def bucketed():
        for b in buckets:
            flat = torch.cat(b)
            tdist.all_reduce(flat)
            off = 0
            for g in b:
                g.copy_(flat[off:off + g.numel()])
                off += g.numel()

    def best(fn):
        fn()
        t = float("inf")
        for _ in range(args.repeat):
            tdist.barrier()
            t0 = time.perf_counter()
            fn()
            tdist.barrier()
            t = min(t, time.perf_counter() - t0)
        return t

    out = {"per tensor": best(each), "25 MB buckets (DDP)": best(bucketed)}
    tdist.destroy_process_group()
    if rank == 0:
        _emit(out)


# ---- launching ----

def find_mpiexec():
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(folder, "mpiexec")
        if os.access(path, os.X_OK):
            return path
    return shutil.which("mpiexec")


def launch(n, argv, threads=1, stdin=None, timeout=900):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    proc = subprocess.run([find_mpiexec(), "-n", str(n), *map(str, argv)], input=stdin,
                          capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def result(stdout):
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"no result in:\n{stdout}")


def me(*args):
    return [sys.executable, os.path.abspath(__file__), *args]


# ---- harness sides: each launches its ranks under mpiexec ----

def cnn_side(threads, ranks, mode, steps, rank_threads=1):
    return result(launch(ranks, me("--worker", "cnn", "--mode", mode, "--threads",
                                   rank_threads, "--steps", steps), threads=rank_threads))


def singa_allreduce_side(threads, repeat):
    return result(launch(2, me("--worker", "allreduce", "--repeat", repeat)))


def native_allreduce_side(threads, repeat, sizes, buckets):
    """MPI_Allreduce from C++ (bench/dist_allreduce.cc, built with the mpicxx
    beside mpiexec) for the same messages."""
    exe = os.path.join(tempfile.gettempdir(), f"singa_dist_allreduce_{os.getuid()}")
    src = os.path.join(HERE, "dist_allreduce.cc")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        mpicxx = os.path.join(os.path.dirname(find_mpiexec()), "mpicxx")
        subprocess.run([mpicxx, "-O2", "-o", exe, src], check=True)

    def run(messages):
        plan = f"{repeat}\n" + "\n".join(" ".join(map(str, m)) for m in messages)
        return float(launch(2, [exe], stdin=plan).strip())
    return {"per tensor": run([[n] for n in sizes]), "fused buckets": run(buckets)}


def torch_allreduce_side(threads, repeat):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return result(launch(2, me("--worker", "torch", "--repeat", repeat, "--port", port)))


# ---- the driver ----

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="timed CNN steps per run")
    ap.add_argument("--repeat", type=int, default=10,
                    help="all-reduce steps per run (the best is kept)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--worker", choices=("cnn", "allreduce", "plan", "torch"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="dist", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        {"cnn": worker_cnn, "allreduce": worker_allreduce, "plan": worker_plan,
         "torch": worker_torch}[args.worker](args)
        return
    if find_mpiexec() is None:
        raise SystemExit('no mpiexec: pip install ".[dist]" (mpi4py and mpich)')
    import _harness
    from common import print_table
    Side = _harness.Side

    runs = [("1 process, SGD (no DistOpt), 1 thread", 1, "plain", 1),
            ("1 process, SGD (no DistOpt), 2 threads", 1, "plain", 2),
            ("1 rank, DistOpt, 1 thread", 1, "dist", 1),
            ("2 ranks, DistOpt, 1 thread each", 2, "dist", 1)]
    res = _harness.compare([Side(label, "dist:cnn_side", {"ranks": n, "mode": mode,
                                                         "steps": args.steps,
                                                         "rank_threads": t})
                            for label, n, mode, t in runs], threads=1, rounds=args.rounds)
    base = res[runs[0][0]].median("samples_per_s")
    rows = [[label, f"{res[label].median('samples_per_s'):.0f}",
             f"{res[label].min('samples_per_s'):.0f}",
             f"{res[label].median('samples_per_s') / base:.2f}"] for label, *_ in runs]
    print_table("Digits CNN (16x16, global batch 64, SGD momentum): training samples per second",
                ["run", "median", "min", "vs 1 process 1 thread"], rows)
    print(_harness.describe(args.rounds))

    sizes = resnet18_grad_sizes()
    buckets = result(launch(1, me("--worker", "plan")))["buckets"]
    sides = [Side("singa", "dist:singa_allreduce_side", {"repeat": args.repeat})]
    if os.access(os.path.join(os.path.dirname(find_mpiexec()), "mpicxx"), os.X_OK):
        sides.append(Side("C++", "dist:native_allreduce_side",
                          {"repeat": args.repeat, "sizes": sizes, "buckets": buckets}))
    if not args.no_torch:
        sides.append(Side("PyTorch", "dist:torch_allreduce_side", {"repeat": args.repeat},
                          needs="torch"))
    res = _harness.compare(sides, threads=1, rounds=args.rounds)
    nbytes = 4 * sum(sizes)
    rows = []
    for side, metric, label, messages in (
            ("singa", "per tensor", "singa communicator (mpi4py, zero-copy), per tensor",
             len(sizes)),
            ("singa", "per tensor via NumPy copies", "singa communicator through NumPy "
             "copies, per tensor", len(sizes)),
            ("C++", "per tensor", "C++ MPI_Allreduce, per tensor", len(sizes)),
            ("singa", "fused buckets", "singa communicator (mpi4py, zero-copy), fused "
             "buckets", len(buckets)),
            ("C++", "fused buckets", "C++ MPI_Allreduce, fused buckets (memcpy in and out)",
             len(buckets)),
            ("singa", "step unfused float32", "singa DistOpt step, unfused float32", ""),
            ("singa", "step fused float32", "singa DistOpt step, fused float32", ""),
            ("singa", "step unfused float16", "singa DistOpt step, unfused float16", ""),
            ("singa", "step fused float16", "singa DistOpt step, fused float16", ""),
            ("PyTorch", "per tensor", "PyTorch gloo, per tensor", len(sizes)),
            ("PyTorch", "25 MB buckets (DDP)", "PyTorch gloo, 25 MB buckets (as DDP)", "")):
        if side not in res:
            continue
        t = res[side].median(metric)
        rows.append([label, messages, f"{1e3 * t:.1f}", f"{1e3 * res[side].min(metric):.1f}",
                     f"{nbytes / t / 1e9:.2f}"])
    print_table(f"All-reduce of ResNet-18 gradients ({len(sizes)} tensors, {nbytes / 1e6:.1f} "
                "MB float32) between 2 ranks: ms per step (best of "
                f"{args.repeat} steps per run)",
                ["variant", "messages", "median ms", "min ms", "GB/s"], rows)
    print(_harness.describe(args.rounds))


if __name__ == "__main__":
    main()
