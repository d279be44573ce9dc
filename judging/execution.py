"""One test (or one run of calls), the way every test runs (the judge's, and the set-up's probes of a level, of warm workers and of
licence egress): take a free slot, write the program (solution, a random marker line, the test code), put it where
it runs (a warm worker's folder, the bwrap sandbox's own /scratch, or a host folder on the weaker levels), run it,
run it again while a licensed language's licence check fails, note an OOM kill in the slot's cgroup, hand the slot
back whatever happened, then grade (judging/grading.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from judging import languages
from judging.executors import LICENCE_FAILURE, RAN, Executor
from judging.grading import TestResult, grade, grade_calls
from judging.records import Calls, Test
from judging.running import RunResult, run_cold
from judging.sandbox import Sandbox
from judging.scratch import new_scratch, remove_tree
from judging.slots import SandboxUnavailable, Slots
from judging.warm import WarmWorkers

LICENCE_RETRY_DELAYS = (0.5, 1.0, 2.0)


@dataclass
class Runner:
    """What runs one language's tests: its executor and its sandbox."""

    executor: Executor
    sandbox: Sandbox


class Counter:
    """A count that the judge's threads add to."""

    def __init__(self):
        self._lock = threading.Lock()
        self._value = 0

    def add(self) -> None:
        with self._lock:
            self._value += 1

    @property
    def value(self) -> int:
        with self._lock:
            return self._value


def execute(
    runner: Runner,
    code: str,
    test: Test | Calls,
    timeout: float,
    slots: Slots,
    warm: WarmWorkers | None,
    licence_retries: Counter,
) -> list[TestResult]:
    """Run ``test`` (or a run of calls) on ``code`` in a free slot of ``slots`` (Python in ``warm`` workers when there
    are some) and grade it: one verdict per test, a call being one; a fault of the judge's own (a host folder it
    cannot write) is ``sandbox_error``."""
    tests = test.tests if isinstance(test, Calls) else (test,)
    free = slots.free  # the queue of the moment (explicit rlimits may swap it while probing)
    uid = free.get()
    try:  # the slot goes back whatever happens below, cleanup included
        # A test giving standard input has no marker: the program is the solution alone, all its output counts.
        reads_input = isinstance(test, Test) and test.input is not None
        marker = None if reads_input else secrets.token_hex(16)
        test_code = runner.executor.calls_code(marker, tests) if isinstance(test, Calls) else test.test_code
        # Model text can hold lone surrogates, which UTF-8 cannot encode: judge them as "?", never crash.
        program = (
            runner.executor.program(code, marker, test_code) if marker else runner.executor.whole_program(code)
        ).encode("utf-8", "replace")
        stdin = test.input.encode("utf-8", "replace") if reads_input else None
        warm = warm if runner.executor.language == "python" else None
        try:
            result, outcome, out_of_memory = _run(
                runner, program, marker or "", uid, timeout, slots, warm, licence_retries, stdin
            )
        except (OSError, SandboxUnavailable) as error:
            return [TestResult("sandbox_error", 0.0, "", f"{type(error).__name__}: {error}") for _ in tests]
    finally:
        free.put(uid)
    if isinstance(test, Calls):
        raised = runner.executor.raised_calls(result, marker, len(tests))
        if raised and outcome == "runtime_error" and result.returncode == 0:
            outcome = RAN  # the errors were the calls' own and the run went on to its end (q)
        return grade_calls(result, outcome, out_of_memory, marker, tests, raised)
    return [grade(result, outcome, out_of_memory, marker, test.expected_output, test.tolerance, test.compare)]


