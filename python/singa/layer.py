"""Layers: parameterised building blocks with lazy initialisation.

A layer creates its parameters from the first input it is called on, so
``Linear(10)`` and ``Conv2d(20, 5)`` need no input sizes. Sub-layers
assigned as attributes are named after them, and ``get_params`` /
``set_params`` / ``get_states`` / ``set_states`` use the dotted paths
(``"conv1.W"``). See singa.layers.base for the rules.

The implementations live in singa.layers by family (base, linear, conv,
norm, rnn, cudnn_rnn, basic); this module is the one to import.
"""

from singa.layers.base import LayerMeta, Layer, Sequential
from singa.layers.linear import Linear, Gemm, Embedding
from singa.layers.conv import (Conv2d, SeparableConv2d, Pooling2d, MaxPool2d, AvgPool2d,
                               Pooling1d, MaxPool1d, AvgPool1d)
from singa.layers.norm import BatchNorm2d, LayerNorm
from singa.layers.rnn import RNN_Base, RNN, LSTM
from singa.layers.cudnn_rnn import CudnnRNN
from singa.layers.basic import (ReLU, Sigmoid, Tanh, SoftMax, Dropout, Flatten, Cat,
                                Reshape, Add, SoftMaxCrossEntropy, CrossEntropy,
                                BinaryCrossEntropy, MeanSquareError)

__all__ = [
    "LayerMeta", "Layer", "Sequential", "Linear", "Gemm", "Embedding", "Conv2d", "SeparableConv2d",
    "Pooling2d", "MaxPool2d", "AvgPool2d", "Pooling1d", "MaxPool1d", "AvgPool1d",
    "BatchNorm2d", "LayerNorm", "RNN_Base", "RNN", "LSTM", "CudnnRNN", "ReLU", "Sigmoid", "Tanh", "SoftMax",
    "Dropout", "Flatten", "Cat", "Reshape", "Add", "SoftMaxCrossEntropy", "CrossEntropy",
    "BinaryCrossEntropy", "MeanSquareError",
]
