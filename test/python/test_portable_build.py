"""The C++ core compiles without x86 vector intrinsics: every source file is
compiled (syntax only) for baseline x86-64 with an <immintrin.h> that
stops the compiler, which is what a non-x86 target would see."""

import glob
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "src", "core", "*", "*.cc")))


@pytest.mark.skipif(shutil.which("g++") is None or not SOURCES
                    or platform.machine() not in ("x86_64", "AMD64"),
                    reason="needs g++, the sources and an x86-64 host")
def test_core_compiles_without_intrinsics(tmp_path):
    scipy_openblas32 = pytest.importorskip("scipy_openblas32")
    (tmp_path / "immintrin.h").write_text('#error "<immintrin.h> outside an AVX-512 guard"\n')
    base = ["g++", "-std=c++17", "-fopenmp", "-fsyntax-only", "-march=x86-64",
            f"-I{tmp_path}", f"-I{os.path.join(ROOT, 'include')}",
            f"-I{scipy_openblas32.get_include_dir()}"]
    failed = []
    for src in SOURCES:
        proc = subprocess.run(base + [src], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            failed.append(f"{os.path.relpath(src, ROOT)}:\n{proc.stderr[-1500:]}")
    assert not failed, "\n".join(failed)
