# A character-level LSTM trained with the Model API, as in SINGA's
# examples/rnn/char_rnn.py: one-hot characters in, next character out.
import json

import numpy as np

from singa import device, layer, model, opt, singa_wrap, tensor


class CharRNN(model.Model):

    def __init__(self, vocab_size, hidden_size=32):
        super(CharRNN, self).__init__()
        self.rnn = layer.LSTM(vocab_size, hidden_size)
        self.cat = layer.Cat()
        self.reshape1 = layer.Reshape()
        self.dense = layer.Linear(hidden_size, vocab_size)
        self.reshape2 = layer.Reshape()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()
        self.optimizer = opt.SGD(0.01)
        self.hidden_size = hidden_size
        self.vocab_size = vocab_size

    def reset_states(self, dev):
        self.hx.to_device(dev)
        self.cx.to_device(dev)
        self.hx.set_value(0.0)
        self.cx.set_value(0.0)

    def initialize(self, inputs):
        batchsize = inputs[0].shape[0]
        self.hx = tensor.Tensor((batchsize, self.hidden_size))
        self.cx = tensor.Tensor((batchsize, self.hidden_size))
        self.reset_states(inputs[0].device)

    def forward(self, inputs):
        x, hx, cx = self.rnn(inputs, (self.hx, self.cx))
        self.hx.copy_data(hx)
        self.cx.copy_data(cx)
        x = self.cat(x)
        x = self.reshape1(x, (-1, self.hidden_size))
        return self.dense(x)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        y = self.cat(y)
        y = self.reshape2(y, (-1, 1))
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def get_states(self):
        ret = super().get_states()
        ret[self.hx.name] = self.hx
        ret[self.cx.name] = self.cx
        return ret

    def set_states(self, states):
        self.hx.copy_from(states[self.hx.name])
        self.cx.copy_from(states[self.cx.name])
        super().set_states(states)


def numpy2tensors(npx, npy, dev):
    """batch, seq, dim -- > seq, batch, dim"""
    tmpy = np.swapaxes(npy, 0, 1).reshape((-1, 1))
    ty = tensor.from_numpy(tmpy.astype(np.int32))
    ty.to_device(dev)
    tmpx = np.swapaxes(npx, 0, 1)
    inputs = []
    for t in range(tmpx.shape[0]):
        x = tensor.from_numpy(tmpx[t])
        x.to_device(dev)
        inputs.append(x)
    return inputs, ty


def convert(batch, batch_size, seq_length, vocab_size, dev):
    """convert a batch of data into a sequence of input tensors"""
    y = batch[:, 1:]
    x1 = batch[:, :seq_length]
    x = np.zeros((batch_size, seq_length, vocab_size), dtype=np.float32)
    for b in range(batch_size):
        for t in range(seq_length):
            c = x1[b, t]
            x[b, t, c] = 1
    inputs, ty = numpy2tensors(x, y, dev)
    labels = [tensor.from_numpy(y[:, t].reshape(-1, 1).astype(np.int32)) for t in
              range(seq_length)]
    return inputs, labels, ty


if singa_wrap.USE_CUDA:
    cuda = device.create_cuda_gpu()
else:
    cuda = device.get_default_device()
cuda.SetRandSeed(0)
np.random.seed(0)

text = "hello singa, hello world. " * 40
chars = sorted(set(text))
vocab_size = len(chars)
char_to_idx = {c: i for i, c in enumerate(chars)}
idx = np.array([char_to_idx[c] for c in text], dtype=np.int32)
seq_length, batch_size, hidden_size = 10, 16, 32
starts = np.arange(0, len(idx) - seq_length - 1, seq_length)
train_dat = np.stack([idx[s:s + seq_length + 1] for s in starts])
num_train_batch = train_dat.shape[0] // batch_size

model = CharRNN(vocab_size, hidden_size)
model.optimizer = opt.SGD(0.5, momentum=0.9)
model.train()
epoch_losses = []
for epoch in range(12):
    train_loss = 0
    for b in range(num_train_batch):
        batch = train_dat[b * batch_size:(b + 1) * batch_size]
        inputs, labels, ty = convert(batch, batch_size, seq_length, vocab_size, cuda)
        out, loss = model(inputs, labels)
        model.reset_states(cuda)
        train_loss += tensor.to_numpy(loss)[0]
    print("\nEpoch %d, train loss is %f" % (epoch, train_loss / num_train_batch))
    epoch_losses.append(float(train_loss / num_train_batch))

model.eval()
batch = train_dat[:batch_size]
inputs, labels, ty = convert(batch, batch_size, seq_length, vocab_size, cuda)
model.reset_states(cuda)
out = model(inputs)
pred = np.argmax(tensor.to_numpy(out), axis=1)
acc = float(np.mean(pred == tensor.to_numpy(ty).reshape(-1)))
states = model.get_states()
print("RESULT", json.dumps({"losses": epoch_losses, "next_char_accuracy": acc,
                            "state_names": sorted(states)}))
