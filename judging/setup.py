"""The judge's set-up, apart from judging: the sandbox level, warm workers, licence egress and each language's
runner, over the judge's slots (judging/slots.py).

Built once per judge. ``JudgeSetup`` chooses the sandbox level by probing it with a real test through the one
execution path every test takes (judging/execution.py, so a level that passes can run tests), starts warm workers
for Python, sets up licence egress for a language whose executor is ``licensed`` (q), and builds each language's
runner (executor and sandbox) once. It is public: ``Judge.setup``, for callers and tests that need to look in.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from cli import UsageError
from judging import languages
from judging.executors import PythonExecutor
from judging.execution import Counter, Runner, execute
from judging.grading import TestResult
from judging.licence_proxy import FLAG, PROXY_ENV, TLS_TRUST, LicenceEgressUnavailable, LicenceProxy, describe_hosts
from judging.levels import BWRAP, COLD_BWRAP, Level, candidates
from judging.policy import Limits, frozen_proc
from judging.records import Calls, Test
from judging.sandbox import Sandbox
from judging.slots import Slots, blocked_for_others
from judging.warm import WarmWorkers

PROBE_TIMEOUT = 10.0
PROBE_TEST = Test("print('ok')", "ok")
logger = logging.getLogger(__name__)


class JudgeUnavailable(UsageError):
    """The judge cannot run this language here; the message names the fix."""


class JudgeSetup:
    """The judge's slots, the level in force (a ``Level``; ``sandbox`` is what was asked for, one of
    judging/levels.py's ``SANDBOX_CHOICES``), the warm workers, the licence proxy and each language's runner, built
    once. ``licence_retries`` counts the runs of every test (probes included) that were run again after a licence
    failure.
    """

    def __init__(self, workers: int, limits: Limits, sandbox: str, q_binary: str | None, licence_hosts):
        self.slots = Slots(workers, limits)
        self.limits = limits
        self.proc_frozen = {name: content.encode() for name, content in frozen_proc(limits).items()}
        self.q_binary = q_binary
        self.licence_hosts = licence_hosts
        self.licence_retries = Counter()
        self.level: Level | None = None
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        self.proxy: LicenceProxy | None = None
        self.egress = ""  # what judged q can reach, once q's runner exists
        self.warm: WarmWorkers | None = None
        self.warm_missing: str | None = None  # why Python runs cold, if it does
        try:
            self._choose(sandbox)
        except BaseException:
            self.slots.close()
            raise

    def execute(self, runner: Runner, code: str, test: Test, timeout: float) -> TestResult:
        """Run and grade one test in a free slot, the way every test runs."""
        return execute(runner, code, test, timeout, self.slots, self.warm, self.licence_retries)[0]

    def execute_calls(self, runner: Runner, code: str, calls: Calls, timeout: float) -> list[TestResult]:
        """Run a run of calls in one program in a free slot and grade each call (judging/records.py, `Calls`)."""
        return execute(runner, code, calls, timeout, self.slots, self.warm, self.licence_retries)

    def _choose(self, sandbox: str) -> None:
        cold = sandbox == COLD_BWRAP
        self.warm_missing = COLD_BWRAP if cold else None
        levels = candidates(sandbox, as_root=os.geteuid() == 0)
        started = None
        if not cold and levels[0].warm and self.slots.uids is not None and shutil.which(levels[0].tool):
            # A level with warm workers is tried first and workers can run (root): they start here, in this thread
            # (they die with the thread that starts them), while another probes the level. Both mostly wait for
            # interpreters to start, so side by side they take the time of one. The workers are used only if that
            # level passes its probe and they pass theirs.
            with ThreadPoolExecutor(max_workers=1) as pool:
                probe = pool.submit(self._pick_level, sandbox, levels)
                started = self._started_workers()
                try:
                    self.level = probe.result()
                except BaseException:
                    started.close()
                    raise
        else:
            self.level = self._pick_level(sandbox, levels)
        if self.level.warm and not cold:
            self._start_warm(started)
        elif started:
            started.close()

    def _started_workers(self) -> WarmWorkers:
        """Warm workers for the slots, started, with bwrap's runner for Python (what ``get`` builds at that level)."""
        python = self._runner("python", BWRAP)
        warm = WarmWorkers(
            python.sandbox,
            python.executor.interpreter,
            python.executor.filename,
            self.slots.base,
            self.slots.uids.uids,
            self.slots.warm_cgroups.slots,
        )
        try:
            warm.start()
        except BaseException:
            warm.close()
            raise
        return warm

    def _pick_level(self, sandbox: str, levels: tuple[Level, ...]) -> Level:
        """The first of ``levels`` (what ``sandbox`` asks for) that works. Only an explicit rlimits falls back to
        running judged code as root, when the slot uid cannot run Python."""
        level, failures = self._first_working_level(levels)
        if not level and sandbox == "rlimits" and self.slots.uids is not None:
            self.slots.run_as_root()
            level, more = self._first_working_level(levels)
            failures += more
        if not level:
            raise JudgeUnavailable(self._unavailable(sandbox, levels, failures))
        return level

    def _unavailable(self, wanted: str, levels: tuple[Level, ...], failures: list[str]) -> str:
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
        blocked = blocked_for_others(interpreter) if self.slots.uids is not None else None
        host_view = any(not level.own_view for level in levels)  # the slot uid reaches the host's files there
        if blocked and host_view:
            fixes.append(
                f"run with a Python the sandbox uid can execute ({interpreter} is out of its reach: {blocked})"
            )
        base_blocked = blocked_for_others(self.slots.base) if self.slots.uids is not None else None
        if base_blocked and host_view:
            fixes.append(
                f"set TMPDIR to a folder others can cross (the judge's folder {self.slots.base} is out of "
                f"the sandbox uid's reach: {base_blocked})"
            )
        if wanted == "auto" and os.geteuid() == 0:
            fixes.append(
                "or pass sandbox='rlimits' to accept running judged code with no namespaces "
                "(as root when the sandbox uid cannot run this Python)"
            )
        return f"{problem} ({'; '.join(failures)}): " + ("; ".join(fixes) or "see the errors above")

    def _first_working_level(self, levels: tuple[Level, ...]) -> tuple[Level | None, list[str]]:
        """The first of ``levels`` that runs a real Python test end to end; and why the others failed.

        The probe takes the same path as every execution (program, slot uid, limits), so a level that passes
        it can run tests.
        """
        failures: list[str] = []
        python = PythonExecutor()
        for level in levels:
            if shutil.which(level.tool) is None:
                failures.append(f"{level.name}: {level.tool} not installed")
                continue
            runner = Runner(
                python,
                Sandbox(
                    level,
                    self.limits,
                    python.read_only,
                    python.env,
                    hidden=python.hidden,
                    proc_frozen=self.proc_frozen,
                    seccomp=python.seccomp,
                ),
            )
            result = self.execute(runner, "", PROBE_TEST, PROBE_TIMEOUT)
            if result.status == "passed":
                return level, failures
            reason = (result.stderr.strip().splitlines() or [result.status])[-1]
            failures.append(f"{level.name}: {reason}")
        return None, failures

    def _start_warm(self, started: WarmWorkers | None) -> None:
        """Use the warm workers ``started`` beside the level probe (None only where they cannot run: not root) for
        Python if every one started and one passes the probe; else say why Python stays cold."""
        if started is None:
            self.warm_missing = "warm workers need root"
            return
        self.warm = started
        self._warm_cleanup = weakref.finalize(self, self.warm.close)
        python = self.get("python")
        result = self.execute(python, "", PROBE_TEST, PROBE_TIMEOUT)
        if result.status != "passed" or self.warm.failures:
            self.warm_missing = f"warm workers did not start: {self.warm.failure or result.status}"
            self._warm_cleanup()
            self.warm = None

    def get(self, language: str) -> Runner:
        with self._lock:
            if language not in self._runners:
                runner = self._runner(language, self.level)
                if runner.executor.licensed and not runner.executor.missing:
                    runner = self._licence_egress(runner)
                self._runners[language] = runner
            return self._runners[language]

    def _runner(self, language: str, level: Level) -> Runner:
        """``language``'s executor in a sandbox of ``level`` (no licence egress)."""
        executor = languages.language(language).make_executor(self.q_binary)
        return Runner(
            executor,
            Sandbox(
                level,
                self.limits,
                executor.read_only,
                executor.env,
                executor.read_write,
                executor.hostname,
                hidden=executor.hidden,
                proc_frozen=self.proc_frozen,
                seccomp=executor.seccomp,
            ),
        )

    def _licence_egress(self, runner: Runner) -> Runner:
        """A licensed language's runner with egress only through the licence proxy, when ``licence_hosts`` asks
        for some, else ``runner`` (no network). With ``auto``, the proxy records what the language's trusted
        preflight program contacts; that becomes the allow-list, and nothing contacted means no proxy at all."""
        hosts = self.licence_hosts
        if not self.level.namespaces:
            self.egress = f"q reaches the network directly ({FLAG} has no effect without namespaces)"
            return runner
        if hosts == ():
            self.egress = f"judged q has no network ({FLAG} none)"
            return runner
        try:
            if self.slots.uids is None:
                raise LicenceEgressUnavailable(
                    "licence egress needs the judge to run as root (a network namespace per slot)"
                )
            if shutil.which("nsenter") is None:
                raise LicenceEgressUnavailable("licence egress needs nsenter (apt-get install util-linux)")
            proxy = LicenceProxy(self.slots.uids.uids, None if hosts == "auto" else hosts)
        except LicenceEgressUnavailable as error:
            if hosts != "auto":
                raise JudgeUnavailable(f"{FLAG} {describe_hosts(hosts)}: {error}; or use {FLAG} none") from None
            self.egress = f"judged q has no network ({FLAG} auto: {error})"
            logger.info("%s", self.egress)
            return runner
        executor = runner.executor
        proxied = Runner(
            executor,
            Sandbox(
                self.level,
                self.limits,
                [*executor.read_only, *TLS_TRUST],
                {**executor.env, **PROXY_ENV},
                executor.read_write,
                executor.hostname,
                netns=proxy.netns,
                hidden=executor.hidden,
                proc_frozen=self.proc_frozen,
                seccomp=executor.seccomp,
            ),
        )
        if hosts == "auto":
            self.execute(proxied, "", Test(languages.language(executor.language).preflight_code, "2"), PROBE_TIMEOUT)
            hosts = tuple(sorted(proxy.contacted))
            proxy.enforce(hosts)
            if not hosts:
                proxy.close()
                self.egress = f"judged q has no network (q contacted no host at its start-up check, {FLAG} auto)"
                logger.info("%s", self.egress)
                return runner
            logger.info(
                "q licence egress (%s auto): q's start-up check contacted %s; judged q may reach only "
                "these, through the judge's proxy",
                FLAG,
                describe_hosts(hosts),
            )
        self.proxy = proxy
        weakref.finalize(self, proxy.close)
        self.egress = f"judged q reaches only {describe_hosts(hosts)}, through the licence proxy"
        return proxied

    def describe(self) -> str:
        """What protects the host, for the trainer's log."""
        base = Sandbox(self.level, self.limits, [], {}).describe(slot_uids=self.slots.uids is not None)
        if self.warm is not None:
            python = (
                "Python: warm workers (one per slot, root in its sandbox with 6 capabilities; each test "
                "a forked child, pid 1 of its own PID namespace, with its own mount and IPC namespace, /tmp, "
                "pipes, limits and the slot uid, in the slot's network namespace while no test left a socket "
                "there)"
            )
        else:
            python = "Python: a fresh interpreter per test" + (f" ({self.warm_missing})" if self.warm_missing else "")
        if self.level.own_view and PythonExecutor.seccomp is not None:
            python += ", Unix sockets only, no file locks or watches"
        cpu = self.slots.cgroups.describe_cpu()
        return "; ".join(part for part in (base, self.memory_bound(), cpu, python, self.egress) if part)

    def memory_bound(self) -> str:
        """What bounds one test's memory: its slot's cgroup, or (where none can be made) only per-process limits."""
        limits, cgroups = self.limits, self.slots.cgroups
        if cgroups.version:
            return cgroups.describe(limits.memory_mb, limits.processes)
        tmpfs = f", /scratch, /tmp and /dev/shm {limits.disk_mb} MB each" if self.level.own_view else ""
        return (
            f"memory: NOT bounded per test ({cgroups.unavailable}); only per process: address space "
            f"{limits.memory_mb} MB each, at most {limits.processes} processes per slot uid{tmpfs}, memfd "
            f"pages unbounded"
        )

    def close_steps(self) -> list[Callable[[], None]]:
        """What closing them takes, in order (the judge runs each even if one fails)."""
        steps = []
        if self.proxy:
            steps.append(self.proxy.close)
        if self.warm is not None:
            steps.append(self._warm_cleanup)
        return steps + [self.slots.close]
