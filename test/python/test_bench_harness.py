"""The comparison statistics of bench/_harness.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import _harness  # noqa: E402


def samples(values):
    s = _harness.Samples()
    for v in values:
        s.add({"ms": v})
    return s


def test_paired_and_best_ratios():
    # round by round 1/4, 5/2, 9/6: median 1.5; fastest rounds 1 and 2
    a, b = samples([1.0, 5.0, 9.0]), samples([4.0, 2.0, 6.0])
    paired, best = _harness.ratios(a, b, "ms")
    assert paired == pytest.approx(1.5)
    assert best == pytest.approx(0.5)
    # unlike the ratio of the medians, 5 / 4
    assert a.median("ms") / b.median("ms") == pytest.approx(1.25)
    paired, _ = _harness.ratios(samples([1.0, 10.0]), samples([2.0, 10.0]), "ms")
    assert paired == pytest.approx(0.75)


def test_graph_inference_side_matches_eager():
    # bench/conv.py times ResNet-18 inference as a Model in graph mode; the
    # side compares the last replay's output with an eager forward and raises
    # when they differ
    import conv
    res = conv.singa_infer(1, batch=2, iters=2, graph=True)
    assert res["max_diff"] <= 1e-5
    assert res["ms"] > 0
