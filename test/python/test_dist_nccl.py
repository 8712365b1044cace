"""The NCCL path of DistOpt (SINGA's Communicator and NcclIdHolder).

What runs depends on the build: a CPU build checks that the NCCL names are
absent and that asking for NCCL says what is missing; a CUDA build with
NCCL checks the names, the NcclIdHolder and the argument checks that come
before any GPU work; with a GPU, bench/nccl_smoke.py runs the collectives
and a DistOpt step against NumPy and the CPU.
"""

import os
import pickle
import shutil
import subprocess
import sys

import pytest

from singa import device, opt, singa_wrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_DIST = bool(singa_wrap.USE_DIST)
HAS_CUDA = bool(singa_wrap.USE_CUDA)
needs_dist = pytest.mark.skipif(not HAS_DIST, reason="needs a CUDA build with NCCL (USE_DIST)")
needs_gpu = pytest.mark.skipif(not HAS_DIST or device.get_num_gpus() == 0,
                               reason="needs a GPU and a CUDA build with NCCL")


def test_use_dist_says_whether_the_communicator_is_there():
    assert hasattr(singa_wrap, "Communicator") == HAS_DIST
    assert hasattr(singa_wrap, "NcclIdHolder") == HAS_DIST
    if HAS_DIST:
        assert HAS_CUDA


@pytest.mark.skipif(HAS_DIST, reason="this build has NCCL")
def test_nccl_id_without_nccl_names_the_missing_piece():
    with pytest.raises(RuntimeError, match=r"NCCL.*USE_DIST is 0.*nvidia-nccl-cu13"):
        opt.DistOpt(opt.SGD(), nccl_id=object(), local_rank=0, world_size=1)


@needs_dist
def test_nccl_id_holder_travels_as_bytes():
    h = singa_wrap.NcclIdHolder()
    b = h.to_bytes()
    assert isinstance(b, bytes) and len(b) == 128
    assert singa_wrap.NcclIdHolder(b).to_bytes() == b
    assert pickle.loads(pickle.dumps(h)).to_bytes() == b
    assert singa_wrap.NcclIdHolder().to_bytes() != b   # a fresh id each time
    with pytest.raises(ValueError, match="128 bytes, got 5"):
        singa_wrap.NcclIdHolder(b"short")
    with pytest.raises(TypeError, match="bytes"):
        singa_wrap.NcclIdHolder("x" * 128)


@needs_dist
def test_communicator_checks_come_before_the_gpu():
    h = singa_wrap.NcclIdHolder()
    with pytest.raises(RuntimeError, match="opt.DistOpt"):
        singa_wrap.Communicator(1024)
    with pytest.raises(ValueError, match=r"rank 2 is not in \[0, world_size\)"):
        singa_wrap.Communicator(2, 2, h, 1024)
    with pytest.raises(ValueError, match="limit"):
        singa_wrap.Communicator(0, 1, h, 0)
    with pytest.raises(TypeError, match="local_rank must be an int"):
        opt.DistOpt(opt.SGD(), nccl_id=h, local_rank=None, world_size=1)
    with pytest.raises(ValueError, match="local_rank 3"):
        opt.DistOpt(opt.SGD(), nccl_id=h, local_rank=3, world_size=2)
    with pytest.raises(TypeError, match="NcclIdHolder"):
        opt.DistOpt(opt.SGD(), nccl_id=b"x" * 128, local_rank=0, world_size=1)


@pytest.mark.skipif(not HAS_DIST or device.get_num_gpus() > 0,
                    reason="needs a CUDA build with NCCL on a machine without a GPU")
def test_communicator_without_a_gpu_raises():
    with pytest.raises(RuntimeError, match="cuda:0"):
        opt.DistOpt(opt.SGD(), nccl_id=singa_wrap.NcclIdHolder(), local_rank=0, world_size=1)


@needs_gpu
def test_nccl_smoke_one_rank():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "nccl_smoke.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NCCL smoke test passed" in proc.stdout


@needs_gpu
def test_nccl_smoke_one_rank_bootstrapped_over_mpi():
    pytest.importorskip("mpi4py")
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")
    if not mpiexec:
        pytest.skip("no mpiexec")
    proc = subprocess.run([mpiexec, "-n", "1", sys.executable,
                           os.path.join(ROOT, "bench", "nccl_smoke.py"), "--mpi"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(MPI bootstrap)" in proc.stdout


@pytest.mark.skipif(not HAS_DIST or device.get_num_gpus() < 2,
                    reason="needs two GPUs and a CUDA build with NCCL")
def test_nccl_two_ranks_with_multiprocessing():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "nccl_smoke.py"),
                           "--gpus", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(2 ranks, multiprocessing)" in proc.stdout


def test_router_sends_host_tensors_over_mpi():
    pytest.importorskip("mpi4py")
    import test_dist
    proc, _ = test_dist.mpirun([os.path.join(ROOT, "test", "python", "nccl_router_worker.py")],
                               timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "router ok on 2 ranks" in proc.stdout


def test_missing_nccl_message_names_the_build_and_the_fix(monkeypatch):
    from singa._dist import nccl
    monkeypatch.setattr(singa_wrap, "USE_DIST", 0)
    assert not nccl.has_nccl()
    where = "has CUDA but" if HAS_CUDA else "has no CUDA backend and"
    with pytest.raises(RuntimeError, match=rf"all_reduce of a tensor on cuda:0 needs singa's "
                       rf"NCCL communicator, and this singa build {where} no NCCL "
                       rf"\(singa_wrap.USE_DIST is 0\); rebuild .*nvidia-nccl-cu13"):
        nccl.require_nccl("all_reduce of a tensor on cuda:0")
