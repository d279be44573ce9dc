"""The judge: runs a completion's code against its tests, in parallel, in the sandbox.

A test passes when the program (solution, a random marker line, the test code) ends normally within
its limits and the stdout after the marker, stripped, equals the expected output, stripped (judging/grading.py).
The expected output never leaves this process. Each test runs through judging/execution.py; what the judge is
built on (slots, level, warm workers, licence egress) is ``Judge.setup`` (judging/setup.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from judging import languages
from judging.env_vars import refuse_names_not_read
from judging.grading import STATUSES, Judgement, TestResult, completion_status
from judging.licence_proxy import FLAG, parse_licence_hosts
from judging.policy import (
    COMPLETION_BUDGET_TIMEOUTS,
    DEFAULT_DISK_MB,
    DEFAULT_LICENCE_HOSTS,
    DEFAULT_MEMORY_MB,
    DEFAULT_SANDBOX,
    DEFAULT_TIMEOUT,
    Limits,
    default_workers,
)
from judging.records import Calls, Test, count
from judging.levels import SANDBOX_CHOICES
from judging.setup import JudgeSetup, JudgeUnavailable

__all__ = ["STATUSES", "Judge", "JudgeUnavailable", "Judgement", "TestResult", "completion_status"]
logger = logging.getLogger(__name__)
# How often run_many wakes to move its progress bar: once a completion, the waiting thread took the GIL from the
# judging threads ~250 times a second.
PROGRESS_INTERVAL = 0.1


class Judge:
    """Judges completions; build once (it probes the host), reuse for every batch, ``close()`` at the end.

    ``timeout`` bounds each test's wall clock unless a call gives its own (training and evaluation share
    one judge); ``completion_budget`` (default 3x the timeout) bounds all tests of one completion: after a
    timeout or once the budget is spent, later tests are recorded as ``timeout`` with 0.0 seconds and are not
    run. ``sandbox`` is ``"auto"`` (strongest level that
    works; as root, only levels with namespaces), ``"strict"`` (refuse to run without namespaces) or
    a level's name (judging/levels.py: ``LEVELS``) (only that level; ``"rlimits"`` as root falls back to running judged
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

    def __init__(
        self,
        timeout: float = DEFAULT_TIMEOUT,
        completion_budget: float | None = None,
        workers: int | None = None,
        sandbox: str = DEFAULT_SANDBOX,
        memory_mb: int = DEFAULT_MEMORY_MB,
        q_binary: str | None = None,
        q_licence_hosts: str | tuple = DEFAULT_LICENCE_HOSTS,
        disk_mb: int = DEFAULT_DISK_MB,
    ):
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
        refuse_names_not_read()
        self.timeout = float(timeout)
        # None: COMPLETION_BUDGET_TIMEOUTS times the timeout of the call
        self.completion_budget = float(completion_budget) if completion_budget else None
        self.workers = workers if workers is not None else default_workers()
        self.q_binary = q_binary
        self.setup = JudgeSetup(
            self.workers, Limits(memory_mb=memory_mb, disk_mb=disk_mb), sandbox, q_binary, licence_hosts
        )
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge")

    @property
    def level(self) -> str:
        """The name of the sandbox level in force (judging/levels.py: LEVELS)."""
        return self.setup.level.name

    @property
    def warm(self) -> bool:
        """Whether Python runs in warm workers."""
        return self.setup.warm is not None

    @property
    def isolation(self) -> str:
        """What protects the host, for the trainer's log."""
        return self.setup.describe()

    def counters(self) -> dict[str, int]:
        """Cumulative counts since the judge was built, for the trainer's log each step: q runs that failed
        their licence check and were run again, and requests the licence proxy refused."""
        proxy = self.setup.proxy
        return {
            "judge/proxy_refusals": proxy.refusals if proxy else 0,
            "judge/licence_retries": self.setup.licence_retries.value,
        }

    def preflight(self, *names: str) -> None:
        """Prove each language runs here (a trusted ``1+1``) before any model loads; raise with the fix if not."""
        for name in sorted(set(names)):
            runner = self.setup.get(name)
            if runner.executor.missing:
                raise JudgeUnavailable(runner.executor.missing)
            judgement = self.run("", [Test(languages.language(name).preflight_code, "2")], name)
            if judgement.status == "passed":
                continue
            result = judgement.tests[0]
            detail = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no output"])[-1]
            if runner.executor.licensed and judgement.status == "sandbox_error":
                raise JudgeUnavailable(
                    f"q did not start ({detail}): check the licence (QLIC folder with k4.lic or "
                    f"kc.lic; {self.setup.egress}; an on-demand kc.lic needs its licence server "
                    f"allowed: {FLAG} auto or HOST:PORT)"
                )
            raise JudgeUnavailable(
                f"{name} cannot run 1+1 in the sandbox ({self.isolation}): {judgement.status}: {detail}"
            )

    def run(
        self, code: str | None, tests: Sequence[Test | Calls], language: str, timeout: float | None = None
    ) -> Judgement:
        """Judge ``code`` on ``tests``, each a `Test` or a run of `Calls` (each call counting as a test); ``timeout``
        (default: the judge's) bounds each test, and a run of calls ``Calls.timeouts`` times it (one for each given
        test joined into it, one for its pool calls), and ``completion_budget`` (default three times it) all of
        them together: a program looping in the given test of a joined run holds its slot up to two timeouts (up to
        the budget, where more given tests join), where a run of that test alone held it one.

        A joined run that a given test ends early (it exits, runs out of memory or prints past the limit; not a
        timeout, after which nothing runs) has the given tests it never reached judged in a fresh run from the next
        one on, with the pool calls after them, as each given test had a run of its own."""
        if not tests:
            raise ValueError("a problem needs at least one test")
        runner = self.setup.get(language)
        total = count(tests)
        flat = [call for test in tests for call in (test.tests if isinstance(test, Calls) else (test,))]
        if not runner.executor.reads_input and any(test.input is not None for test in flat):
            raise ValueError(f"{language} programs are not judged on standard input (a test with an input)")
        if any(test.input is not None for each in tests if isinstance(each, Calls) for test in each.tests):
            raise ValueError("a run of calls holds printed calls only, not a test giving standard input")
        if runner.executor.missing:
            return Judgement(
                "sandbox_error", 0, total, [TestResult("sandbox_error", 0.0, "", runner.executor.missing) for _ in flat]
            )
        if code is None:
            return Judgement("no_code", 0, total, [TestResult("no_code", 0.0, "", "") for _ in flat])
        problem = runner.executor.syntax_error(code)
        if problem:
            return Judgement("syntax_error", 0, total, [TestResult("syntax_error", 0.0, "", problem) for _ in flat])
        results: list[TestResult] = []
        timeout = self.timeout if timeout is None else timeout
        budget_end = time.monotonic() + (self.completion_budget or COMPLETION_BUDGET_TIMEOUTS * timeout)
        pending = list(reversed(tests))  # next to judge last: a joined run's given tests left unreached go back
        while pending:
            test = pending.pop()
            left = budget_end - time.monotonic()
            if left <= 0 or (results and results[-1].status == "timeout"):
                results.extend(
                    TestResult(
                        "timeout",
                        0.0,
                        "",
                        "not run: an earlier test timed out or the completion's time budget is spent",
                    )
                    for _ in range(count([test]))
                )
            elif isinstance(test, Calls):
                judged = self.setup.execute_calls(runner, code, test, min(timeout * test.timeouts, left))
                unreached = next((index for index, result in enumerate(judged) if not result.reached), len(judged))
                if 0 < unreached < test.given:
                    results.extend(judged[:unreached])
                    pending.append(Calls(test.tests[unreached:], test.given - unreached))
                else:
                    results.extend(judged)
            else:
                results.append(self.setup.execute(runner, code, test, min(timeout, left)))
        passed = sum(result.status == "passed" for result in results)
        return Judgement(completion_status(results), passed, total, results)

    def run_many(
        self,
        items: list[tuple[str | None, Sequence[Test | Calls], str]],
        progress: bool = False,
        timeout: float | None = None,
    ) -> list[Judgement]:
        from tqdm import tqdm  # here, not at the top: its import reads every installed package's metadata (~25 ms)

        futures = [self._pool.submit(self.run, *item, timeout) for item in items]
        pending = set(futures)
        with tqdm(total=len(items), desc="judging", unit="completion", disable=not progress, leave=False) as bar:
            while pending:
                done, pending = wait(pending, timeout=PROGRESS_INTERVAL, return_when=FIRST_EXCEPTION)
                bar.update(len(done))
                for future in done:
                    future.result()  # a judge's own fault raises here, as soon as it happens
        return [future.result() for future in futures]

    async def arun_many(
        self, items: list[tuple[str | None, Sequence[Test | Calls], str]], timeout: float | None = None
    ) -> list[Judgement]:
        import asyncio  # here, not at the top: only TRL's async reward functions need it, and it costs a CLI ~35 ms

        return list(
            await asyncio.gather(*(asyncio.wrap_future(self._pool.submit(self.run, *item, timeout)) for item in items))
        )

    def close(self) -> None:
        """Stop the pool, the licence proxy and the warm workers and remove the judge's folder; never raises (a
        step that fails is logged and the next still runs)."""
        for step in [lambda: self._pool.shutdown(wait=True), *self.setup.close_steps()]:
            try:
                step()
            except Exception:
                logger.exception("judge close: a step failed; the rest still ran")

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
