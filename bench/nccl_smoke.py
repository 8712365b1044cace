"""One-rank NCCL smoke test for a GPU machine (bench/gpu_check.sh runs it).

    python bench/nccl_smoke.py          # bootstrapped from an NcclIdHolder
    mpiexec -n 1 python bench/nccl_smoke.py --mpi   # bootstrapped over MPI
    python bench/nccl_smoke.py --gpus 2 # two ranks (multiprocessing), two GPUs

Needs a CUDA build with NCCL (singa_wrap.USE_DIST) and one GPU. With one
rank every all-reduce returns its input, so the checks are exact: the
collectives against NumPy (float32, int32, float16 rounding, fused buffers,
top-K and threshold sparsification with their residuals), then one DistOpt
step on GPU against the same step of the plain optimizer on the CPU. Exits
non-zero (an AssertionError) on any mismatch; prints one line per check.
With --gpus N, N processes started with multiprocessing (SINGA's form)
sum rank-dependent tensors and train one step on their shards of a batch,
against NumPy and one CPU process on the whole batch.
"""

import sys

import numpy as np

from singa import autograd, device, opt, singa_wrap, tensor

rng = np.random.default_rng(0)


def check(name, got, want, tol=0.0):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
    print(f"ok  {name}")


def collectives(dev):
    comm = singa_wrap.Communicator(0, 1, singa_wrap.NcclIdHolder(), 1000)
    a = rng.standard_normal(777).astype(np.float32)
    t = tensor.from_numpy(a, dev)
    comm.synch(t.data)
    check("synch float32", tensor.to_numpy(t), a)
    i = rng.integers(-1000, 1000, 300).astype(np.int32)
    ti = tensor.from_numpy(i, dev)
    comm.synch(ti.data)
    check("synch int32", tensor.to_numpy(ti), i)
    t = tensor.from_numpy(a, dev)
    comm.synchHalf(t.data)
    check("synchHalf", tensor.to_numpy(t), a.astype(np.float16).astype(np.float32))
    parts = [rng.standard_normal(n).astype(np.float32) for n in (600, 300, 500)]
    ts = [tensor.from_numpy(p, dev) for p in parts]
    for x in ts:   # 600 + 300 fill the first buffer of 1000, 500 the next
        comm.fusedSynch(singa_wrap.VecTensor([x.data]), False)
    outs = [tensor.Tensor((p.size,), dev) for p in parts]
    comm.fusedSynch(singa_wrap.VecTensor([o.data for o in outs]), True)
    for k, (o, p) in enumerate(zip(outs, parts)):
        check(f"fusedSynch tensor {k}", tensor.to_numpy(o), p)
    ts = [tensor.from_numpy(p, dev) for p in parts]
    comm.fusedSynchHalf(singa_wrap.VecTensor([x.data for x in ts]), True)
    for k, (x, p) in enumerate(zip(ts, parts)):
        check(f"fusedSynchHalf tensor {k}", tensor.to_numpy(x),
              p.astype(np.float16).astype(np.float32))

    g = rng.standard_normal(1000).astype(np.float32)
    r = rng.standard_normal(1000).astype(np.float32) * 0.1
    t, acc = tensor.from_numpy(g, dev), tensor.from_numpy(r, dev)
    comm.sparsification(t.data, acc.data, 0.1, True)
    s = g + r
    top = np.argsort(-np.abs(s))[:100]
    want = np.zeros_like(s)
    want[top] = s[top]
    check("sparsification top-K", tensor.to_numpy(t), want, 1e-6)
    check("sparsification top-K residual", tensor.to_numpy(acc), s - want, 1e-6)
    t = tensor.from_numpy(g, dev)
    comm.sparsification(t.data, 1.0, False)
    check("sparsification threshold", tensor.to_numpy(t), np.where(np.abs(g) >= 1.0, g, 0))
    ts = [tensor.from_numpy(p, dev) for p in parts]
    comm.fusedSparsification(singa_wrap.VecTensor([x.data for x in ts]), 0.5, False)
    for k, (x, p) in enumerate(zip(ts, parts)):
        check(f"fusedSparsification tensor {k}", tensor.to_numpy(x),
              np.where(np.abs(p) >= 0.5, p, 0))
    comm.wait()


def one_step(dev, method, make_dist, tol, **kw):
    """One step of a linear least-squares model: DistOpt on dev against the
    plain optimizer on the CPU."""
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = rng.standard_normal((16, 4)).astype(np.float32)
    w0 = rng.standard_normal((8, 4)).astype(np.float32)
    autograd.training = True
    result = []
    for d, sgd in ((dev, make_dist(opt.SGD(lr=0.1, momentum=0.9))),
                   (device.get_default_device(), opt.SGD(lr=0.1, momentum=0.9))):
        w = tensor.from_numpy(w0, d)
        w.requires_grad, w.stores_grad = True, True
        loss = autograd.mse_loss(autograd.matmul(tensor.from_numpy(x, d), w),
                                 tensor.from_numpy(y, d))
        if isinstance(sgd, opt.DistOpt):
            getattr(sgd, method)(loss, **kw)
        else:
            sgd(loss)
        result.append(tensor.to_numpy(w))
    check(f"DistOpt.{method} on GPU", result[0], result[1], tol)


