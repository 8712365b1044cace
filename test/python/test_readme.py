"""The README's Python examples run as written."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if ">>>" not in b]


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_example_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_blocks()[index], f"README block {index}", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip()


def test_readme_error_example_is_true():
    from singa import tensor
    with pytest.raises(ValueError, match=r"Add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        tensor.Tensor((2, 3)) + tensor.Tensor((4,))
