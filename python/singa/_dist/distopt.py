"""DistOpt: synchronous data-parallel training, with SINGA's API.

Every process (rank) runs the same script on its own share of each batch.
After backward, DistOpt sums each gradient over the ranks, divides it by
the number of ranks and lets the wrapped optimizer apply it, so every rank
takes the step a single process would take on the whole batch::

    sgd = opt.DistOpt(opt.SGD(lr=0.05, momentum=0.9))
    model.set_optimizer(sgd)
    ...
    loss = model.loss(model.forward(x_shard), y_shard)
    sgd(loss)       # backward, all-reduce, update, step

launched as ``mpiexec -n 2 python train.py``. Ranks must start from the
same parameters (seed every rank alike) and feed batches of equal size.

DistOpt keeps the optimizer contract of doc/design.md: it uses only the
wrapped optimizer's ``update(param, grad)``, ``step()`` and
``get_states()``/``set_states()``, and the ``(param, grad)`` stream of
``autograd.backward``. Communication goes through a communicator with the
methods of SINGA's C++ ``Communicator``: MPI for host tensors (see
``singa._dist.mpi``).
"""

import numbers
import os

from singa import autograd
from singa import singa_wrap as _cw
from singa import tensor as _tensor

__all__ = ["DistOpt"]


def _ct(t):
    """The CTensor of a singa Tensor (CTensors pass through)."""
    return t.data if isinstance(t, _tensor.Tensor) else t


def _cts(ts):
    if isinstance(ts, (list, tuple, _cw.VecTensor)):
        return [_ct(t) for t in ts]
    return ts


def _check_threshold(threshold, where):
    if not isinstance(threshold, numbers.Integral) or isinstance(threshold, bool) \
            or threshold < 0:
        raise ValueError(f"{where}: threshold must be a number of elements >= 0, "
                         f"got {threshold!r}")


def _as_count(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"DistOpt: {name} must be an int, got {type(value).__name__}")
    return int(value)


