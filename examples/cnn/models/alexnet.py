"""A small AlexNet (Krizhevsky et al., 2012) for small images: five 3x3
convolutions (64, 128, 192, 128, 128 channels) with ReLU, two 2x2 max
pools, then dropout-regularised linear layers (256, 256, classes)."""

from singa import layer

from models.base import Classifier


class AlexNet(Classifier):
    def __init__(self, num_classes=10, dropout=0.3):
        super().__init__()
        conv = (lambda c: layer.Conv2d(c, 3, padding=1, activation="RELU"))  # noqa: E731
        self.features = layer.Sequential(
            conv(64), layer.MaxPool2d(2),
            conv(128), layer.MaxPool2d(2),
            conv(192), conv(128), conv(128))
        self.flatten = layer.Flatten()
        self.classifier = layer.Sequential(
            layer.Dropout(dropout), layer.Linear(256), layer.ReLU(),
            layer.Dropout(dropout), layer.Linear(256), layer.ReLU(),
            layer.Linear(num_classes))
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def create_model(num_classes=10, num_channels=1, image_size=28):
    return AlexNet(num_classes)
