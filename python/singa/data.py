"""Mini-batches of images read by a background worker (SINGA's
``ImageBatchIter``), with Pillow and NumPy.

The image list file has one image per line: a path (relative to
``image_folder``), the delimiter, and meta information, usually the label
index. ``image_transform(path)`` returns a list of PIL images (augmented
versions of that image); each becomes one sample, converted to RGB and laid
out as (3, H, W) float32. A batch is ``(x, y)``: x of shape
(batch_size, 3, H, W) and y an int32 array of labels when every meta field
is an integer, else a list of the meta strings (None where a line has
none). After the last image the list starts again (reshuffled with
``shuffle``).

``start()`` starts the worker, ``next(it)`` takes a batch, ``end()`` stops
the worker. The worker is a thread: decoding and resizing in Pillow release
the GIL, and nothing is forked. An error in the worker (a missing image, a
transform that fails) is raised by the next ``next(it)``.
"""

import os
import queue
import random
import threading

import numpy as np

__all__ = ["ImageBatchIter"]

_POLL = 0.1


class ImageBatchIter:
    """See the module doc. capacity is the most batches queued ahead."""

    def __init__(self, img_list_file, batch_size, image_transform, shuffle=True,
                 delimiter=" ", image_folder=None, capacity=10):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"ImageBatchIter: batch_size must be a positive int, "
                             f"got {batch_size!r}")
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"ImageBatchIter: capacity must be a positive int, got {capacity!r}")
        if not callable(image_transform):
            raise TypeError("ImageBatchIter: image_transform must be a function of the image "
                            "path returning a list of PIL images")
        self.img_list_file = os.fspath(img_list_file)
        self.batch_size = batch_size
        self.image_transform = image_transform
        self.shuffle = bool(shuffle)
        self.delimiter = delimiter
        self.image_folder = image_folder
        self.capacity = capacity
        self.img_list, self.is_label_index = self._read_list()
        self.num_samples = len(self.img_list)
        self.queue = queue.Queue(capacity)
        self._stop = threading.Event()
        self.p = None

    def _read_list(self):
        items, labels = [], True
        with open(self.img_list_file, "r", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                parts = line.split(self.delimiter, 1)
                path = parts[0].strip()
                meta = parts[1].strip() if len(parts) > 1 else None
                if meta is None or not meta.lstrip("-").isdigit():
                    labels = False
                items.append((path, meta))
        if not items:
            raise ValueError(f"ImageBatchIter: {self.img_list_file!r} lists no images")
        return items, labels

    def start(self):
        """Starts the background worker."""
        if self.p is not None and self.p.is_alive():
            return
        self._stop.clear()
        self.p = threading.Thread(target=self.run, name="ImageBatchIter", daemon=True)
        self.p.start()

    def end(self):
        """Stops the worker and waits for it."""
        self._stop.set()
        if self.p is not None:
            self.p.join()
            self.p = None

    def __iter__(self):
        return self

    def __next__(self):
        """The next (x, y) batch."""
        if self.p is None:
            raise RuntimeError("ImageBatchIter: call start() before taking batches")
        while True:
            try:
                item = self.queue.get(timeout=_POLL)
            except queue.Empty:
                if not self.p.is_alive() and self.queue.empty():
                    raise RuntimeError("ImageBatchIter: the worker has stopped") from None
                continue
            if isinstance(item, BaseException):
                self.end()
                raise item
            return item

    next = __next__

    def _path(self, path):
        return os.path.join(self.image_folder, path) if self.image_folder else path

    def _batch(self, order, pos):
        x, y = [], []
        while len(x) < self.batch_size:
            path, meta = self.img_list[order[pos]]
            images = self.image_transform(self._path(path))
            if len(x) + len(images) > self.batch_size:
                raise ValueError(f"ImageBatchIter: image_transform gave {len(images)} images "
                                 f"for {path!r}, more than the {self.batch_size - len(x)} left "
                                 "in the batch")
            for img in images:
                arr = np.asarray(img.convert("RGB"), dtype=np.float32)
                x.append(arr.transpose(2, 0, 1))
                y.append(int(meta) if self.is_label_index else meta)
            pos += 1
            if pos == self.num_samples:
                pos = 0
                if self.shuffle:
                    random.shuffle(order)
        try:
            xs = np.stack(x)
        except ValueError:
            shapes = sorted({a.shape for a in x})
            raise ValueError(f"ImageBatchIter: images of one batch differ in size {shapes}; "
                             "resize or crop them in image_transform") from None
        ys = np.asarray(y, dtype=np.int32) if self.is_label_index else y
        return (xs, ys), pos

    def run(self):
        """The worker's loop (runs in the background thread)."""
        order = list(range(self.num_samples))
        if self.shuffle:
            random.shuffle(order)
        pos = 0
        while not self._stop.is_set():
            try:
                batch, pos = self._batch(order, pos)
            except Exception as e:  # handed to the consumer, which raises it
                self._put(e)
                return
            self._put(batch)

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue
