"""Hostile inputs: raw singa_wrap objects, wrapped offsets and strides, bad
thread counts and pooling indices, ONNX models with bad dimensions and
attributes, forged checkpoints. Every snippet runs in a child process
(crashguard), so one that crashes is reported by name instead of taking
pytest down; each must finish or raise one of the documented exception
types, and some must raise a particular one."""

import pytest

import crashguard

# The exception types a user may see (README, doc/design.md "Errors").
DOCUMENTED = {"ValueError", "TypeError", "IndexError", "RuntimeError", "MemoryError",
              "NotImplementedError", "FileNotFoundError"}


def check(cases, expect=None, prelude=crashguard.PRELUDE, env=None):
    """Runs cases; fails on a crash, an undocumented exception, or an
    outcome other than the one expect gives for a case."""
    expect = expect or {}
    results = crashguard.run_cases(cases, prelude=prelude, env=env)
    bad = []
    for name, (outcome, kind, detail) in sorted(results.items()):
        if name in expect:
            if outcome != expect[name] and kind != expect[name]:
                bad.append(f"{name}: expected {expect[name]}, got {outcome} ({detail})")
        elif outcome != "ok" and kind not in DOCUMENTED:
            bad.append(f"{name}: {outcome} ({detail})")
    assert not bad, "\n".join(bad)
    return results


# ---- raw singa_wrap objects ----

_NULL_CLASSES = ["Tensor", "Device", "CppCPU", "VecTensor", "Shape", "VecInt", "VecInt64"]

RAW = {
    # A default-constructed Tensor has no storage.
    "default/Exp": "w.Exp(w.Tensor())",
    "default/numpy": "tensor.from_raw_tensor(w.Tensor()).numpy()",
    "default/Add": "w.Add(w.Tensor(), w.Tensor())",
    "default/AddInto-out": "t = w.Tensor([1]); w.AddInto(t, t, w.Tensor())",
    "default/SetValue": "w.Tensor().SetValue(1.0)",
    "default/Clone": "w.Tensor().Clone()",
    "default/AsType": "w.Tensor().AsType(w.kInt)",
    "default/CopyData": "w.Tensor([1]).CopyData(w.Tensor())",
    "default/Reshape-Exp": "w.Exp(w.Tensor().Reshape([1, 1]))",
    "default/View": "w.Tensor().View([1], [1], 0)",
    "default/Sum": "w.Sum(w.Tensor(), [], False)",
    "default/SumAll": "w.SumAll(w.Tensor())",
    "default/L2": "w.Tensor().L2()",
    "default/Gaussian": "w.Tensor().Gaussian(0.0, 1.0)",
    "default/Matmul": "w.Matmul(w.Tensor().Reshape([1, 1]), w.Tensor([1, 1]))",
    "default/Conv": "w.Conv2dForward(w.Tensor().Reshape([1, 1, 1, 1]), w.Tensor([1, 1, 1, 1]), "
                    "w.Tensor(), [1, 1], [0, 0, 0, 0], [1, 1], 1)",
    "default/repr": "repr(tensor.from_raw_tensor(w.Tensor()))",
    "default/ToDevice": "t = w.Tensor(); t.ToDevice(w.CppCPU()); t.L1()",
    # None where a Tensor pointer is expected.
    "none/AddInto": "t = w.Tensor([2]); w.AddInto(t, t, None)",
    "none/ExpInto": "w.ExpInto(w.Tensor([2]), None)",
    "none/Mult": "a = w.Tensor([2, 2]); w.Mult(1.0, a, a, 0.0, None)",
    "none/Axpy": "w.Axpy(1.0, w.Tensor([2]), None)",
    "none/IndexAdd": "w.IndexAdd(None, w.Tensor([1], None, w.kInt), w.Tensor([1]), 0)",
    "none/Exp": "w.Exp(None)",
    "none/CopyData": "w.Tensor([2]).CopyData(None)",
    # Wrong types and out-of-range scalars.
    "type/str-scalar": "w.AddScalar(w.Tensor([2]), 'x')",
    "type/float-shape": "w.Tensor([2.5])",
    "type/dtype-99": "w.Tensor([2], None, 99)",
    "type/dtype-neg": "w.Tensor([2], None, -1)",
    "type/dtype-huge": "w.Tensor([2], None, 2**40)",
    "type/device-int": "w.Tensor([2], 5)",
    "range/scalar-1e300": "w.AddScalar(w.Tensor([2]), 1e300)",
    "range/SetValue-1e39": "w.Tensor([2]).SetValue(-1e39)",
    "range/shape-index": "w.Tensor([2]).shape(2**70)",
    "range/axis": "w.SoftMax(w.Tensor([2]), 2**40)",
    "range/seed": "w.DefaultDevice().SetRandSeed(-1)",
    "range/shape-neg": "w.Tensor([-1])",
    "range/shape-huge": "w.Tensor([2**40, 2**40])",
    "buffer/readonly": "a = np.zeros(2, np.float32); a.flags.writeable = False; "
                       "w.Tensor([2]).CopyDataToHostPtr(a)",
    "buffer/bytes-dst": "w.Tensor([2]).CopyDataToHostPtr(b'12345678')",
    "buffer/not-a-buffer": "w.Tensor([2]).CopyDataFromHostPtr(3)",
    "buffer/strided": "w.Tensor([2]).CopyDataFromHostPtr(np.zeros((2, 2), np.float32)[:, 0])",
    "buffer/too-small": "w.Tensor([4]).CopyDataToHostPtr(np.zeros(2, np.float32))",
}
for _cls in _NULL_CLASSES:
    RAW[f"null/{_cls}/repr"] = f"repr(w.{_cls}.__new__(w.{_cls}))"
    RAW[f"null/{_cls}/as-tensor"] = f"w.Exp(w.{_cls}.__new__(w.{_cls}))"
    RAW[f"null/{_cls}/as-device"] = f"w.Tensor([2], w.{_cls}.__new__(w.{_cls}))"
    RAW[f"null/{_cls}/as-list"] = f"w.ConcatOn(w.{_cls}.__new__(w.{_cls}), 0)"