def _share_cores(local_ranks):
    """Ranks on one host share its cores. As torchrun does, each rank gets
    its share of the threads unless OMP_NUM_THREADS chooses: threads that
    outnumber the cores spin against each other and run several times
    slower."""
    if local_ranks <= 1 or "OMP_NUM_THREADS" in os.environ:
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    share = max(1, cores // local_ranks)
    if _cw.GetNumThreads() > share:
        _cw.SetNumThreads(share)


class DistOpt:
    """Data-parallel wrapper of an optimizer (SINGA's ``opt.DistOpt``).

    Args:
        opt: the optimizer that applies the averaged gradients (SGD() when
            None).
        nccl_id: an ``NcclIdHolder`` shared with ``multiprocessing`` to
            bootstrap NCCL without MPI (GPU tensors); None uses MPI.
        local_rank, world_size: with nccl_id, this process's GPU and the
            number of processes. With MPI they come from the launcher; if
            given they must agree with it.
        buffSize: elements per fused all-reduce buffer.

    Attributes: ``world_size``, ``local_rank`` (rank on this host),
    ``global_rank``, ``opt``, ``communicator``.

    With several ranks on one host and no OMP_NUM_THREADS set, each rank's
    CPU threads are lowered to its share of the host's cores. An uncaught
    exception on any rank ends the whole job (MPI_Abort) after printing
    its traceback.
    """

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304):
        if opt is None:
            from singa.opt import SGD
            opt = SGD()
        for method in ("update", "step"):
            if not callable(getattr(opt, method, None)):
                raise TypeError(f"DistOpt: opt must be an optimizer with update() and step(), "
                                f"got {type(opt).__name__}")
        if not isinstance(buffSize, numbers.Integral) or isinstance(buffSize, bool) \
                or buffSize <= 0:
            raise ValueError(f"DistOpt: buffSize must be a positive number of elements, "
                             f"got {buffSize!r}")
        self.opt = opt
        self.buffSize = int(buffSize)
        if nccl_id is not None:
            raise RuntimeError("DistOpt: an nccl_id bootstraps NCCL for GPU tensors, and this "
                               "singa build has no CUDA backend; leave nccl_id out to "
                               "train host tensors over MPI (mpiexec -n N python ...)")
        from singa._dist.mpi import MpiCommunicator
        self.communicator = MpiCommunicator(self.buffSize)
        self.world_size = self.communicator.world_size
        self.local_rank = self.communicator.local_rank
        self.global_rank = self.communicator.global_rank
        for name, given, actual in (("world_size", world_size, self.world_size),
                                    ("local_rank", local_rank, self.local_rank)):
            if given is not None and _as_count(given, name) != actual:
                raise ValueError(f"DistOpt: {name}={given} but MPI started this process with "
                                 f"{name} {actual}; leave it out under mpiexec")
        _share_cores(self.communicator.local_size)
        self._sparse_acc = []      # residuals of backward_and_sparse_update, per bucket
        self._partial_chunks = None
        self._partial_next = 0

    # ---- the optimizer's side ----

    def __call__(self, loss):
        """backward_and_update(loss)."""
        self.backward_and_update(loss)

    def update(self, param, grad):
        """Divides grad (summed over the ranks) by world_size, in place, and
        lets the wrapped optimizer update param."""
        grad /= self.world_size
        self.opt.update(param, grad)

    def get_states(self):
        """The wrapped optimizer's states (the same on every rank)."""
        return self.opt.get_states()

    def set_states(self, states):
        self.opt.set_states(states)

    # ---- collectives (SINGA's names; tensors may be Tensors or CTensors) ----

    def all_reduce(self, tensor):
        """Sums tensor over all ranks, in place."""
        self.communicator.synch(_ct(tensor))

    def fused_all_reduce(self, tensor, send=True):
        """send=False packs a list of float32 tensors into the fused
        buffers; send=True sums what was packed over all ranks and writes it
        into the listed tensors (which must match what was packed; with
        nothing packed, the list is packed and sent)."""
        self.communicator.fusedSynch(_cts(tensor), send)

    def all_reduce_half(self, tensor):
        """all_reduce of a float32 tensor, sending float16."""
        self.communicator.synchHalf(_ct(tensor))

    def fused_all_reduce_half(self, tensor, send=True):
        """fused_all_reduce with float16 buffers."""
        self.communicator.fusedSynchHalf(_cts(tensor), send)

    def sparsification(self, tensor, accumulation, spars, topK):
        """Sums a sparsified tensor over the ranks, in place: each rank sends
        its top spars fraction of entries by magnitude (topK) or those of
        magnitude >= spars. A non-None accumulation is added first and keeps
        what was not sent."""
        acc = None if accumulation is None else _ct(accumulation)
        self.communicator.sparsification(_ct(tensor), acc, spars, topK)

    def fused_sparsification(self, tensor, accumulation, spars, topK):
        """sparsification over a list of tensors taken as one vector."""
        acc = None if accumulation is None else _ct(accumulation)
        self.communicator.fusedSparsification(_cts(tensor), acc, spars, topK)

    def wait(self):
        """Waits for the collectives started so far."""
        self.communicator.wait()

    # ---- training steps ----

    def backward_and_update(self, loss, threshold=2097152):
        """Backward from loss, all-reduce, update, step.

        Gradients of more than threshold elements are all-reduced one by
        one; smaller ones are packed into fused buffers, each sent once it
        holds more than threshold elements.
        """
        self._reduce_and_update(loss, threshold, self.all_reduce, self.fused_all_reduce,
                                "backward_and_update")

    def backward_and_update_half(self, loss, threshold=2097152, clipping=False, clip_Value=100):
        """backward_and_update sending float16; with clipping, each gradient
        is first clipped to [-clip_Value, clip_Value]."""
        self._reduce_and_update(loss, threshold, self.all_reduce_half,
                                self.fused_all_reduce_half, "backward_and_update_half",
                                clip=float(clip_Value) if clipping else None)

    def _reduce_and_update(self, loss, threshold, single, fused, where, clip=None):
        _check_threshold(threshold, where)
        pairs, bucket, packed = [], [], 0
        for p, g in autograd.backward(loss):
            if p.dtype != _tensor.float32:
                raise TypeError(f"{where}: parameter {p.name!r} is "
                                f"{_tensor.dtype_name(p.dtype)}; DistOpt reduces float32 "
                                "gradients")
            if clip is not None:
                g = _tensor.from_raw_tensor(_cw.Clip(g.data, -clip, clip))
            n = g.size()
            if n > threshold or n > self.buffSize:
                single(g.data)
            else:
                bucket.append(g.data)
                fused([g.data], send=False)
                packed += n
                if packed > threshold:
                    fused(bucket)
                    bucket, packed = [], 0
            pairs.append((p, g))
        if bucket:
            fused(bucket)
        self.wait()
        for p, g in pairs:
            self.update(p, g)
        self.opt.step()

    def backward_and_sparse_update(self, loss, threshold=2097152, spars=0.05, topK=False,
                                   corr=True):
        """Backward from loss, then a sparse all-reduce of the gradients.

        Gradients of more than threshold elements are sparsified one by one,
        smaller ones in buckets of more than threshold elements. topK sends
        the spars fraction of largest entries, otherwise the entries of
        magnitude >= spars. corr keeps, per bucket, what was not sent and
        adds it to the next step's gradient.
        """
        _check_threshold(threshold, "backward_and_sparse_update")
        pairs, bucket, packed, k = [], [], 0, 0
        for p, g in autograd.backward(loss):
            n = g.size()
            if n > threshold:
                self.sparsification(g.data, self._residual(k, n, g, corr), spars, topK)
                k += 1
            else:
                bucket.append(g.data)
                packed += n
                if packed > threshold:
                    self.fused_sparsification(bucket, self._residual(k, packed, g, corr),
                                              spars, topK)
                    k += 1
                    bucket, packed = [], 0
            pairs.append((p, g))
        if bucket:
            self.fused_sparsification(bucket, self._residual(k, packed, pairs[-1][1], corr),
                                      spars, topK)
        self.wait()
        for p, g in pairs:
            self.update(p, g)
        self.opt.step()

    def _residual(self, k, n, like, corr):
        """Bucket k's accumulation tensor (zeros when first made)."""
        if not corr:
            return None
        acc = self._sparse_acc
        if k < len(acc) and acc[k].size() == n and acc[k].device.id() == like.device.id():
            return acc[k].data
        fresh = _tensor.Tensor((n,), like.device)
        if k < len(acc):   # the parameters changed: start this bucket afresh
            acc[k] = fresh
        else:
            acc.append(fresh)
        return fresh.data

    def backward_and_partial_update(self, loss, threshold=2097152):
        """Local updates with partial averaging (asynchronous-style training).

        Every rank updates all parameters with its own gradient, then one
        chunk of parameters is averaged over the ranks: the parameters, in
        backward order, form chunks of at most threshold elements (a larger
        parameter is a chunk of its own) and each step takes the next chunk
        in turn.
        """
        _check_threshold(threshold, "backward_and_partial_update")
        params = []
        for p, g in autograd.backward(loss):
            self.opt.update(p, g)
            params.append(p)
        self.opt.step()
        if not params:
            return
        chunks = self._chunks(params, threshold)
        chunk = chunks[self._partial_next % len(chunks)]
        self._partial_next = (self._partial_next + 1) % len(chunks)
        alone = len(chunk) == 1 and (chunk[0].size() > self.buffSize
                                     or chunk[0].dtype != _tensor.float32)
        if alone:
            self.all_reduce(chunk[0].data)
        else:
            self.fused_all_reduce([p.data for p in chunk])
        self.wait()
        for p in chunk:
            p /= self.world_size

    def _chunks(self, params, threshold):
        key = tuple(id(p) for p in params)
        if self._partial_chunks is None or self._partial_chunks[0] != key:
            chunks, cur, size = [], [], 0
            for p in params:
                n = p.size()
                if cur and (size + n > threshold or size + n > self.buffSize):
                    chunks.append(cur)
                    cur, size = [], 0
                cur.append(p)
                size += n
            chunks.append(cur)
            self._partial_chunks = (key, chunks)
            self._partial_next = 0
        return self._partial_chunks[1]
