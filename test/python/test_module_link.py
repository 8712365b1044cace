"""How the module is linked against the C++ runtime. A toolchain that links
libstdc++ statically puts a second copy of it in the module; once another
library loads the shared libstdc++.so.6 (PyTorch, cuBLAS, NCCL), iostreams
in the module must still use only their own copy, or formatting a number in
an error message breaks (CMakeLists.txt keeps such a copy local)."""

import os
import shutil
import subprocess
import sys

import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__import__("singa").__file__)))


def _module_path():
    from singa import _singa_wrap
    return _singa_wrap.__file__


def _defined(args):
    out = subprocess.run(["nm", "-C", "--defined-only", *args, _module_path()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if "std::locale::id" in line]


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_static_libstdcxx_stays_local():
    if not _defined([]):
        pytest.skip("libstdc++ is linked dynamically: no copy inside the module")
    exported = _defined(["-D"])
    assert not exported, f"the module exports its own libstdc++ symbols: {exported[:5]}"


def test_error_messages_format_numbers_after_torch(torch):
    code = (
        "import torch, numpy as np\n"
        "from singa import autograd as ag, tensor\n"
        "x = tensor.from_numpy(np.ones((0, 1, 3, 3), np.float32))\n"
        "w = tensor.from_numpy(np.ones((1, 1, 1, 1), np.float32))\n"
        "try:\n"
        "    ag.conv2d(x, w)\n"
        "except ValueError as e:\n"
        "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[0, 1, 3, 3]" in proc.stdout and "[1, 1, 1, 1]" in proc.stdout, proc.stdout
