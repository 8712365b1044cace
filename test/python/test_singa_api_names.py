"""Every public name of SINGA's Python package and of its singa_wrap module,
as listed in SINGA_API.md (kept in test/python/data, generated from SINGA's
sources), exists in singa; for the Python modules, each function's and
method's parameters have SINGA's names, order and defaults.

The few names singa leaves out on purpose are in ABSENT below, each with
the reason; a name listed there that singa has grown raises, so the list
stays true.
"""

import ast
import enum
import inspect
import pathlib
import re
from typing import NamedTuple, Optional

import numpy as np
import pytest

import singa
from singa import singa_wrap as sw

API_MD = pathlib.Path(__file__).resolve().parent / "data" / "SINGA_API.md"


class Entry(NamedTuple):
    module: str            # "tensor", "autograd", ..., or "singa_wrap"
    cls: Optional[str]     # the class a method belongs to
    name: str
    params: Optional[str]  # SINGA's parameter list as written, None for plain names
    kind: str              # "name", "class", "function", "method"
    decorator: str = ""    # classmethod / staticmethod / deprecated, for methods
    section: str = ""      # the .i file, for singa_wrap
    base: str = ""         # a class's base class, as written


_DECORATOR = re.compile(r"^@(\w+)(?:\((?:reason=)?'[^']*'\))?\s+")
_CALL = re.compile(r"^([A-Za-z_]\w*)\((.*)\)$")
_WRAP_ALIAS = re.compile(r"^([A-Za-z_]\w*) \((?:template|rename) of .*\)$")


def _strip_decorators(text):
    decorators = []
    while True:
        m = _DECORATOR.match(text)
        if not m:
            return text, decorators
        decorators.append(m.group(1))
        text = text[m.end():]


def parse_api(text):
    """Parses SINGA_API.md into Entries (one per name, class or method)."""
    entries = []
    module = section = cls = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].split()[0]
            module = title[len("singa."):] if title.startswith("singa.") else title
            section = cls = None
            continue
        if line.startswith("### "):
            section, cls = line[4:].strip(), None
            continue
        if module is None:
            continue
        if line.startswith("Module names: "):
            for name in line[len("Module names: "):].split(","):
                entries.append(Entry(module, None, name.strip(), None, "name"))
            continue
        m = re.match(r"^(\s*)- (class |flag )?`(.*)`$", line)
        if not m:
            continue
        indent, prefix, body = m.group(1), m.group(2), m.group(3)
        if module == "singa_wrap":
            # here the words "class" and "flag" are inside the backquotes
            word = re.match(r"^(class |flag )(\w+)$", body)
            if word:
                prefix, body = word.groups()
            entries.extend(_parse_wrap(prefix, body, section, cls))
            if prefix == "class ":
                cls = body
            continue
        if prefix == "class ":
            cls, _, base = body.rstrip(")").partition("(")
            entries.append(Entry(module, None, cls, None, "class", base=base))
            continue
        body, decorators = _strip_decorators(body)
        call = _CALL.match(body)
        assert call, f"SINGA_API.md: cannot read {line!r}"
        name, params = call.groups()
        if indent:
            entries.append(Entry(module, cls, name, params, "method",
                                 next((d for d in decorators if d != "deprecated"), "")))
        else:
            cls = None
            entries.append(Entry(module, None, name, params, "function"))
    return entries


def _parse_wrap(prefix, body, section, cls):
    if prefix == "class ":
        return [Entry("singa_wrap", None, body.split()[0], None, "class", section=section)]
    if prefix == "flag ":
        return [Entry("singa_wrap", None, body, None, "name", section=section)]
    alias = _WRAP_ALIAS.match(body)
    if alias:
        name = alias.group(1)
    else:
        call = _CALL.match(body)
        assert call, f"SINGA_API.md: cannot read singa_wrap entry {body!r}"
        name = call.group(1)
    if name == cls or name == "import_array":
        # a constructor (its class is checked), or SWIG's NumPy set-up call
        return []
    return [Entry("singa_wrap", cls, name, None, "name", section=section)]