RAW.update({
    "null/Tensor/Size": "w.Tensor.__new__(w.Tensor).Size()",
    "null/Tensor/shape": "w.Tensor.__new__(w.Tensor).shape()",
    "null/Tensor/SetValue": "w.Tensor.__new__(w.Tensor).SetValue(1.0)",
    "null/Tensor/wrapped": "tensor.from_raw_tensor(w.Tensor.__new__(w.Tensor)).numpy()",
    "null/Tensor/as-out": "t = w.Tensor([1]); w.AddInto(t, t, w.Tensor.__new__(w.Tensor))",
    "null/Device/id": "w.Device.__new__(w.Device).id()",
    "null/CppCPU/Sync": "w.CppCPU.__new__(w.CppCPU).Sync()",
    "null/VecTensor/size": "w.VecTensor.__new__(w.VecTensor).size()",
    "null/Shape/getitem": "w.Shape.__new__(w.Shape)[0]",
    "null/HostBuffer/memoryview": "memoryview(w.HostBuffer.__new__(w.HostBuffer))",
    "null/HostBuffer/nbytes": "w.HostBuffer.__new__(w.HostBuffer).nbytes()",
    "default/HostBuffer": "memoryview(w.HostBuffer(w.Tensor()))",
    "null/Tensor/init-later": "t = w.Tensor.__new__(w.Tensor); t.__init__([2, 3]); "
                              "assert t.Size() == 6",
})

RAW_EXPECT = {name: "ValueError" for name in RAW if name.startswith("default/")}
RAW_EXPECT.update({name: "TypeError" for name in RAW
                   if name.startswith(("none/", "null/")) and not name.endswith(
                       ("/repr", "init-later"))})
RAW_EXPECT.update({name: "ok" for name in RAW if name.endswith(("/repr", "init-later"))})
RAW_EXPECT.update({"range/scalar-1e300": "ValueError", "range/SetValue-1e39": "ValueError",
                   "range/shape-index": "ValueError", "range/axis": "ValueError",
                   "range/seed": "ValueError", "buffer/readonly": "ValueError",
                   "buffer/bytes-dst": "ValueError", "buffer/not-a-buffer": "TypeError",
                   "buffer/strided": "ValueError", "type/dtype-99": "TypeError",
                   "type/dtype-neg": "TypeError", "type/dtype-huge": "ValueError"})
# The default tensor repr has no data to show.
RAW_EXPECT["default/repr"] = "ValueError"
# Ops that touch no element may return another empty-storage tensor.
del RAW_EXPECT["default/Sum"], RAW_EXPECT["default/View"]


def test_raw_singa_wrap_objects():
    check(RAW, RAW_EXPECT)


# ---- wrapped offsets and strides ----

