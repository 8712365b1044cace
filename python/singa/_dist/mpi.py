"""Collectives on host tensors over MPI (mpi4py).

``MpiCommunicator`` has the methods of SINGA's C++ ``Communicator``
(``synch``, ``fusedSynch``, ``synchHalf``, ``fusedSynchHalf``,
``sparsification``, ``fusedSparsification``, ``wait``) for tensors on a
host device. MPI reads and writes the tensors' own memory: a
``singa_wrap.HostBuffer`` exports a contiguous host tensor through the
buffer protocol and mpi4py hands that memory to MPI. Packing gradients into
fused buffers and converting to float16 are copies into views of buffers
kept across steps, done by the core (``CopyData``).

float16 sums send float16 and add in float32: each rank receives its
slice of every rank's values (MPI_Alltoallv), adds them in float32 in rank
order, rounds once to float16 and the slices are gathered back
(MPI_Allgatherv). That needs no float16 support from the MPI library and
takes about half the time of MPICH's own float16 MPI_SUM
(doc/distributed.md).

Every collective here completes before it returns, so ``wait()`` has
nothing left to wait for. With MPICH over shared memory a nonblocking
all-reduce makes progress only inside MPI calls, so leaving it in flight
during the backward pass overlaps nothing (doc/distributed.md).
"""

import sys
import time

import numpy as np

from singa import singa_wrap as _cw
from singa import tensor as _tensor

INSTALL_HINT = ('install the "dist" extra: pip install "singa[dist]" '
                "(or pip install mpi4py mpich)")

_abort_hook_installed = False
# How long a failing rank waits, after printing its traceback, before it
# aborts the job (install_abort_on_error).
_FORWARD_SECONDS = 0.5


