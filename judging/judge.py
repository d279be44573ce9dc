"""The judge: runs a completion's code against its tests, in parallel, in the sandbox.

A test passes when the program (solution, a random marker line, the test code) ends normally within
its limits and the stdout after the marker, stripped, equals the expected output, stripped. The
expected output never leaves this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from tqdm import tqdm

from judging import languages
from judging.executors import LICENCE_FAILURE, RAN
from judging.licence_proxy import FLAG, parse_licence_hosts
from judging.runners import SANDBOX_CHOICES, JudgeUnavailable, Runner, Runners, Slots
from judging.sandbox import SCRATCH, Limits, SandboxUnavailable
from judging.scratch import new_scratch, remove_tree

__all__ = ["STATUSES", "Judge", "JudgeUnavailable", "Judgement", "TestResult", "completion_status"]
STATUSES = ("passed", "failed", "no_code", "syntax_error", "runtime_error", "timeout", "memory",
            "output_limit", "sandbox_error")
# A completion's status is its most telling failing test status, in this order: a broken sandbox
# says nothing about the code; then errors that stop every test; then per-test failures.
SEVERITY = ("sandbox_error", "syntax_error", "timeout", "memory", "output_limit", "runtime_error", "failed")
LICENCE_RETRY_DELAYS = (0.5, 1.0, 2.0)
KEEP_CHARS = 4096
logger = logging.getLogger(__name__)


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


class Judge:
    """Judges completions; build once (it probes the host), reuse for every batch, ``close()`` at the end.

    ``timeout`` bounds each test's wall clock unless a call gives its own (training and evaluation share
    one judge); ``completion_budget`` (default 3x the timeout) bounds all tests of one completion: after a
    timeout or once the budget is spent, later tests are recorded as ``timeout`` with 0.0 seconds and are not
    run. ``sandbox`` is ``"auto"`` (strongest level that
    works; as root, only levels with namespaces), ``"strict"`` (refuse to run without namespaces) or
    a level name from ``LEVELS`` (only that level; ``"rlimits"`` as root falls back to running judged
    code as root when the sandbox uid cannot run Python). At the bwrap level, Python runs in warm workers
    (``judging/warm.py``) when they start, else cold; ``"bwrap-cold"`` is bwrap with a fresh interpreter
    per test.

    ``memory_mb`` bounds one test's memory and ``disk_mb`` the size of its /scratch, /tmp and /dev/shm (each a
    tmpfs inside the bwrap sandbox; the weaker levels write to a host folder).

    ``q_licence_hosts`` is what judged q may reach, only through the judge's licence proxy
    (judging/licence_proxy.py): ``"auto"`` (what q contacts when the judge first runs its own ``1+1``;
    nothing if it contacts nothing), ``"none"``, or ``"HOST:PORT[,HOST:PORT...]"``. A bad value raises
    ``LicenceHostsError`` (a UsageError). Egress needs root (a network namespace per slot).
    """

    def __init__(self, timeout: float = 1.0, completion_budget: float | None = None, workers: int | None = None,
                 sandbox: str = "auto", memory_mb: int = 1024, q_binary: str | None = None,
                 q_licence_hosts: str | tuple = "auto", disk_mb: int = 64):
        # JudgeArguments hands over the hosts it parsed; a string (the Python API) is parsed here.
        licence_hosts = parse_licence_hosts(q_licence_hosts) if isinstance(q_licence_hosts, str) else q_licence_hosts
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if completion_budget is not None and completion_budget <= 0:
            raise ValueError(f"completion_budget must be positive, got {completion_budget}")
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if sandbox not in SANDBOX_CHOICES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_CHOICES)}; got {sandbox!r}")
        if disk_mb < 1:
            raise ValueError(f"disk_mb must be at least 1, got {disk_mb}")
        self.timeout = float(timeout)
        self.completion_budget = float(completion_budget) if completion_budget else None  # None: 3x the timeout
        self.workers = workers if workers is not None else os.cpu_count() or 1
        self.q_binary = q_binary
        limits = Limits(memory_mb=memory_mb, disk_mb=disk_mb)
        self._slots_held = Slots(self.workers, limits)
        self._runners = Runners(self._slots_held, limits, q_binary, licence_hosts, self._execute)
        self._licence_retries = 0
        self._counts_lock = threading.Lock()
        try:
            self._runners.choose(sandbox)
        except BaseException:
            self._slots_held.close()
            raise
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge")

    # What the tests look into: the set-up's parts (judging/runners.py).
    level = property(lambda self: self._runners.level)
    _warm = property(lambda self: self._runners.warm)
    _proxy = property(lambda self: self._runners.proxy)
    _slot_uids = property(lambda self: self._slots_held.uids)
    _slots = property(lambda self: self._slots_held.free)
    _base = property(lambda self: self._slots_held.base)
    _cgroups = property(lambda self: self._slots_held.cgroups)

    @property
    def warm(self) -> bool:
        """Whether Python runs in warm workers."""
        return self._warm is not None

    @property
    def isolation(self) -> str:
        """What protects the host, for the trainer's log."""
        return self._runners.describe()

    def counters(self) -> dict[str, int]:
        """Cumulative counts since the judge was built, for the trainer's log each step: q runs that failed
        their licence check and were run again, and requests the licence proxy refused."""
        with self._counts_lock:
            retries = self._licence_retries
        return {"judge/proxy_refusals": self._proxy.refusals if self._proxy else 0,
                "judge/licence_retries": retries}

    def preflight(self, *names: str) -> None:
        """Prove each language runs here (a trusted ``1+1``) before any model loads; raise with the fix if not."""
        for name in sorted(set(names)):
            runner = self._runners.get(name)
            if runner.executor.missing:
                raise JudgeUnavailable(runner.executor.missing)
            test = {"test_code": languages.language(name).preflight_code, "expected_output": "2"}
            judgement = self.run("", [test], name)
            if judgement.status == "passed":
                continue
            result = judgement.tests[0]
            detail = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no output"])[-1]
            if runner.executor.licensed and judgement.status == "sandbox_error":
                raise JudgeUnavailable(f"q did not start ({detail}): check the licence (QLIC folder with k4.lic or "
                                       f"kc.lic; {self._runners.egress}; an on-demand kc.lic needs its licence server "
                                       f"allowed: {FLAG} auto or HOST:PORT)")
            raise JudgeUnavailable(f"{name} cannot run 1+1 in the sandbox ({self.isolation}): "
                                   f"{judgement.status}: {detail}")

    def run(self, code: str | None, tests: list[dict], language: str, timeout: float | None = None) -> Judgement:
        """Judge ``code`` on ``tests``; ``timeout`` (default: the judge's) bounds each test, three times it the
        completion."""
        if not tests:
            raise ValueError("a problem needs at least one test")
        runner = self._runners.get(language)
        total = len(tests)
        if runner.executor.missing:
            return Judgement("sandbox_error", 0, total,
                             [TestResult("sandbox_error", 0.0, "", runner.executor.missing) for _ in tests])
        if code is None:
            return Judgement("no_code", 0, total, [TestResult("no_code", 0.0, "", "") for _ in tests])
        problem = runner.executor.syntax_error(code)
        if problem:
            return Judgement("syntax_error", 0, total, [TestResult("syntax_error", 0.0, "", problem) for _ in tests])
        results: list[TestResult] = []
        timeout = self.timeout if timeout is None else timeout
        budget_end = time.monotonic() + (self.completion_budget or 3.0 * timeout)
        for test in tests:
            left = budget_end - time.monotonic()
            if left <= 0 or (results and results[-1].status == "timeout"):
                results.append(TestResult("timeout", 0.0, "", "not run: an earlier test timed out or the "
                                                              "completion's time budget is spent"))
                continue
            results.append(self._execute(runner, code, test, min(timeout, left)))
        passed = sum(result.status == "passed" for result in results)
        return Judgement(completion_status(results), passed, total, results)

    def _execute(self, runner: Runner, code: str, test: dict, timeout: float) -> TestResult:
        slots = self._slots_held.free  # the queue of the moment (explicit rlimits may swap it while probing)
        uid = slots.get()
        try:  # the slot goes back whatever happens below, cleanup included
            scratch = None
            try:
                warm = self._warm if self._warm is not None and runner.executor.language == "python" else None
                marker = secrets.token_hex(16)
                # Model text can hold lone surrogates, which UTF-8 cannot encode: judge them as "?", never crash.
                program = runner.executor.program(code, marker, test["test_code"]).encode("utf-8", "replace")
                filename = runner.executor.filename
                # bwrap copies the program into the sandbox's own /scratch (a tmpfs): no host folder; the warm
                # worker reads it from its slot's folder; the weaker levels run in a host folder.
                in_tmpfs = runner.sandbox.level == "bwrap"
                if warm:  # the worker (root without CAP_DAC_OVERRIDE) reads it: a folder of the judge's own
                    scratch = new_scratch(warm.folders[uid], None, filename, program)
                elif not in_tmpfs:
                    scratch = new_scratch(self._slots_held.base, uid, filename, program)
                argv = runner.executor.argv(f"{SCRATCH if in_tmpfs else scratch}/{filename}")
                cgroup = self._slots_held.cgroups.slots.get(uid)
                oom_kills = cgroup.oom_kills() if cgroup else 0
                for delay in (*LICENCE_RETRY_DELAYS, None):
                    result = warm.run(uid, scratch, timeout) if warm else None
                    if result is None:  # no warm worker, or it failed (maybe mid-test): run cold
                        result = runner.sandbox.run(argv, None if in_tmpfs else scratch, uid, timeout,
                                                    (filename, program), cgroup)
                    outcome = runner.executor.outcome(result, marker) if result.returncode is not None else RAN
                    if outcome != LICENCE_FAILURE:
                        break
                    if delay is None:
                        outcome = "sandbox_error"
                        break
                    with self._counts_lock:
                        self._licence_retries += 1
                    time.sleep(delay)
                out_of_memory = cgroup is not None and cgroup.oom_kills() > oom_kills
            except (OSError, SandboxUnavailable) as error:
                return TestResult("sandbox_error", 0.0, "", f"{type(error).__name__}: {error}")
            finally:
                if scratch:
                    remove_tree(scratch)  # never raises: what judged code left is logged, not the test's verdict
        finally:
            slots.put(uid)
        after_marker = _after(result.stdout, marker)
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
            status = "passed" if after_marker.strip() == str(test["expected_output"]).strip() else "failed"
        shown = result.stdout if after_marker is None else after_marker
        return TestResult(status, round(result.seconds, 4), shown[:KEEP_CHARS], result.stderr[-KEEP_CHARS:])

    def run_many(self, items: list[tuple[str | None, list[dict], str]], progress: bool = False,
                 timeout: float | None = None) -> list[Judgement]:
        futures = {self._pool.submit(self.run, *item, timeout): index for index, item in enumerate(items)}
        judgements: list[Judgement | None] = [None] * len(items)
        with tqdm(total=len(items), desc="judging", unit="completion", disable=not progress, leave=False) as bar:
            for future in as_completed(futures):
                judgements[futures[future]] = future.result()
                bar.update()
        return judgements

    async def arun_many(self, items: list[tuple[str | None, list[dict], str]],
                        timeout: float | None = None) -> list[Judgement]:
        return list(await asyncio.gather(*(asyncio.wrap_future(self._pool.submit(self.run, *item, timeout))
                                           for item in items)))

    def close(self) -> None:
        """Stop the pool, the licence proxy and the warm workers and remove the judge's folder; never raises (a
        step that fails is logged and the next still runs)."""
        for step in [lambda: self._pool.shutdown(wait=True), *self._runners.close_steps(), self._slots_held.close]:
            try:
                step()
            except Exception:
                logger.exception("judge close: a step failed; the rest still ran")

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _after(stdout: str, marker: str) -> str | None:
    """The stdout printed after the marker line, or None when the marker never appeared."""
    index = stdout.find(marker)
    if index < 0:
        return None
    rest = stdout[index + len(marker):]
    return rest[1:] if rest.startswith("\n") else rest