OFFSETS = {
    "copy/offset-2**64-1": """
t = tensor.Tensor((4, 4)); v = t[1:3]
try:
    v.copy_from_numpy(np.ones(2, np.float32), offset=2**64 - 1)
except ValueError:
    pass
assert not t.numpy().any(), "copy_from_numpy wrote outside its view"
raise ValueError("refused")
""",
    "copy/offset-2**63": "tensor.Tensor((4, 4)).copy_from_numpy(np.ones(2, np.float32), offset=2**63)",
    "copy/offset-neg": "tensor.Tensor((4,)).copy_from_numpy(np.ones(2, np.float32), offset=-1)",
    "copy/offset-end": "tensor.Tensor((4,)).copy_from_numpy(np.ones(2, np.float32), offset=3)",
    "copy/raw-offset": "w.Tensor([4]).CopyDataFromHostPtr(np.ones(2, np.float32), 2**64 - 1)",
    "view/stride-sum-wraps": "v = w.Tensor([4]).View([2, 2], [2**62, 2**62], 0); w.Exp(v)",
    "view/stride-2**63": "v = w.Tensor([4]).View([2], [-2**63], 2**63 - 1); w.Exp(v)",
    "view/neg-stride": "v = w.Tensor([4]).View([3], [-2], 3); w.Exp(v)",
    "view/offset-huge": "w.Exp(w.Tensor([4]).View([1], [1], 2**64 - 1))",
    "view/span-wraps": "v = w.Tensor([8]).View([2**20, 2**21], [2**43, 2**42], 0); w.Exp(v)",
    "view/many-axes": "v = w.Tensor([4]).View([2] * 40, [2**57] * 40, 0); w.Sum(v, [], False)",
    "view/too-many-elements": "w.Tensor([4]).View([2] * 64, [0] * 64, 0)",
    "view/zero-size": "v = w.Tensor([4]).View([0, 2**62], [2**62, 2**62], 2**64 - 1); "
                      "assert w.Exp(v).Size() == 0",
    "view/65-dims": "w.Tensor([4]).View([1] * 65, [1] * 65, 0)",
    "slice/step-huge": "s = w.Tensor([4]).Slice(0, 0, 4, 2**63); assert s.Size() == 1; w.Exp(s)",
    "slice/step-max": "s = w.Tensor([4, 3]).Slice(1, 1, 3, 2**64 - 1); w.Exp(s)",
    "slice/start-past": "s = w.Tensor([4]).Slice(0, 2**64 - 1, 2**64 - 1); assert s.Size() == 0",
    "index/step-2**70": "t = tensor.from_numpy(np.arange(6, dtype=np.float32)); "
                        "assert t[::2**70].numpy().tolist() == [0.0]",
    "index/neg-step-2**70": "t = tensor.from_numpy(np.arange(6, dtype=np.float32)); "
                            "assert t[::-2**70].numpy().tolist() == [5.0]",
    "index/huge": "tensor.Tensor((4,))[2**63]",
    "broadcast/huge": "w.Tensor([1]).Broadcast([2**62, 4])",
    "reshape/huge": "w.Tensor([4]).Reshape([2**62, 2**62, 0, 4])",
    "repeat/huge": "w.Repeat(w.Tensor([2]), [2**62], 0)",
    "tile/wraps": "w.Tile(w.Tensor([2**31]), [2**33])",
    "transpose/view": "v = w.Tensor([6]).View([2, 3], [1, 2], 0); "
                      "assert w.Exp(v.Transpose([1, 0])).shape() == (3, 2)",
    "index-select/huge": "w.IndexSelect(w.Tensor([4]), tensor.from_numpy(np.array([2**31 - 1], "
                         "np.int32)).data, 0)",
}
OFFSETS_EXPECT = {
    "copy/offset-2**64-1": "ValueError", "copy/offset-2**63": "ValueError",
    "copy/offset-end": "ValueError", "copy/raw-offset": "ValueError",
    "view/stride-sum-wraps": "IndexError", "view/stride-2**63": "IndexError",
    "view/offset-huge": "IndexError", "view/span-wraps": "IndexError",
    "view/many-axes": "IndexError", "view/too-many-elements": "MemoryError",
    "view/zero-size": "ok", "view/neg-stride": "IndexError",
    "slice/step-huge": "ok", "slice/step-max": "ok", "slice/start-past": "ok",
    "index/step-2**70": "ok", "index/neg-step-2**70": "ok", "index/huge": "IndexError",
    "transpose/view": "ok", "index-select/huge": "IndexError",
}


def test_wrapped_offsets_and_strides():
    check(OFFSETS, OFFSETS_EXPECT)


# Random views over a small Block: a view the core accepts must read only
# its own elements (compared with NumPy's as_strided over the same buffer),
# and one it refuses must raise IndexError.
_RANDOM_VIEWS = """
import random
rng = random.Random(SEED)
base = np.arange(24, dtype=np.float32)
c = tensor.from_numpy(base).data
accepted = exercised = 0
for _ in range(400):
    nd = rng.randint(1, 3)
    shape = [rng.choice([0, 1, 2, 2, 3, 3, 5, 2**31, 2**62]) for _ in range(nd)]
    strides = [rng.choice([-7, -3, -1, -1, 0, 1, 1, 2, 4, 9, 2**40, -2**62, 2**62])
               for _ in range(nd)]
    offset = rng.choice([0, 1, 5, 23, 24, 2**63, 2**64 - 1])
    size = int(np.prod(shape, dtype=object))
    inside = size == 0 or (offset + sum(min(0, (d - 1) * st) for d, st in zip(shape, strides)) >= 0
                           and offset + sum(max(0, (d - 1) * st) for d, st in zip(shape, strides)) < 24)
    try:
        v = c.View(shape, strides, offset)
    except (IndexError, MemoryError):
        assert not inside or size >= 2**62, (shape, strides, offset)
        continue
    assert inside, ("accepted", shape, strides, offset)
    accepted += 1
    if size == 0 or size > 4096:  # a big broadcast view is fine, but costly to compare
        continue
    exercised += 1
    ref = np.array([base[offset + sum(i * st for i, st in zip(idx, strides))]
                    for idx in np.ndindex(*shape)], np.float32).reshape(shape)
    t = tensor.from_raw_tensor(v)
    np.testing.assert_array_equal(t.numpy(), ref)
    np.testing.assert_allclose(tensor.exp(t).numpy(), np.exp(ref), rtol=1e-6)
    np.testing.assert_array_equal((t + t).numpy(), ref + ref)
    np.testing.assert_allclose(tensor.sum(t, axis=0).numpy(), ref.sum(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(tensor.from_raw_tensor(v.Transpose()).numpy(), ref.T)
    np.testing.assert_array_equal(tensor.argmax(t, axis=-1).numpy(), ref.argmax(axis=-1))
assert exercised > 20, (accepted, exercised)
"""
VIEWS = {f"random-views/{seed}": _RANDOM_VIEWS.replace("SEED", str(seed)) for seed in range(4)}


