"""singa on a CUDA GPU against PyTorch CUDA: GEMMs and training steps, each
framework in a process of its own, one table at the end.

    PYTHONPATH=python python3 bench/gpu_bench.py [--quick] [--only CASE ...]

(--cpu runs the same code on the CPU with 512^3 GEMMs and batches of 8, to
check the script where there is no GPU; its numbers mean nothing here.)

Cases and the targets they are held to:
  gemm_f32   4096^3 float32 GEMM, TF32 off in both   singa >= 0.95x PyTorch's TFLOP/s
  gemm_f16   4096^3 float16 GEMM (float32 accumulation)  >= 0.90x
  mlp        784-256-256-10 training step, batch 128  singa <= 1.2x PyTorch's time
  cnn        LeNet-style training step, 1x28x28, batch 64   <= 1.2x
  resnet18   ResNet-18 (CIFAR stem: 3x3 conv, no max pool; 64-128-256-512),
             3x32x32, batch 64, training step              <= 1.2x
Training steps are SGD with momentum 0.9 on softmax cross-entropy; a step is
timed from the forward to the end of the update (the device is synchronised
after the timed steps), and the best of three rounds is kept. PyTorch runs
with TF32 off for matmuls and cuDNN, and its default (non-benchmark) cuDNN
algorithm choice.
"""

import argparse
import subprocess
import sys
import time

import numpy as np

import train_step  # the MLP, LeNet and ResNet-18 models, shared with the CPU bench

CASES = ("gemm_f32", "gemm_f16", "mlp", "cnn", "resnet18")
TARGETS = {"gemm_f32": (">=", 0.95), "gemm_f16": (">=", 0.90), "mlp": ("<=", 1.2),
           "cnn": ("<=", 1.2), "resnet18": ("<=", 1.2)}
BATCH = {"mlp": 128, "cnn": 64, "resnet18": 64}
WORKLOAD = {"mlp": "mlp", "cnn": "cnn", "resnet18": "resnet"}  # train_step.py's names


def _gemm_size(cpu):
    return 512 if cpu else 4096


def _data(case, rng, cpu=False):
    n = 8 if cpu else BATCH[case]
    shape = {"mlp": (n, 784), "cnn": (n, 1, 28, 28), "resnet18": (n, 3, 32, 32)}[case]
    return (rng.standard_normal(shape).astype(np.float32),
            rng.integers(0, 10, n).astype(np.int32))


def _best(step, sync, steps, rounds=3):
    """Best mean seconds per call of step() over rounds of `steps` calls."""
    best = float("inf")
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


# ---- singa ----

def singa_case(case, steps, cpu):
    from singa import autograd, device, opt, tensor
    dev = device.get_default_device() if cpu else device.create_cuda_gpu()
    rng = np.random.default_rng(0)
    if case.startswith("gemm"):
        dt = np.float16 if case == "gemm_f16" else np.float32
        n = _gemm_size(cpu)
        a = tensor.from_numpy(rng.standard_normal((n, n)).astype(dt), dev)
        b = tensor.from_numpy(rng.standard_normal((n, n)).astype(dt), dev)
        tensor.matmul(a, b)
        sec = _best(lambda: tensor.matmul(a, b), dev.Sync, steps)
        return {"value": 2 * n ** 3 / sec / 1e12, "unit": "TFLOP/s"}
    xn, yn = _data(case, rng, cpu)
    x, y = tensor.from_numpy(xn, dev), tensor.from_numpy(yn, dev)
    x.requires_grad = y.requires_grad = False
    net = train_step.singa_model(WORKLOAD[case])
    sgd = opt.SGD(lr=0.01, momentum=0.9)

    def step():
        loss = autograd.softmax_cross_entropy(net(x), y)
        sgd(loss)
    with autograd.train_mode(True):
        for _ in range(5):
            step()
        sec = _best(step, dev.Sync, steps)
    return {"value": sec * 1e3, "unit": "ms/step"}


# ---- PyTorch ----

def torch_case(case, steps, cpu):
    import torch
    from torch import nn
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cpu" if cpu else "cuda")
    sync = (lambda: None) if cpu else torch.cuda.synchronize
    g = torch.Generator(device="cpu").manual_seed(0)
    if case.startswith("gemm"):
        dt = torch.float16 if case == "gemm_f16" else torch.float32
        n = _gemm_size(cpu)
        a = torch.randn(n, n, generator=g).to(dev, dt)
        b = torch.randn(n, n, generator=g).to(dev, dt)
        a @ b
        sec = _best(lambda: a @ b, sync, steps)
        return {"value": 2 * n ** 3 / sec / 1e12, "unit": "TFLOP/s"}
    xn, yn = _data(case, np.random.default_rng(0), cpu)
    x, y = torch.from_numpy(xn).to(dev), torch.from_numpy(yn.astype(np.int64)).to(dev)
    net = train_step.torch_model(WORKLOAD[case])
    net = net.to(dev)
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(net(x), y)
        sgd.zero_grad(set_to_none=True)
        loss.backward()
        sgd.step()
    for _ in range(5):
        step()
    return {"value": _best(step, sync, steps) * 1e3, "unit": "ms/step"}


# ---- driver: each side in a process of its own (bench/_harness.py) ----

def singa_side(threads, case, steps, cpu=False):
    return {"value": singa_case(case, steps, cpu)["value"]}


def torch_side(threads, case, steps, cpu=False):
    return {"value": torch_case(case, steps, cpu)["value"]}


UNITS = {"gemm_f32": "TFLOP/s", "gemm_f16": "TFLOP/s", "mlp": "ms/step", "cnn": "ms/step",
         "resnet18": "ms/step"}


def main(argv=None):
    import _harness
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--quick", action="store_true", help="fewer timed steps")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per process")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (to check the script)")
    args = ap.parse_args(argv)
    print(f"{'case':9} {'singa':>10} {'pytorch':>10} {'ratio':>6} {'target':>7}  verdict",
          flush=True)
    missed = 0
    for case in args.only:
        steps = args.steps or ((5 if args.quick else 20) if case.startswith("gemm") else
                               (10 if args.quick else 30))
        kw = {"case": case, "steps": steps, "cpu": args.cpu}
        sides = [_harness.Side("singa", "gpu_bench:singa_side", kw),
                 _harness.Side("pytorch", "gpu_bench:torch_side", kw, needs="torch")]
        op, target = TARGETS[case]
        err = ""
        try:
            res = _harness.compare(sides, threads=None, rounds=1, timeout=args.timeout)
        except (_harness.SideError, subprocess.TimeoutExpired) as e:
            res, err = {}, str(e).strip().splitlines()[-1][:160]
        s = res["singa"].median("value") if "singa" in res else None
        t = res["pytorch"].median("value") if "pytorch" in res else None
        if s is not None and t is not None:
            ratio = s / t
            ok = ratio >= target if op == ">=" else ratio <= target
            verdict = "meets" if ok else "MISSES"
        else:
            ratio, ok = float("nan"), False
            verdict = "ERROR" if err or s is None else "NO TORCH"
        missed += not ok
        sv = "-" if s is None else f"{s:.3f}"
        tv = "-" if t is None else f"{t:.3f}"
        print(f"{case:9} {sv:>10} {tv:>10} {ratio:6.2f} {op + ' ' + str(target):>7}  {verdict}"
              f" ({UNITS[case]})" + (f"  {err}" if err else ""), flush=True)
    print("ratio: singa/pytorch (TFLOP/s for the GEMMs, ms per step for training); each "
          "framework ran in a process of its own (bench/_harness.py), each figure the best of "
          "three timed rounds")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
