# Export a trained CNN with batch norm to ONNX after model.eval(), as in
# SINGA's examples/onnx: an inference-mode forward, sonnx.to_onnx(inputs,
# outputs), then onnxruntime and SINGA's own backend run it again.
import json
import os
import sys
import tempfile

import numpy as np

from singa import autograd, device, layer, model, opt, singa_wrap, sonnx, tensor


class Net(model.Model):

    def __init__(self):
        super(Net, self).__init__()
        self.conv = layer.Conv2d(1, 8, 3, padding=1)
        self.bn = layer.BatchNorm2d(8)
        self.relu = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.dropout = layer.Dropout(0.3)
        self.fc = layer.Linear(4)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pool(self.relu(self.bn(self.conv(x))))
        return self.fc(self.dropout(self.flatten(y)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


if singa_wrap.USE_CUDA:
    dev = device.create_cuda_gpu()
else:
    dev = device.get_default_device()
dev.SetRandSeed(0)
np.random.seed(0)

x_np = np.random.randn(8, 1, 6, 6).astype(np.float32)
y_np = np.random.randint(0, 4, 8).astype(np.int32)
tx = tensor.from_numpy(x_np)
ty = tensor.from_numpy(y_np)
m = Net()
m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
m.compile([tx], is_train=True, use_graph=False, sequential=False)
m.train()
for _ in range(5):
    out, loss = m(tx, ty)
print("last training loss", tensor.to_numpy(loss)[0])

m.eval()
before = {k: tensor.to_numpy(v).copy() for k, v in m.get_states().items()}
y = m.forward(tx)
onnx_model = sonnx.to_onnx([tx], [y])
after = {k: tensor.to_numpy(v) for k, v in m.get_states().items()}
unchanged = all(np.array_equal(before[k], after[k]) for k in before)

path = os.path.join(tempfile.mkdtemp(), "net.onnx")
sonnx.save(onnx_model, path)
loaded = sonnx.load(path)

import onnxruntime as ort  # noqa: E402

sess = ort.InferenceSession(loaded.SerializeToString(), providers=["CPUExecutionProvider"])
ort_out = sess.run(None, {sess.get_inputs()[0].name: x_np})[0]
rep = sonnx.prepare(loaded, device=dev)
singa_out = rep.run([tx])[0]
ref = tensor.to_numpy(y)

print("RESULT", json.dumps({
    "ort_diff": float(np.abs(ort_out - ref).max()),
    "singa_diff": float(np.abs(tensor.to_numpy(singa_out) - ref).max()),
    "states_unchanged": unchanged,
    "eval_again_diff": float(np.abs(tensor.to_numpy(m.forward(tx)) - ref).max()),
    "ops": [n.op_type for n in loaded.graph.node]}))
