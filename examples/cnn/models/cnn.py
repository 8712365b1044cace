"""A LeNet-style CNN: conv(20, 5x5) relu maxpool, conv(50, 5x5) relu
maxpool, linear(500) relu, linear(classes), as SINGA's example CNN.

With padding=0 (SINGA's LeNet) inputs must be at least 16x16; 28x28
MNIST gives 50 x 4 x 4 = 800 features. Images smaller than 28x28 use
padding=2 ("same" convolutions), which keeps small inputs from shrinking
away: 16x16 then gives the same 800 features.
"""

from singa import layer

from models.base import Classifier


class CNN(Classifier):
    def __init__(self, num_classes=10, num_channels=1, padding=0, dropout=0.0):
        super().__init__()
        self.dropout = layer.Dropout(dropout)
        self.conv1 = layer.Conv2d(num_channels, 20, 5, padding=padding, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=padding, activation="RELU")
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.flatten = layer.Flatten()
        self.linear1 = layer.Linear(500)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(num_classes)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pooling1(self.conv1(x))
        y = self.pooling2(self.conv2(y))
        y = self.relu(self.linear1(self.dropout(self.flatten(y))))
        return self.linear2(self.dropout(y))


def create_model(num_classes=10, num_channels=1, image_size=28, dropout=0.3):
    return CNN(num_classes, num_channels, padding=0 if image_size >= 28 else 2,
               dropout=dropout)