def test_random_views_read_only_their_elements():
    check(VIEWS, {name: "ok" for name in VIEWS})


# ---- thread counts and pooling indices ----

_POOL = """
def pool_backward(argmax, dtype=np.int32):
    dy = tensor.from_numpy(np.ones((1, 1, 2, 2), np.float32)).data
    am = tensor.from_numpy(np.asarray(argmax, dtype).reshape(1, 1, 2, 2)).data
    return w.MaxPool2dBackward(dy, am, [1, 1, 4, 4], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False)
"""
MISC = {
    "threads/100000": "singa.set_num_threads(100000); (tensor.Tensor((512, 512)) + 1).numpy()",
    "threads/2**31-1": "singa.set_num_threads(2**31 - 1); (tensor.Tensor((512, 512)) + 1).numpy()",
    "threads/2**40": "singa.set_num_threads(2**40)",
    "threads/0": "singa.set_num_threads(0)",
    "threads/4096": "singa.set_num_threads(4096); import os; "
                    "assert singa.get_num_threads() <= len(os.sched_getaffinity(0)); "
                    "a = tensor.random((300, 300)); tensor.mult(a, a).numpy()",
    "pool/argmax-16": _POOL + "pool_backward([0, 1, 2, 16])",
    "pool/argmax-huge": _POOL + "pool_backward([0, 1, 2, 2**31 - 1])",
    "pool/argmax-neg": _POOL + "r = tensor.from_raw_tensor(pool_backward([-1, -5, 0, 15])).numpy()\n"
                               "assert r.sum() == 2 and r[0, 0, 0, 0] == 1 and r[0, 0, 3, 3] == 1",
    "pool/argmax-float": _POOL + "pool_backward([0, 1, 2, 3], np.float32)",
    "pool/argmax-device": _POOL + "dy = tensor.from_numpy(np.ones((1, 1, 2, 2), np.float32)).data\n"
                                  "am = w.Tensor([1, 1, 2, 2], w.CppCPU(), w.kInt)\n"
                                  "w.MaxPool2dBackward(dy, am, [1, 1, 4, 4], [2, 2], [2, 2], "
                                  "[0, 0, 0, 0], [1, 1], False)",
}
MISC_EXPECT = {"threads/100000": "ValueError", "threads/2**31-1": "ValueError",
               "threads/2**40": "ValueError", "threads/0": "ValueError", "threads/4096": "ok",
               "pool/argmax-16": "IndexError", "pool/argmax-huge": "IndexError",
               "pool/argmax-neg": "ok", "pool/argmax-float": "TypeError",
               "pool/argmax-device": "RuntimeError"}


def test_thread_counts_and_pool_indices():
    check(MISC, MISC_EXPECT)


# OpenBLAS jobs that an OpenMP team cannot host run on reserve threads; a
# thread limit of 1 leaves every job but the caller's to them. A lost job
# would hang the child (reported as a crash), a wrong one the result.
_GEMM = """
import os
from singa import singa_wrap
procs = len(os.sched_getaffinity(0))
singa.set_num_threads(min(procs, 4))
singa_wrap.SetCpuGemmPath("blas")  # the BLAS, whatever the CPU would pick
rng = np.random.default_rng(0)
a = rng.standard_normal((600, 500)).astype(np.float32)
b = rng.standard_normal((500, 700)).astype(np.float32)
def gemm():
    got = tensor.mult(tensor.from_numpy(a), tensor.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)
"""
BLAS = {
    "reserve/gemm": _GEMM + """
tasks = len(os.listdir("/proc/self/task"))
for _ in range(3):
    gemm()
if procs > 1:  # the reserve started its threads once, and reused them
    assert len(os.listdir("/proc/self/task")) == tasks + min(procs, 4) - 1
""",
    "reserve/after-fork": _GEMM + """
gemm()
pid = os.fork()
if pid == 0:
    try:
        gemm()
        os._exit(0)
    except BaseException:
        os._exit(1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
""",
    "reserve/threads-from-python": _GEMM + """
import threading
errors = []
def work():
    try:
        gemm()
    except BaseException as e:
        errors.append(e)
ts = [threading.Thread(target=work) for _ in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert not errors, errors
""",
}


