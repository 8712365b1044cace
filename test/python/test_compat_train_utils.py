"""singa.utils, SINGA's initializer forms, singa.data.ImageBatchIter and
singa.image_tool, against NumPy (and Pillow for images)."""

import math

import numpy as np
import pytest

from singa import autograd, initializer, tensor, utils

RNG = np.random.default_rng(5)


# ---- utils ----

@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("size,kernel,stride", [((7, 8), (3, 2), (2, 2)), ((5, 5), (4, 4), (1, 3)),
                                               ((9, 4), (1, 1), (3, 2))])
def test_output_and_padding_shapes_follow_onnx(mode, size, kernel, stride):
    out = utils.get_output_shape(mode, size, kernel, stride)
    if mode == "VALID":
        assert out == [math.ceil((n - k + 1) / s) for n, k, s in zip(size, kernel, stride)]
        return
    assert out == [math.ceil(n / s) for n, s in zip(size, stride)]
    pads, odd = utils.get_padding_shape(mode, size, kernel, stride)
    for i, (n, k, s, o) in enumerate(zip(size, kernel, stride, out)):
        total = max((o - 1) * s + k - n, 0)
        begin, end = pads[2 * i] + odd[2 * i], pads[2 * i + 1] + odd[2 * i + 1]
        assert begin + end == total and pads[2 * i] == pads[2 * i + 1]
        assert (begin >= end) if mode == "SAME_LOWER" else (end >= begin)
        # The padded input gives exactly `o` windows.
        assert (n + total - k) // s + 1 == o


def test_odd_padding_forward_backward():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = tensor.from_numpy(x)
    pads = (1, 0, 2, 1)  # top, bottom, left, right
    y = tensor.from_raw_tensor(utils.handle_odd_pad_fwd(t.data, pads)).numpy()
    np.testing.assert_array_equal(y, np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1))))
    yp = tensor.from_raw_tensor(utils.handle_odd_pad_fwd(t.data, pads, is_pool=True)).numpy()
    np.testing.assert_array_equal(yp, _edge_repeat(x, pads))
    back = utils.handle_odd_pad_bwd(tensor.from_numpy(y).data, pads)
    np.testing.assert_array_equal(tensor.from_raw_tensor(back).numpy(), x)
    with pytest.raises(ValueError, match="four ints"):
        utils.handle_odd_pad_fwd(t.data, (1, 2))
    with pytest.raises(TypeError, match="singa_wrap Tensor"):
        utils.handle_odd_pad_fwd(x, pads)


def _edge_repeat(x, pads):
    """SINGA's pooling odd padding: the rows/columns nearest each side, copied."""
    top, bottom, left, right = pads
    if top:
        x = np.concatenate([x[:, :, :top], x], 2)
    if bottom:
        x = np.concatenate([x, x[:, :, -bottom:]], 2)
    if left:
        x = np.concatenate([x[:, :, :, :left], x], 3)
    if right:
        x = np.concatenate([x, x[:, :, :, -right:]], 3)
    return x


def test_update_progress_and_force_unicode(capsys):
    utils.update_progress(0.5, "epoch 1")
    out = capsys.readouterr().out
    assert "[" + "." * 10 + " " * 10 + "]" in out and "50.0%" in out and "epoch 1" in out
    utils.update_progress(1.5, "x")
    assert "Done." in capsys.readouterr().out
    utils.update_progress(-1, "x")
    assert "Halt." in capsys.readouterr().out
    assert utils.force_unicode(b"caf\xc3\xa9") == "café" and utils.force_unicode("a") == "a"


def test_post_order_walks_inputs_first():
    autograd.training = True
    x = tensor.from_numpy(np.ones((2, 3), np.float32))
    w = tensor.from_numpy(np.ones((3, 4), np.float32))
    w.requires_grad = w.stores_grad = True
    w.name = "w"
    y = autograd.relu(autograd.matmul(x, w))
    z = autograd.add(y, y)
    nodes, weights, inputs = utils.post_order_recursive(z.creator, z)
    assert list(nodes.values()) == [y.creator.src[0][0], y.creator, z.creator]
    assert list(weights.values()) == [w]
    assert len(inputs) == 1 and list(inputs.values()) == [None]