def _run(
    runner: Runner,
    program: bytes,
    marker: str,
    uid: int | None,
    timeout: float,
    slots: Slots,
    warm: WarmWorkers | None,
    licence_retries: Counter,
    stdin: bytes | None = None,
) -> tuple[RunResult, str, bool]:
    """Place ``program``, run it with ``stdin`` as its standard input (again after a licence failure) and remove what
    it left: the run's result, its outcome (``RAN`` or a failure status) and whether the kernel killed one of its
    processes for memory."""
    with _placed(runner, program, uid, slots) as (argv, scratch):
        cgroup = slots.cgroups.slots.get(uid)
        # The OOM kills counted in each cgroup the test ran in (the warm worker's; the slot's own for a cold (re)run),
        # before it first ran there.
        oom_kills: dict = {}

        def run_in(where) -> None:
            if where is not None and where not in oom_kills:
                oom_kills[where] = where.oom_kills()

        def run_once() -> RunResult:
            result = None
            if warm:
                run_in(slots.warm_cgroups.slots.get(uid))
                result = warm.run(uid, program, timeout, stdin)
            if result is None:  # no warm worker, or it failed (maybe mid-test): run cold
                run_in(cgroup)
                result = run_cold(
                    runner.sandbox, argv, scratch, uid, timeout, (runner.executor.filename, program), cgroup, stdin
                )
            return result

        def language_starts() -> bool:
            """Whether the language's trusted program (``1+1``) gets past the licence check now, in this slot."""
            probe_marker = secrets.token_hex(16)
            trusted = languages.language(runner.executor.language).preflight_code
            probe = runner.executor.program("", probe_marker, trusted).encode()
            result = _run_cold_once(runner, probe, uid, timeout, slots, cgroup)
            return result.returncode is None or runner.executor.outcome(result, probe_marker) != LICENCE_FAILURE

        result, outcome = _retrying_licence_failures(
            run_once, language_starts, runner.executor, marker, licence_retries
        )
        return result, outcome, any(each.oom_kills() > before for each, before in oom_kills.items())


def _run_cold_once(runner: Runner, program: bytes, uid: int | None, timeout: float, slots: Slots, cgroup) -> RunResult:
    """Run ``program`` cold in the slot."""
    with _placed(runner, program, uid, slots) as (argv, scratch):
        return run_cold(runner.sandbox, argv, scratch, uid, timeout, (runner.executor.filename, program), cgroup)


@contextmanager
def _placed(runner: Runner, program: bytes, uid: int | None, slots: Slots):
    """The command line running ``program`` where the sandbox's level places it, and the host folder holding it
    (None at a level with a view of its own: bwrap copies it into the sandbox's /scratch, a tmpfs, as a warm worker
    gets it in a memory file); the folder is removed afterwards."""
    filename = runner.executor.filename
    level = runner.sandbox.level
    scratch = None if level.own_view else new_scratch(slots.base, uid, filename, program)
    try:
        yield runner.executor.argv(level.program_path(filename, scratch)), scratch
    finally:
        if scratch:
            remove_tree(scratch)  # never raises: what judged code left is logged, not the test's verdict


def _retrying_licence_failures(
    run_once, language_starts, executor: Executor, marker: str, licence_retries: Counter
) -> tuple[RunResult, str]:
    """``run_once()`` until its outcome is not a licence failure, waiting ``LICENCE_RETRY_DELAYS`` between tries;
    still failing after the last, the outcome is ``sandbox_error`` (not the program's fault). A licence failure is
    only concluded while ``language_starts()`` (the judge's trusted program) fails too: when it starts, the test
    runs once more (a licence server's hiccup may just have ended), and licence text then is the program's own
    doing, a ``runtime_error``."""
    for delay in (*LICENCE_RETRY_DELAYS, None):
        result = run_once()
        outcome = executor.outcome(result, marker) if result.returncode is not None else RAN
        if outcome != LICENCE_FAILURE:
            return result, outcome
        if language_starts():
            result = run_once()
            outcome = executor.outcome(result, marker) if result.returncode is not None else RAN
            return result, "runtime_error" if outcome == LICENCE_FAILURE else outcome
        if delay is None:
            return result, "sandbox_error"
        licence_retries.add()
        time.sleep(delay)
