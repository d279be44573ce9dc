"""Warm Python workers: one per slot, started once inside bubblewrap, forking a fresh child per execution.

A cold execution pays bubblewrap, setpriv, prlimit and the interpreter's start-up (~30 ms) for every
test. A warm worker pays them once: it is ``python -I -S -B`` inside the slot's own bubblewrap sandbox (the
same namespaces and read-only view as a cold execution), and per execution it forks a child, pid 1 of a PID
namespace of its own as a cold program is, which gets a mount and IPC namespace of its own (and the slot's network
namespace, only loopback, fresh whenever an earlier test left a socket in it), a fresh tmpfs at /scratch holding
the program and at /tmp and /dev/shm (each ``--judge_disk_mb``), its own pipes, the limits and the slot uid, then
runs the program (``judging/worker/`` says how: it is the worker's program). What the child gets is the cold
path's policy (judging/policy.py): the worker cannot import this package, so it gets the rules as JSON when it
starts and each test's limits packed with its request (``judging/worker/protocol.py``, the one contract both sides
import).

Why the worker is root inside the sandbox and the child the slot uid: a child cannot signal, ptrace or
open the files of a process of another uid, so nothing a program does reaches the worker; and the worker
can then kill every process the child left behind without killing itself. The worker keeps only the
capabilities it needs (SETUID, SETGID, SYS_ADMIN and NET_ADMIN for the child's namespaces and loopback,
KILL, SETPCAP to empty the child's bounding set) and never runs judged code.

A worker that fails (does not start, dies, hangs, answers nonsense) is dropped; the execution it was running
is run again on the cold path, and the slot's next execution starts a new worker.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

from judging.cgroups import SlotCgroup, warm_joining
from judging.policy import EMPTY_TMPFS, PROC_EMPTY, PROC_VIEW, SCRATCH, worker_rules
from judging.running import OUTPUT_CAP, RunResult, input_file, memfd_holding, read_capped
from judging.sandbox import Sandbox
from judging.worker import protocol

WORKER = str(Path(__file__).with_name("worker"))  # the worker's folder, its modules copied into WORKER_INSIDE
WORKER_INSIDE = "/warm_worker"
# What the worker keeps: SETUID, SETGID for the uid drop, SYS_ADMIN and NET_ADMIN for the child's namespaces,
# mounts and loopback, KILL, SETPCAP to empty the child's bounding set.
CAPABILITIES = ("CAP_SETUID", "CAP_SETGID", "CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_KILL", "CAP_SETPCAP")
CAPABILITY_NUMBERS = {
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_SETPCAP": 8,
    "CAP_NET_ADMIN": 12,
    "CAP_SYS_ADMIN": 21,
}
START_TIMEOUT = 10.0
# Past the test's timeout, how long a worker may take to kill, reap and reply before it counts as failed.
REPLY_GRACE = 2.0


class WorkerFailed(RuntimeError):
    """The warm worker did not start, died, hung or broke the protocol; the message says which."""


class WarmWorker:
    """One slot's worker: ``run`` one execution at a time, ``close`` at the end. ``program`` is the name its
    program's file gets in /scratch (the executor's ``filename``); ``log`` is where the worker's stderr goes.

    It starts in the calling thread (bwrap dies with the thread that started it: ``--die-with-parent``) and is
    waited for unless ``wait`` is false; then ``wait_ready`` must come before ``run``."""

    def __init__(
        self,
        sandbox: Sandbox,
        interpreter: str,
        program: str,
        uid: int,
        log: str,
        cgroup: SlotCgroup | None = None,
        wait: bool = True,
    ):
        self.sandbox = sandbox
        rules = {
            **worker_rules(sandbox.limits, program, sandbox.seccomp),
            "capabilities": [CAPABILITY_NUMBERS[name] for name in CAPABILITIES],
        }
        self.log = log
        self.cgroup = cgroup
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        capabilities = [arg for cap in CAPABILITIES for arg in ("--cap-add", cap)]
        # The worker joins the slot's cgroup: it and every child it forks count against its memory and tasks.
        binds, join = warm_joining(cgroup)
        # Each child binds the fixed /proc files from PROC_VIEW over its fresh /proc, and PROC_EMPTY over the folders
        # it empties (judging/policy.py); both are mounts the child then unmounts. The fixed files are copied into
        # PROC_VIEW (bwrap --file), as are the worker's modules into WORKER_INSIDE: a bind of a host file or folder
        # would show its host path in a test's /proc/self/mountinfo.
        data = {f"{PROC_VIEW}/{name}": memfd_holding(content) for name, content in sandbox.proc_frozen.items()}
        view = [arg for path, fd in data.items() for arg in ("--perms", "0444", "--file", str(fd), path)]
        if view:  # a tmpfs as the cold path's files lie on one (mode 1777, the default, shows no mode), read-only
            view = [
                "--perms",
                "1777",
                "--tmpfs",
                PROC_VIEW,
                *view,
                "--remount-ro",
                PROC_VIEW,
                *EMPTY_TMPFS,
                PROC_EMPTY,
                "--remount-ro",
                PROC_EMPTY,
            ]
        modules = {
            f"{WORKER_INSIDE}/{module.name}": memfd_holding(module.read_bytes())
            for module in sorted(Path(WORKER).glob("*.py"))
        }
        data.update(modules)
        copies = [arg for path, fd in modules.items() for arg in ("--perms", "0444", "--file", str(fd), path)]
        command = [
            *sandbox.warm_prefix,
            "--dir",
            SCRATCH,
            *view,
            "--perms",
            "0555",
            "--dir",
            WORKER_INSIDE,
            *copies,
            *binds,
            "--chdir",
            SCRATCH,
            "--cap-drop",
            "ALL",
            *capabilities,
            *join,
            interpreter,
            "-I",
            "-S",
            "-B",
            f"{WORKER_INSIDE}/main.py",
            *protocol.start_arguments(theirs.fileno(), uid, rules),
        ]
        try:
            with theirs, open(self.log, "wb") as log:
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pass_fds=(theirs.fileno(), *data.values()),
                    start_new_session=True,
                )
        finally:
            for fd in data.values():
                os.close(fd)
        self._deadline = time.monotonic() + START_TIMEOUT
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait for the worker's first message (ready); close it and raise WorkerFailed if another comes or none."""
        try:
            if not protocol.is_ready(self._receive(self._deadline)):
                raise WorkerFailed("the worker's first message was not ready")
        except WorkerFailed:
            self.close()
            raise

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, program: bytes, timeout: float, stdin: bytes | None = None) -> RunResult:
        """Run ``program`` under the policy's limits for ``timeout`` with ``stdin`` as its standard input (None:
        /dev/null); raise WorkerFailed if the worker fails."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        start = time.monotonic()
        try:
            passed = [out_write, err_write]  # then the program's memory file and the standard input
            try:
                passed += [memfd_holding(program)]
                passed += [input_file(stdin)]
                request = protocol.pack_request(timeout, self.sandbox.limits.rlimits(timeout))
                try:
                    socket.send_fds(self.control, [request], passed)
                except OSError as error:
                    raise WorkerFailed(f"the worker is gone ({error})") from None
            finally:
                for fd in passed:
                    os.close(fd)
            deadline = start + timeout + REPLY_GRACE
            out, err, stuck, overflow = read_capped(out_read, err_read, deadline, OUTPUT_CAP)
        finally:
            os.close(out_read)
            os.close(err_read)
        if stuck or overflow:
            try:
                self.control.send(protocol.STOP)
            except OSError as error:
                raise WorkerFailed(f"the worker is gone ({error})") from None
        try:
            reply = protocol.unpack_reply(self._receive(max(time.monotonic(), start + timeout) + REPLY_GRACE))
        except protocol.ProtocolError as error:
            raise WorkerFailed(f"the warm worker answered nonsense: {error}") from None
        if not reply["setup"]:
            why = err.decode("utf-8", "replace").strip()[-500:] or self._log_tail()
            raise WorkerFailed(f"the child's set-up failed: {why}")
        timed_out = reply["timed_out"] or stuck
        returncode = None if timed_out or overflow or reply["stopped"] else reply["exit_code"]
        return RunResult(
            returncode=returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            seconds=time.monotonic() - start,
            timed_out=timed_out,
            output_overflow=overflow,
        )

    def _receive(self, deadline: float) -> bytes:
        """The worker's next message, or WorkerFailed (with the end of its log) if none comes by ``deadline``."""
        ready, _, _ = select.select([self.control], [], [], max(0.0, deadline - time.monotonic()))
        try:
            message = self.control.recv(protocol.MESSAGE_BYTES) if ready else b""
        except OSError:
            message = b""
        if not message:
            what = "did not answer in time" if not ready else "hung up"
            raise WorkerFailed(f"the warm worker {what}: {self._log_tail() or 'no message in its log'}")
        return message

    def _log_tail(self) -> str:
        try:
            lines = Path(self.log).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def hang_up(self) -> None:
        """Close the control socket: the worker, waiting for its next request, exits."""
        self.control.close()

    def close(self) -> None:
        """Hang up (the worker exits), then kill bubblewrap's process group to be sure, and wait for bubblewrap and
        (where there is one) for the worker's cgroup to empty: the worker, in a session and PID namespace of its own,
        dies with bubblewrap's but not at once."""
        self.hang_up()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        if self.cgroup:
            self.cgroup.wait_settled()


