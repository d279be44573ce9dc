"""The judge's set-up, apart from judging: its slots, the sandbox level, warm workers, licence egress, runners.

Built once per judge. ``Slots`` claims what each parallel slot needs (an unprivileged uid and a cgroup, as root)
and the judge's folder. ``Runners`` chooses the sandbox level by probing it with a real test through the judge's
own execution path (so a level that passes can run tests), starts warm workers for Python, sets up licence
egress for a language whose executor is ``licensed`` (q), and builds each language's runner (executor and
sandbox) once.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Callable

from cli import UsageError
from judging import languages
from judging.cgroups import Cgroups
from judging.executors import PythonExecutor
from judging.licence_proxy import (FLAG, PROXY_ENV, TLS_TRUST, LicenceEgressUnavailable, LicenceProxy,
                                   describe_hosts)
from judging.sandbox import LEVEL_TOOLS, LEVELS, NAMESPACE_LEVELS, Limits, Sandbox, SlotUids, blocked_for_others
from judging.scratch import remove_tree
from judging.warm import WarmWorkers

PROBE_TIMEOUT = 10.0
PROBE_TEST = {"test_code": "print('ok')", "expected_output": "ok"}
# bwrap-cold: bubblewrap with a fresh interpreter per Python test; bwrap, auto and strict use warm workers
# for Python when they start (root only) and fall back to that.
COLD_BWRAP = "bwrap-cold"
SANDBOX_CHOICES = ("auto", "strict", "bwrap", COLD_BWRAP, "unshare", "rlimits")
logger = logging.getLogger(__name__)


class JudgeUnavailable(UsageError):
    """The judge cannot run this language here; the message names the fix."""


@dataclass
class Runner:
    executor: object  # an executor of judging/executors.py
    sandbox: Sandbox


class Slots:
    """The judge's parallel slots: a queue of free slot uids (None each when not root), their cgroups, and the
    judge's folder. A judge that is never closed still removes its folder and cgroups and frees its uids at exit.
    """

    def __init__(self, workers: int, limits: Limits):
        self.workers = workers
        self.uids = SlotUids(workers) if os.geteuid() == 0 else None
        self.free: queue.Queue = queue.Queue()
        for uid in self.uids.uids if self.uids else [None] * workers:
            self.free.put(uid)
        self.base = tempfile.mkdtemp(prefix="rewards-judge-")
        self.cgroups = Cgroups(self.uids.uids if self.uids else [], limits.memory_mb << 20, limits.processes)
        self.close = weakref.finalize(self, _release, self.base, self.uids, self.cgroups)
        # Slot uids must cross it to reach their own scratch folders inside (unshare and rlimits levels).
        os.chmod(self.base, 0o711)

    def run_as_root(self) -> None:
        """Give the slot uids (and so the cgroups) back: judged code then runs as root (explicit rlimits only)."""
        self.uids.release()
        self.uids = None
        self.cgroups.close()
        self.cgroups.slots = {}
        self.cgroups.unavailable = "judged code runs as root, which may leave any cgroup"
        self.free = queue.Queue()
        for _ in range(self.workers):
            self.free.put(None)


class Runners:
    """The level in force, the warm workers, the licence proxy and each language's runner, built once.

    ``probe(runner, code, test, timeout)`` runs one test the way every test runs and returns its TestResult; ``choose``
    (called once the judge can run tests) picks the level and starts the warm workers.
    """

    def __init__(self, slots: Slots, limits: Limits, q_binary: str | None, licence_hosts,
                 probe: Callable[[Runner, str, dict, float], object]):
        self.slots = slots
        self.limits = limits
        self.q_binary = q_binary
        self.licence_hosts = licence_hosts
        self._probe = probe
        self.level = ""
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        self.proxy: LicenceProxy | None = None
        self.egress = ""  # what judged q can reach, once q's runner exists
        self.warm: WarmWorkers | None = None
        self.warm_missing: str | None = None  # why Python runs cold, if it does

    def choose(self, sandbox: str) -> None:
        self.warm_missing = COLD_BWRAP if sandbox == COLD_BWRAP else None
        self.level = self._pick_level("bwrap" if sandbox == COLD_BWRAP else sandbox)
        if self.level == "bwrap" and sandbox != COLD_BWRAP:
            self._start_warm()

    def _pick_level(self, wanted: str) -> str:
        """The level to use; ``auto`` as root never picks rlimits, which would run judged code as root
        beside the trainer (reading its data and environment, able to kill it)."""
        if wanted in ("auto", "strict"):
            levels = LEVELS if wanted == "auto" and os.geteuid() != 0 else NAMESPACE_LEVELS
        else:
            levels = (wanted,)
        level, failures = self._first_working_level(levels)
        if not level and wanted == "rlimits" and self.slots.uids is not None:
            self.slots.run_as_root()
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
        blocked = blocked_for_others(interpreter) if self.slots.uids is not None else None
        if blocked and wanted != "bwrap":
            fixes.append(f"run with a Python the sandbox uid can execute ({interpreter} is out of its reach: "
                         f"{blocked})")
        base_blocked = blocked_for_others(self.slots.base) if self.slots.uids is not None else None
        if base_blocked and wanted != "bwrap":
            fixes.append(f"set TMPDIR to a folder others can cross (the judge's folder {self.slots.base} is out of "
                         f"the sandbox uid's reach: {base_blocked})")
        if wanted == "auto" and os.geteuid() == 0:
            fixes.append("or pass sandbox='rlimits' to accept running judged code with no namespaces "
                         "(as root when the sandbox uid cannot run this Python)")
        return f"{problem} ({'; '.join(failures)}): " + ("; ".join(fixes) or "see the errors above")

    def _first_working_level(self, levels: tuple[str, ...]) -> tuple[str, list[str]]:
        """The first of ``levels`` that runs a real Python test end to end; and why the others failed.

        The probe takes the same path as every execution (program, slot uid, limits), so a level that passes
        it can run tests.
        """
        failures: list[str] = []
        python = PythonExecutor()
        for level in levels:
            if shutil.which(LEVEL_TOOLS[level]) is None:
                failures.append(f"{level}: {LEVEL_TOOLS[level]} not installed")
                continue
            runner = Runner(python, Sandbox(level, self.limits, python.read_only, python.env, hidden=python.hidden))
            result = self._probe(runner, "", PROBE_TEST, PROBE_TIMEOUT)
            if result.status == "passed":
                return level, failures
            reason = (result.stderr.strip().splitlines() or [result.status])[-1]
            failures.append(f"{level}: {reason}")
        return "", failures

    def _start_warm(self) -> None:
        """Use warm workers for Python if one starts and passes the probe; else say why Python stays cold."""
        if self.slots.uids is None:
            self.warm_missing = "warm workers need root"
            return
        python = self.get("python")
        try:
            self.warm = WarmWorkers(python.sandbox, python.executor.interpreter, self.slots.base, self.slots.uids.uids,
                                    self.slots.cgroups.slots)
        except OSError as error:
            self.warm_missing = f"warm workers did not start: {error}"
            return
        self._warm_cleanup = weakref.finalize(self, self.warm.close)
        result = self._probe(python, "", PROBE_TEST, PROBE_TIMEOUT)
        if result.status != "passed" or self.warm.failures:
            self.warm_missing = f"warm workers did not start: {self.warm.failure or result.status}"
            self._warm_cleanup()
            self.warm = None

    def get(self, language: str) -> Runner:
        with self._lock:
            if language not in self._runners:
                executor = languages.language(language).make_executor(self.q_binary)
                runner = Runner(executor, Sandbox(self.level, self.limits, executor.read_only, executor.env,
                                                  executor.read_write, executor.hostname, hidden=executor.hidden))
                if executor.licensed and not executor.missing:
                    runner = self._licence_egress(runner)
                self._runners[language] = runner
            return self._runners[language]

    def _licence_egress(self, runner: Runner) -> Runner:
        """A licensed language's runner with egress only through the licence proxy, when ``licence_hosts`` asks
        for some, else ``runner`` (no network). With ``auto``, the proxy records what the language's trusted
        preflight program contacts; that becomes the allow-list, and nothing contacted means no proxy at all."""
        hosts = self.licence_hosts
        if self.level == "rlimits":
            self.egress = f"q reaches the network directly ({FLAG} has no effect without namespaces)"
            return runner
        if hosts == ():
            self.egress = f"judged q has no network ({FLAG} none)"
            return runner
        try:
            if self.slots.uids is None:
                raise LicenceEgressUnavailable("licence egress needs the judge to run as root (a network namespace "
                                               "per slot)")
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
        proxied = Runner(executor, Sandbox(self.level, self.limits, [*executor.read_only, *TLS_TRUST],
                                           {**executor.env, **PROXY_ENV}, executor.read_write, executor.hostname,
                                           netns=proxy.netns, hidden=executor.hidden))
        if hosts == "auto":
            test = {"test_code": languages.language(executor.language).preflight_code, "expected_output": "2"}
            self._probe(proxied, "", test, PROBE_TIMEOUT)
            hosts = tuple(sorted(proxy.contacted))
            proxy.enforce(hosts)
            if not hosts:
                proxy.close()
                self.egress = f"judged q has no network (q contacted no host at its start-up check, {FLAG} auto)"
                logger.info("%s", self.egress)
                return runner
            logger.info("q licence egress (%s auto): q's start-up check contacted %s; judged q may reach only "
                        "these, through the judge's proxy", FLAG, describe_hosts(hosts))
        self.proxy = proxy
        weakref.finalize(self, proxy.close)
        self.egress = f"judged q reaches only {describe_hosts(hosts)}, through the licence proxy"
        return proxied

    def describe(self) -> str:
        """What protects the host, for the trainer's log."""
        base = Sandbox(self.level, self.limits, [], {}).describe(slot_uids=self.slots.uids is not None)
        if self.warm is not None:
            python = ("Python: warm workers (one per slot, root in its sandbox with 6 capabilities; each test "
                      "a forked child with its own PID+mount+IPC+net namespace, /tmp, pipes, limits and the slot uid)")
        else:
            python = "Python: a fresh interpreter per test" + (f" ({self.warm_missing})" if self.warm_missing else "")
        return "; ".join(part for part in (base, self.memory_bound(), python, self.egress) if part)

    def memory_bound(self) -> str:
        """What bounds one test's memory: its slot's cgroup, or (where none can be made) only per-process limits."""
        limits, cgroups = self.limits, self.slots.cgroups
        if cgroups.version:
            return cgroups.describe(limits.memory_mb, limits.processes)
        tmpfs = f", /scratch, /tmp and /dev/shm {limits.disk_mb} MB each" if self.level == "bwrap" else ""
        return (f"memory: NOT bounded per test ({cgroups.unavailable}); only per process: address space "
                f"{limits.memory_mb} MB each, at most {limits.processes} processes per slot uid{tmpfs}, memfd "
                f"pages unbounded")

    def close_steps(self) -> list[Callable[[], None]]:
        """What closing them takes, in order (the judge runs each even if one fails)."""
        steps = []
        if self.proxy:
            steps.append(self.proxy.close)
        if self.warm is not None:
            steps.append(self._warm_cleanup)
        return steps


def _release(base: str, slot_uids: SlotUids | None, cgroups: Cgroups) -> None:
    cgroups.close()
    if slot_uids:
        slot_uids.release()
    remove_tree(base)
