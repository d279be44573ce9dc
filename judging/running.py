"""Running one program to its end: start it in its own session, read its stdout and stderr up to a cap until its
deadline, then kill everything it started. ``run_cold`` runs a test in a fresh sandbox (judging/sandbox.py builds
the command line); judging/warm.py reads a warm child's output with the same ``read_capped``.

Every execution ends by SIGKILL to the sandbox's process group. With a PID namespace the kernel then kills every
descendant, double-forked daemons included, when the namespace's pid 1 dies: at the bwrap level that is the program
itself (judging/policy.py), which lost bwrap's parent-death signal when it took the slot uid, so it is killed first,
through a pidfd taken from bwrap's ``--info-fd``.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass

from judging.cgroups import SlotCgroup
from judging.policy import environment
from judging.sandbox import Sandbox

OUTPUT_CAP = 1 << 20
REAP_GRACE = 2.0  # how long bwrap may take to reap the killed program and exit


@dataclass
class RunResult:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    output_overflow: bool


def run_cold(
    sandbox: Sandbox,
    argv: list[str],
    scratch: str | None,
    uid: int | None,
    timeout: float,
    program: tuple[str, bytes] | None = None,
    cgroup: SlotCgroup | None = None,
    stdin: bytes | None = None,
) -> RunResult:
    """Run ``argv`` in ``scratch`` (a host folder; at a level with a view of its own, a fresh tmpfs holding
    ``program``, a file name and its bytes, instead), inside the slot's ``cgroup`` when there is one, with ``stdin``
    as its standard input (None: /dev/null); everything it started is dead when this returns."""
    own_view = sandbox.level.own_view
    env = None
    cwd = None
    if not own_view:  # the program runs in the host folder, with the environment bwrap sets in a view
        env = environment(sandbox.env, scratch)
        cwd = scratch
    passed: list[int] = []
    opened: list[int] = []  # closed with ``passed`` once the program started, not passed to it
    info = None
    try:
        info_write = seccomp = held = None
        proc_fds = {}
        if own_view:  # bwrap reads each of these from a descriptor, and writes the program's pid to ``info_write``
            info, info_write = os.pipe()
            passed.append(info_write)
            if sandbox.seccomp:
                seccomp = _pipe_holding(sandbox.seccomp)
                passed.append(seccomp)
            if program:
                held = (program[0], memfd_holding(program[1]))
                passed.append(held[1])
            for name, content in sandbox.proc_frozen.items():
                proc_fds[name] = _pipe_holding(content)
                passed.append(proc_fds[name])
        command = sandbox.command(argv, uid, timeout, seccomp, held, cgroup, info_write, proc_fds)
        standard_input = input_file(stdin)
        opened.append(standard_input)  # Popen gives the program its own copy, as descriptor 0
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            stdin=standard_input,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
            pass_fds=passed,
        )
    finally:
        for fd in passed + opened:
            os.close(fd)
    pid_1 = None
    try:
        if info is not None:
            pid_1 = _namespace_pid_1(info, start + timeout)
        out, err, timed_out, overflow = _read_capped(proc, start + timeout, OUTPUT_CAP)
    finally:
        if pid_1 is not None:
            _kill_pidfd(pid_1)
            try:  # bwrap reaps it and exits; killed first, it would leave it a zombie of the slot uid for the host's init
                proc.wait(REAP_GRACE)
            except subprocess.TimeoutExpired:
                pass
        if info is not None:
            os.close(info)
        _kill_group(proc)
        if uid is not None and not sandbox.level.namespaces:
            _kill_uid(uid)
        if cgroup:
            cgroup.wait_settled()
    seconds = time.monotonic() - start
    return RunResult(
        returncode=None if timed_out or overflow else proc.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        seconds=seconds,
        timed_out=timed_out,
        output_overflow=overflow,
    )


def _namespace_pid_1(info: int, deadline: float) -> int | None:
    """A pidfd of the process bwrap forked as pid 1 of the sandbox's PID namespace, from what bwrap writes to its
    ``--info-fd`` as soon as it has forked it (``{"child-pid": N}``, then it closes the descriptor); None if bwrap
    wrote nothing by ``deadline`` (it failed before)."""
    text = b""
    while select.select([info], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(info, 4096)
        if not chunk:
            break
        text += chunk
    try:
        return os.pidfd_open(int(json.loads(text)["child-pid"]))
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _kill_pidfd(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (bwrap reads a seccomp program, or a file's content, from a
    descriptor to its end; ``data`` must fit in the pipe's buffer, 64 KiB)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def memfd_holding(data: bytes) -> int:
    """A memory file holding ``data``, read from its start (bwrap's ``--file`` copies it into the sandbox; a warm
    worker's child reads it)."""
    fd = os.memfd_create("program", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def input_file(data: bytes | None) -> int:
    """A test's standard input: a memory file holding ``data``, sealed (no process can change it) and read from its
    start, or /dev/null when ``data`` is None. It lives in the judge's memory: no path reaches it, so no other test
    can read it, and the program gets it as its descriptor 0 only."""
    if data is None:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    fd = os.memfd_create("input", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(
            fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        )
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def read_capped(out_fd: int, err_fd: int, deadline: float, cap: int) -> tuple[bytes, bytes, bool, bool]:
    """Read both pipes until EOF, the deadline, or either stream passing ``cap`` bytes:
    (stdout, stderr, timed out, over the cap)."""
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN)
    open_fds = len(buffers)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(buffers[out_fd]), bytes(buffers[err_fd]), True, False
        for fd, _ in poller.poll(left * 1000):
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # EOF (POLLHUP with nothing left to read)
                poller.unregister(fd)
                open_fds -= 1
                continue
            buffers[fd] += chunk
            if len(buffers[fd]) > cap:
                return bytes(buffers[out_fd][:cap]), bytes(buffers[err_fd][:cap]), False, True
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), False, False


def _read_capped(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytes, bytes, bool, bool]:
    out, err, timed_out, overflow = read_capped(proc.stdout.fileno(), proc.stderr.fileno(), deadline, cap)
    if timed_out or overflow:
        return out, err, timed_out, overflow
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return out, err, True, False
    return out, err, False, False


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def _kill_uid(uid: int) -> None:
    """Without a PID namespace, daemons escape the process group: kill everything the slot uid owns."""
    subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "kill", "-9", "-1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
