"""Collectives on GPU tensors over NCCL (a CUDA build with USE_DIST).

``singa_wrap.Communicator`` (C++, ``src/dist/communicator.cu``) does the
work on the GPU's stream. This module bootstraps it the two ways SINGA
does: from an ``NcclIdHolder`` shared with ``multiprocessing`` (one host,
GPU ``local_rank``), or over MPI, where rank 0 makes the id and mpi4py
broadcasts its 128 bytes. ``DeviceRouter`` is what DistOpt uses under
``mpiexec``: host tensors go over MPI as before, GPU tensors over NCCL,
whose communicator is made by the first collective on a GPU tensor (every
rank reaches it together, as every collective).
"""

import numbers

from singa import singa_wrap as _cw
from singa import tensor as _tensor

__all__ = ["has_nccl", "require_nccl", "NcclCommunicator", "DeviceRouter"]

BUILD_HINT = ('rebuild singa with CUDA and NCCL: pip install ".[cuda]" '
              '-Ccmake.define.USE_CUDA=ON (the cuda extra brings the nvidia-nccl-cu13 wheel)')


def has_nccl():
    """True when this build has the NCCL Communicator (singa_wrap.USE_DIST)."""
    return bool(getattr(_cw, "USE_DIST", 0)) and hasattr(_cw, "Communicator")


def require_nccl(what):
    if not has_nccl():
        cuda = "has CUDA but" if _cw.USE_CUDA else "has no CUDA backend and"
        raise RuntimeError(f"{what} needs singa's NCCL communicator, and this singa build {cuda} "
                           f"no NCCL (singa_wrap.USE_DIST is 0); {BUILD_HINT}")


def _ctensor(t, where):
    ct = t.data if isinstance(t, _tensor.Tensor) else t
    if not isinstance(ct, _cw.Tensor):
        raise TypeError(f"{where}: expected a singa Tensor, got {type(t).__name__}")
    return ct


def _vec(tensors, where):
    if not isinstance(tensors, (list, tuple, _cw.VecTensor)):
        raise TypeError(f"{where}: expected a list of tensors, got {type(tensors).__name__}")
    return _cw.VecTensor([_ctensor(t, where) for t in tensors])


class NcclCommunicator:
    """The C++ Communicator with the calling conventions of
    ``MpiCommunicator`` (lists for the fused forms, None for no
    accumulation).

    Args:
        rank, world_size: this process's rank and the number of ranks.
        holder: the NcclIdHolder every rank was given.
        buff_size: elements per fused buffer.
        device_id: the GPU (rank when None, SINGA's one-host convention).
        local_rank, local_size: the rank on this host and the ranks on it.
    """

    def __init__(self, rank, world_size, holder, buff_size, device_id=None, local_rank=None,
                 local_size=None):
        require_nccl("DistOpt on GPU tensors")
        if not isinstance(holder, _cw.NcclIdHolder):
            raise TypeError(f"DistOpt: nccl_id must be a singa_wrap.NcclIdHolder, got "
                            f"{type(holder).__name__}")
        device_id = rank if device_id is None else device_id
        self.comm = _cw.Communicator(rank, world_size, holder, buff_size, device_id)
        self.world_size, self.global_rank = world_size, rank
        self.local_rank = rank if local_rank is None else local_rank
        self.local_size = world_size if local_size is None else local_size
        self.device_id = device_id
        self.buff_size = buff_size

    def synch(self, t):
        self.comm.synch(_ctensor(t, "all_reduce"))

    def synchHalf(self, t):
        self.comm.synchHalf(_ctensor(t, "all_reduce_half"))

    def fusedSynch(self, tensors, send=True):
        self.comm.fusedSynch(_vec(tensors, "fused_all_reduce"), send)

    def fusedSynchHalf(self, tensors, send=True):
        self.comm.fusedSynchHalf(_vec(tensors, "fused_all_reduce_half"), send)

    def sparsification(self, t, accumulation, spars=None, topK=None):
        if spars is None or topK is None:   # SINGA's three-argument form
            accumulation, spars, topK = None, accumulation, spars
        ct = _ctensor(t, "sparsification")
        if accumulation is None:
            self.comm.sparsification(ct, spars, bool(topK))
        else:
            self.comm.sparsification(ct, _ctensor(accumulation, "sparsification"), spars,
                                     bool(topK))

    def fusedSparsification(self, tensors, accumulation, spars=None, topK=None):
        if spars is None or topK is None:
            accumulation, spars, topK = None, accumulation, spars
        vec = _vec(tensors, "fused_sparsification")
        if accumulation is None:
            self.comm.fusedSparsification(vec, spars, bool(topK))
        else:
            self.comm.fusedSparsification(vec, _ctensor(accumulation, "fused_sparsification"),
                                          spars, bool(topK))

    def wait(self):
        self.comm.wait()


