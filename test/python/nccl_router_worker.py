"""Run by test_dist_nccl.py as `mpiexec -n 2 python nccl_router_worker.py`:
DistOpt's DeviceRouter sends host tensors over MPI in every build (NCCL is
made only for a CUDA tensor). Prints one line per check from rank 0."""

import numpy as np

from singa import tensor
from singa._dist.mpi import MpiCommunicator
from singa._dist.nccl import DeviceRouter

router = DeviceRouter(MpiCommunicator(1000))
r, p = router.global_rank, router.world_size
a = tensor.from_numpy(np.arange(6, dtype=np.float32) * (r + 1))
router.synch(a)
want = np.arange(6, dtype=np.float32) * sum(k + 1 for k in range(p))
assert np.array_equal(tensor.to_numpy(a), want), tensor.to_numpy(a)
ts = [tensor.from_numpy(np.full(n, r + 1, np.float32)) for n in (600, 500)]
router.fusedSynch(ts)
for t in ts:
    assert (tensor.to_numpy(t) == sum(k + 1 for k in range(p))).all()
g = tensor.from_numpy(np.array([0.1, -2.0, 0.4, 3.0], np.float32) * (r + 1))
router.sparsification(g, None, 1.0, False)
want = np.array([0, -2.0, 0, 3.0], np.float32) * sum(k + 1 for k in range(p))
assert np.allclose(tensor.to_numpy(g), want), tensor.to_numpy(g)
router.wait()
assert router.nccl is None, "a host tensor made an NCCL communicator"
if r == 0:
    print(f"router ok on {p} ranks")