def test_conv_handle_helpers_when_singa_wrap_has_handles():
    from singa import singa_wrap
    if not hasattr(singa_wrap, "ConvHandle"):
        pytest.skip("singa_wrap.ConvHandle comes with the compat-autograd work")
    x = tensor.from_numpy(np.zeros((1, 2, 6, 6), np.float32))
    h = singa_wrap.ConvHandle(x.data, [3, 3], [1, 1], [1, 1], 2, 4, True, 1)
    utils.same_pad_shape_check(h, "SAME_UPPER", x.data)
    x2 = tensor.from_numpy(np.zeros((1, 2, 9, 9), np.float32))
    h2 = utils.re_new_handle(h, x2.data)
    assert type(h2) is type(h) and [h2.kernel_h, h2.pad_w] == [3, 1]
    with pytest.raises(ValueError, match="padding should be"):
        utils.same_pad_shape_check(singa_wrap.ConvHandle(x.data, [3, 3], [1, 1], [0, 0], 2, 4,
                                                         True, 1), "SAME_UPPER", x.data)


# ---- SINGA's initializer forms ----

def _fill(fn, shape, *a, **k):
    t = tensor.Tensor(shape)
    with pytest.warns(DeprecationWarning):
        fn(t, *a, **k)
    return t.numpy()


def test_singa_deprecated_initializers():
    a = _fill(initializer.gaussian, (300, 300), 200, 100)
    assert a.std() == pytest.approx(math.sqrt(2 * 2 / 300), rel=0.03)
    a = _fill(initializer.gaussian, (300, 300), 50)
    assert a.std() == pytest.approx(math.sqrt(2 / 50), rel=0.03)
    a = _fill(initializer.glorot, (200, 400))
    assert a.std() == pytest.approx(math.sqrt(2 / 600), rel=0.03) and np.abs(a).max() > 0.2
    a = _fill(initializer.xavier, (200, 400))
    assert np.abs(a).max() <= math.sqrt(6 / 600) and a.std() == pytest.approx(
        math.sqrt(2 / 600), rel=0.03)
    a = _fill(initializer.msra, (16, 8, 3, 3))
    assert a.std() == pytest.approx(math.sqrt(2 / 16), rel=0.05)
    with pytest.raises(ValueError, match="fan_in or fan_out"):
        initializer.gaussian(tensor.Tensor((3, 3)))
    t = tensor.Tensor((100, 100))
    initializer.gaussian(t, mean=1.0, std=0.5)  # singa's form: no warning
    assert t.numpy().mean() == pytest.approx(1.0, abs=0.02)


def test_singa_variance_scaling_fans():
    # 1-D: fans are sqrt(size) (SINGA's rule for other ranks).
    a = initializer.he_normal(tensor.Tensor((40000,))).numpy()
    assert a.std() == pytest.approx(math.sqrt(2 / 200), rel=0.03)


# ---- data and image_tool ----

PIL = pytest.importorskip("PIL")


def _png(path, arr):
    from PIL import Image
    Image.fromarray(arr).save(path)


