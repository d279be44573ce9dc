"""From a finished run to a verdict: what every test's status means and how a completion's is chosen. Pure: no
process, file or clock; judging/execution.py runs the test, this grades it.

A test passes when the program ends normally within its limits and the stdout printed after the marker line,
stripped, equals the expected output, stripped. Output printed before the marker does not count, so a solution
that prints answers or exits early fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judging.executors import RAN

if TYPE_CHECKING:
    from judging.running import RunResult

STATUSES = ("passed", "failed", "no_code", "syntax_error", "runtime_error", "timeout", "memory",
            "output_limit", "sandbox_error")
# A completion's status is its most telling failing test status, in this order: a broken sandbox
# says nothing about the code; then errors that stop every test; then per-test failures.
SEVERITY = ("sandbox_error", "syntax_error", "timeout", "memory", "output_limit", "runtime_error", "failed")
KEEP_CHARS = 4096  # of a test's stdout (from its start) and stderr (its end) kept in its result


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    status: str
    seconds: float
    stdout: str
    stderr: str


@dataclass
class Judgement:
    status: str
    passed: int
    total: int
    tests: list[TestResult] = field(default_factory=list)


def completion_status(results: list[TestResult]) -> str:
    statuses = {result.status for result in results}
    if statuses == {"passed"}:
        return "passed"
    return next(status for status in SEVERITY if status in statuses)


def grade(result: RunResult, outcome: str, out_of_memory: bool, marker: str, expected_output) -> TestResult:
    """One test's verdict: ``result`` of its run, ``outcome`` as its executor read it (``RAN`` or a failure status),
    whether the kernel killed one of its processes for memory, the run's ``marker`` and the expected output."""
    after_marker = after(result.stdout, marker)
    if out_of_memory:  # the kernel killed one of its processes: the test passed the slot's memory bound
        status = "memory"
    elif result.output_overflow:
        status = "output_limit"
    elif result.timed_out:
        status = "timeout"
    elif outcome != RAN:
        status = outcome
    elif after_marker is None:
        status = "failed"
    else:
        status = "passed" if after_marker.strip() == str(expected_output).strip() else "failed"
    shown = result.stdout if after_marker is None else after_marker
    return TestResult(status, round(result.seconds, 4), shown[:KEEP_CHARS], result.stderr[-KEEP_CHARS:])


def after(stdout: str, marker: str) -> str | None:
    """The stdout printed after the marker line, or None when the marker never appeared."""
    index = stdout.find(marker)
    if index < 0:
        return None
    rest = stdout[index + len(marker):]
    return rest[1:] if rest.startswith("\n") else rest
