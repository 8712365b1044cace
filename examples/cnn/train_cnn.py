"""Trains an image classifier with singa's Model API.

    PYTHONPATH=python python3 examples/cnn/train_cnn.py cnn digits
    PYTHONPATH=python python3 examples/cnn/train_cnn.py mlp mnist --data-dir ~/mnist

Models: mlp, cnn (LeNet-style), resnet (small), alexnet (small).
Data: digits (scikit-learn's 8x8 digits, offline) or mnist (IDX files in
--data-dir, downloaded with checksum checks when online).

Each epoch shows a progress bar, then the training loss, training and test
accuracy and throughput. --checkpoint saves the model and optimizer after
every epoch (atomically); --resume continues from such a file.
"""

import argparse
import importlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import data  # noqa: E402  (the example's own modules, next to this file)

from singa import device, opt, tensor  # noqa: E402

MODELS = ("mlp", "cnn", "resnet", "alexnet")
# Input side each model is trained at on 8x8 digits; None keeps 8x8. The
# LeNet-style CNN sees 16x16 (2x nearest-neighbour), where its "same"
# convolutions give LeNet's 800 features.
DIGITS_SIZE = {"mlp": None, "cnn": 16, "resnet": None, "alexnet": None}
DEFAULT_LR = {"mlp": 0.1, "cnn": 0.05, "resnet": 0.1, "alexnet": 0.02}
DEFAULT_EPOCHS = {"mlp": 30, "cnn": 20, "resnet": 10, "alexnet": 15}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=MODELS)
    ap.add_argument("data", choices=("digits", "mnist"))
    ap.add_argument("--data-dir", default=None, help="where the MNIST IDX files are")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--image-size", type=int, default=None,
                    help="resize images to this side (default: per model)")
    ap.add_argument("--graph", action="store_true",
                    help="graph mode: record the training step once, replay it (doc/graph.md)")
    ap.add_argument("--checkpoint", default=None, help="save states here after each epoch")
    ap.add_argument("--resume", default=None, metavar="CHECKPOINT",
                    help="load states from this checkpoint and continue")
    ap.add_argument("--plot", default=None, metavar="FILE", help="save loss/accuracy curves")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="stop after this many training steps (smoke tests)")
    ap.add_argument("--shift", type=int, default=None,
                    help="augment: random shifts of up to this many pixels (default: "
                         "1 on digits resized to 16x16 or more, else 0)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for singa")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return ap.parse_args(argv)


def get_device(name):
    if name == "cpu":
        return device.get_default_device()
    if device.get_num_gpus() == 0:
        raise SystemExit("--device cuda: this singa build sees no CUDA GPU; use --device cpu")
    return device.create_cuda_gpu()


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix(self, **kw):
        pass

    def close(self):
        pass


