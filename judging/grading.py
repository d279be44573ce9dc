"""From a finished run to a verdict: what every test's status means and how a completion's is chosen. Pure: no
process, file or clock; judging/execution.py runs the test, this grades it, in time linear in what the program
printed (it runs in the judge's threads, on up to the 1 MiB output cap).

A test passes when the program ends normally within its limits and the stdout printed after the marker line,
stripped, equals the expected output, stripped. Output printed before the marker does not count, so a solution
that prints answers or exits early fails. A test that gives the program its standard input has no marker: the
program is the solution alone, so all it prints is its answer (nothing of the judge's is printed before or after
it to forge), compared as competitive-programming judges compare: the spaces and tabs at the end of each line and
the line ends themselves (``\r\n`` or ``\n``; nothing else ends a line) do not count.

A test with a tolerance compares numbers: the printed text and the expected output must be the same text once
every number in them is set aside, and each printed number must be within the tolerance of the expected one at
its place (``0.30000000000000004`` for ``0.3`` under 1e-9, ``[1.0, 2.5]`` for ``[1, 2.5]``; integers exactly, at
any size: judging/tolerance.py). It is read from the printed text here, on the host, never by code in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judging.executors import RAN
from judging.tolerance import within_tolerance

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


def grade(result: RunResult, outcome: str, out_of_memory: bool, marker: str | None, expected_output,
          tolerance: float | None = None) -> TestResult:
    """One test's verdict: ``result`` of its run, ``outcome`` as its executor read it (``RAN`` or a failure status),
    whether the kernel killed one of its processes for memory, the run's ``marker`` (None: all of stdout counts),
    the expected output and the test's tolerance (None: the text must be equal)."""
    after_marker = result.stdout if marker is None else after(result.stdout, marker)
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
    elif marker is None:
        status = "passed" if matches(by_lines(after_marker), by_lines(str(expected_output)), tolerance) else "failed"
    else:
        status = "passed" if matches(after_marker, str(expected_output), tolerance) else "failed"
    shown = result.stdout if after_marker is None else after_marker
    return TestResult(status, round(result.seconds, 4), shown[:KEEP_CHARS], result.stderr[-KEEP_CHARS:])


def matches(printed: str, expected: str, tolerance: float | None = None) -> bool:
    """Whether ``printed`` is the ``expected`` output: equal once stripped, or, with a ``tolerance``, equal text
    around the numbers and each number within ``tolerance`` of the expected one (judging/tolerance.py: integers
    exactly, infinities of one sign equal, nan only as the same text)."""
    printed, expected = printed.strip(), expected.strip()
    if tolerance is None or printed == expected:
        return printed == expected
    return within_tolerance(printed, expected, tolerance)


def by_lines(text: str) -> str:
    """``text`` with each line end (``\r\n`` or ``\n``) as one ``\n`` and the spaces and tabs at the end of each line
    removed. Nothing else ends a line or is removed (``str.splitlines`` would end lines at a lone ``\r``, ``\v``,
    ``\f``, ``\x1c``-``\x1e``, ``\x85``, ``\u2028`` and ``\u2029``, and ``str.rstrip`` remove any white space,
    no-break space included): a program's output differs from the answer there."""
    text = text.replace("\r\n", "\n")
    if " \n" not in text and "\t\n" not in text:  # no line but the last ends in a space or tab: one pass in C
        return text.rstrip(" \t")
    return "\n".join([line.rstrip(" \t") for line in text.split("\n")])


def after(stdout: str, marker: str) -> str | None:
    """The stdout printed after the marker line, or None when the marker never appeared."""
    index = stdout.find(marker)
    if index < 0:
        return None
    rest = stdout[index + len(marker):]
    return rest[1:] if rest.startswith("\n") else rest