class WarmWorkers:
    """The warm workers of a judge's slots, keyed by slot uid, each one's stderr going to ``base/warm-UID.log``.
    ``start`` starts them all at once; a slot whose worker is not running (never started, dropped) starts one on
    its next execution.

    ``run`` returns None when the slot's worker could not run the execution (it is dropped and ``failure``
    says why); the caller then runs it cold.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        interpreter: str,
        program: str,
        base: str,
        uids: list[int],
        cgroups: dict[int, SlotCgroup] | None = None,
    ):
        self.sandbox = sandbox
        self.cgroups = cgroups or {}
        self.interpreter = interpreter
        self.program = program
        self.logs = {uid: os.path.join(base, f"warm-{uid}.log") for uid in uids}
        self.workers: dict[int, WarmWorker] = {}  # those started and not dropped
        self.failure: str | None = None
        self.failures = 0

    def start(self) -> None:
        """Start every slot's worker side by side (each takes ~40 ms for its interpreter to start), from the calling
        thread; one that fails is dropped, as in ``run``, and its slot tries again on its next execution."""
        started = {}
        for uid in self.logs:
            if uid not in self.workers:
                try:
                    started[uid] = self._new_worker(uid, wait=False)
                except (WorkerFailed, OSError) as error:
                    self._drop(uid, str(error))
        for uid, worker in started.items():
            try:
                worker.wait_ready()
            except WorkerFailed as error:
                self._drop(uid, str(error))
                continue
            self.workers[uid] = worker

    def run(self, uid: int, program: bytes, timeout: float, stdin: bytes | None = None) -> RunResult | None:
        worker = self.workers.get(uid)
        try:
            if worker is None or not worker.alive():
                if worker is not None:
                    self._drop(uid, "the warm worker died between executions")
                worker = self.workers[uid] = self._new_worker(uid)
            return worker.run(program, timeout, stdin)
        except (WorkerFailed, OSError) as error:
            self._drop(uid, str(error))
            return None

    def _new_worker(self, uid: int, wait: bool = True) -> WarmWorker:
        return WarmWorker(
            self.sandbox, self.interpreter, self.program, uid, self.logs[uid], self.cgroups.get(uid), wait
        )

    def _drop(self, uid: int, why: str) -> None:
        self.failure = why
        self.failures += 1
        worker = self.workers.pop(uid, None)
        if worker is not None:
            worker.close()

    def close(self) -> None:
        workers = [self.workers.pop(uid) for uid in list(self.workers)]
        for worker in workers:  # every worker told first, then each waited for: they exit side by side
            worker.hang_up()
        for worker in workers:
            worker.close()