ENTRIES = parse_api(API_MD.read_text())
MODULES = sorted({e.module for e in ENTRIES})

# Names of SINGA_API.md that singa leaves out, and why. Keys are
# (module, class or None, name). A name listed here that singa has grown
# fails the test, so the list stays true.
_TEMPLATE = ("a C++ template's own name: SWIG exposes only its %template instances "
             "(GetFloatValue, GetIntValue, GetHalfFloatValue), so SINGA's module has no "
             "such attribute either")
ABSENT = {
    ("singa_wrap", "Tensor", "get_value"): _TEMPLATE,
    ("singa_wrap", "Tensor", "GetValue"): _TEMPLATE,
}

# Names that exist on some builds only, or come with a part of issue 8
# another branch implements; absent is fine, present is checked as usual.
_GPU = "needs CUDA/cuDNN: present on a CUDA build (singa_wrap.USE_CUDA) only"
_NCCL = "the NCCL communicator: present on a build with CUDA and NCCL only"
_GRAPH = ("graph mode (Device.EnableGraph, RunGraph, ...) is the graph branch's part "
          "(doc/compat.md, COMPAT.md); drop these when it lands")
OPTIONAL = {}
for _e in ENTRIES:
    if _e.module != "singa_wrap":
        continue
    if _e.section == "model_operation.i" and re.match(r"^(Gpu|Cudnn)", _e.cls or _e.name):
        OPTIONAL[(_e.module, _e.cls, _e.name)] = _GPU
    elif _e.section == "dist_communicator.i":
        OPTIONAL[(_e.module, _e.cls, _e.name)] = _NCCL
    elif _e.cls == "Device" and _e.name in ("ResetGraph", "RunGraph", "graph_enabled",
                                            "EnableGraph", "PrintTimeProfiling",
                                            "SetVerbosity", "SetSkipIteration"):
        OPTIONAL[(_e.module, _e.cls, _e.name)] = _GRAPH

# Functions whose parameters deliberately differ from SINGA's, and why.
_GENERATED = ("the operators generated from the op table (singa.opdefs) name forward's "
              "inputs x (unary) or a, b (binary); Operator.__call__ passes them "
              "positionally, and the functions carry SINGA's names (autograd.less(x, y), "
              "autograd.abs(a))")
PARAMS_DIFFER = {
    ("tensor", "Tensor", "T"): "t.T is a property (a transposed view, PyTorch's habit) "
                               "whose value is callable, so SINGA's t.T() works too "
                               "(test_compat_tensor)",
    ("tensor", None, "add_column"): "one function takes SINGA's (alpha, v, beta, M) and "
                                    "the short (v, M), positionally (*args)",
    ("tensor", None, "add_row"): "as add_column",
    ("layer", "BatchNorm2d", "__init__"): "SINGA's *args are (channels[, momentum]); "
                                          "singa names them: (num_features=None, "
                                          "momentum=0.9, epsilon=1e-5), so every SINGA "
                                          "call form works",
    ("sonnx", "SingaRep", "__init__"): "a SingaRep is made by prepare(model, device) from "
                                       "the ONNX model; SINGA's (params, inputs, outputs, "
                                       "layers, device) are its importer's internals "
                                       "(layers are SINGA layer objects), which no script "
                                       "passes",
}
for _op in ("Less", "Greater", "Equal", "Abs", "Exp", "Sign"):
    PARAMS_DIFFER[("autograd", _op, "forward")] = _GENERATED


def _key(e):
    return (e.module, e.cls, e.name)


def _module(name):
    if name == "singa_wrap":
        return sw
    return __import__(f"singa.{name}", fromlist=[name])


