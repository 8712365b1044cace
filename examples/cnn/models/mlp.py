"""A multilayer perceptron on flattened images."""

from singa import layer

from models.base import Classifier


class MLP(Classifier):
    def __init__(self, num_classes=10, hidden=(256, 128), dropout=0.2):
        super().__init__()
        self.flatten = layer.Flatten()
        self.hidden = [layer.Linear(h) for h in hidden]
        self.relu = layer.ReLU()
        self.dropout = layer.Dropout(dropout)
        self.out = layer.Linear(num_classes)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        x = self.flatten(x)
        for fc in self.hidden:
            x = self.dropout(self.relu(fc(x)))
        return self.out(x)


def create_model(num_classes=10, num_channels=1, image_size=28):
    return MLP(num_classes)
