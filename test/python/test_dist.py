"""DistOpt over MPI: pytest launches `mpiexec -n 2` on dist_worker.py and
checks what both ranks computed against NumPy and against a single process
trained on the full batch (never against DistOpt itself)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import time

import numpy as np
import pytest

import singa
from singa import autograd, opt

import dist_worker as W

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI4PY, reason='needs the "dist" extra '
                               '(pip install ".[dist]": mpi4py and mpich)')


def find_mpiexec():
    """mpiexec beside this interpreter first (the mpich wheel installs it in
    the environment's scripts folder, which need not be on PATH), then on
    PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(folder, "mpiexec")
        if os.access(path, os.X_OK):
            return path
    return shutil.which("mpiexec")


def mpirun(args, timeout, n=2, threads=1):
    mpiexec = find_mpiexec()
    assert mpiexec, "mpi4py is installed but no mpiexec was found beside the interpreter or on PATH"
    env = dict(os.environ)
    # The ranks import the singa this process imported; one thread each
    # (threads=None leaves the choice to DistOpt), since the ranks share the
    # machine's cores.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(singa.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_parent, HERE,
                                                      env.get("PYTHONPATH")]))
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.monotonic()
    proc = subprocess.run([mpiexec, "-n", str(n), sys.executable, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    return proc, time.monotonic() - start


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each rank of one `mpiexec -n 2 dist_worker.py all` run wrote."""
    out = tmp_path_factory.mktemp("dist")
    proc, _ = mpirun([os.path.join(HERE, "dist_worker.py"), "all", out], timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = [dict(np.load(out / f"all_{r}.npz")) for r in range(2)]
    res[0]["_dir"] = out
    return res


# ---- zero-copy host buffers (no MPI needed) ----

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_host_buffer_views_the_tensor_memory(dtype):
    from singa import singa_wrap, tensor
    a = np.arange(12).reshape(3, 4).astype(dtype)
    t = tensor.from_numpy(a)
    view = memoryview(singa_wrap.HostBuffer(t.data))
    assert (view.format, view.itemsize, view.shape, view.readonly) == \
        (np.dtype(dtype).char, a.itemsize, (12,), False)
    arr = np.asarray(singa_wrap.HostBuffer(t.data))
    arr[5] = 42                                  # writes reach the tensor
    a.reshape(-1)[5] = 42
    np.testing.assert_array_equal(t.numpy(), a)
    col = tensor.from_numpy(a)[:, 1:2].contiguous()   # a contiguous slice of a copy
    np.testing.assert_array_equal(np.asarray(singa_wrap.HostBuffer(col.data)), a[:, 1])


def test_host_buffer_keeps_the_memory_alive():
    from singa import singa_wrap, tensor
    t = tensor.from_numpy(np.full(1000, 7, np.float32))
    arr = np.asarray(singa_wrap.HostBuffer(t.data))
    del t
    np.testing.assert_array_equal(arr, 7)        # the Block outlives the tensor


def test_host_buffer_refuses_what_it_cannot_export():
    from singa import singa_wrap, tensor
    t = tensor.from_numpy(np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"shape \(4, 3\).*not contiguous"):
        singa_wrap.HostBuffer(t.data.Transpose())
    with pytest.raises(ValueError, match="no storage"):
        singa_wrap.HostBuffer(singa_wrap.Tensor())


# ---- the launcher and the missing extra ----

def test_distopt_without_mpi_names_the_extra(monkeypatch):
    import singa._dist.mpi as mpi_mod
    monkeypatch.setitem(sys.modules, "mpi4py", None)    # import mpi4py now fails
    monkeypatch.setattr(mpi_mod, "_MPI", None)
    with pytest.raises(ImportError, match=r'singa\[dist\]'):
        opt.DistOpt(opt.SGD())


def test_importing_opt_loads_no_mpi():
    code = ("import sys, singa.opt as o; assert o.DistOpt.__name__ == 'DistOpt'; "
            "assert 'mpi4py' not in sys.modules, 'mpi4py imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_bad_arguments_raise_before_mpi():
    with pytest.raises(TypeError, match="update"):
        opt.DistOpt(object())
    with pytest.raises(ValueError, match="buffSize"):
        opt.DistOpt(opt.SGD(), buffSize=0)
    with pytest.raises(RuntimeError, match="NCCL|CUDA"):
        opt.DistOpt(opt.SGD(), nccl_id=object(), local_rank=0, world_size=1)


@needs_mpi
def test_mpiexec_is_found_beside_the_interpreter():
    path = find_mpiexec()
    assert path is not None
    if importlib.util.find_spec("mpich") is not None:   # the wheel's own launcher
        assert os.path.dirname(path) in (sysconfig.get_path("scripts"),
                                         os.path.dirname(sys.executable))


@needs_mpi
def test_ranks_know_their_place(ranks):
    for r, res in enumerate(ranks):
        assert int(res["world_size"]) == 2 and int(res["local_rank"]) == r


# ---- collectives against NumPy, on 2 and 3 ranks ----

@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    """The collectives on three ranks (uneven float16 slices, 3-way sums)."""
    out = tmp_path_factory.mktemp("dist3")
    proc, _ = mpirun([os.path.join(HERE, "dist_worker.py"), "collectives", out], timeout=180,
                     n=3, threads=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [dict(np.load(out / f"collectives_{r}.npz")) for r in range(3)]


@needs_mpi
def test_ranks_on_one_host_share_its_cores(three_ranks):
    for res in three_ranks:   # launched without OMP_NUM_THREADS
        assert int(res["threads"]) == max(1, int(res["cores"]) // 3)


@pytest.fixture(params=[2, 3], ids=["2 ranks", "3 ranks"])
def coll(request):
    """(per-rank results, per-rank inputs) of the collectives."""
    if not HAVE_MPI4PY:
        pytest.skip('needs the "dist" extra')
    res = request.getfixturevalue("ranks" if request.param == 2 else "three_ranks")
    return res, [W.rank_inputs(r) for r in range(request.param)]


def _same(res, key):
    """The value every rank got for key (checked to be the same)."""
    for r in range(1, len(res)):
        np.testing.assert_array_equal(res[r][key], res[0][key],
                                      err_msg=f"{key} differs between rank 0 and rank {r}")
    return res[0][key]


def _f16_sum(*xs):
    """What a float16 all-reduce gives: the values rounded to float16, added
    in float32 in rank order, the sum rounded to float16."""
    total = xs[0].astype(np.float16).astype(np.float32)
    for x in xs[1:]:
        total = total + x.astype(np.float16).astype(np.float32)
    return total.astype(np.float16).astype(np.float32)


def test_all_reduce_sums(coll):
    res, inp = coll
    total = lambda key: sum(i[key] for i in inp)   # noqa: E731
    # MPI may add three ranks' values in any order: one rounding apart.
    np.testing.assert_allclose(_same(res, "coll/f32"), total("f32"), rtol=1e-6)
    np.testing.assert_array_equal(_same(res, "coll/i32"), total("i32"))
    np.testing.assert_array_equal(_same(res, "coll/f16").astype(np.float32),
                                  _f16_sum(*[i["f16"] for i in inp]))
    np.testing.assert_allclose(_same(res, "coll/strided"), total("strided").T, rtol=1e-6)


def test_all_reduce_half_sends_float16(coll):
    res, inp = coll
    got = _same(res, "coll/half")
    np.testing.assert_array_equal(got, _f16_sum(*[i["half"] for i in inp]))
    assert not np.allclose(got, sum(i["half"] for i in inp), rtol=1e-6)   # really float16


def test_fused_all_reduce_over_several_buffers(coll):
    res, inp = coll
    for k in range(len(inp[0]["fused"])):
        parts = [i["fused"][k] for i in inp]
        np.testing.assert_allclose(_same(res, f"coll/fused{k}"), sum(parts), rtol=1e-6)
        np.testing.assert_array_equal(_same(res, f"coll/fused_half{k}"), _f16_sum(*parts))


def _sparse_reference(gs, accs, spars, top_k):
    """One sparse all-reduce over ranks: (result, new residuals)."""
    out = np.zeros_like(gs[0])
    new_accs = []
    for r, g in enumerate(gs):
        src = g + accs[r] if accs is not None else g.copy()
        if top_k:
            k = max(1, int(spars * src.size))
            idx = np.argsort(-np.abs(src), kind="stable")[:k]
        else:
            idx = np.flatnonzero(np.abs(src) >= spars)
        out[idx] += src[idx]
        rest = src.copy()
        rest[idx] = 0
        new_accs.append(rest)
    return out, new_accs


def test_sparsification_matches_numpy(coll):
    res, inp = coll
    n = len(inp)
    accs = [np.zeros(40, np.float32)] * n
    for step in range(3):
        want, accs = _sparse_reference([i["sparse"][step] for i in inp], accs, 0.1, True)
        np.testing.assert_allclose(_same(res, f"coll/topk{step}"), want, rtol=1e-6)
        for r in range(n):   # each rank keeps its own residual
            np.testing.assert_allclose(res[r][f"coll/topk_acc{step}"], accs[r], rtol=1e-6)
        assert np.count_nonzero(want) <= 4 * n
    want, _ = _sparse_reference([i["sparse"][0] for i in inp], None, 1.0, False)
    np.testing.assert_allclose(_same(res, "coll/threshold"), want, rtol=1e-6)

    flat = [np.concatenate([a.ravel() for a in i["fused_sparse"]]) for i in inp]
    want, accs = _sparse_reference(flat, [np.zeros(30, np.float32)] * n, 0.2, True)
    got = np.concatenate([_same(res, f"coll/fused_sparse{k}").ravel() for k in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for r in range(n):
        np.testing.assert_allclose(res[r]["coll/fused_sparse_acc"], accs[r], rtol=1e-6)


@needs_mpi
def test_misuse_raises_python_errors(ranks):
    err = {k[4:]: str(v) for k, v in ranks[0].items() if k.startswith("err/")}
    assert err["fused_float16"].startswith("TypeError") and "float16" in err["fused_float16"]
    assert err["too_big"].startswith("ValueError") and "buffSize=4" in err["too_big"]
    assert err["not_a_tensor"].startswith("TypeError") and "ndarray" in err["not_a_tensor"]
    assert err["bad_spars"].startswith("ValueError") and "spars" in err["bad_spars"]
    assert err["bad_acc"].startswith("ValueError") and "4 elements" in err["bad_acc"]
    assert err["bad_threshold"].startswith("ValueError") and "threshold" in err["bad_threshold"]
    assert err["empty_list"].startswith("ValueError")
    assert err["mismatch"].startswith("ValueError") and "[2]" in err["mismatch"]


# ---- training against one process on the full batch ----

def _single_process(kind):
    """Parameters after W.STEPS steps of one process on the full batches."""
    xs, ys = W.batches()
    m = W.build_model(W.make_optimizer(kind), xs[0])
    for x, y in zip(xs, ys):
        m.optimizer(W.loss_of(m, x, y))
    return W.params_of(m)


@pytest.fixture(scope="module")
def single():
    return {kind: _single_process(kind) for kind in ("sgd", "adam")}


def _trained(ranks, name):
    names = [k.split("/", 1)[1] for k in ranks[0] if k.startswith(name + "/")]
    return {n: _same(ranks, f"{name}/{n}") for n in names}


@needs_mpi
@pytest.mark.parametrize("name", [n for n in W.TRAIN_CONFIGS if not n.startswith("half")])
def test_training_equals_one_process_on_the_full_batch(ranks, single, name):
    want = single[W.TRAIN_CONFIGS[name][0]]
    got = _trained(ranks, name)
    assert sorted(got) == sorted(want) and len(want) == 4
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=0, atol=1e-6, err_msg=n)
    # The run moved the parameters: the check above is not about the start.
    start = W.build_model(opt.SGD(), W.batches()[0][0]).get_params()
    assert all(np.abs(want[n] - start[n].numpy()).max() > 1e-3 for n in want)


@needs_mpi
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_fused_and_unfused_agree(ranks, kind):
    runs = [_trained(ranks, n) for n in W.TRAIN_CONFIGS
            if n.startswith(kind) and W.TRAIN_CONFIGS[n][1] == "backward_and_update"]
    assert len(runs) >= 2
    for other in runs[1:]:
        for n in runs[0]:
            np.testing.assert_array_equal(other[n], runs[0][n], err_msg=n)


@needs_mpi
@pytest.mark.parametrize("name", ["half_unfused", "half_fused"])
def test_half_training_within_float16_tolerance(ranks, single, name):
    want, got = single["sgd"], _trained(ranks, name)
    for n in want:
        # Each rank's gradient and their sum are rounded to float16 (a
        # relative 2**-11 each); ten steps of lr 0.05 with momentum keep the
        # drift well under 1e-3 here (about 2e-4 measured).
        np.testing.assert_allclose(got[n], want[n], rtol=0, atol=1e-3, err_msg=n)
    assert any(not np.array_equal(got[n], want[n]) for n in want)


@needs_mpi
def test_partial_update_is_local_steps_plus_chunk_averaging(ranks):
    """Two independent processes (one per shard) with the averaging of one
    chunk of parameters after each step done in NumPy."""
    xs, ys = W.batches()
    models = [W.build_model(W.make_optimizer("sgd"), W.shard(xs[0], r)) for r in range(2)]
    chunks, turn = None, 0
    for x, y in zip(xs, ys):
        order = []
        for r, m in enumerate(models):
            names = {id(t): n for n, t in m.get_params().items()}
            for p, g in autograd.backward(W.loss_of(m, W.shard(x, r), W.shard(y, r))):
                m.optimizer.apply(p.name, p, g)
                if r == 0:
                    order.append((names[id(p)], p.size()))
            m.optimizer.step()
        if chunks is None:
            chunks, cur, size = [], [], 0
            for n, k in order:
                if cur and size + k > W.PARTIAL_THRESHOLD:
                    chunks.append(cur)
                    cur, size = [], 0
                cur.append(n)
                size += k
            chunks.append(cur)
        params = [m.get_params() for m in models]
        for n in chunks[turn % len(chunks)]:
            avg = (params[0][n].numpy() + params[1][n].numpy()) / np.float32(2)
            for p in params:
                p[n].copy_from_numpy(avg)
        turn += 1
    assert len(chunks) == 3
    for r in range(2):
        got = {k.split("/", 1)[1]: v for k, v in ranks[r].items() if k.startswith("partial/")}
        want = W.params_of(models[r])
        for n in want:
            np.testing.assert_allclose(got[n], want[n], rtol=0, atol=1e-6, err_msg=f"rank {r} {n}")
    # Parameters outside the chunk averaged last differ between the ranks.
    assert any(not np.array_equal(ranks[0][k], ranks[1][k]) for k in ranks[0]
               if k.startswith("partial/"))


@needs_mpi
def test_checkpoint_of_a_distributed_run_loads_in_one_process(ranks, single):
    m = W.build_model(W.make_optimizer("sgd"), W.batches()[0][0])
    m.load_states(str(ranks[0]["_dir"] / "sgd_fused.ckpt"))
    for n, v in W.params_of(m).items():
        np.testing.assert_allclose(v, single["sgd"][n], rtol=0, atol=1e-6)
    assert set(m.optimizer.get_states()["moments"]) == set(m.get_params())


# ---- failure and the example ----

@needs_mpi
def test_a_failing_rank_ends_the_job_with_its_error(tmp_path):
    proc, elapsed = mpirun([os.path.join(HERE, "dist_worker.py"), "fail", tmp_path], timeout=120)
    assert proc.returncode != 0
    assert "rank 1 fails on purpose at step 3" in proc.stderr, proc.stderr
    assert elapsed < 30, f"the job took {elapsed:.0f} s to end"


@needs_mpi
def test_example_sparse_topk_with_correction_reaches_95_percent():
    pytest.importorskip("sklearn")
    proc, _ = mpirun([os.path.join(ROOT, "examples", "dist", "train_cnn.py"), "digits",
                      "--dist-option", "sparseTopK", "--spars", "0.05", "--epochs", "6",
                      "--threads", "1"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    acc = float(proc.stdout.rsplit("test accuracy ", 1)[1].split(",")[0])
    assert acc >= 0.95, proc.stdout