def rank_main(rank, world, id_bytes, queue):
    """One of --gpus N ranks: what it computed goes back through queue."""
    try:
        dev = device.create_cuda_gpu_on(rank)
        sgd = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9),
                          nccl_id=singa_wrap.NcclIdHolder(id_bytes), local_rank=rank,
                          world_size=world)
        t = tensor.from_numpy(np.arange(10, dtype=np.float32) * (rank + 1), dev)
        sgd.all_reduce(t)
        g = np.random.default_rng(rank).standard_normal(500).astype(np.float32)
        s = tensor.from_numpy(g, dev)
        sgd.sparsification(s, None, 0.1, True)
        x, y, w0 = shards()
        w = tensor.from_numpy(w0, dev)
        w.requires_grad, w.stores_grad = True, True
        autograd.training = True
        n = len(x) // world
        xs, ys = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        loss = autograd.mse_loss(autograd.matmul(tensor.from_numpy(xs, dev), w),
                                 tensor.from_numpy(ys, dev))
        sgd(loss)
        queue.put((rank, tensor.to_numpy(t), tensor.to_numpy(s), tensor.to_numpy(w), None))
    except Exception as e:   # the parent reports it
        queue.put((rank, None, None, None, f"{type(e).__name__}: {e}"))


def shards():
    r = np.random.default_rng(1)
    return (r.standard_normal((16, 8)).astype(np.float32),
            r.standard_normal((16, 4)).astype(np.float32),
            r.standard_normal((8, 4)).astype(np.float32))


def several(world):
    import multiprocessing as mp
    assert device.get_num_gpus() >= world, f"--gpus {world}: {device.get_num_gpus()} GPUs"
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    id_bytes = singa_wrap.NcclIdHolder().to_bytes()
    procs = [ctx.Process(target=rank_main, args=(r, world, id_bytes, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    got = sorted(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
    for r, _, _, _, err in got:
        assert err is None, f"rank {r}: {err}"
    summed = sum(np.arange(10, dtype=np.float32) * (r + 1) for r in range(world))
    sparse = np.zeros(500, np.float32)
    for r in range(world):
        g = np.random.default_rng(r).standard_normal(500).astype(np.float32)
        top = np.argsort(-np.abs(g))[:50]
        sparse[top] += g[top]
    x, y, w0 = shards()
    w = tensor.from_numpy(w0)
    w.requires_grad, w.stores_grad = True, True
    autograd.training = True
    opt.SGD(lr=0.1, momentum=0.9)(autograd.mse_loss(
        autograd.matmul(tensor.from_numpy(x), w), tensor.from_numpy(y)))
    for r, t, s, wr, _ in got:
        check(f"rank {r}: all_reduce of {world} ranks", t, summed)
        check(f"rank {r}: top-K sparsification of {world} ranks", s, sparse, 1e-6)
        check(f"rank {r}: DistOpt step on its shard = one process on the batch", wr,
              tensor.to_numpy(w), 1e-5)
    print(f"NCCL smoke test passed ({world} ranks, multiprocessing)")


def main():
    assert singa_wrap.USE_DIST, "this build has no NCCL communicator (USE_DIST is 0)"
    assert device.get_num_gpus() > 0, "no GPU visible"
    if "--gpus" in sys.argv:
        several(int(sys.argv[sys.argv.index("--gpus") + 1]))
        return
    use_mpi = "--mpi" in sys.argv
    dev = device.create_cuda_gpu_on(0)
    if use_mpi:
        make = lambda o: opt.DistOpt(o)                                    # noqa: E731
    else:
        collectives(dev)
        make = lambda o: opt.DistOpt(o, nccl_id=singa_wrap.NcclIdHolder(),  # noqa: E731
                                     local_rank=0, world_size=1)
    sgd = make(opt.SGD())
    assert (sgd.world_size, sgd.global_rank, sgd.local_rank) == (1, 0, 0)
    one_step(dev, "backward_and_update", make, 1e-5)
    one_step(dev, "backward_and_update", make, 1e-5, threshold=0)
    one_step(dev, "backward_and_update_half", make, 2e-3)
    one_step(dev, "backward_and_sparse_update", make, 1e-5, spars=1.0, topK=True)
    print(f"NCCL smoke test passed ({'MPI' if use_mpi else 'NcclIdHolder'} bootstrap)")


if __name__ == "__main__":
    main()