def progress(total, desc, disable):
    """A progress bar advanced by hand, one update per step: tqdm iterating
    a range only writes its count back at its own refresh times, so a bar
    whose postfix is set every step showed a stale count."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, disable=disable, dynamic_ncols=True)


def evaluate(m, x, y, batch_size, dev):
    m.eval()
    correct = 0
    for i in range(0, len(x), batch_size):
        out = m(tensor.from_numpy(x[i:i + batch_size], dev)).numpy()
        correct += int(np.sum(np.argmax(out, axis=1) == y[i:i + batch_size]))
    return correct / max(len(x), 1)


def plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = [h["epoch"] for h in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(epochs, [h["loss"] for h in history], marker="o")
    a.set_xlabel("epoch")
    a.set_ylabel("training loss")
    b.plot(epochs, [h["train_acc"] for h in history], marker="o", label="train")
    b.plot(epochs, [h["test_acc"] for h in history], marker="o", label="test")
    b.set_xlabel("epoch")
    b.set_ylabel("accuracy")
    b.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        import singa
        singa.set_num_threads(args.threads)
    dev = get_device(args.device)
    dev.SetRandSeed(args.seed)
    rng = np.random.default_rng(args.seed)

    try:
        train_x, train_y, test_x, test_y = data.load(args.data, args.data_dir)
    except data.DataError as e:
        raise SystemExit(f"error: {e}")
    size = args.image_size or (DIGITS_SIZE[args.model] if args.data == "digits" else None)
    if size:
        train_x, test_x = data.resize(train_x, size), data.resize(test_x, size)
    # Shifting 8x8 digits by a whole pixel is too coarse for the MLP, which
    # is trained on them unresized; the CNN sees 16x16 images.
    shift = args.shift if args.shift is not None else \
        (1 if args.data == "digits" and train_x.shape[2] >= 16 else 0)
    epochs = args.epochs if args.epochs is not None else DEFAULT_EPOCHS[args.model]
    lr = args.lr if args.lr is not None else DEFAULT_LR[args.model]
    bs = args.batch_size
    print(f"{args.model} on {args.data}: {len(train_x)} training and {len(test_x)} test "
          f"images of shape {train_x.shape[1:]}, batch {bs}, lr {lr}, shifts up to {shift} px, "
          f"device {args.device}")

    module = importlib.import_module(f"models.{args.model}")
    m = module.create_model(num_classes=10, num_channels=train_x.shape[1],
                            image_size=train_x.shape[2])
    steps_per_epoch = -(-len(train_x) // bs)
    # Decay the rate smoothly to a tenth of its start over the planned run.
    sched = opt.ExponentialDecay(lr, decay_steps=max(steps_per_epoch * epochs, 1),
                                 decay_rate=0.1)
    m.set_optimizer(opt.SGD(lr=sched, momentum=0.9, weight_decay=5e-4))
    m.compile([tensor.from_numpy(train_x[:bs], dev)], is_train=True, use_graph=args.graph)

    start_epoch, history = 0, []
    if args.resume:
        try:
            aux = m.load_states(args.resume)
        except (ValueError, FileNotFoundError) as e:
            raise SystemExit(f"error: cannot resume: {e}")
        start_epoch = int(aux.get("epoch", 0))
        history = list(aux.get("history", []))
        print(f"resumed from {args.resume} after epoch {start_epoch}")

    steps = 0
    for epoch in range(start_epoch, epochs):
        m.train()
        order = rng.permutation(len(train_x))
        total_loss, correct, seen = 0.0, 0, 0
        t0 = time.perf_counter()
        bar = progress(steps_per_epoch, f"epoch {epoch + 1}/{epochs}", args.no_progress)
        for i in range(0, len(train_x), bs):
            idx = order[i:i + bs]
            x = tensor.from_numpy(data.random_shift(train_x[idx], shift, rng), dev)
            y = tensor.from_numpy(train_y[idx], dev)
            out, loss = m(x, y)
            batch_loss = loss.item()
            total_loss += batch_loss * len(idx)
            correct += int(np.sum(np.argmax(out.numpy(), axis=1) == train_y[idx]))
            seen += len(idx)
            steps += 1
            bar.set_postfix(loss=f"{batch_loss:.3f}", refresh=False)
            bar.update(1)
            if args.max_steps is not None and steps >= args.max_steps:
                break
        bar.close()
        elapsed = time.perf_counter() - t0
        test_acc = evaluate(m, test_x, test_y, 256, dev)
        record = {"epoch": epoch + 1, "loss": total_loss / seen, "train_acc": correct / seen,
                  "test_acc": test_acc}
        history.append(record)
        print(f"epoch {epoch + 1}/{epochs}: loss {record['loss']:.4f}, train accuracy "
              f"{record['train_acc']:.4f}, test accuracy {test_acc:.4f}, "
              f"{seen / elapsed:.0f} images/s", flush=True)
        if args.checkpoint:
            m.save_states(args.checkpoint, aux_states={"epoch": epoch + 1,
                                                       "history": history})
        if args.max_steps is not None and steps >= args.max_steps:
            break

    if args.plot and history:
        plot(history, args.plot)
        print(f"curves saved to {args.plot}")
    return history


if __name__ == "__main__":
    main()
