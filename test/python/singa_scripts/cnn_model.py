# A CNN trained with the Model API, as in SINGA's examples/cnn/train_cnn.py,
# on scikit-learn's 8x8 digits (offline), with compile(..., use_graph=False).
import json

import numpy as np
from sklearn.datasets import load_digits

from singa import device, layer, model, opt, singa_wrap, tensor


class CNN(model.Model):

    def __init__(self, num_classes=10, num_channels=1):
        super(CNN, self).__init__()
        self.num_classes = num_classes
        self.input_size = 8
        self.dimension = 4
        self.conv1 = layer.Conv2d(num_channels, 16, 3, padding=1, activation="RELU")
        self.conv2 = layer.Conv2d(16, 32, 3, padding=1, activation="RELU")
        self.linear1 = layer.Linear(64)
        self.linear2 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.conv1(x)
        y = self.pooling1(y)
        y = self.conv2(y)
        y = self.pooling2(y)
        y = self.flatten(y)
        y = self.linear1(y)
        y = self.relu(y)
        y = self.linear2(y)
        return y

    def train_one_batch(self, x, y, dist_option, spars):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        if dist_option == "plain":
            self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def accuracy(pred, target):
    y = np.argmax(pred, axis=1)
    return np.sum(y == target)


if singa_wrap.USE_CUDA:
    dev = device.create_cuda_gpu()
else:
    dev = device.get_default_device()
dev.SetRandSeed(0)
np.random.seed(0)

digits = load_digits()
data = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
labels = digits.target.astype(np.int32)
perm = np.random.permutation(len(data))
train_x, train_y = data[perm[:1400]], labels[perm[:1400]]
val_x, val_y = data[perm[1400:]], labels[perm[1400:]]

batch_size = 50
max_epoch = 4
sgd = opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5)
model = CNN()
tx = tensor.Tensor((batch_size, 1, 8, 8), dev, tensor.float32)
ty = tensor.Tensor((batch_size,), dev, tensor.int32)
num_train_batch = train_x.shape[0] // batch_size
num_val_batch = val_x.shape[0] // batch_size
idx = np.arange(train_x.shape[0], dtype=np.int32)

model.set_optimizer(sgd)
model.compile([tx], is_train=True, use_graph=False, sequential=False)

history = []
for epoch in range(max_epoch):
    np.random.shuffle(idx)
    train_correct = np.zeros(shape=[1], dtype=np.float32)
    test_correct = np.zeros(shape=[1], dtype=np.float32)
    train_loss = np.zeros(shape=[1], dtype=np.float32)

    model.train()
    for b in range(num_train_batch):
        x = train_x[idx[b * batch_size:(b + 1) * batch_size]]
        y = train_y[idx[b * batch_size:(b + 1) * batch_size]]
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        out, loss = model(tx, ty, "plain", None)
        train_correct += accuracy(tensor.to_numpy(out), y)
        train_loss += tensor.to_numpy(loss)[0]
    print("Training loss = %f, training accuracy = %f" %
          (train_loss[0], train_correct[0] / (num_train_batch * batch_size)))

    model.eval()
    for b in range(num_val_batch):
        x = val_x[b * batch_size:(b + 1) * batch_size]
        y = val_y[b * batch_size:(b + 1) * batch_size]
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        out_test = model(tx)
        test_correct += accuracy(tensor.to_numpy(out_test), y)
    print("Evaluation accuracy = %f" % (test_correct[0] / (num_val_batch * batch_size)))
    history.append({"loss": float(train_loss[0]),
                    "val_acc": float(test_correct[0] / (num_val_batch * batch_size))})

print("RESULT", json.dumps({"history": history}))
