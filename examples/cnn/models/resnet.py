"""A small ResNet (He et al., 2016) for small images: a 3x3 stem and three
stages of basic blocks (16, 32, 64 channels; the last two halve the
resolution), global average pooling and a linear classifier."""

from singa import autograd, layer

from models.base import Classifier


class BasicBlock(layer.Layer):
    """conv-bn-relu-conv-bn plus a shortcut (a 1x1 conv when the shape changes)."""

    def __init__(self, channels, stride=1, project=False):
        super().__init__()
        self.conv1 = layer.Conv2d(channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.conv2 = layer.Conv2d(channels, 3, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.add = layer.Add()
        if project:
            self.shortcut = layer.Sequential(
                layer.Conv2d(channels, 1, stride=stride, bias=False), layer.BatchNorm2d())
        else:
            self.shortcut = None

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        skip = x if self.shortcut is None else self.shortcut(x)
        return self.relu(self.add(y, skip))


class ResNet(Classifier):
    def __init__(self, num_classes=10, widths=(16, 32, 64), blocks_per_stage=1):
        super().__init__()
        self.stem = layer.Sequential(layer.Conv2d(widths[0], 3, padding=1, bias=False),
                                     layer.BatchNorm2d(), layer.ReLU())
        blocks = []
        prev = widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks_per_stage):
                stride = 2 if i > 0 and j == 0 else 1
                blocks.append(BasicBlock(w, stride, project=(stride != 1 or w != prev)))
                prev = w
        self.blocks = blocks
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.stem(x)
        for b in self.blocks:
            y = b(y)
        return self.fc(self.flatten(autograd.globalaveragepool(y)))


def create_model(num_classes=10, num_channels=1, image_size=28):
    return ResNet(num_classes)
