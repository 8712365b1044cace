"""Every module of the package can be imported first, in a fresh
interpreter, and gives the same API as in any other order.

For each module M a subprocess imports M alone and records M's namespace,
then imports every other module and records all namespaces. Both must match
a reference process that imports the modules in sorted order. A namespace
is recorded as {name: type name}, so a function replaced by a submodule of
the same name (or a missing operator) shows up.
"""

import concurrent.futures
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import singa

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
MODULES = sorted(m.name for m in pkgutil.walk_packages(singa.__path__, "singa."))
if not HAVE_ONNX:
    MODULES = [m for m in MODULES if not m.startswith(("singa._onnx", "singa.sonnx"))]
SNAPSHOT = r"""
import importlib, json, sys, types

def names(m, own_only=False):
    out = {}
    for n in dir(m):
        v = getattr(m, n)
        # a package's attributes include the submodules imported so far
        if own_only and isinstance(v, types.ModuleType) and v.__name__ == m.__name__ + "." + n:
            continue
        out[n] = type(v).__name__
    return out

first, modules = sys.argv[1], sys.argv[2:]
own = names(importlib.import_module(first), own_only=True) if first != "-" else None
for m in modules:
    importlib.import_module(m)
print(json.dumps({"own": own, "all": {m: names(sys.modules[m]) for m in modules}}))
"""


def _run(first):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(singa.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, "-c", SNAPSHOT, first] + MODULES,
                          capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def snapshots():
    """Runs the reference and every import-first process, four at a time."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = dict(zip(["-"] + MODULES, pool.map(_run, ["-"] + MODULES)))
    ref = runs.pop("-")
    assert "error" not in ref, ref.get("error")
    own_ref = {}
    for m in MODULES:
        names = ref["all"][m]
        sub = {n for n in names if f"{m}.{n}" in MODULES}
        own_ref[m] = {n: t for n, t in names.items() if not (n in sub and t == "module")}
    return ref, own_ref, runs


def test_every_module_is_listed():
    for m in ("singa.tensor", "singa.tensor_ops", "singa.autograd", "singa.ops.activation",
              "singa.layer", "singa.model", "singa.opt"):
        assert m in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_import_first(module, snapshots):
    ref, own_ref, runs = snapshots
    got = runs[module]
    assert "error" not in got, f"importing {module} first failed:\n{got.get('error')}"
    assert got["own"] == own_ref[module], f"{module} imported first differs on its own"
    for m in MODULES:
        assert got["all"][m] == ref["all"][m], f"{m} differs after importing {module} first"


def test_autograd_complete_after_ops_first(snapshots):
    _, _, runs = snapshots
    names = runs["singa.ops"]["all"]["singa.autograd"]
    for n in ("relu", "ReLU", "conv2d", "softmax_cross_entropy", "backward"):
        assert n in names


@pytest.mark.parametrize("module", ["singa.tensor", "singa.autograd"])
def test_star_import_shadows_no_builtin(module):
    import builtins
    mod = importlib.import_module(module)
    ns = {}
    exec(f"from {module} import *", ns)
    for n in ("abs", "round", "sum", "max", "min", "pow"):
        assert n not in ns and n not in mod.__all__
        assert callable(getattr(mod, n))   # still there as module attributes
    assert not set(ns) & set(dir(builtins)) - {"__builtins__"}
    assert "Tensor" in ns or "Operator" in ns


def test_shadowed_names_still_work():
    import numpy as np
    from singa import tensor
    t = tensor.from_numpy(np.array([[1.5, -2.5], [3.0, 0.5]], np.float32))
    assert float(tensor.sum(t)) == 2.5
    np.testing.assert_array_equal(tensor.max(t, axis=0).numpy(), [3.0, 0.5])
    np.testing.assert_array_equal(tensor.min(t, axis=1).numpy(), [-2.5, 0.5])
    np.testing.assert_array_equal(tensor.abs(t).numpy(), [[1.5, 2.5], [3.0, 0.5]])
    np.testing.assert_array_equal(tensor.round(t).numpy(), [[2.0, -3.0], [3.0, 1.0]])


@pytest.mark.skipif(not HAVE_ONNX, reason="needs onnx")
def test_onnx_op_table_complete_whichever_module_comes_first():
    code = ("import importlib, sys; importlib.import_module(sys.argv[1]); "
            "from singa._onnx.registry import OPS; print(len(OPS))")
    counts = {m: subprocess.run([sys.executable, "-c", code, m], capture_output=True,
                                text=True, timeout=300, check=True).stdout.strip()
              for m in ("singa._onnx.registry", "singa._onnx.ops_nn", "singa.sonnx")}
    assert len(set(counts.values())) == 1 and int(counts["singa.sonnx"]) > 100, counts
