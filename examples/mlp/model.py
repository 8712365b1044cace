"""The native.py perceptron written with the Model API: layers, compile,
train_one_batch, an optimizer and a checkpoint.

    PYTHONPATH=python python3 examples/mlp/model.py --epochs 50
"""

import argparse
import os
import tempfile
import time

import numpy as np

from singa import layer, model, opt, tensor


class MLP(model.Model):
    """Linear(hidden) -> ReLU -> Linear(classes), softmax cross-entropy."""

    def __init__(self, hidden=16, classes=2):
        super().__init__()
        self.linear1 = layer.Linear(hidden)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.linear2(self.relu(self.linear1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def make_data(n, rng):
    """Points in [-1, 1]^2, label 1 above the noisy line y = 5x + 1."""
    x = rng.uniform(-1.0, 1.0, n)
    y = 5.0 * x + 1.0 + 2.0 * rng.standard_normal(n)
    label = (5.0 * x + 1.0 > y).astype(np.int32)
    return np.stack([x, y], axis=1).astype(np.float32), label


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    data, label = make_data(args.samples, rng)
    split = int(0.8 * len(data))
    xtr, ytr, xte, yte = data[:split], label[:split], data[split:], label[split:]

    m = MLP()
    m.set_optimizer(opt.SGD(lr=args.lr, momentum=0.9))
    bs = args.batch_size
    m.compile([tensor.from_numpy(xtr[:bs])], is_train=True, use_graph=False)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        m.train()
        order = rng.permutation(len(xtr))
        total = 0.0
        for i in range(0, len(xtr), bs):
            idx = order[i:i + bs]
            _, loss = m(tensor.from_numpy(xtr[idx]), tensor.from_numpy(ytr[idx]))
            total += loss.item() * len(idx)
        if epoch % 10 == 0 or epoch == args.epochs - 1:
            print(f"epoch {epoch:3d}  loss = {total / len(xtr):.4f}")
    elapsed = time.perf_counter() - start

    m.eval()
    acc = float(np.mean(np.argmax(m(tensor.from_numpy(xte)).numpy(), 1) == yte))
    print(f"test accuracy = {acc:.4f}  ({args.epochs} epochs in {elapsed:.2f} s)")

    # A checkpoint round trip: a fresh model loads the weights and agrees.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.ckpt")
        m.save_states(path, aux_states={"epoch": args.epochs})
        m2 = MLP()
        m2.set_optimizer(opt.SGD(lr=args.lr, momentum=0.9))
        m2.compile([tensor.from_numpy(xte)], is_train=False)
        aux = m2.load_states(path)
        m2.eval()
        same = np.allclose(m2(tensor.from_numpy(xte)).numpy(), m(tensor.from_numpy(xte)).numpy())
        print(f"checkpoint reloaded (epoch {aux['epoch']}), same predictions: {same}")
    return acc


if __name__ == "__main__":
    main()