def _lookup(e):
    """The object e names in singa, or raises AttributeError."""
    mod = _module(e.module)
    if e.cls is None:
        return getattr(mod, e.name)
    owner = getattr(mod, e.cls)
    if e.module == "singa_wrap":
        # SINGA's .i files list a class's methods and then free functions
        # without a closing marker: a name is found on the class or the module.
        obj = inspect.getattr_static(owner, e.name, None)
        inherited = e.name.startswith("__") and obj is getattr(object, e.name, None)
        if obj is not None and not inherited:
            return getattr(owner, e.name)
        return getattr(mod, e.name)
    return getattr(owner, e.name)


# ---- parameters ----

class _NonLiteral(enum.Enum):
    DTYPE = "float32"
    DEVICE = "the default device"
    ANY = "any"


def _expected_default(node):
    src = ast.unparse(node)
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if src in ("float32", "tensor.float32"):
        return _NonLiteral.DTYPE
    if src == "get_default_device()":
        return _NonLiteral.DEVICE
    return _NonLiteral.ANY      # _opset_version, SGD(): any default will do


def _same_default(expected, actual):
    if expected is _NonLiteral.ANY:
        return actual is not inspect.Parameter.empty
    if expected is _NonLiteral.DTYPE:
        from singa import tensor
        return actual == tensor.float32
    if expected is _NonLiteral.DEVICE:
        from singa import device
        return actual is None or actual is device.get_default_device()
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return tuple(expected) == tuple(actual)
    return type(expected) is not bool and expected == actual or expected is actual


def singa_params(params):
    """SINGA's parameters as inspect.Parameters (self/cls dropped)."""
    args = ast.parse(f"def f({params}): pass").body[0].args
    P = inspect.Parameter
    out = []
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(pos, defaults):
        out.append((a.arg, P.POSITIONAL_OR_KEYWORD, d))
    if args.vararg:
        out.append((args.vararg.arg, P.VAR_POSITIONAL, None))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append((a.arg, P.KEYWORD_ONLY, d))
    if args.kwarg:
        out.append((args.kwarg.arg, P.VAR_KEYWORD, None))
    if out and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def _signature(e, obj):
    if e.kind == "class":
        fn = obj.__init__
    else:
        fn = obj
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    owner = _module(e.module)
    static = None
    if e.kind == "method":
        static = inspect.getattr_static(getattr(owner, e.cls), e.name)
    bound_self = (e.kind == "class" or
                  (e.kind == "method" and not isinstance(static, (classmethod, staticmethod))))
    if bound_self and params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                                     params[0].POSITIONAL_OR_KEYWORD):
        params = params[1:]
    return params