def import_mpi():
    """mpi4py's MPI module (MPI is initialised on first import)."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"DistOpt needs MPI through mpi4py, which cannot be imported "
                          f"({e}); {INSTALL_HINT}") from e
    return MPI


def install_abort_on_error(MPI):
    """Makes an uncaught exception on any rank end the whole job.

    Without this the failing rank's interpreter waits in MPI_Finalize while
    the others wait in their next collective, and the job hangs. The hook
    prints the traceback as usual, then calls MPI_Abort, which makes
    mpiexec stop every rank. Between the two it waits a moment: the
    traceback reaches the user's terminal through mpiexec's forwarding of
    each rank's output, and an abort that came first cut it off mid-line
    (seen once in CI, on a loaded machine).
    """
    global _abort_hook_installed
    if _abort_hook_installed:
        return
    previous = sys.excepthook

    def abort_job(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
            sys.stderr.flush()
            sys.stdout.flush()
            time.sleep(_FORWARD_SECONDS)
        finally:
            if MPI.COMM_WORLD.Get_size() > 1:
                MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_job
    _abort_hook_installed = True


def _ctensor(t, where):
    """The CTensor of a singa Tensor or CTensor."""
    ct = t.data if isinstance(t, _tensor.Tensor) else t
    if not isinstance(ct, _cw.Tensor):
        raise TypeError(f"{where}: expected a singa Tensor, got {type(t).__name__}")
    return ct


def _dtype_name(dtype):
    return {_cw.kFloat32: "float32", _cw.kFloat16: "float16", _cw.kInt: "int32"}.get(
        dtype, f"dtype({dtype})")


class _Fuser:
    """Packs tensors into buffers of buff_size elements and all-reduces
    each buffer as one message.

    ``add`` copies a tensor into the current buffer (converting to the
    buffer's dtype); a buffer that cannot take the next tensor is
    all-reduced at once and the next one is started. ``send`` all-reduces
    the last buffer and copies every packed range back, in packing order.
    """

    def __init__(self, reduce, buff_size, dtype, where):
        self.reduce, self.buff_size, self.dtype = reduce, buff_size, dtype
        self.where = where
        self.buffers = []      # CTensors of shape (buff_size,), kept across steps
        self.packed = []       # (tensor, buffer index, offset, size) since the last send
        self.cur = self.off = 0

    def _buffer(self, i, device):
        while len(self.buffers) <= i:
            self.buffers.append(_cw.Tensor([self.buff_size], device, self.dtype))
        return self.buffers[i]

    def _reduce(self, i, n):
        if n:
            self.reduce(self.buffers[i].Slice(0, 0, n))

    def add(self, t):
        n = t.Size()
        if n > self.buff_size:
            raise ValueError(f"{self.where}: a tensor of {n} elements (shape {tuple(t.shape())}) "
                             f"does not fit in a fused buffer of buffSize={self.buff_size} "
                             "elements; all-reduce it on its own or raise buffSize")
        if self.off + n > self.buff_size:
            self._reduce(self.cur, self.off)
            self.cur, self.off = self.cur + 1, 0
        self._buffer(self.cur, t.device()).Slice(0, self.off, self.off + n).CopyData(t)
        self.packed.append((t, self.cur, self.off, n))
        self.off += n

    def send(self, dests=None):
        """All-reduces what is packed and writes the sums into dests (the
        packed tensors themselves when None)."""
        packed = self.packed
        if dests is not None:
            sizes = [d.Size() for d in dests]
            if sizes != [p[3] for p in packed]:
                self.reset()
                raise ValueError(f"{self.where}: {len(packed)} tensors of "
                                 f"{[p[3] for p in packed]} elements were packed but the "
                                 f"tensors to receive them have {sizes} elements")
        self._reduce(self.cur, self.off)
        for k, (t, i, off, n) in enumerate(packed):
            dst = t if dests is None else dests[k]
            dst.CopyData(self.buffers[i].Slice(0, off, off + n))
        self.reset()

    def reset(self):
        self.packed = []
        self.cur = self.off = 0


_MPI = None


def _mpi():
    global _MPI
    if _MPI is None:
        _MPI = import_mpi()
    return _MPI


class MpiCommunicator:
    """SINGA's Communicator for host tensors, over MPI_COMM_WORLD.

    Args:
        buff_size: elements per fused buffer (SINGA's buffSize).
    """

    def __init__(self, buff_size=4194304):
        MPI = _mpi()
        if not isinstance(buff_size, (int, np.integer)) or isinstance(buff_size, bool) \
                or buff_size <= 0:
            raise ValueError(f"Communicator: buffSize must be a positive number of elements, "
                             f"got {buff_size!r}")
        # A communicator of our own, so that a script's own messages on
        # COMM_WORLD can never match ours.
        self.comm = MPI.COMM_WORLD.Dup()
        self.world_size = self.comm.Get_size()
        self.global_rank = self.comm.Get_rank()
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank = node.Get_rank()
        self.local_size = node.Get_size()
        node.Free()
        self.buff_size = int(buff_size)
        self._types = {_cw.kFloat32: MPI.FLOAT, _cw.kInt: MPI.INT32_T}
        self._fused = _Fuser(self._allreduce, self.buff_size, _cw.kFloat32,
                             "fused_all_reduce")
        self._fused_half = _Fuser(self._allreduce, self.buff_size, _cw.kFloat16,
                                  "fused_all_reduce_half")
        self._scratch = {}     # (use, dtype, device id) -> CTensor, grown as needed
        install_abort_on_error(MPI)

    # ---- checks and buffers ----

    def _check(self, t, where, float32_only=False):
        ct = _ctensor(t, where)
        dev = ct.device()
        if not dev.is_host():
            from singa._dist.nccl import require_nccl
            require_nccl(f"{where} of a tensor on {dev.name()} (MPI moves host tensors)")
            raise RuntimeError(f"{where}: the tensor is on {dev.name()}; MPI moves host "
                               "tensors, and GPU tensors go over NCCL")
        if float32_only and ct.data_type() != _cw.kFloat32:
            raise TypeError(f"{where}: expected a float32 tensor, got "
                            f"{_dtype_name(ct.data_type())} of shape {tuple(ct.shape())}")
        return ct

    def _scratch_of(self, use, dtype, n, device):
        """A (n,) CTensor kept for one use (tensors in use at the same time
        need different uses)."""
        key = (use, dtype, device.id())
        buf = self._scratch.get(key)
        if buf is None or buf.Size() < n:
            buf = self._scratch[key] = _cw.Tensor([max(n, 1)], device, dtype)
        return buf.Slice(0, 0, n)

    def _allreduce(self, ct):
        """In-place sum over ranks of a contiguous host CTensor."""
        if ct.Size() == 0:
            return
        if ct.data_type() == _cw.kFloat16:
            self._allreduce_half(ct)
        else:
            self.comm.Allreduce(_mpi().IN_PLACE,
                                [memoryview(_cw.HostBuffer(ct)), self._types[ct.data_type()]])

    def _allreduce_half(self, h):
        """In-place sum over ranks of a contiguous float16 CTensor, added in
        float32 (see the module doc)."""
        MPI = _mpi()
        n, p, r = h.Size(), self.world_size, self.global_rank
        bounds = [n * k // p for k in range(p + 1)]
        sizes = np.diff(bounds)
        mine = int(sizes[r])
        half = MPI.UINT16_T            # the bits travel; nothing adds them in MPI
        hb = memoryview(_cw.HostBuffer(h))
        recv = self._scratch_of("half_recv", _cw.kFloat16, p * mine, h.device())
        if p > 1:
            self.comm.Alltoallv([hb, sizes, bounds[:-1], half],
                                [memoryview(_cw.HostBuffer(recv)), [mine] * p,
                                 [k * mine for k in range(p)], half])
        else:
            recv.CopyData(h)
        acc = self._scratch_of("half_acc", _cw.kFloat32, mine, h.device())
        tmp = self._scratch_of("half_tmp", _cw.kFloat32, mine, h.device())
        acc.CopyData(recv.Slice(0, 0, mine))
        for k in range(1, p):
            tmp.CopyData(recv.Slice(0, k * mine, (k + 1) * mine))
            _cw.AddInto(acc, tmp, acc)
        h.Slice(0, bounds[r], bounds[r + 1]).CopyData(acc)
        if p > 1:
            self.comm.Allgatherv(MPI.IN_PLACE, [hb, sizes, bounds[:-1], half])

    # ---- SINGA's Communicator methods ----

    def synch(self, t):
        """Sums t over all ranks, in place."""
        ct = self._check(t, "all_reduce")
        if ct.IsContiguous():
            self._allreduce(ct)
        else:
            tmp = ct.Contiguous()
            self._allreduce(tmp)
            ct.CopyData(tmp)

    def synchHalf(self, t):
        """Sums float32 t over all ranks in place, sending float16."""
        ct = self._check(t, "all_reduce_half", float32_only=True)
        half = self._scratch_of("half", _cw.kFloat16, ct.Size(), ct.device())
        half.CopyData(ct)
        self._allreduce(half)
        ct.CopyData(half)

    def fusedSynch(self, tensors, send=True):
        """Packs tensors into the fused buffers (send=False), or sums what
        is packed over all ranks and writes it back (send=True; with
        nothing packed, packs tensors first)."""
        self._fused_op(self._fused, tensors, send, "fused_all_reduce")

    def fusedSynchHalf(self, tensors, send=True):
        """fusedSynch with float16 buffers: float32 in, float16 sent."""
        self._fused_op(self._fused_half, tensors, send, "fused_all_reduce_half")

    def _fused_op(self, fuser, tensors, send, where):
        cts = [self._check(t, where, float32_only=True) for t in _as_list(tensors, where)]
        if not send:
            for ct in cts:
                fuser.add(ct)
            return
        if not fuser.packed:
            for ct in cts:
                fuser.add(ct)
            fuser.send()
        else:
            fuser.send(cts)

    def sparsification(self, t, accumulation, spars=None, topK=None):
        """Sums a sparsified t over all ranks, in place.

        SINGA's two forms: ``sparsification(t, accumulation, spars, topK)``
        and ``sparsification(t, spars, topK)``. With topK, each rank sends
        its ``spars * t.Size()`` entries of largest magnitude; otherwise the
        entries with magnitude >= spars. With an accumulation tensor the
        local residual is added before selecting and what is not sent is
        kept in it for the next step.
        """
        if spars is None or topK is None:   # the three-argument form
            accumulation, spars, topK = None, accumulation, spars
        ct = self._check(t, "sparsification", float32_only=True)
        acc = self._check_acc(accumulation, ct.Size(), "sparsification")
        if ct.IsContiguous():
            self._sparse_allreduce(ct, acc, spars, topK)
        else:
            tmp = ct.Contiguous()
            self._sparse_allreduce(tmp, acc, spars, topK)
            ct.CopyData(tmp)

    def fusedSparsification(self, tensors, accumulation, spars=None, topK=None):
        """sparsification over the concatenation of tensors (one selection
        for all of them), written back into each."""
        if spars is None or topK is None:
            accumulation, spars, topK = None, accumulation, spars
        cts = [self._check(t, "fused_sparsification", float32_only=True)
               for t in _as_list(tensors, "fused_sparsification")]
        total = sum(ct.Size() for ct in cts)
        acc = self._check_acc(accumulation, total, "fused_sparsification")
        flat = self._scratch_of("sparse", _cw.kFloat32, total, cts[0].device())
        off = 0
        for ct in cts:
            flat.Slice(0, off, off + ct.Size()).CopyData(ct)
            off += ct.Size()
        self._sparse_allreduce(flat, acc, spars, topK)
        off = 0
        for ct in cts:
            ct.CopyData(flat.Slice(0, off, off + ct.Size()))
            off += ct.Size()

    def wait(self):
        """Host collectives complete when they return: nothing to wait for."""

    def barrier(self):
        self.comm.Barrier()

    # ---- sparse all-reduce ----

    def _check_acc(self, accumulation, n, where):
        if accumulation is None:
            return None
        acc = self._check(accumulation, where + " (accumulation)", float32_only=True)
        if acc.Size() != n or not acc.IsContiguous():
            raise ValueError(f"{where}: the accumulation tensor must be contiguous with {n} "
                             f"elements, got shape {tuple(acc.shape())}")
        return acc

    def _sparse_allreduce(self, ct, acc, spars, topK):
        n = ct.Size()
        if topK:
            if not 0 < spars <= 1:
                raise ValueError(f"sparsification: with topK, spars is the fraction of entries "
                                 f"sent and must be in (0, 1], got {spars}")
        elif spars < 0:
            raise ValueError(f"sparsification: spars is the magnitude threshold and must be "
                             f">= 0, got {spars}")
        if n == 0:
            return
        g = np.asarray(_cw.HostBuffer(ct))
        if acc is not None:
            src = np.asarray(_cw.HostBuffer(acc))
            src += g
        else:
            src = g
        mag = np.abs(src)
        if topK:
            k = min(n, max(1, int(spars * n)))
            idx = np.argpartition(mag, n - k)[n - k:]
        else:
            idx = np.flatnonzero(mag >= spars)
        idx = idx.astype(np.int64 if n > np.iinfo(np.int32).max else np.int32)
        vals = src[idx]
        if acc is not None:
            src[idx] = 0.0     # what is sent leaves the residual
        MPI = _mpi()
        counts = np.empty(self.world_size, np.int64)
        self.comm.Allgather(np.array([len(idx)], np.int64), counts)
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        all_idx = np.empty(int(counts.sum()), idx.dtype)
        all_vals = np.empty(int(counts.sum()), np.float32)
        self.comm.Allgatherv(idx, [all_idx, counts, displs, MPI._typedict[idx.dtype.char]])
        self.comm.Allgatherv(vals, [all_vals, counts, displs, MPI.FLOAT])
        g[:] = 0.0
        # One rank's indices are distinct, so a fancy-indexed add per rank
        # sums correctly; ranks are added in rank order.
        for r in range(self.world_size):
            lo, hi = displs[r], displs[r] + counts[r]
            g[all_idx[lo:hi]] += all_vals[lo:hi]


def _as_list(tensors, where):
    if isinstance(tensors, (list, tuple, _cw.VecTensor)):
        items = list(tensors)
    else:
        raise TypeError(f"{where}: expected a list of tensors, got {type(tensors).__name__}")
    if not items:
        raise ValueError(f"{where}: the list of tensors is empty")
    return items
