"""The recorded step behind ``Model.compile(use_graph=True)`` (doc/graph.md).

The first call records the step (``train_one_batch``, or ``forward`` in
evaluation mode) on the inputs' device: every op's work goes into the
device's graph instead of running. The step is recorded on copies of the
inputs that the model owns; a later call with inputs of the same shapes and
dtypes copies them into those copies and replays the graph in C++, with no
Python per op, and returns the same output tensors, now holding this step's
values. What cannot be replayed is handled, never silently wrong:

* inputs of another shape or dtype (or other non-tensor arguments) record
  the step again, said at debug level on the ``singa.model`` logger; the
  last few recordings are kept, so alternating between a training batch,
  an epoch's last smaller batch and evaluation replays each of them;
* a host read in the middle of the step (``to_numpy``, ``nonzero``,
  ``item`` ...) cannot be recorded: the step runs eagerly from then on,
  with a RuntimeWarning naming the op that read; so does a step whose
  optimizer is a DistOpt (its collectives work on host memory).
"""

import collections
import logging
import os
import traceback
import warnings

from singa import autograd
from singa import device as _device
from singa.tensor import Tensor, dtype_name

log = logging.getLogger("singa.model")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _describe(key):
    mode, tensors, _ = key
    shapes = ", ".join(f"{tuple(s)} {dtype_name(dt)}" for s, dt, _ in tensors)
    return f"{'training' if mode else 'evaluation'} step on [{shapes}]"


def _key(training, args, kwargs):
    """What a recording depends on, or None when an argument cannot be
    compared (the step then runs eagerly)."""
    tensors, others = [], []
    for a in list(args) + [kwargs[k] for k in sorted(kwargs)]:
        if isinstance(a, Tensor):
            tensors.append((tuple(a.shape), a.dtype, a.device.id()))
            others.append(Tensor)
        else:
            others.append(a)
    if not tensors:
        return None
    key = (training, tuple(tensors), (tuple(others), tuple(sorted(kwargs))))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _culprit(tb):
    """The op that read device values while a step was recorded: the
    innermost autograd Operator on the stack, else the innermost call made
    outside singa."""
    frames = traceback.extract_tb(tb)
    op_name = None
    t = tb
    while t is not None:
        obj = t.tb_frame.f_locals.get("self")
        if isinstance(obj, autograd.Operator):
            op_name = type(obj).__name__
        t = t.tb_next
    if op_name:
        return op_name
    for fr in reversed(frames):
        if not os.path.abspath(fr.filename).startswith(_PACKAGE_DIR):
            return f"{fr.name} ({os.path.basename(fr.filename)}:{fr.lineno}: {fr.line})"
    return frames[-1].name if frames else "an op"


class _Recording:
    """One recorded step: its graph, the model's copies of the inputs and
    the outputs it returns."""

    def __init__(self, dev, graph, inputs, outputs):
        self.dev, self.graph, self.inputs, self.outputs = dev, graph, inputs, outputs


