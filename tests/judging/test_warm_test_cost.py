"""The figure the warm worker's page-copy tricks exist for (judging/worker/loop.py): the copy-on-write faults a warm
test costs the worker and the program's process stay under the bounds benchmarks/warm_test_cost.py states."""

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from warm_test_cost import FAULT_BOUNDS, PROGRAMS, measure  # noqa: E402

from judging import Judge  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="warm workers need root")


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=1) as judge:
        assert judge.warm, judge.isolation
        yield judge


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_warm_test_copies_no_more_pages_than_the_bound(judge, program):
    figures = measure(judge, program, tests=40)
    assert figures["worker_faults"] <= FAULT_BOUNDS["worker"], figures
    assert figures["program_faults"] <= FAULT_BOUNDS["program"][program], figures
    assert figures["worker_faults"] > 10 and figures["program_faults"] > 100, f"nothing counted: {figures}"