def signature_problems(e, obj):
    """How singa's parameters differ from SINGA's for entry e (a list of strings)."""
    P = inspect.Parameter
    try:
        have = _signature(e, obj)
    except (TypeError, ValueError) as err:
        return [f"signature not inspectable ({err})"]
    expected = singa_params(e.params)
    if expected and all(p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in have) and \
            not all(k in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for _, k, _ in expected):
        # a pass-through wrapper hides the parameters; it must copy them
        # (functools.wraps) for a user's help() and this check to see them
        return ["takes only *args, **kwargs"]
    by_name = {p.name: p for p in have}
    var_pos = any(p.kind == P.VAR_POSITIONAL for p in have)
    var_kw = any(p.kind == P.VAR_KEYWORD for p in have)
    problems = []
    positional = [p for p in have if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    used = set()
    for i, (name, kind, default) in enumerate(expected):
        if kind == P.VAR_POSITIONAL:
            if not var_pos:
                problems.append(f"no *{name}")
            continue
        if kind == P.VAR_KEYWORD:
            if not var_kw:
                problems.append(f"no **{name}")
            continue
        p = by_name.get(name)
        if kind == P.POSITIONAL_OR_KEYWORD:
            if i < len(positional) and positional[i].name != name:
                problems.append(f"parameter {i} is {positional[i].name!r}, SINGA's is {name!r}")
                continue
            if p is None:
                if not (var_pos and var_kw):
                    problems.append(f"no parameter {name!r}")
                continue
        elif p is None:
            if not var_kw:
                problems.append(f"no keyword {name!r}")
            continue
        used.add(p.name)
        if default is not None:
            want = _expected_default(default)
            if not _same_default(want, p.default):
                got = "none" if p.default is P.empty else repr(p.default)
                problems.append(f"{name}: default {got}, SINGA's is {ast.unparse(default)}")
    for p in have:
        if p.name in used or p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        renamed = p in positional and positional.index(p) < len(expected)
        if p.default is P.empty and not renamed and p.name not in {n for n, _, _ in expected}:
            problems.append(f"extra required parameter {p.name!r}")
    return problems


# ---- the tests ----

def _label(e):
    return ".".join(x for x in (e.module, e.cls, e.name) if x)


def test_parser_reads_every_section():
    counts = {}
    for e in ENTRIES:
        counts[e.module] = counts.get(e.module, 0) + 1
    assert set(counts) == {"tensor", "device", "autograd", "layer", "model", "opt", "sonnx",
                           "initializer", "utils", "snapshot", "data", "singa_wrap"}
    # a few entries of each form, spelled out, so a parser slip cannot pass silently
    assert Entry("opt", "SGD", "__init__", "self, lr=0.1, momentum=0, dampening=0, "
                 "weight_decay=0, nesterov=False, dtype=tensor.float32", "method") in ENTRIES
    assert Entry("sonnx", "OnnxAttributes", "from_onnx", "args", "method",
                 "staticmethod") in ENTRIES
    assert Entry("tensor", "Tensor", "add_column", "self, v", "method") in ENTRIES
    assert Entry("autograd", None, "where", "x, y, condition", "function") in ENTRIES
    assert Entry("singa_wrap", "Tensor", "GetFloatValue", None, "name",
                 section="core_tensor.i") in ENTRIES
    assert Entry("singa_wrap", None, "SINGA_VERSION", None, "name",
                 section="config.i.in") in ENTRIES
    assert counts["autograd"] > 300 and counts["singa_wrap"] > 200


@pytest.mark.parametrize("module", MODULES)
def test_every_name_exists(module):
    missing = []
    for e in ENTRIES:
        if e.module != module:
            continue
        try:
            _lookup(e)
        except AttributeError:
            if _key(e) not in ABSENT and _key(e) not in OPTIONAL:
                missing.append(_label(e))
            continue
        if _key(e) in ABSENT:
            missing.append(f"{_label(e)} exists now: drop it from ABSENT")
    assert not missing, f"{len(missing)} names of SINGA_API.md:\n" + "\n".join(missing)


@pytest.mark.parametrize("module", [m for m in MODULES if m != "singa_wrap"])
def test_parameters_match(module):
    problems = []
    for e in ENTRIES:
        if e.module != module or e.params is None or _key(e) in PARAMS_DIFFER:
            continue
        try:
            obj = _lookup(e)
        except AttributeError:
            continue            # reported by test_every_name_exists
        for p in signature_problems(e, obj):
            problems.append(f"{_label(e)}: {p}")
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems)


def _base_class(e):
    """The class e's base names in singa (None for SINGA's `object`)."""
    if e.base in ("", "object"):
        return None
    if e.base in ("dict", "type"):
        return {"dict": dict, "type": type}[e.base]
    if e.base in ("Backend", "BackendRep"):
        import onnx.backend.base
        return getattr(onnx.backend.base, e.base)
    owner, _, name = e.base.rpartition(".")
    return getattr(_module(owner or e.module), name)