class StepGraph:
    """One model's recorded steps (the few last input signatures) and what
    they need to replay."""

    # Recordings kept per model: enough for a training step, its last
    # smaller batch of an epoch and an evaluation step or two.
    KEEP = 4

    def __init__(self):
        self.recordings = collections.OrderedDict()  # key -> _Recording
        self.last_key = None
        self.eager_keys = {}                         # key -> why it runs eagerly

    def drop(self):
        """Forgets every recording (the device lets go of the one it holds)."""
        for rec in self.recordings.values():
            if rec.dev.graph_id() == rec.graph.id():
                rec.dev.ResetGraph()
        self.recordings.clear()
        self.last_key = None

    def call(self, model, step, args, kwargs, sequential):
        """Runs step(*args, **kwargs) (a bound method of model) through the
        graph: replays it, records it, or runs it eagerly."""
        key = _key(autograd.training, args, kwargs)
        if key is None:
            if not self.eager_keys.get(None):
                self.eager_keys[None] = True
                log.debug("%s: graph mode needs tensor inputs and hashable other "
                          "arguments; running eagerly", type(model).__name__)
            return step(*args, **kwargs)
        if key in self.eager_keys:
            return step(*args, **kwargs)
        rec = self.recordings.get(key)
        if rec is None or rec.dev.graph_enabled():
            return self._record(model, step, key, args, kwargs, sequential)
        self.recordings.move_to_end(key)
        self.last_key = key
        if rec.dev.graph_id() != rec.graph.id():
            rec.dev.AttachGraph(rec.graph)
        for own, a in zip(rec.inputs, _tensors(args, kwargs)):
            own.data.CopyData(a.data)
        rec.dev.RunGraph(sequential)
        return rec.outputs

    def _record(self, model, step, key, args, kwargs, sequential):
        name = type(model).__name__
        dev = next(_tensors(args, kwargs)).device
        if dev.graph_enabled():
            log.debug("%s: %s is already recording a graph; running eagerly", name, dev.name())
            return step(*args, **kwargs)
        from singa.opt import DistOpt
        if isinstance(model.optimizer, DistOpt):
            # MPI reads and writes host memory mid-step, which a recording
            # cannot hold; found before recording, so no collective starts.
            why = ("graph mode cannot record DistOpt's all-reduce (MPI works on host "
                   "memory in the middle of the step)")
            self.eager_keys[key] = why
            warnings.warn(f"{name}: {why}; this step runs eagerly", RuntimeWarning, stacklevel=4)
            return step(*args, **kwargs)
        if self.last_key is not None:
            log.debug("%s: recording the graph again: %s, was %s", name, _describe(key),
                      _describe(self.last_key))
        else:
            log.debug("%s: recording the graph of the %s", name, _describe(key))
        # The device lets go of the graph it holds (kept by its owner, if any).
        dev.ResetGraph()
        copies = {}
        own_args = [_own(a, copies) for a in args]
        own_kwargs = {k: _own(v, copies) for k, v in kwargs.items()}
        # The optimizer's scheduled values move to the device now, not in
        # the recording (a DistOpt wraps the optimizer as .opt).
        inner = getattr(model.optimizer, "opt", model.optimizer)
        ensure = getattr(inner, "_ensure_device", None)
        if ensure is not None:
            ensure(dev)
        dev.EnableGraph(True)
        try:
            out = step(*own_args, **own_kwargs)
        except _device.GraphError as e:
            dev.EnableGraph(False)
            dev.ResetGraph()
            why = f"graph mode cannot record {_culprit(e.__traceback__)}: {e}"
            self.eager_keys[key] = why
            warnings.warn(f"{name}: {why}; this step runs eagerly from now on", RuntimeWarning,
                          stacklevel=4)
            return step(*args, **kwargs)
        except BaseException:
            dev.EnableGraph(False)
            dev.ResetGraph()
            raise
        dev.EnableGraph(False)
        # Backward keeps what it walked until the next recording op call;
        # the graph plans its memory when it first runs, and a block still
        # held from Python would be kept for good instead of reused.
        autograd._release_walked()
        self.recordings[key] = _Recording(dev, dev.CurrentGraph(),
                                          list(_tensors(own_args, own_kwargs)), out)
        self.last_key = key
        while len(self.recordings) > self.KEEP:
            self.recordings.popitem(last=False)
        dev.RunGraph(sequential)
        return out


def _tensors(args, kwargs):
    for a in list(args) + [kwargs[k] for k in sorted(kwargs)]:
        if isinstance(a, Tensor):
            yield a


def _own(a, copies):
    """The model's copy of input a (one copy per distinct tensor)."""
    if not isinstance(a, Tensor):
        return a
    c = copies.get(id(a))
    if c is None:
        c = copies[id(a)] = a.clone()
    return c