@pytest.mark.parametrize("omp_env", [{"OMP_THREAD_LIMIT": "1"}, {"OMP_DYNAMIC": "true"}])
def test_blas_jobs_on_a_short_openmp_team(omp_env):
    check(BLAS, {name: "ok" for name in BLAS}, env=omp_env)


# ---- ONNX models with bad dimensions and attributes ----

ONNX_PRELUDE = crashguard.PRELUDE + '''
import onnx
from onnx import helper, numpy_helper, TensorProto
from singa import sonnx


def model(op, inputs, attrs=None, consts=None, n_out=1, opset=17):
    """A one-node model: inputs are (shape, elem_type) graph inputs, consts
    name -> array initializers, in that order on the node."""
    vis = [helper.make_tensor_value_info(f"x{i}", elem, shape)
           for i, (shape, elem) in enumerate(inputs)]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()]
    outs = [helper.make_tensor_value_info(f"y{i}", 0, None) for i in range(n_out)]
    for o in outs:
        o.type.tensor_type.shape.SetInParent()
    node = helper.make_node(op, [v.name for v in vis] + [t.name for t in inits],
                            [o.name for o in outs], **(attrs or {}))
    return helper.make_model(helper.make_graph([node], "g", vis, outs, inits),
                             opset_imports=[helper.make_opsetid("", opset)])


def run(m, check_first=False):
    """prepare() and, when every input has a concrete shape, run()."""
    if check_first:
        try:
            onnx.checker.check_model(m)
        except Exception:
            return  # not a valid model at all: onnx's own checker says so
    rep = sonnx.prepare(m)
    feed = []
    for vi in rep._inputs:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        assert all(d >= 0 for d in dims), f"prepare() accepted the dimensions {dims}"
        elem = vi.type.tensor_type.elem_type
        arr = np.asarray(np.random.rand(*dims) * 4 - 2)
        feed.append(arr.astype(helper.tensor_dtype_to_np_dtype(elem)))
    rep.run(feed)

F = TensorProto.FLOAT
I64 = np.int64
'''

_BAD_DIMS = {"neg": [-2, 4], "minus1": [-1, 4], "huge": [2**62, 2**62]}
_DIM_OPS = {
    "Relu": "[(D, F)]",
    "Slice": "[(D, F)], consts={'s': np.array([0], I64), 'e': np.array([2], I64), "
             "'a': np.array([0], I64)}",
    "Reshape": "[(D, F)], consts={'shape': np.array([-1, 2], I64)}",
    "Flatten": "[(D, F)], {'axis': 1}",
    "Concat": "[(D, F), (D, F)], {'axis': 0}",
    "Gather": "[(D, F)], {'axis': 0}, {'i': np.array([0, 1], I64)}",
    "Pad": "[(D, F)], consts={'p': np.array([1, 1, 1, 1], I64)}",
    "Split": "[(D, F)], {'axis': 0}, {'s': np.array([1, 1], I64)}, n_out=2",
    "MatMul": "[(D, F), ([4, 3], F)]",
    "ReduceSum": "[(D, F)], {'keepdims': 1}, {'a': np.array([0], I64)}",
    "Expand": "[(D, F)], consts={'s': np.array([3, 1, 4], I64)}",
}
ONNX_CASES = {f"dims/{op}/{dn}": f"D = {d!r}\nrun(model({op!r}, {args}))"
              for op, args in _DIM_OPS.items() for dn, d in _BAD_DIMS.items()}