@pytest.mark.parametrize("module", [m for m in MODULES if m != "singa_wrap"])
def test_classes_and_decorators_match(module):
    """Classes derive from SINGA's base classes (a SINGA user's subclass of
    autograd.Operator or layer.Layer, and isinstance checks, rely on it), and
    SINGA's classmethods and staticmethods can be called on the class."""
    problems = []
    for e in ENTRIES:
        if e.module != module:
            continue
        try:
            obj = _lookup(e)
        except AttributeError:
            continue
        if e.kind == "class":
            base = _base_class(e)
            if not inspect.isclass(obj):
                problems.append(f"{_label(e)} is not a class")
            elif base is not None and not issubclass(obj, base):
                problems.append(f"{_label(e)} does not derive from {e.base}")
        elif e.decorator in ("classmethod", "staticmethod"):
            static = inspect.getattr_static(getattr(_module(module), e.cls), e.name)
            if not isinstance(static, (classmethod, staticmethod)):
                problems.append(f"{_label(e)} is not a {e.decorator}")
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems)


def test_allow_lists_name_entries_of_singa_api():
    keys = {_key(e) for e in ENTRIES}
    for k in list(ABSENT) + list(PARAMS_DIFFER):
        assert k in keys, k
    for k in PARAMS_DIFFER:
        e = next(e for e in ENTRIES if _key(e) == k)
        assert e.params is not None, k
        if k == ("tensor", "Tensor", "T"):
            continue
        assert signature_problems(e, _lookup(e)), f"{k} matches SINGA now: drop it"


def test_signature_check_finds_differences():
    def f(t, axis=None, out=None):
        pass

    def renamed(x, axis=None):
        pass

    def other_default(t, axis=0, out=None, extra=1):
        pass

    def needs_more(t, extra, axis=None):
        pass

    def opaque(*args, **kwargs):
        pass

    e = Entry("tensor", None, "sum", "t, axis=None, out=None", "function")
    assert signature_problems(e, f) == []
    assert signature_problems(e, opaque) == ["takes only *args, **kwargs"]
    assert signature_problems(e, renamed) == ["parameter 0 is 'x', SINGA's is 't'",
                                              "no parameter 'out'"]
    assert signature_problems(e, other_default) == ["axis: default 0, SINGA's is None"]
    assert signature_problems(e, needs_more) == ["parameter 1 is 'extra', SINGA's is 'axis'",
                                                 "parameter 2 is 'axis', SINGA's is 'out'"]
    kw = Entry("opt", "SGD", "__init__", "self, lr=0.1, dtype=tensor.float32", "method")

    class SGD:
        def __init__(self, lr=0.1, dtype=None):
            pass
    assert signature_problems(kw, SGD.__init__) == ["dtype: default None, SINGA's is "
                                                    "tensor.float32"]


def test_renamed_parameters_work_as_keywords(rng):
    # the parameters this check made singa rename, called by SINGA's names
    from singa import device, tensor
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
    ta, tb = tensor.from_numpy(a), tensor.from_numpy(b)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_raw_tensor(t=ta.data)), a)
    assert [tensor.to_numpy(t).shape for t in tensor.from_raw_tensors(tt=[ta.data])] == [(2, 3)]
    np.testing.assert_array_equal(tensor.to_numpy(tensor.reshape(tensor=ta, shape=(3, 2))),
                                  a.reshape(3, 2))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.contiguous(tensor=ta.T())), a.T)
    for name, ref in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal)):
        got = tensor.to_numpy(getattr(tensor, name)(t=ta, x=0.25))
        np.testing.assert_array_equal(got, ref(a, np.float32(0.25)).astype(np.float32), name)
    out = tensor.from_numpy(np.zeros((2, 3), np.float32))
    assert tensor.pow(t=tb, x=ta, out=out) is out
    np.testing.assert_allclose(tensor.to_numpy(out), b ** a, rtol=1e-5)
    assert tensor.to_numpy(ta.__getitem__(keys=(0, slice(1, 3)))).shape == (1, 2)
    if device.get_num_gpus() == 0:
        with pytest.raises(RuntimeError):
            device.get_gpu_mem_size(id=0)
        with pytest.raises(RuntimeError):
            device.device_query(id=0)
