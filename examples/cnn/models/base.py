"""The training step shared by the example models."""

from singa import model


class Classifier(model.Model):
    """A Model whose train_one_batch is forward, softmax cross-entropy and
    an optimizer step. Subclasses set self.loss_fn and define forward."""

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optimizer(loss)
        return out, loss