def _dataset(tmp_path, n=5, labels=True):
    imgs = {}
    lines = []
    for i in range(n):
        arr = RNG.integers(0, 256, (6, 4, 3), dtype=np.uint8)
        _png(tmp_path / f"im{i}.png", arr)
        imgs[f"im{i}.png"] = arr
        lines.append(f"im{i}.png {i if labels else 'cat' + str(i)}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return imgs


def test_image_batch_iter(tmp_path):
    from singa import data, image_tool
    imgs = _dataset(tmp_path)
    it = data.ImageBatchIter(str(tmp_path / "list.txt"), 3,
                             lambda p: [image_tool.load_img(p)], shuffle=False,
                             image_folder=str(tmp_path), capacity=2)
    it.start()
    try:
        batches = [next(it) for _ in range(4)]
    finally:
        it.end()
    order = [f"im{i % 5}.png" for i in range(12)]
    xs = np.concatenate([b[0] for b in batches])
    ys = np.concatenate([b[1] for b in batches])
    assert batches[0][0].shape == (3, 3, 6, 4) and batches[0][0].dtype == np.float32
    assert ys.dtype == np.int32 and list(ys) == [i % 5 for i in range(12)]
    for x, name in zip(xs, order):
        np.testing.assert_array_equal(x, imgs[name].transpose(2, 0, 1).astype(np.float32))


def test_image_batch_iter_meta_strings_shuffle_and_errors(tmp_path):
    from singa import data, image_tool
    _dataset(tmp_path, labels=False)
    it = data.ImageBatchIter(tmp_path / "list.txt", 5, lambda p: [image_tool.load_img(p)],
                             image_folder=str(tmp_path))
    it.start()
    x, y = next(it)
    it.end()
    assert sorted(y) == [f"cat{i}" for i in range(5)]
    with pytest.raises(RuntimeError, match="start"):
        next(data.ImageBatchIter(tmp_path / "list.txt", 2, lambda p: []))
    bad = data.ImageBatchIter(tmp_path / "list.txt", 2, lambda p: [image_tool.load_img(p)],
                              image_folder=str(tmp_path / "nowhere"))
    bad.start()
    with pytest.raises(FileNotFoundError):
        next(bad)
    with pytest.raises(ValueError, match="batch_size"):
        data.ImageBatchIter(tmp_path / "list.txt", 0, lambda p: [])


def test_image_tool_functions(tmp_path):
    from PIL import Image
    from singa import image_tool
    arr = RNG.integers(0, 256, (10, 16, 3), dtype=np.uint8)  # height 10, width 16
    _png(tmp_path / "a.png", arr)
    img = image_tool.load_img(tmp_path / "a.png")
    np.testing.assert_array_equal(np.asarray(img), arr)
    assert np.asarray(image_tool.load_img(tmp_path / "a.png", grayscale=True)).shape == (10, 16)
    np.testing.assert_array_equal(np.asarray(image_tool.crop(img, (4, 3), "right_bottom")),
                                  arr[7:, 12:])
    np.testing.assert_array_equal(np.asarray(image_tool.crop(img, (4, 2), "center")),
                                  arr[4:6, 6:10])
    np.testing.assert_array_equal(np.asarray(image_tool.flip(img)), arr[:, ::-1])
    np.testing.assert_array_equal(np.asarray(image_tool.flip_down(img)), arr[::-1])
    assert image_tool.resize(img, 5).size == (8, 5)
    sq = image_tool.crop_and_resize(img, (10, 10), "right")
    np.testing.assert_array_equal(np.asarray(sq), arr[:, 6:])
    assert image_tool.crop_and_resize(img, (4, 4), "left").size == (4, 4)
    cast = np.asarray(image_tool.color_cast(img, 30)).astype(int) - arr
    for c in range(3):  # one constant shift per channel, clipped at 0 and 255
        inside = (arr[..., c] > 30) & (arr[..., c] < 225)
        assert np.unique(cast[..., c][inside]).size == 1 and abs(cast[..., c][inside][0]) <= 30
    with pytest.raises(ValueError, match="smaller than the patch"):
        image_tool.crop(img, (20, 3), "center")
    with pytest.raises(ValueError, match="position"):
        image_tool.crop(img, (2, 2), "middle")
    assert isinstance(image_tool.enhance(img, 0.2), Image.Image)
    sample = image_tool.get_list_sample(list("abcdefghij"), 4)
    assert len(set(sample)) == 4 and sample == sorted(sample)


def test_image_tool_chain(tmp_path):
    from singa import image_tool
    arr = RNG.integers(0, 256, (12, 20, 3), dtype=np.uint8)
    _png(tmp_path / "a.png", arr)
    tool = image_tool.ImageTool().load(tmp_path / "a.png")
    out = tool.resize_by_list([10, 12], num_case=2).crop5((8, 8), 5).flip(2).get()
    assert len(out) == 2 * 5 * 2 and tool.num_augmentation() == 20
    assert all(im.size == (8, 8) for im in out)
    tool.set([image_tool.load_img(tmp_path / "a.png")])
    crops = tool.crop3((6, 6), 3, inplace=False)
    assert len(crops) == 3 and all(c.size == (6, 6) for c in crops)
    assert len(tool.crop8((6, 6), 8, inplace=False)) == 8
    rc = tool.random_crop((5, 7), inplace=False)[0]
    a = np.asarray(rc)
    hits = [(i, j) for i in range(12 - 7 + 1) for j in range(20 - 5 + 1)
            if np.array_equal(arr[i:i + 7, j:j + 5], a)]
    assert hits
    assert tool.random_crop_resize((9, 9), inplace=False)[0].size == (9, 9)
    assert len(tool.rotate_by_list([0, 90, 180], 3, inplace=False)) == 3
    np.testing.assert_array_equal(np.asarray(tool.rotate_by_list([180], 1, False)[0]),
                                  arr[::-1, ::-1])
    assert tool.resize_for_test((8, 12)).get()[1].size[1] == 10
    with pytest.raises(ValueError, match="num_case"):
        tool.crop5((4, 4), 6)
    with pytest.raises(ValueError, match="square"):
        tool.crop3((4, 5))
