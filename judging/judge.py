"""The judge: runs a completion's code against its tests, in parallel, in the sandbox.

A test passes when the program (solution, a random marker line, the test code) ends normally within
its limits and the stdout after the marker, stripped, equals the expected output, stripped. The
expected output never leaves this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from tqdm import tqdm

from judging import languages
from cli import UsageError
from judging.cgroups import Cgroups
from judging.executors import LICENCE_FAILURE, RAN, PythonExecutor
from judging.licence_proxy import (FLAG, PROXY_ENV, TLS_TRUST, LicenceEgressUnavailable, LicenceProxy,
                                   describe_hosts, parse_licence_hosts)
from judging.sandbox import (LEVEL_TOOLS, LEVELS, NAMESPACE_LEVELS, SCRATCH, Limits, Sandbox, SandboxUnavailable,
                             SlotUids, blocked_for_others)
from judging.scratch import new_scratch, remove_tree
from judging.warm import WarmWorkers

STATUSES = ("passed", "failed", "no_code", "syntax_error", "runtime_error", "timeout", "memory",
            "output_limit", "sandbox_error")
# A completion's status is its most telling failing test status, in this order: a broken sandbox
# says nothing about the code; then errors that stop every test; then per-test failures.
SEVERITY = ("sandbox_error", "syntax_error", "timeout", "memory", "output_limit", "runtime_error", "failed")
LICENCE_RETRY_DELAYS = (0.5, 1.0, 2.0)
KEEP_CHARS = 4096
PROBE_TIMEOUT = 10.0
logger = logging.getLogger(__name__)
# bwrap-cold: bubblewrap with a fresh interpreter per Python test; bwrap, auto and strict use warm workers
# for Python when they start (root only) and fall back to that.
COLD_BWRAP = "bwrap-cold"
SANDBOX_CHOICES = ("auto", "strict", "bwrap", COLD_BWRAP, "unshare", "rlimits")


class JudgeUnavailable(UsageError):
    """The judge cannot run this language here; the message names the fix."""


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


@dataclass
class _Runner:
    executor: object  # an executor of judging/executors.py
    sandbox: Sandbox


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

    ``memory_mb`` bounds one test's memory and ``disk_mb`` the size of its /scratch and of its /tmp (each a
    tmpfs inside the bwrap sandbox; the weaker levels write to a host folder).

    ``q_licence_hosts`` is what judged q may reach, only through the judge's licence proxy
    (judging/licence_proxy.py): ``"auto"`` (what q contacts when the judge first runs its own ``1+1``;
    nothing if it contacts nothing), ``"none"``, or ``"HOST:PORT[,HOST:PORT...]"``. A bad value raises
    ``LicenceHostsError`` (a UsageError). Egress needs root (a network namespace per slot).
    """

    def __init__(self, timeout: float = 1.0, completion_budget: float | None = None, workers: int | None = None,
                 sandbox: str = "auto", memory_mb: int = 1024, q_binary: str | None = None,
                 q_licence_hosts: str = "auto", disk_mb: int = 64):
        self._licence_hosts = parse_licence_hosts(q_licence_hosts)
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if completion_budget is not None and completion_budget <= 0:
            raise ValueError(f"completion_budget must be positive, got {completion_budget}")
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if sandbox not in SANDBOX_CHOICES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_CHOICES)}; got {sandbox!r}")
        self.timeout = float(timeout)
        self.completion_budget = float(completion_budget) if completion_budget else None  # None: 3x the timeout
        self.workers = workers if workers is not None else os.cpu_count() or 1
        self.q_binary = q_binary
        if disk_mb < 1:
            raise ValueError(f"disk_mb must be at least 1, got {disk_mb}")
        self._limits = Limits(memory_mb=memory_mb, disk_mb=disk_mb)
        self._slot_uids = SlotUids(self.workers) if os.geteuid() == 0 else None
        self._slots: queue.Queue = queue.Queue()
        for uid in self._slot_uids.uids if self._slot_uids else [None] * self.workers:
            self._slots.put(uid)
        self._base = tempfile.mkdtemp(prefix="rewards-judge-")
        self._cgroups = Cgroups(self._slot_uids.uids if self._slot_uids else [], self._limits.memory_mb << 20,
                                self._limits.processes)
        # A judge that is never closed still removes its folder and cgroups and frees its slot uids at exit.
        self._cleanup = weakref.finalize(self, _release, self._base, self._slot_uids, self._cgroups)
        # Slot uids must cross it to reach their own scratch folders inside (unshare and rlimits levels).
        os.chmod(self._base, 0o711)
        self._runners: dict[str, _Runner] = {}
        self._runners_lock = threading.Lock()
        self._proxy: LicenceProxy | None = None
        self._egress = ""  # what judged q can reach, once q's runner exists
        self._licence_retries = 0
        self._counts_lock = threading.Lock()
        self._warm: WarmWorkers | None = None
        self._warm_missing = "bwrap-cold" if sandbox == COLD_BWRAP else None  # why Python runs cold, if it does
        try:
            self.level = self._pick_level("bwrap" if sandbox == COLD_BWRAP else sandbox)
            if self.level == "bwrap" and sandbox != COLD_BWRAP:
                self._start_warm()
        except BaseException:
            self._cleanup()
            raise
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge")

    def _pick_level(self, wanted: str) -> str:
        """The level to use; ``auto`` as root never picks rlimits, which would run judged code as root
        beside the trainer (reading its data and environment, able to kill it)."""
        if wanted in ("auto", "strict"):
            levels = LEVELS if wanted == "auto" and os.geteuid() != 0 else NAMESPACE_LEVELS
        else:
            levels = (wanted,)
        level, failures = self._first_working_level(levels)
        if not level and wanted == "rlimits" and self._slot_uids is not None:
            self._slot_uids.release()
            self._slot_uids = None
            self._cgroups.close()
            self._cgroups.slots = {}
            self._cgroups.unavailable = "judged code runs as root, which may leave any cgroup"
            self._slots = queue.Queue()
            for _ in range(self.workers):
                self._slots.put(None)
            level, more = self._first_working_level(("rlimits",))
            failures += more
        if not level:
            raise JudgeUnavailable(self._unavailable(wanted, failures))
        return level

    def _unavailable(self, wanted: str, failures: list[str]) -> str:
        """Why no level works, naming the real cause and the fixes that apply."""
        if wanted == "auto":
            problem = "no sandbox that isolates judged code works here"
        elif wanted == "strict":
            problem = "sandbox='strict' needs namespaces but they do not work here"
        else:
            problem = f"sandbox={wanted!r} does not work here"
        fixes = []
        if shutil.which("bwrap") is None:
            fixes.append("install bubblewrap (apt-get install bubblewrap)")
        interpreter = PythonExecutor().interpreter
        blocked = blocked_for_others(interpreter) if self._slot_uids is not None else None
        if blocked and wanted != "bwrap":
            fixes.append(f"run with a Python the sandbox uid can execute ({interpreter} is out of its reach: "
                         f"{blocked})")
        base_blocked = blocked_for_others(self._base) if self._slot_uids is not None else None
        if base_blocked and wanted != "bwrap":
            fixes.append(f"set TMPDIR to a folder others can cross (the judge's folder {self._base} is out of the "
                         f"sandbox uid's reach: {base_blocked})")
        if wanted == "auto" and os.geteuid() == 0:
            fixes.append("or pass sandbox='rlimits' to accept running judged code with no namespaces "
                         "(as root when the sandbox uid cannot run this Python)")
        return f"{problem} ({'; '.join(failures)}): " + ("; ".join(fixes) or "see the errors above")

    def _first_working_level(self, levels: tuple[str, ...]) -> tuple[str, list[str]]:
        """The first of ``levels`` that runs a real Python test end to end; and why the others failed.

        The probe takes the same path as every execution (program file written into a scratch folder
        under the judge's base, slot uid, limits), so a level that passes it can run tests.
        """
        failures: list[str] = []
        python = PythonExecutor()
        for level in levels:
            if shutil.which(LEVEL_TOOLS[level]) is None:
                failures.append(f"{level}: {LEVEL_TOOLS[level]} not installed")
                continue
            runner = _Runner(python, Sandbox(level, self._limits, python.read_only, python.env, hidden=python.hidden))
            result = self._execute(runner, "", {"test_code": "print('ok')", "expected_output": "ok"}, PROBE_TIMEOUT)
            if result.status == "passed":
                return level, failures
            reason = (result.stderr.strip().splitlines() or [result.status])[-1]
            failures.append(f"{level}: {reason}")
        return "", failures

    def _start_warm(self) -> None:
        """Use warm workers for Python if one starts and passes the probe; else say why Python stays cold."""
        if self._slot_uids is None:
            self._warm_missing = "warm workers need root"
            return
        python = self._runner("python")
        try:
            self._warm = WarmWorkers(python.sandbox, python.executor.interpreter, self._base, self._slot_uids.uids,
                                     self._cgroups.slots)
        except OSError as error:
            self._warm_missing = f"warm workers did not start: {error}"
            return
        self._warm_cleanup = weakref.finalize(self, self._warm.close)
        result = self._execute(python, "", {"test_code": "print('ok')", "expected_output": "ok"}, PROBE_TIMEOUT)
        if result.status != "passed" or self._warm.failures:
            self._warm_missing = f"warm workers did not start: {self._warm.failure or result.status}"
            self._warm_cleanup()
            self._warm = None

    @property
    def warm(self) -> bool:
        """Whether Python runs in warm workers."""
        return self._warm is not None

    @property
    def isolation(self) -> str:
        """What protects the host, for the trainer's log."""
        base = Sandbox(self.level, self._limits, [], {}).describe(slot_uids=self._slot_uids is not None)
        if self._warm is not None:
            python = ("Python: warm workers (one per slot, root in its sandbox with 5 capabilities; each test "
                      "a forked child with its own mount+IPC namespace, /tmp, pipes, limits and the slot uid)")
        else:
            python = "Python: a fresh interpreter per test" + (f" ({self._warm_missing})" if self._warm_missing else "")
        return "; ".join(part for part in (base, self.memory_bound, python, self._egress) if part)

    @property
    def memory_bound(self) -> str:
        """What bounds one test's memory: its slot's cgroup, or (where none can be made) only per-process limits."""
        limits = self._limits
        if self._cgroups.version:
            return self._cgroups.describe(limits.memory_mb, limits.processes)
        tmpfs = f", /scratch and /tmp {limits.disk_mb} MB each" if self.level == "bwrap" else ""
        return (f"memory: NOT bounded per test ({self._cgroups.unavailable}); only per process: address space "
                f"{limits.memory_mb} MB each, at most {limits.processes} processes per slot uid{tmpfs}, memfd "
                f"pages unbounded")

    def counters(self) -> dict[str, int]:
        """Cumulative counts since the judge was built, for the trainer's log each step: q runs that failed
        their licence check and were run again, and requests the licence proxy refused."""
        with self._counts_lock:
            retries = self._licence_retries
        return {"judge/proxy_refusals": self._proxy.refusals if self._proxy else 0,
                "judge/licence_retries": retries}

    def _runner(self, language: str) -> _Runner:
        with self._runners_lock:
            if language not in self._runners:
                executor = languages.language(language).make_executor(self.q_binary)
                runner = _Runner(executor, Sandbox(self.level, self._limits, executor.read_only, executor.env,
                                                   executor.read_write, executor.hostname, hidden=executor.hidden))
                if executor.licensed and not executor.missing:
                    runner = self._licence_egress(runner)
                self._runners[language] = runner
            return self._runners[language]

    def _licence_egress(self, runner: _Runner) -> _Runner:
        """q's runner with egress only through the licence proxy, when ``q_licence_hosts`` asks for some, else
        ``runner`` (no network). With ``auto``, the proxy records what q's trusted ``1+1`` contacts; that
        becomes the allow-list, and nothing contacted means no proxy at all."""
        hosts = self._licence_hosts
        if self.level == "rlimits":
            self._egress = f"q reaches the network directly ({FLAG} has no effect without namespaces)"
            return runner
        if hosts == ():
            self._egress = f"judged q has no network ({FLAG} none)"
            return runner
        try:
            if self._slot_uids is None:
                raise LicenceEgressUnavailable("licence egress needs the judge to run as root (a network namespace "
                                               "per slot)")
            if shutil.which("nsenter") is None:
                raise LicenceEgressUnavailable("licence egress needs nsenter (apt-get install util-linux)")
            proxy = LicenceProxy(self._slot_uids.uids, None if hosts == "auto" else hosts)
        except LicenceEgressUnavailable as error:
            if hosts != "auto":
                raise JudgeUnavailable(f"{FLAG} {describe_hosts(hosts)}: {error}; or use {FLAG} none") from None
            self._egress = f"judged q has no network ({FLAG} auto: {error})"
            logger.info("%s", self._egress)
            return runner
        executor = runner.executor
        proxied = _Runner(executor, Sandbox(self.level, self._limits, [*executor.read_only, *TLS_TRUST],
                                            {**executor.env, **PROXY_ENV}, executor.read_write, executor.hostname,
                                            netns=proxy.netns, hidden=executor.hidden))
        if hosts == "auto":
            test = {"test_code": languages.language("q").preflight_code, "expected_output": "2"}
            self._execute(proxied, "", test, PROBE_TIMEOUT)
            hosts = tuple(sorted(proxy.contacted))
            proxy.enforce(hosts)
            if not hosts:
                proxy.close()
                self._egress = f"judged q has no network (q contacted no host at its start-up check, {FLAG} auto)"
                logger.info("%s", self._egress)
                return runner
            logger.info("q licence egress (%s auto): q's start-up check contacted %s; judged q may reach only "
                        "these, through the judge's proxy", FLAG, describe_hosts(hosts))
        self._proxy = proxy
        weakref.finalize(self, proxy.close)
        self._egress = f"judged q reaches only {describe_hosts(hosts)}, through the licence proxy"
        return proxied

    def preflight(self, *names: str) -> None:
        """Prove each language runs here (a trusted ``1+1``) before any model loads; raise with the fix if not."""
        for name in sorted(set(names)):
            runner = self._runner(name)
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
                                       f"kc.lic; {self._egress}; an on-demand kc.lic needs its licence server "
                                       f"allowed: {FLAG} auto or HOST:PORT)")
            raise JudgeUnavailable(f"{name} cannot run 1+1 in the sandbox ({self.isolation}): "
                                   f"{judgement.status}: {detail}")

    def run(self, code: str | None, tests: list[dict], language: str, timeout: float | None = None) -> Judgement:
        """Judge ``code`` on ``tests``; ``timeout`` (default: the judge's) bounds each test, three times it the
        completion."""
        if not tests:
            raise ValueError("a problem needs at least one test")
        runner = self._runner(language)
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

    def _execute(self, runner: _Runner, code: str, test: dict, timeout: float) -> TestResult:
        uid = self._slots.get()
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
                    scratch = new_scratch(self._base, uid, filename, program)
                argv = runner.executor.argv(f"{SCRATCH if in_tmpfs else scratch}/{filename}")
                cgroup = self._cgroups.slots.get(uid)
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
            self._slots.put(uid)
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
        steps = [lambda: self._pool.shutdown(wait=True)]
        if self._proxy:
            steps.append(self._proxy.close)
        if self._warm is not None:
            steps.append(self._warm_cleanup)
        steps.append(self._cleanup)
        for step in steps:
            try:
                step()
            except Exception:
                logger.exception("judge close: a step failed; the rest still ran")

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _release(base: str, slot_uids: SlotUids | None, cgroups: Cgroups) -> None:
    cgroups.close()
    if slot_uids:
        slot_uids.release()
    remove_tree(base)


def _after(stdout: str, marker: str) -> str | None:
    """The stdout printed after the marker line, or None when the marker never appeared."""
    index = stdout.find(marker)
    if index < 0:
        return None
    rest = stdout[index + len(marker):]
    return rest[1:] if rest.startswith("\n") else rest
