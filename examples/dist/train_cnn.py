"""Data-parallel training of the example image classifiers with DistOpt.

    mpiexec -n 2 python examples/dist/train_cnn.py digits
    mpiexec -n 2 python examples/dist/train_cnn.py digits --dist-option sparseTopK --spars 0.05
    mpiexec -hosts node1,node2 -n 4 python examples/dist/train_cnn.py mnist --data-dir ~/mnist

Every rank builds the same model from the same seed, takes its share of
each global batch (--batch-size images per rank) and DistOpt averages the
gradients over the ranks, so the run trains like one process with a batch
of ranks x --batch-size. The models and data sets are those of
examples/cnn (models/, data.py).

--dist-option picks DistOpt's step: plain (all-reduce), half (float16
all-reduce), partialUpdate (local steps, one chunk of parameters averaged
per step), sparseTopK / sparseThreshold (sparse all-reduce with residual
correction; --spars is the fraction sent, or the magnitude threshold).
"""

import argparse
import importlib
import os
import sys
import time

import numpy as np

CNN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "cnn")
sys.path.insert(0, os.path.abspath(CNN_DIR))

import data  # noqa: E402  (examples/cnn/data.py)
import train_cnn as single  # noqa: E402  (examples/cnn/train_cnn.py)

import singa  # noqa: E402
from singa import autograd, opt, tensor  # noqa: E402

OPTIONS = ("plain", "half", "partialUpdate", "sparseTopK", "sparseThreshold")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", choices=("digits", "mnist"))
    ap.add_argument("--model", choices=single.MODELS, default="cnn")
    ap.add_argument("--data-dir", default=None, help="where the MNIST IDX files are")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dist-option", choices=OPTIONS, default="plain")
    ap.add_argument("--spars", type=float, default=0.05,
                    help="sparseTopK: fraction of entries sent; sparseThreshold: magnitude")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=32, help="images per rank and step")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--max-steps", type=int, default=None,
                    help="stop after this many steps (smoke tests, benchmarks)")
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads per rank (default: DistOpt's share, the host's cores "
                         "divided by its ranks)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def train_step(dist, args):
    """The DistOpt call for --dist-option, as a function of the loss."""
    return {
        "plain": dist.backward_and_update,
        "half": dist.backward_and_update_half,
        "partialUpdate": dist.backward_and_partial_update,
        "sparseTopK": lambda loss: dist.backward_and_sparse_update(loss, spars=args.spars,
                                                                   topK=True),
        "sparseThreshold": lambda loss: dist.backward_and_sparse_update(loss, spars=args.spars,
                                                                        topK=False),
    }[args.dist_option]


def main(argv=None):
    args = parse_args(argv)
    lr = args.lr if args.lr is not None else single.DEFAULT_LR[args.model]
    epochs = args.epochs if args.epochs is not None else single.DEFAULT_EPOCHS[args.model]
    # DistOpt first: from here on an exception on any rank ends the job.
    sgd = opt.SGD(lr=lr, momentum=0.9, weight_decay=5e-4)
    dist = opt.DistOpt(sgd)
    rank, world = dist.global_rank, dist.world_size
    if args.threads:     # DistOpt already gave each rank its share of the cores
        singa.set_num_threads(args.threads)
    dev = single.get_device(args.device)
    dev.SetRandSeed(args.seed)   # the same initial parameters on every rank

    try:
        train_x, train_y, test_x, test_y = data.load(args.data, args.data_dir)
    except data.DataError as e:
        raise SystemExit(f"error: {e}")
    size = single.DIGITS_SIZE[args.model] if args.data == "digits" else None
    if size:
        train_x, test_x = data.resize(train_x, size), data.resize(test_x, size)
    shift = 1 if args.data == "digits" and train_x.shape[2] >= 16 else 0
    bs = args.batch_size
    global_bs = bs * world
    steps_per_epoch = len(train_x) // global_bs
    if steps_per_epoch == 0:
        raise SystemExit(f"error: {len(train_x)} images are fewer than one global batch "
                         f"of {world} x {bs}")
    if rank == 0:
        print(f"{args.model} on {args.data} with {world} ranks ({args.dist_option}): batch "
              f"{bs} per rank ({global_bs} in all), {steps_per_epoch} steps per epoch, lr {lr}",
              flush=True)

    module = importlib.import_module(f"models.{args.model}")
    m = module.create_model(num_classes=10, num_channels=train_x.shape[1],
                            image_size=train_x.shape[2])
    m.set_optimizer(dist)
    m.compile([tensor.from_numpy(train_x[:bs], dev)], is_train=True)
    dev.SetRandSeed(args.seed + 1 + rank)   # different dropout masks per rank
    step = train_step(dist, args)
    order_rng = np.random.default_rng(args.seed)         # the same on every rank
    shift_rng = np.random.default_rng(args.seed + 1 + rank)
    loss_sum = tensor.Tensor((2,), dev)                  # (loss * images, correct)

    steps = 0
    for epoch in range(epochs):
        m.train()
        order = order_rng.permutation(len(train_x))
        loss_sum.set_value(0.0)
        totals = np.zeros(2)
        t0 = time.perf_counter()
        for s in range(steps_per_epoch):
            idx = order[s * global_bs + rank * bs:s * global_bs + (rank + 1) * bs]
            x = tensor.from_numpy(data.random_shift(train_x[idx], shift, shift_rng), dev)
            y = tensor.from_numpy(train_y[idx], dev)
            with autograd.train_mode(True):
                out = m.forward(x)
                loss = m.loss_fn(out, y)
                step(loss)
            totals += (loss.item() * bs, np.sum(np.argmax(out.numpy(), axis=1) == train_y[idx]))
            steps += 1
            if args.max_steps is not None and steps >= args.max_steps:
                break
        elapsed = time.perf_counter() - t0
        loss_sum.copy_from_numpy(totals.astype(np.float32))
        dist.all_reduce(loss_sum)   # sums over the ranks
        dist.wait()
        seen = (s + 1) * global_bs
        mean_loss, train_acc = loss_sum.numpy() / seen
        test_acc = single.evaluate(m, test_x, test_y, 256, dev)
        if rank == 0:
            print(f"epoch {epoch + 1}/{epochs}: loss {mean_loss:.4f}, train accuracy "
                  f"{train_acc:.4f}, test accuracy {test_acc:.4f}, "
                  f"{seen / elapsed:.0f} images/s", flush=True)
        if args.max_steps is not None and steps >= args.max_steps:
            break
    return test_acc


if __name__ == "__main__":
    main()
