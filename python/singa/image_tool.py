"""Image loading and augmentation with Pillow and NumPy (SINGA's
``image_tool``): functions on one PIL image, and ``ImageTool``, which holds
a list of images and applies an augmentation to each.

Sizes are (width, height), as Pillow gives them. ``ImageTool`` operations
with ``inplace=True`` replace the held images and return the tool, so calls
chain (``ImageTool().load(p).resize_by_range((112, 128)).random_crop((96,
96)).flip().get()``); with ``inplace=False`` they return the new images.
Operations with countable cases take ``num_case``: how many of the cases to
produce per image (1 for training, all of them for testing). Random choices
use Python's ``random`` module.
"""

import math
import random

import numpy as np
from PIL import Image, ImageEnhance

__all__ = ["load_img", "crop", "crop_and_resize", "resize", "color_cast", "enhance", "flip",
           "flip_down", "get_list_sample", "ImageTool"]

_CROP5 = ("left_top", "left_bottom", "right_top", "right_bottom", "center")


def _size_pair(patch, where):
    try:
        w, h = (int(v) for v in patch)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: patch must be (width, height), got {patch!r}") from None
    if w < 1 or h < 1:
        raise ValueError(f"{where}: patch sizes must be positive, got {patch!r}")
    return w, h


def load_img(path, grayscale=False):
    """The image at path, as "L" when grayscale else as RGB."""
    img = Image.open(path)
    return img.convert("L" if grayscale else "RGB")


