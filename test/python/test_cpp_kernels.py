"""Builds and runs the standalone C++ test of the conv, pooling and batch-norm
kernels (test/cpp/test_nn_*.cc), which checks them against direct
double-precision loops and finite differences."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "test", "cpp", "build_nn_test.sh")


@pytest.mark.skipif(shutil.which("g++") is None or not os.path.exists(SCRIPT),
                    reason="needs g++ and the source tree")
def test_nn_kernels_cpp(tmp_path):
    # The interpreter running the tests, not whichever python3 is on the PATH.
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", SCRIPT, str(tmp_path / "test_nn_kernels")],
                          capture_output=True, text=True, timeout=600, env=env)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    assert " 0 failed" in proc.stdout, tail
