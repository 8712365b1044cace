"""A two-layer perceptron written with plain autograd functions and SGD
(with momentum).

The data: points in [-1, 1]^2 labelled by which side of the line
y = 5x + 1 they fall on, after Gaussian noise is added to y. The network
(2 -> 3 -> 2, ReLU) learns the boundary.

    PYTHONPATH=python python3 examples/mlp/native.py --steps 500
"""

import argparse
import time

import numpy as np

from singa import autograd, opt, tensor


def make_data(n, rng):
    """n points, labels 1 above the line y = 5x + 1 (before noise)."""
    x = rng.uniform(-1.0, 1.0, n)
    y = 5.0 * x + 1.0 + 2.0 * rng.standard_normal(n)
    label = (5.0 * x + 1.0 > y).astype(np.int32)
    data = np.stack([x, y], axis=1).astype(np.float32)
    return data, label


def parameter(shape, std):
    t = tensor.Tensor(shape, requires_grad=True, stores_grad=True)
    if std:
        t.gaussian(0.0, std)
    return t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    data, label = make_data(args.samples, rng)
    onehot = np.eye(2, dtype=np.float32)[label]
    x = tensor.from_numpy(data)
    target = tensor.from_numpy(onehot)
    x.requires_grad = target.requires_grad = False

    w0, b0 = parameter((2, 3), 0.1), parameter((3,), 0.0)
    w1, b1 = parameter((3, 2), 0.1), parameter((2,), 0.0)
    for name, t in (("w0", w0), ("b0", b0), ("w1", w1), ("b1", b1)):
        t.name = name
    sgd = opt.SGD(lr=args.lr, momentum=0.9)

    def net(inp):
        h = autograd.relu(autograd.add_bias(autograd.matmul(inp, w0), b0))
        return autograd.add_bias(autograd.matmul(h, w1), b1)

    start = time.perf_counter()
    with autograd.train_mode(True):
        for step in range(args.steps + 1):
            loss = autograd.softmax_cross_entropy(net(x), target)
            sgd(loss)
            if step % 100 == 0:
                print(f"step {step:5d}  training loss = {loss.item():.4f}")
    elapsed = time.perf_counter() - start

    with autograd.no_grad():
        pred = np.argmax(net(x).numpy(), axis=1)
    acc = float(np.mean(pred == label))
    print(f"accuracy = {acc:.4f}  ({args.steps} steps in {elapsed:.2f} s)")
    return acc


if __name__ == "__main__":
    main()
