# An MLP trained with plain autograd, as in SINGA's examples/mlp/native.py:
# points above or below the line y = 5x + 1.
import json

import numpy as np

from singa import autograd, device, opt, singa_wrap, tensor

if singa_wrap.USE_CUDA:
    dev = device.create_cuda_gpu()
else:
    dev = device.get_default_device()
dev.SetRandSeed(0)
np.random.seed(0)

autograd.training = True

f = lambda x: (5 * x + 1)  # noqa: E731
bd_x = np.linspace(-1.0, 1, 200)
bd_y = f(bd_x)
x = np.random.uniform(-1, 1, 400)
y = f(x) + 2 * np.random.randn(len(x))
label = np.asarray([5 * a + 1 > b for (a, b) in zip(x, y)]).astype(np.int32)


def to_categorical(y, num_classes):
    y = np.array(y, dtype="int")
    n = y.shape[0]
    categorical = np.zeros((n, num_classes))
    categorical[np.arange(n), y] = 1
    return categorical.astype(np.float32)


label = to_categorical(label, 2)
data = np.array([[a, b] for (a, b) in zip(x, y)], dtype=np.float32)

inputs = tensor.Tensor(data=data, device=dev)
target = tensor.Tensor(data=label, device=dev)

w0 = tensor.Tensor(shape=(2, 3), device=dev, requires_grad=True, stores_grad=True)
w0.gaussian(0.0, 0.1)
b0 = tensor.Tensor(shape=(3,), device=dev, requires_grad=True, stores_grad=True)
b0.set_value(0.0)
w1 = tensor.Tensor(shape=(3, 2), device=dev, requires_grad=True, stores_grad=True)
w1.gaussian(0.0, 0.1)
b1 = tensor.Tensor(shape=(2,), device=dev, requires_grad=True, stores_grad=True)
b1.set_value(0.0)

sgd = opt.SGD(0.05)
losses = []
for i in range(1001):
    x = autograd.matmul(inputs, w0)
    x = autograd.add_bias(x, b0)
    x = autograd.relu(x)
    x = autograd.matmul(x, w1)
    x = autograd.add_bias(x, b1)
    loss = autograd.softmax_cross_entropy(x, target)
    sgd(loss)
    if i % 100 == 0:
        print("training loss = ", tensor.to_numpy(loss)[0])
        losses.append(float(tensor.to_numpy(loss)[0]))

autograd.training = False
logits = autograd.add_bias(autograd.matmul(autograd.relu(
    autograd.add_bias(autograd.matmul(inputs, w0), b0)), w1), b1)
accuracy = float(np.mean(np.argmax(tensor.to_numpy(logits), 1) == np.argmax(label, 1)))
print("RESULT", json.dumps({"losses": losses, "accuracy": accuracy,
                            "params": {n: tensor.to_numpy(t).tolist()
                                       for n, t in (("w0", w0), ("b0", b0), ("w1", w1),
                                                    ("b1", b1))}}))
