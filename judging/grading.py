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

import ast
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judging.executors import RAN
from judging.records import call_raised, call_spans
from judging.tolerance import within_tolerance

if TYPE_CHECKING:
    from judging.running import RunResult

STATUSES = (
    "passed",
    "failed",
    "no_code",
    "syntax_error",
    "runtime_error",
    "timeout",
    "memory",
    "output_limit",
    "sandbox_error",
)
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
    # False for a call of a run of calls that the run never got to: it ended or failed in an earlier call.
    reached: bool = True


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


def run_status(result: RunResult, outcome: str, out_of_memory: bool) -> str | None:
    """How a run ended, as a test status, or None when it ended normally (its output is then compared)."""
    if out_of_memory:  # the kernel killed one of its processes: the test passed the slot's memory bound
        return "memory"
    if result.output_overflow:
        return "output_limit"
    if result.timed_out:
        return "timeout"
    return None if outcome == RAN else outcome


def grade(
    result: RunResult,
    outcome: str,
    out_of_memory: bool,
    marker: str | None,
    expected_output,
    tolerance: float | None = None,
    compare: str = "text",
) -> TestResult:
    """One test's verdict: ``result`` of its run, ``outcome`` as its executor read it (``RAN`` or a failure status),
    whether the kernel killed one of its processes for memory, the run's ``marker`` (None: all of stdout counts),
    the expected output, the test's tolerance (None: the text must be equal) and how it compares (``"value"``:
    as Python literals, `equal_values`)."""
    after_marker = result.stdout if marker is None else after(result.stdout, marker)
    status = run_status(result, outcome, out_of_memory)
    if status is not None:
        pass
    elif after_marker is None:
        status = "failed"
    elif marker is None:
        status = "passed" if matches(by_lines(after_marker), by_lines(str(expected_output)), tolerance) else "failed"
    else:
        status = "passed" if output_matches(after_marker, str(expected_output), tolerance, compare) else "failed"
    shown = result.stdout if after_marker is None else after_marker
    return TestResult(status, round(result.seconds, 4), shown[:KEEP_CHARS], result.stderr[-KEEP_CHARS:])


def grade_calls(
    result: RunResult, outcome: str, out_of_memory: bool, marker: str, tests, raised: frozenset[int] = frozenset()
) -> list[TestResult]:
    """The verdicts of a run of calls, one per test of ``tests``: what was printed between call ``i``'s separator
    line and the next is call ``i``'s output, graded as one test's. The calls in ``raised`` (the executor read
    that they raised and the run went on: `Executor.raised_calls`) fail alone with ``runtime_error``, whatever
    they printed, as a run of each alone would. A run that ended normally grades every other call it reached (one
    it never reached, the program having ended first, fails, and is marked not ``reached``). A run that failed
    (exited with an error, ran out of time or memory, printed past the limit) fails with its status the last call
    it reached and every later one (not ``reached``); the calls before it are graded on what they printed."""
    status = run_status(result, outcome, out_of_memory)
    text = after(result.stdout, marker)
    spans = call_spans(text, marker, len(tests))
    first_failed = len(spans) if status is None else max(len(spans) - 1, 0)
    seconds = round(result.seconds / max(len(tests), 1), 4)
    results = []
    for index, test in enumerate(tests):
        printed = text[spans[index][0] : spans[index][1]] if index < len(spans) else ""
        if index < first_failed and index in raised:
            results.append(
                TestResult("runtime_error", seconds, printed[:KEEP_CHARS], _raised_stderr(result, marker, index))
            )
        elif index < first_failed:
            verdict = (
                "passed"
                if output_matches(printed, str(test.expected_output), test.tolerance, test.compare)
                else "failed"
            )
            results.append(TestResult(verdict, seconds, printed[:KEEP_CHARS], ""))
        elif status is None:
            results.append(
                TestResult("failed", seconds, "", "not reached: the program ended before this call", reached=False)
            )
        elif index == first_failed:
            results.append(TestResult(status, seconds, printed[:KEEP_CHARS], result.stderr[-KEEP_CHARS:]))
        else:
            why = f"not run: call {first_failed} ended the run ({status})"
            results.append(TestResult(status, seconds, "", why, reached=False))
    return results


def _raised_stderr(result: RunResult, marker: str, index: int) -> str:
    """What call ``index``, which raised, wrote to stderr: its traceback, from after the last raised line the
    harness wrote there before it (the program's own, before the first call's, included) to its own; the end of
    stderr when the harness wrote none (q)."""
    end = result.stderr.find(call_raised(marker, index) + "\n")
    if end < 0:
        return result.stderr[-KEEP_CHARS:]
    start = result.stderr.rfind(":raised\n", 0, end)
    return result.stderr[0 if start < 0 else start + len(":raised\n") : end][-KEEP_CHARS:]


def output_matches(printed: str, expected: str, tolerance: float | None = None, compare: str = "text") -> bool:
    """Whether a test's printed output is its expected output, under its rule (text, tolerance or value)."""
    if compare == "value":
        return equal_values(printed, expected)
    return matches(printed, expected, tolerance)


# Printed text longer than this many times the expected text (plus a margin) is not read as a value: no literal a
# program prints needs it, and reading one costs time in the judge's thread.
VALUE_TEXT_FACTOR, VALUE_TEXT_MARGIN = 4, 1024


def equal_values(printed: str, expected: str) -> bool:
    """Whether the printed text and the expected output are equal Python values (``ast.literal_eval`` of each,
    compared with ``==``: ``240.0`` for ``240``, ``{2, 1}`` for ``{1, 2}``, a tuple never for a list); where either
    is no literal, whether they are equal text. Read on the host, never by code in the sandbox."""
    printed, expected = printed.strip(), expected.strip()
    if printed == expected:
        return True
    if len(printed) > VALUE_TEXT_FACTOR * len(expected) + VALUE_TEXT_MARGIN:
        return False
    wanted = _expected_literal(expected)
    got = _literal(printed) if wanted is not NOT_LITERAL else NOT_LITERAL
    if got is NOT_LITERAL:
        return False
    try:
        return bool(wanted == got)  # literals' == never runs judged code; only deep nesting can make it raise
    except RecursionError:
        return False


NOT_LITERAL = object()


def _literal(text: str):
    """``ast.literal_eval(text)``, or ``NOT_LITERAL``."""
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


# A pool's expected outputs are read once for all the completions judged on them (the data's text, never a
# program's); the values are only compared, never changed.
_expected_literal = functools.lru_cache(maxsize=1 << 14)(_literal)


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
    rest = stdout[index + len(marker) :]
    return rest[1:] if rest.startswith("\n") else rest