ONNX_CASES.update({
    "dims/value_info": "m = model('Relu', [([2], F)]); "
                       "m.graph.value_info.append(helper.make_tensor_value_info('y0', F, [-3])); "
                       "run(m)",
    "dims/output": "m = model('Relu', [([2], F)]); "
                   "m.graph.output[0].CopyFrom(helper.make_tensor_value_info('y0', F, [-3])); run(m)",
    "dims/initializer": "m = model('Relu', []); t = m.graph.initializer.add(); t.name = 'w'; "
                        "t.data_type = F; t.dims.extend([-3]); m.graph.node[0].input[:] = ['w']; "
                        "run(m)",
    "dims/initializer-huge": "m = model('Relu', []); t = m.graph.initializer.add(); t.name = 'w'; "
                             "t.data_type = F; t.dims.extend([2**40]); "
                             "m.graph.node[0].input[:] = ['w']; run(m)",
    "attr/Transpose-perm-dup": "run(model('Transpose', [([2, 3], F)], {'perm': [0, 0]}))",
    "attr/Transpose-perm-big": "run(model('Transpose', [([2, 3], F)], {'perm': [0, 5]}))",
    "attr/Transpose-perm-neg": "run(model('Transpose', [([2, 3], F)], {'perm': [-1, 0]}))",
    "attr/Softmax-axis": "run(model('Softmax', [([2, 3], F)], {'axis': 2**40}))",
    "attr/Flatten-axis": "run(model('Flatten', [([2, 3], F)], {'axis': 100}))",
    "attr/Concat-axis": "run(model('Concat', [([2, 3], F), ([2, 3], F)], {'axis': -100}))",
    "attr/Conv-neg-kernel": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], "
                            "{'kernel_shape': [-3, 3]}))",
    "attr/Conv-zero-stride": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], "
                             "{'strides': [0, 0]}))",
    "attr/Conv-neg-pads": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], "
                          "{'pads': [-5, -5, -5, -5]}))",
    "attr/Conv-huge-pads": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], "
                           "{'pads': [2**40] * 4}))",
    "attr/Conv-group-0": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], {'group': 0}))",
    "attr/Conv-dilation-neg": "run(model('Conv', [([1, 1, 5, 5], F), ([1, 1, 3, 3], F)], "
                              "{'dilations': [-1, -1]}))",
    "attr/MaxPool-kernel-0": "run(model('MaxPool', [([1, 1, 5, 5], F)], {'kernel_shape': [0, 0]}))",
    "attr/MaxPool-kernel-huge": "run(model('MaxPool', [([1, 1, 5, 5], F)], "
                                "{'kernel_shape': [2**40, 2**40]}))",
    "attr/MaxPool-stride-neg": "run(model('MaxPool', [([1, 1, 5, 5], F)], "
                               "{'kernel_shape': [2, 2], 'strides': [-1, -1]}))",
    "attr/AveragePool-pads-neg": "run(model('AveragePool', [([1, 1, 5, 5], F)], "
                                 "{'kernel_shape': [2, 2], 'pads': [-9, -9, -9, -9]}))",
    "attr/LRN-size-neg": "run(model('LRN', [([1, 2, 3, 3], F)], {'size': -1}))",
    "attr/LRN-size-0": "run(model('LRN', [([1, 2, 3, 3], F)], {'size': 0}))",
    "attr/Cast-to-999": "run(model('Cast', [([2], F)], {'to': 999}))",
    "attr/DepthToSpace-0": "run(model('DepthToSpace', [([1, 4, 2, 2], F)], {'blocksize': 0}))",
    "attr/SpaceToDepth-neg": "run(model('SpaceToDepth', [([1, 1, 4, 4], F)], {'blocksize': -2}))",
    "const/Gather-index": "run(model('Gather', [([2, 3], F)], {'axis': 0}, "
                          "{'i': np.array([2**40], I64)}))",
    "const/Slice-step-0": "run(model('Slice', [([4, 4], F)], consts={'s': np.array([0], I64), "
                          "'e': np.array([2], I64), 'a': np.array([0], I64), "
                          "'st': np.array([0], I64)}))",
    "const/Slice-axis": "run(model('Slice', [([4, 4], F)], consts={'s': np.array([0], I64), "
                        "'e': np.array([2], I64), 'a': np.array([2**40], I64)}))",
    "const/Slice-extremes": "run(model('Slice', [([4, 4], F)], consts={'s': np.array([-2**63], I64), "
                            "'e': np.array([2**63 - 1], I64), 'a': np.array([0], I64), "
                            "'st': np.array([-2**63], I64)}))",
    "const/Reshape-neg": "run(model('Reshape', [([4, 4], F)], consts={'s': np.array([-5, 4], I64)}))",
    "const/Reshape-huge": "run(model('Reshape', [([4, 4], F)], "
                          "consts={'s': np.array([2**62, 2**62], I64)}))",
    "const/Tile-neg": "run(model('Tile', [([2, 2], F)], consts={'r': np.array([-1, 2], I64)}))",
    "const/Tile-huge": "run(model('Tile', [([2, 2], F)], consts={'r': np.array([2**40, 2**40], I64)}))",
    "const/Expand-neg": "run(model('Expand', [([2, 1], F)], consts={'s': np.array([-3, 4], I64)}))",
    "const/Expand-huge": "run(model('Expand', [([2, 1], F)], consts={'s': np.array([2**62, 4], I64)}))",
    "const/ConstantOfShape-neg": "run(model('ConstantOfShape', [], consts={'s': np.array([-3, 4], I64)}))",
    "const/ConstantOfShape-huge": "run(model('ConstantOfShape', [], "
                                  "consts={'s': np.array([2**62, 4], I64)}))",
    "const/Pad-huge": "run(model('Pad', [([2, 2], F)], consts={'p': np.array([2**40, 0, 0, 0], I64)}))",
    "const/Split-neg": "run(model('Split', [([4, 2], F)], {'axis': 0}, "
                       "{'s': np.array([-1, 5], I64)}, n_out=2))",
    "const/OneHot-neg-depth": "run(model('OneHot', [([3], F)], consts={'d': np.array([-5], I64), "
                              "'v': np.array([0.0, 1.0], np.float32)}))",
    "const/Range-delta-0": "run(model('Range', [], consts={'a': np.array(0.0, np.float32), "
                           "'b': np.array(1.0, np.float32), 'c': np.array(0.0, np.float32)}))",
    "const/Range-huge": "run(model('Range', [], consts={'a': np.array(0.0, np.float32), "
                        "'b': np.array(1e12, np.float32), 'c': np.array(1.0, np.float32)}))",
})
# Every declared negative dimension is refused before shape inference.
ONNX_EXPECT = {name: "ValueError" for name in ONNX_CASES
               if name.startswith("dims/") and not name.endswith(("/huge", "initializer-huge"))}