def crop(img, patch, position):
    """The (width, height) patch of img at position: left_top, left_bottom,
    right_top, right_bottom or center."""
    w, h = _size_pair(patch, "crop")
    iw, ih = img.size
    if iw < w or ih < h:
        raise ValueError(f"crop: image of size {img.size} is smaller than the patch {patch}")
    corners = {"left_top": (0, 0), "left_bottom": (0, ih - h), "right_top": (iw - w, 0),
               "right_bottom": (iw - w, ih - h), "center": ((iw - w) // 2, (ih - h) // 2)}
    if position not in corners:
        raise ValueError(f"crop: position must be one of {sorted(corners)}, got {position!r}")
    left, top = corners[position]
    return img.crop((left, top, left + w, top + h))


def crop_and_resize(img, patch, position):
    """The largest square of img at position (left, center or right for a
    wide image; top, middle or bottom for a tall one), resized to patch."""
    patch = _size_pair(patch, "crop_and_resize")
    iw, ih = img.size
    s = min(iw, ih)
    boxes = {"left": (0, 0), "center": ((iw - s) // 2, 0), "right": (iw - s, 0),
             "top": (0, 0), "middle": (0, (ih - s) // 2), "bottom": (0, ih - s)}
    if position not in boxes:
        raise ValueError(f"crop_and_resize: position must be one of {sorted(boxes)}, "
                         f"got {position!r}")
    left, top = boxes[position]
    return img.crop((left, top, left + s, top + s)).resize(patch, Image.BILINEAR)


def resize(img, small_size):
    """img scaled (bilinear) so that its shorter side is small_size."""
    small_size = int(small_size)
    if small_size < 1:
        raise ValueError(f"resize: small_size must be positive, got {small_size}")
    iw, ih = img.size
    if iw < ih:
        size = (small_size, int(small_size * ih / iw))
    else:
        size = (int(small_size * iw / ih), small_size)
    return img.resize(size, Image.BILINEAR)


def color_cast(img, offset):
    """Adds to each RGB channel, with probability 1/2, a random integer in
    [-offset, offset], clipping to [0, 255]."""
    x = np.asarray(img.convert("RGB"), dtype=np.int16).copy()
    for c in range(3):
        if random.randint(0, 1):
            x[:, :, c] += random.randint(-offset, offset)
    return Image.fromarray(np.clip(x, 0, 255).astype(np.uint8), "RGB")


def enhance(img, scale):
    """Changes color, contrast, brightness and sharpness, each with
    probability 1/2, by a random factor in [1 - scale, 1 + scale]."""
    for kind in (ImageEnhance.Color, ImageEnhance.Contrast, ImageEnhance.Brightness,
                 ImageEnhance.Sharpness):
        if random.randint(0, 1):
            img = kind(img).enhance(random.uniform(1 - scale, 1 + scale))
    return img


def flip(img):
    """img mirrored left to right."""
    return img.transpose(Image.FLIP_LEFT_RIGHT)


def flip_down(img):
    """img mirrored top to bottom."""
    return img.transpose(Image.FLIP_TOP_BOTTOM)


def get_list_sample(l, sample_size):
    """sample_size items of l drawn without replacement, in l's order."""
    return [l[i] for i in sorted(random.sample(range(len(l)), sample_size))]


def _check_cases(num_case, n, where):
    if not isinstance(num_case, int) or not 1 <= num_case <= n:
        raise ValueError(f"{where}: num_case must be in [1, {n}], got {num_case!r}")


class ImageTool:
    """A list of images and augmentations over it (see the module doc)."""

    def __init__(self):
        self.imgs = []

    def load(self, path, num=1):
        """Holds num references to the image at path."""
        self.imgs = [load_img(path)] * num
        return self

    def set(self, imgs):
        self.imgs = list(imgs)
        return self

    def append(self, img):
        self.imgs.append(img)
        return self

    def get(self):
        """The images held."""
        return self.imgs

    def num_augmentation(self):
        """The number of images held (each augmentation step multiplies it
        by its num_case)."""
        return len(self.imgs)

    def _done(self, new_imgs, inplace):
        if inplace:
            self.imgs = new_imgs
            return self
        return new_imgs

    def _per_image(self, fn, inplace):
        return self._done([fn(img) for img in self.imgs], inplace)

    def _cases(self, cases, num_case, fn, inplace, where):
        _check_cases(num_case, len(cases), where)
        out = []
        for img in self.imgs:
            chosen = cases if num_case == len(cases) else get_list_sample(cases, num_case)
            out.extend(fn(img, c) for c in chosen)
        return self._done(out, inplace)

    def resize_by_range(self, rng, inplace=True):
        """Resizes each image so its shorter side is a random size in
        [rng[0], rng[1])."""
        return self.resize_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def resize_by_list(self, size_list, num_case=1, inplace=True):
        """num_case resized copies per image, shorter sides from size_list."""
        return self._cases(list(size_list), num_case, resize, inplace, "resize_by_list")

    def resize_for_test(self, rng):
        """Three copies per image: shorter sides rng[0], their mean, rng[1]."""
        sizes = [rng[0], (rng[0] + rng[1]) // 2, rng[1]]
        return self.resize_by_list(sizes, num_case=3)

    def rotate_by_range(self, rng, inplace=True):
        """Rotates each image by a random whole angle in [rng[0], rng[1])
        degrees."""
        return self.rotate_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def rotate_by_list(self, angle_list, num_case=1, inplace=True):
        """num_case rotated copies per image, angles (degrees) from angle_list."""
        return self._cases(list(angle_list), num_case, lambda img, a: img.rotate(a), inplace,
                           "rotate_by_list")

    def crop5(self, patch, num_case=1, inplace=True):
        """num_case patches per image from the four corners and the center."""
        return self._cases(list(_CROP5), num_case, lambda img, p: crop(img, patch, p), inplace,
                           "crop5")

    def crop3(self, patch, num_case=1, inplace=True):
        """num_case square patches per image (left/center/right of a wide
        image, top/middle/bottom of a tall one), resized to patch."""
        w, h = _size_pair(patch, "crop3")
        if w != h:
            raise ValueError(f"crop3: patch must be a square, got {patch!r}")
        _check_cases(num_case, 3, "crop3")
        out = []
        for img in self.imgs:
            cases = ["left", "center", "right"] if img.size[0] > img.size[1] else \
                ["top", "middle", "bottom"]
            chosen = cases if num_case == 3 else get_list_sample(cases, num_case)
            out.extend(crop_and_resize(img, patch, c) for c in chosen)
        return self._done(out, inplace)

    def crop8(self, patch, num_case=1, inplace=True):
        """crop5 and crop3 together: num_case of their eight cases."""
        _check_cases(num_case, 8, "crop8")
        picked = range(8) if num_case == 8 else get_list_sample(list(range(8)), num_case)
        n5 = sum(1 for i in picked if i < 5)
        out = []
        if n5:
            out += self.crop5(patch, n5, False)
        if num_case - n5:
            out += self.crop3(patch, num_case - n5, False)
        return self._done(out, inplace)

    def random_crop(self, patch, inplace=True):
        """A (width, height) patch of each image at a random offset."""
        w, h = _size_pair(patch, "random_crop")

        def one(img):
            if img.size[0] < w or img.size[1] < h:
                raise ValueError(f"random_crop: image of size {img.size} is smaller than the "
                                 f"patch {patch}")
            left = random.randint(0, img.size[0] - w)
            top = random.randint(0, img.size[1] - h)
            return img.crop((left, top, left + w, top + h))
        return self._per_image(one, inplace)

    def random_crop_resize(self, patch, inplace=True):
        """A crop of 8% to 100% of each image's area with an aspect ratio in
        [3/4, 4/3], resized to patch (the whole image when ten tries find no
        crop that fits)."""
        size = _size_pair(patch, "random_crop_resize")

        def one(img):
            iw, ih = img.size
            for _ in range(10):
                area = random.uniform(0.08, 1.0) * iw * ih
                ratio = random.uniform(3 / 4, 4 / 3)
                cw = int(round(math.sqrt(area * ratio)))
                ch = int(round(math.sqrt(area / ratio)))
                if 0 < cw <= iw and 0 < ch <= ih:
                    left, top = random.randint(0, iw - cw), random.randint(0, ih - ch)
                    return img.crop((left, top, left + cw, top + ch)).resize(size,
                                                                             Image.BILINEAR)
            return img.resize(size, Image.BILINEAR)
        return self._per_image(one, inplace)

    def _flips(self, fn, num_case, inplace, where):
        if num_case not in (1, 2):
            raise ValueError(f"{where}: num_case must be 1 or 2, got {num_case!r}")
        out = []
        for img in self.imgs:
            if num_case == 2:
                out += [fn(img), img]
            else:
                out.append(fn(img) if random.randint(0, 1) else img)
        return self._done(out, inplace)

    def flip(self, num_case=1, inplace=True):
        """num_case=1: each image mirrored left to right with probability
        1/2; num_case=2: the mirrored image and the original."""
        return self._flips(flip, num_case, inplace, "flip")

    def flip_down(self, num_case=1, inplace=True):
        """As flip, top to bottom."""
        return self._flips(flip_down, num_case, inplace, "flip_down")

    def color_cast(self, offset=20, inplace=True):
        """color_cast on each image; offset in [0, 255]."""
        if not 0 <= offset <= 255:
            raise ValueError(f"color_cast: offset must be in [0, 255], got {offset!r}")
        return self._per_image(lambda img: color_cast(img, offset), inplace)

    def enhance(self, scale=0.2, inplace=True):
        """enhance on each image."""
        return self._per_image(lambda img: enhance(img, scale), inplace)
