"""Runs test_onnx_backend.py and reports what it covers.

    PYTHONPATH=python python test/python/onnx_backend_report.py [pytest args]

Prints the node tests selected (included and not excluded, CPU), passed,
failed and skipped, and the distinct ONNX operators appearing in the
passing tests' graphs. Exits non-zero when a test fails or nothing runs.
"""

import os
import sys
import warnings

import pytest


class _Collector:
    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.skipped):
            name = report.nodeid.rsplit("::", 1)[-1]
            self.outcomes[name] = report.outcome


def _ops_by_test():
    from onnx.backend.test.loader import load_model_tests
    ops = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in load_model_tests(kind="node"):
            ops[case.name + "_cpu"] = {n.op_type for n in case.model.graph.node}
    return ops


def main(args):
    here = os.path.dirname(os.path.abspath(__file__))
    collector = _Collector()
    code = pytest.main([os.path.join(here, "test_onnx_backend.py"), "-q",
                        "-p", "no:cacheprovider"] + args, plugins=[collector])
    node = {k: v for k, v in collector.outcomes.items()
            if k.startswith("test_") and k.endswith("_cpu")}
    passed = sorted(k for k, v in node.items() if v == "passed")
    failed = sorted(k for k, v in node.items() if v == "failed")
    skipped = sorted(k for k, v in node.items() if v == "skipped")
    ops_of = _ops_by_test()
    ops = sorted(set().union(*(ops_of.get(k, set()) for k in passed))) if passed else []
    print(f"node tests (CPU): selected {len(passed) + len(failed)}, passed {len(passed)}, "
          f"failed {len(failed)}, skipped (not included / excluded) {len(skipped)}")
    print(f"distinct ONNX operators passing: {len(ops)}")
    print(" ".join(ops))
    for k in failed:
        print("FAILED", k)
    if code == 0 and (failed or not passed):
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