def _random_onnx_cases(seed, per_op):
    """Nodes of every imported operator with random (often absurd) shapes,
    integer constants and attribute values, built from the operators' ONNX
    schemas. Models onnx's checker rejects are skipped in the child."""
    import random

    import onnx.defs
    from singa._onnx import importer  # noqa: F401  (registers the operators)
    from singa._onnx.registry import OPS

    rng = random.Random(seed)
    ints = [-2**63, -2**31, -100, -3, -1, 0, 1, 2, 3, 100, 2**31, 2**62]
    small = [-3, -2, -1, 0, 1, 2, 3]
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    cases = {}
    for name in sorted(OPS):
        try:
            schema = onnx.defs.get_schema(name, 17, "")
        except Exception:
            continue
        for k in range(per_op):
            shape = [rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.choice([0, 1, 2, 3, 4]))]
            inputs, consts = [], {}
            for i, formal in enumerate(schema.inputs):
                if formal.option == optional and rng.random() < 0.4:
                    break
                if i > 0 and rng.random() < 0.6 and any("int64" in t for t in formal.types):
                    vals = [rng.choice(ints if rng.random() < 0.5 else small)
                            for _ in range(rng.choice([0, 1, 2, 4]))]
                    consts[f"c{i}"] = vals
                    continue
                if consts:  # graph inputs come first on the node
                    break
                s = shape if rng.random() < 0.7 else [rng.choice([0, 1, 2, 3])
                                                      for _ in range(rng.choice([0, 1, 2, 3]))]
                elem = 1 if any("(float)" in t for t in formal.types) else 7
                inputs.append((s, elem))
            attrs = {}
            for an, a in schema.attributes.items():
                if rng.random() < 0.5:
                    continue
                if a.type == onnx.AttributeProto.INT:
                    attrs[an] = rng.choice(ints + small)
                elif a.type == onnx.AttributeProto.INTS:
                    attrs[an] = [rng.choice(ints + small * 2) for _ in range(rng.choice([1, 2, 4]))]
                elif a.type == onnx.AttributeProto.FLOAT:
                    attrs[an] = rng.choice([-1e30, -1.0, 0.0, 0.5, 1e30])
                elif a.type == onnx.AttributeProto.STRING:
                    attrs[an] = rng.choice(["", "xyz", "NOTSET", "SAME_UPPER", "VALID", "reflect"])
            n_out = max(1, sum(o.option != optional for o in schema.outputs))
            consts_src = "{" + ", ".join(f"{c!r}: np.array({v!r}, I64)"
                                         for c, v in consts.items()) + "}"
            cases[f"random/{name}/{seed}.{k}"] = (
                f"run(model({name!r}, {inputs!r}, {attrs!r}, {consts_src}, {n_out}), "
                "check_first=True)")
    return cases


def test_onnx_models_with_bad_dims_and_attributes():
    check(ONNX_CASES, ONNX_EXPECT, prelude=ONNX_PRELUDE)


@pytest.mark.parametrize("seed", [0, 1])
def test_onnx_random_nodes(seed):
    check(_random_onnx_cases(seed, 3), prelude=ONNX_PRELUDE)


# ---- checkpoints with bad headers ----

CKPT_PRELUDE = crashguard.PRELUDE + '''
import io, json, os, struct, tempfile, tracemalloc, zipfile

DIR = tempfile.mkdtemp()


def npy(arr=None, header=None, data=b""):
    """.npy bytes: a real array, or a hand-written header dict and data."""
    if arr is not None:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.asarray(arr))
        return buf.getvalue()
    text = repr(header).encode("latin1")
    text += b" " * (-(len(text) + 11) % 64) + b"\\n"
    return b"\\x93NUMPY\\x01\\x00" + struct.pack("<H", len(text)) + text + data


def archive(members, meta, name="ck.zip"):
    """A checkpoint-shaped zip: members {name: bytes} and meta.json."""
    path = os.path.join(DIR, name)
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
        zf.writestr("meta.json", meta if isinstance(meta, (bytes, str)) else json.dumps(meta))
    return path


def index(shape, dtype="float32"):
    return {"format": "singa-checkpoint", "version": 1, "meta": None,
            "arrays": {"w": {"file": "a0.npy", "shape": shape, "dtype": dtype}}}


def load_small(path, limit=16 << 20):
    """checkpoint.load, failing if it takes more than limit bytes."""
    tracemalloc.start()
    try:
        checkpoint.load(path)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < limit, f"load took {peak} bytes"


def good():
    path = os.path.join(DIR, "good.zip")
    checkpoint.save(path, {"w": np.arange(64, dtype=np.float32).reshape(8, 8)}, {"e": 1})
    return path
'''

