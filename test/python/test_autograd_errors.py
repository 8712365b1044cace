"""Bad inputs to autograd operators raise Python exceptions that name the
shapes or arguments involved; none may crash the interpreter."""

import numpy as np
import pytest

from singa import autograd as ag
from singa import tensor


def t(shape, dtype=np.float32):
    return tensor.from_numpy(np.ones(shape, dtype))


# (call, exception, text the message must contain)
BAD_CALLS = {
    "softmax of int": (lambda: ag.softmax(t((2, 3), np.int32)), TypeError, "int32"),
    "matmul shapes": (lambda: ag.matmul(t((2, 3)), t((2, 3))), ValueError, "(2, 3)"),
    "matmul 0-d": (lambda: ag.matmul(t(()), t(())), ValueError, "()"),
    "softmax 0-d": (lambda: ag.softmax(t(())), IndexError, "()"),
    "conv2d int": (lambda: ag.conv2d(t((1, 1, 3, 3), np.int32), t((1, 1, 1, 1), np.int32)),
                   TypeError, "float32"),
    "conv2d empty batch": (lambda: ag.conv2d(t((0, 1, 3, 3)), t((1, 1, 1, 1))), ValueError,
                           "[0, 1, 3, 3]"),
    "conv2d group 0": (lambda: ag.conv2d(t((1, 2, 3, 3)), t((2, 2, 1, 1)), group=0),
                       ValueError, "group=0"),
    "pool kernel 0": (lambda: ag.max_pool2d(t((1, 1, 4, 4)), 0), ValueError, "kernel"),
    "pool stride 0": (lambda: ag.avg_pool2d(t((1, 1, 4, 4)), 2, 0), ValueError, "strides"),
    "batchnorm scale": (lambda: ag.batchnorm_2d(t((2, 3)), t((2, 3)), t(3), t(3), t(3)),
                        ValueError, "(2, 3)"),
    "gather fractional": (lambda: ag.gather(t((2, 3)), 0, [0.5]), ValueError, "whole"),
    "gather None": (lambda: ag.gather(t((2, 3)), 0, None), TypeError, "integers"),
    "reshape text": (lambda: ag.reshape(t((2, 3)), "ab"), TypeError, "shape"),
    "split parts": (lambda: ag.split(t((2, 3)), 1, [4, -1]), ValueError, "(2, 3)"),
    "slice step 0": (lambda: ag.slice(t((2, 3)), [0], [1], [0], [0]), ValueError, "step"),
    "pad negative": (lambda: ag.pad(t((2, 3)), "constant", [-1, 0, 0, 0]), ValueError, "-1"),
    "tile negative": (lambda: ag.tile(t((2, 3)), [-1, 1]), ValueError, "(2, 3)"),
    "onehot axis": (lambda: ag.onehot(5, t((2, 3), np.int32), 3), IndexError, "(2, 3"),
    "cat nothing": (lambda: ag.cat([], 0), ValueError, "at least one"),
    "cat dtypes": (lambda: ag.cat([t((2, 3)), t((2, 3), np.int32)], 0), TypeError, "int32"),
    "layer_norm scale": (lambda: ag.layer_norm(t((2, 3)), t(5), t(3)), ValueError, "(5,)"),
    "cossim shapes": (lambda: ag.cossim(t((2, 3)), t((3, 2))), ValueError, "(3, 2)"),
    "dropout ratio": (lambda: ag.dropout(t((2, 3)), ratio=-0.1), ValueError, "ratio"),
    "clip bound": (lambda: ag.clip(t((2, 3)), "a"), TypeError, "'a'"),
    "add_bias 3-d": (lambda: ag.add_bias(t((2, 3, 4)), t(3)), ValueError, "(2, 3, 4)"),
    "gemm vectors": (lambda: ag.gemm(t(3), t(3)), ValueError, "(3,)"),
    "flatten 0-d": (lambda: ag.flatten(t(())), IndexError, "()"),
    "expand": (lambda: ag.expand(t((2, 3)), [4, 3]), ValueError, "(2, 3)"),
    "nll_loss 3-d": (lambda: ag.nll_loss(t((2, 3, 4)), t(2, np.int32)), ValueError, "(2, 3, 4)"),
    "pool1d 4-d": (lambda: ag.max_pool1d(t((1, 1, 4, 4)), 2), ValueError, "(1, 1, 4, 4)"),
    "cast dtype": (lambda: ag.cast(t(3), 7), TypeError, "dtype"),
    "constant_of_shape": (lambda: ag.constant_of_shape(tensor.from_numpy(
        np.array([-1], np.int32))), ValueError, "-1"),
    "non-tensor input": (lambda: ag.tanh([1.0, 2.0]), TypeError, "list"),
    "backward of a number": (lambda: list(ag.backward(3)), TypeError, "int"),
    "infer_dependency of a tensor": (lambda: ag.infer_dependency(t(3)), TypeError, "Tensor"),
    "back_broadcast of a list": (lambda: ag.back_broadcast((2, 3), (3,), [1.0]), TypeError,
                                 "list"),
}


def test_back_broadcast_takes_a_tensor_too():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ag.back_broadcast((2, 3), (1, 3), tensor.from_numpy(x))
    assert isinstance(got, tensor.Tensor)
    np.testing.assert_allclose(tensor.to_numpy(got), x.sum(0, keepdims=True))
    raw = ag.back_broadcast((2, 3), (3,), tensor.from_numpy(x).data)
    np.testing.assert_allclose(tensor.to_numpy(tensor.from_raw_tensor(raw)), x.sum(0))


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
@pytest.mark.parametrize("train", [False, True])
def test_bad_call_raises(name, train):
    call, exc, text = BAD_CALLS[name]
    with ag.train_mode(train):
        with pytest.raises(exc) as info:
            call()
    assert text in str(info.value)
