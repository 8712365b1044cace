# A GAN with the Model API and two optimizers, after SINGA's examples/gan:
# the steps are written by hand outside train_one_batch, so they rely on
# model.train() switching autograd to training. The "real" data are 2-D
# points around (2, -1).
import json

import numpy as np

from singa import autograd, device, layer, model, opt, singa_wrap, tensor


class GAN_MLP(model.Model):

    def __init__(self, noise_size=4, feature_size=2, hidden_size=16):
        super(GAN_MLP, self).__init__()
        self.noise_size = noise_size
        self.feature_size = feature_size
        self.hidden_size = hidden_size

        self.gen_net_fc_0 = layer.Linear(self.hidden_size)
        self.gen_net_relu_0 = layer.ReLU()
        self.gen_net_fc_1 = layer.Linear(self.feature_size)

        self.dis_net_fc_0 = layer.Linear(self.hidden_size)
        self.dis_net_relu_0 = layer.ReLU()
        self.dis_net_fc_1 = layer.Linear(1)
        self.dis_net_sigmoid_1 = layer.Sigmoid()
        self.binary_cross_entropy = layer.BinaryCrossEntropy()

    def forward(self, x):
        y = self.forward_gen(x)
        y = self.forward_dis(y)
        return y

    def forward_dis(self, x):
        y = self.dis_net_fc_0(x)
        y = self.dis_net_relu_0(y)
        y = self.dis_net_fc_1(y)
        y = self.dis_net_sigmoid_1(y)
        return y

    def forward_gen(self, x):
        y = self.gen_net_fc_0(x)
        y = self.gen_net_relu_0(y)
        y = self.gen_net_fc_1(y)
        return y

    def set_optimizers(self, gen_opt, dis_opt):
        self.gen_opt = gen_opt
        self.dis_opt = dis_opt

    def train_one_batch(self, x, y):
        # Training the generative net: only its parameters move.
        out = self.forward(x)
        loss = self.binary_cross_entropy(out, y)
        for p, g in autograd.backward(loss):
            if "gen_net" in p.name:
                self.gen_opt.apply(p.name, p, g)
        self.gen_opt.step()
        return out, loss

    def train_one_batch_dis(self, x, y):
        # Training the discriminative net: only its parameters move.
        out = self.forward_dis(x)
        loss = self.binary_cross_entropy(out, y)
        for p, g in autograd.backward(loss):
            if "dis_net" in p.name:
                self.dis_opt.apply(p.name, p, g)
        self.dis_opt.step()
        return out, loss


if singa_wrap.USE_CUDA:
    dev = device.create_cuda_gpu()
else:
    dev = device.get_default_device()
dev.SetRandSeed(0)
np.random.seed(0)

batch_size = 64
center = np.array([2.0, -1.0], dtype=np.float32)
m = GAN_MLP()
m.set_optimizers(opt.Adam(lr=0.01, beta_1=0.5), opt.Adam(lr=0.01, beta_1=0.5))
noise = tensor.Tensor((batch_size, m.noise_size), dev, tensor.float32)
real_images = tensor.Tensor((batch_size, m.feature_size), dev, tensor.float32)
real_labels = tensor.Tensor((batch_size, 1), dev, tensor.float32)
fake_labels = tensor.Tensor((batch_size, 1), dev, tensor.float32)
real_labels.set_value(1.0)
fake_labels.set_value(0.0)
m.compile([noise], is_train=True, use_graph=False, sequential=True)


def gen_mean():
    noise.gaussian(0.0, 1.0)
    return tensor.to_numpy(m.forward_gen(noise)).mean(axis=0)


start_mean = gen_mean()
m.train()
d_losses, g_losses = [], []
for iteration in range(400):
    real_images.copy_from_numpy(center + 0.3 * np.random.randn(batch_size, 2)
                                .astype(np.float32))
    _, d_loss_real = m.train_one_batch_dis(real_images, real_labels)
    noise.gaussian(0.0, 1.0)
    fake_images = m.forward_gen(noise)
    _, d_loss_fake = m.train_one_batch_dis(fake_images, fake_labels)
    d_loss = tensor.to_numpy(d_loss_real)[0] + tensor.to_numpy(d_loss_fake)[0]

    noise.gaussian(0.0, 1.0)
    _, g_loss_tensor = m.train_one_batch(noise, real_labels)
    g_loss = tensor.to_numpy(g_loss_tensor)[0]
    if iteration % 100 == 0:
        print("iteration %d: d_loss %f, g_loss %f" % (iteration, d_loss, g_loss))
    d_losses.append(float(d_loss))
    g_losses.append(float(g_loss))

m.eval()
end_mean = gen_mean()
print("RESULT", json.dumps({"start_mean": start_mean.tolist(), "end_mean": end_mean.tolist(),
                            "center": center.tolist(),
                            "gen_steps": float(tensor.to_numpy(m.gen_opt.step_counter)[0]),
                            "dis_steps": float(tensor.to_numpy(m.dis_opt.step_counter)[0]),
                            "d_losses": d_losses[-50:], "g_losses": g_losses[-50:]}))