_HDR = "{'descr': '<f4', 'fortran_order': False, 'shape': %s}"
CKPT = {
    "header/2**40-elements": "load_small(archive({'a0.npy': npy(header=%s, data=b'x' * 64)}, "
                             "index([2**40])))" % (_HDR % "(2**40,)"),
    "header/256MB-in-256KB": "load_small(archive({'a0.npy': npy(header=%s, data=bytes(256 << 10))}, "
                             "index([64 << 20])))" % (_HDR % "(64 << 20,)"),
    "header/index-disagrees": "load_small(archive({'a0.npy': npy(np.zeros(4, np.float32))}, "
                              "index([2**40])))",
    "header/short-data": "load_small(archive({'a0.npy': npy(header=%s, data=bytes(12))}, "
                         "index([4])))" % (_HDR % "(4,)"),
    "header/long-data": "load_small(archive({'a0.npy': npy(header=%s, data=bytes(20))}, "
                        "index([4])))" % (_HDR % "(4,)"),
    "header/negative-shape": "load_small(archive({'a0.npy': npy(header=%s)}, index([-4])))"
                             % (_HDR % "(-4,)"),
    "header/object-dtype": "load_small(archive({'a0.npy': npy(header={'descr': '|O', "
                           "'fortran_order': False, 'shape': (1,)}, data=b'x' * 8)}, "
                           "index([1], 'object')))",
    "header/garbage": "load_small(archive({'a0.npy': b'\\x93NUMPY\\x01\\x00\\x10\\x00{not python}  \\n'}, "
                      "index([1])))",
    "header/version-9": "load_small(archive({'a0.npy': b'\\x93NUMPY\\x09\\x00' + bytes(64)}, "
                        "index([1])))",
    "header/fortran": "p = archive({'a0.npy': npy(np.asfortranarray(np.arange(6, dtype=np.float32)"
                      ".reshape(2, 3)))}, index([2, 3])); a, _ = checkpoint.load(p); "
                      "assert (a['w'] == np.arange(6).reshape(2, 3)).all()",
    "index/missing-member": "load_small(archive({}, index([1])))",
    "index/file-not-str": "d = index([1]); d['arrays']['w']['file'] = [1]; "
                          "load_small(archive({}, d))",
    "index/entry-not-dict": "d = index([1]); d['arrays']['w'] = 5; load_small(archive({}, d))",
    "meta/not-json": "load_small(archive({}, b'{'))",
    "meta/not-utf8": "load_small(archive({}, b'\\xff\\xfe'))",
    "meta/huge": "load_small(archive({}, b' ' * (65 << 20) + b'{}'), limit=300 << 20)",
    "meta/missing": "p = os.path.join(DIR, 'x.zip'); zipfile.ZipFile(p, 'w').close(); load_small(p)",
    "zip/size-claims": """
p = good()
raw = bytearray(open(p, 'rb').read())
# Central directory entries: claim 2**31 bytes for every member.
i = raw.find(b'PK\\x01\\x02')
while i >= 0:
    raw[i + 20:i + 28] = struct.pack('<II', 2**31, 2**31)
    i = raw.find(b'PK\\x01\\x02', i + 4)
open(p, 'wb').write(raw)
load_small(p)
""",
    "zip/not-a-zip": "p = os.path.join(DIR, 'n.zip'); open(p, 'wb').write(b'hello'); load_small(p)",
    "zip/bare-npy": "p = os.path.join(DIR, 'a.npy'); np.save(p, np.zeros(3)); load_small(p)",
    "zip/directory": "load_small(DIR)",
    "zip/missing": "load_small(os.path.join(DIR, 'nope.zip'))",
}
for _cut in (10, 100, 200, 400, 600):
    CKPT[f"zip/truncated-{_cut}"] = (f"p = good(); raw = open(p, 'rb').read(); "
                                     f"open(p, 'wb').write(raw[:{_cut}]); load_small(p)")
for _seed in range(12):
    CKPT[f"zip/flipped-{_seed}"] = (
        f"p = good(); raw = bytearray(open(p, 'rb').read()); r = np.random.default_rng({_seed}); "
        f"pos = r.integers(0, len(raw), 3); raw[pos] ^= 0xFF; open(p, 'wb').write(raw); "
        "load_small(p)")
CKPT_EXPECT = {name: "ValueError" for name in CKPT if not name.startswith("zip/flipped")}
CKPT_EXPECT.update({"header/fortran": "ok", "zip/missing": "FileNotFoundError"})


def test_checkpoints_with_bad_headers():
    check(CKPT, CKPT_EXPECT, prelude=CKPT_PRELUDE)