def from_nccl_id(holder, local_rank, world_size, buff_size):
    """SINGA's multiprocessing form: rank local_rank of world_size on GPU
    local_rank, all given the same NcclIdHolder."""
    require_nccl("DistOpt(nccl_id=...)")
    for name, v in (("local_rank", local_rank), ("world_size", world_size)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"DistOpt: with nccl_id, {name} must be an int, got "
                            f"{type(v).__name__}")
    if world_size < 1 or not 0 <= local_rank < world_size:
        raise ValueError(f"DistOpt: local_rank {local_rank} is not in [0, world_size) for "
                         f"world_size {world_size}")
    return NcclCommunicator(int(local_rank), int(world_size), holder, buff_size)


class DeviceRouter:
    """SINGA's Communicator methods, each sent over MPI (host tensors) or
    NCCL (GPU tensors) by the device of its first tensor."""

    def __init__(self, mpi):
        self.mpi = mpi
        self.nccl = None
        self.comm, self.buff_size = mpi.comm, mpi.buff_size   # as MpiCommunicator has
        self.world_size, self.global_rank = mpi.world_size, mpi.global_rank
        self.local_rank, self.local_size = mpi.local_rank, mpi.local_size

    def _pick(self, t):
        first = t[0] if isinstance(t, (list, tuple, _cw.VecTensor)) and len(t) else t
        ct = first.data if isinstance(first, _tensor.Tensor) else first
        if not isinstance(ct, _cw.Tensor) or ct.device().is_host():
            return self.mpi     # it reports anything that is not a tensor
        if self.nccl is None:
            require_nccl(f"DistOpt on a tensor on {ct.device().name()}")
            holder = _cw.NcclIdHolder() if self.global_rank == 0 else None
            data = self.mpi.comm.bcast(holder.to_bytes() if holder else None, root=0)
            self.nccl = NcclCommunicator(self.global_rank, self.world_size,
                                         _cw.NcclIdHolder(data), self.buff_size,
                                         device_id=ct.device().id(),
                                         local_rank=self.local_rank, local_size=self.local_size)
        return self.nccl

    def synch(self, t):
        self._pick(t).synch(t)

    def synchHalf(self, t):
        self._pick(t).synchHalf(t)

    def fusedSynch(self, tensors, send=True):
        self._pick(tensors).fusedSynch(tensors, send)

    def fusedSynchHalf(self, tensors, send=True):
        self._pick(tensors).fusedSynchHalf(tensors, send)

    def sparsification(self, t, accumulation, spars=None, topK=None):
        self._pick(t).sparsification(t, accumulation, spars, topK)

    def fusedSparsification(self, tensors, accumulation, spars=None, topK=None):
        self._pick(tensors).fusedSparsification(tensors, accumulation, spars, topK)

    def wait(self):
        self.mpi.wait()
        if self.nccl is not None:
            self.nccl.wait()

    def barrier(self):
        self.mpi.barrier()
