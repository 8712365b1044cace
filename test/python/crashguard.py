"""Runs code snippets in child processes so that a crash cannot take pytest
down, and says which snippet crashed.

``run_cases({name: source})`` executes every snippet in a fresh namespace
(after ``PRELUDE``) inside one child interpreter, one after another. The child
reports each snippet's start and outcome on stdout; when the child dies (a
segfault, an abort, a hang past the timeout), the snippet that had started
but not finished is recorded as the crash and a new child carries on with
the next one. Each snippet gets (outcome, kind, detail): outcome is "ok",
the name of the exception it raised, or "crash: ..." for the one that
killed its child; kind is "ok", "crash", the documented built-in exception
the raised one derives from, or "undocumented".
"""

import json
import os
import subprocess
import sys


# Everything a snippet may use without importing it.
PRELUDE = """
import numpy as np
import singa
from singa import singa_wrap as w, tensor, autograd, device, layer, checkpoint
"""

_CHILD = r"""
import json, resource, sys
limit = MEM_LIMIT
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
cases = json.loads(sys.stdin.read())
# Most specific first: NotImplementedError is a RuntimeError.
DOCUMENTED = (FileNotFoundError, NotImplementedError, MemoryError, IndexError, TypeError,
              ValueError, RuntimeError)
exec(compile(PRELUDE_SRC, "<prelude>", "exec"), base := {})
for name, src in cases:
    print("START " + json.dumps(name), flush=True)
    ns = dict(base)
    try:
        exec(compile(src, name, "exec"), ns)
        outcome = kind = "ok"
        detail = ""
    except BaseException as e:
        outcome = type(e).__name__
        kind = next((c.__name__ for c in DOCUMENTED if isinstance(e, c)), "undocumented")
        detail = str(e).splitlines()[0][:300] if str(e) else ""
    print("DONE " + json.dumps([name, outcome, kind, detail]), flush=True)
"""


def _env(extra=None):
    env = dict(os.environ)
    env.update(extra or {})
    # The children import the same singa as this process: the installed
    # package, or the tree's python/ when PYTHONPATH points there.
    import singa
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(singa.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_parent, env.get("PYTHONPATH")]))
    # Bounded threads keep every child cheap on a shared CI machine.
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


# Address space of a child: a snippet that asks for a huge allocation gets
# MemoryError instead of pressing on the machine. SINGA_CRASHGUARD_MEM
# overrides it in bytes (0 for none, e.g. under AddressSanitizer).
MEM_LIMIT = int(os.environ.get("SINGA_CRASHGUARD_MEM", 3 << 30))


def run_cases(cases, timeout=120, prelude=PRELUDE, env=None):
    """{name: source} -> {name: (outcome, kind, detail)}, each snippet run
    once; env adds variables to the children's environment."""
    todo = list(cases.items())
    results = {}
    child = _CHILD.replace("PRELUDE_SRC", repr(prelude)).replace("MEM_LIMIT", str(MEM_LIMIT))
    while todo:
        proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(env))
        try:
            out, err = proc.communicate(json.dumps(todo), timeout=timeout)
            status = f"exit status {proc.returncode}"
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            status = f"no answer within {timeout} s"
        started = None
        for line in out.splitlines():
            if line.startswith("START "):
                started = json.loads(line[6:])
            elif line.startswith("DONE "):
                name, outcome, kind, detail = json.loads(line[5:])
                results[name] = (outcome, kind, detail)
                started = None
        done = {n for n, _ in todo if n in results}
        if started is None and len(done) < len(todo):
            # The child failed before its first snippet (e.g. the prelude).
            raise RuntimeError(f"child ended ({status}) before running a snippet:\n"
                               f"{err[-3000:]}")
        if started is not None:
            last = err.strip().splitlines()
            results[started] = (f"crash: {status}", "crash", last[-1][:300] if last else "")
            done.add(started)
        todo = [(n, s) for n, s in todo if n not in done]
    return results
