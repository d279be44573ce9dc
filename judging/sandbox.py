"""Run one untrusted program with limits, under the strongest isolation this host offers.

Levels, strongest first (picked once by probing, never per execution):

- ``bwrap``: bubblewrap started as root builds PID, network, IPC and UTS namespaces and a private,
  read-only filesystem view holding only /usr, /proc, /dev, the interpreter's own files, and /scratch (the
  working directory, holding the program), /tmp and /dev/shm, each a fresh tmpfs of ``--judge_disk_mb``:
  nothing a test writes reaches the host disk (its pages are memory, counted in the slot's cgroup:
  judging/cgroups.py).
  Inside, ``setpriv`` drops to a per-slot unprivileged uid (so RLIMIT_NPROC binds and slots cannot signal each
  other) and ``prlimit`` sets the resource limits. bwrap runs as root rather than after the uid drop because
  the interpreter may live in a folder the slot uid cannot enter (pyenv under /root is 0700); the program
  itself still runs unprivileged with an empty capability set. A seccomp program (``seccomp_filter``) refuses
  new namespaces, setns, io_uring and the kernel keyring (which outlives processes and would carry keys from
  one test of a slot uid to the next).
  Python tests run in warm workers instead when they start (``judging/warm.py``: the same sandbox, started
  once per slot, forking a child per test); ``bwrap-cold`` in the judge keeps this path for them.
- ``unshare``: util-linux ``unshare`` gives PID, network, IPC and UTS namespaces, then ``setpriv`` and
  ``prlimit`` as above; the host filesystem stays visible with the slot uid's permissions.
- ``rlimits``: only a new session, the slot uid (when root) and resource limits; logged as weak, and
  never chosen automatically as root.

Every execution ends by SIGKILL to the sandbox's process group. With a PID namespace the namespace's
init dies with it and the kernel kills every descendant, double-forked daemons included.
"""

from __future__ import annotations

import fcntl
import functools
import grp
import math
import os
import pwd
import selectors
import signal
import stat
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cli import UsageError
from judging.cgroups import SlotCgroup

LEVELS = ("bwrap", "unshare", "rlimits")
NAMESPACE_LEVELS = ("bwrap", "unshare")
LEVEL_TOOLS = {"bwrap": "bwrap", "unshare": "unshare", "rlimits": "prlimit"}
SCRATCH = "/scratch"
# Slot uids are SLOT_UID_BASE + n. 2e9 lies outside every range that systemd and shadow hand out
# (systemd's UIDS-GIDS.md): users up to 60000, homed 60001-60513, DynamicUser 61184-65519, nobody
# 65534, /etc/subuid ranges from 100000 in 65536-uid blocks, nspawn containers 524288-1879048191,
# the "foreign" range from 2147352576, and it stays below 2^31 (tools that read uids as signed).
# REWARDS_SLOT_UID_BASE overrides it; uids or gids present in the user database are skipped.
SLOT_UID_BASE = 2_000_000_000
SLOT_UID_COUNT = 1000
# Fixed, root-only: every trainer process on the machine must see the same locks whatever its TMPDIR.
SLOT_LOCK_DIR = Path("/run/lock/rewards-slot-uids")
OUTPUT_CAP = 1 << 20


# Per architecture: the audit arch and the calls refused. clone3's flags sit in memory, where seccomp cannot read
# them, so clone3 gets ENOSYS and libc falls back to clone, whose flags it can read.
_SECCOMP_CALLS = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "unshare": 272, "clone3": 435,
               "refused": {"add_key": 248, "request_key": 249, "keyctl": 250, "setns": 308, "io_uring_setup": 425,
                           "io_uring_enter": 426, "io_uring_register": 427}},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "unshare": 97, "clone3": 435,
                "refused": {"add_key": 217, "request_key": 218, "keyctl": 219, "setns": 268, "io_uring_setup": 425,
                            "io_uring_enter": 426, "io_uring_register": 427}},
}
# Every CLONE_NEW* flag: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET; unshare also takes NEWTIME.
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_NEWTIME = 0x00000080


def seccomp_filter() -> bytes | None:
    """The seccomp program (classic BPF, as bwrap's ``--seccomp`` and prctl take it) that judged code runs under,
    on both bwrap paths. It refuses with EPERM:

    - new namespaces (``unshare`` and ``clone`` with a CLONE_NEW* flag) and ``setns``: a user namespace gives uid
      0 with every capability inside it, a network or mount namespace one to configure; most recent local
      privilege escalations start there (Docker's default profile refuses them too);
    - ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register``, for the same reason (Docker since 25);
    - the kernel keyring (``add_key``, ``request_key``, ``keyctl``): a uid's user keyring outlives its processes,
      so a program could leave keys that a later program of the same slot uid (a later test or run) reads;
    - every call of another ABI (i386, x32);

    and answers ``clone3`` with ENOSYS (see ``_SECCOMP_CALLS``). None on an architecture this does not know,
    where all of these stay reachable.
    """
    calls = _SECCOMP_CALLS.get(os.uname().machine)
    if calls is None:
        return None
    load, equal, at_least, has_bits, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, refuse, no_such_call = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # ALLOW, ERRNO | EPERM, ERRNO | ENOSYS
    number, arch, flags = 0, 4, 16  # offsets in struct seccomp_data: nr, arch, the low half of args[0]
    # (operation, jump if true, jump if false, operand); jumps name a label, resolved below.
    program = [(load, 0, 0, arch), (equal, "check_number", "refuse", calls["arch"]),
               ("check_number",), (load, 0, 0, number),
               (at_least, "refuse", 0, 0x40000000)]  # x32 numbers on x86_64
    program += [(equal, "refuse", 0, call) for call in calls["refused"].values()]
    program += [(equal, "no_such_call", 0, calls["clone3"]), (equal, "unshare", 0, calls["unshare"]),
                (equal, "clone", "allow", calls["clone"]),
                ("unshare",), (load, 0, 0, flags), (has_bits, "refuse", "allow", CLONE_NAMESPACES | CLONE_NEWTIME),
                ("clone",), (load, 0, 0, flags), (has_bits, "refuse", "allow", CLONE_NAMESPACES),
                ("allow",), (ret, 0, 0, allow), ("refuse",), (ret, 0, 0, refuse),
                ("no_such_call",), (ret, 0, 0, no_such_call)]
    labels, index = {}, 0
    for instruction in program:
        if len(instruction) == 1:
            labels[instruction[0]] = index
        else:
            index += 1
    code, index = [], 0
    for instruction in program:
        if len(instruction) == 1:
            continue
        operation, true, false, operand = instruction
        jumps = [labels[target] - index - 1 if isinstance(target, str) else target for target in (true, false)]
        code.append(struct.pack("=HBBI", operation, *jumps, operand))
        index += 1
    return b"".join(code)


SECCOMP_FILTER = seccomp_filter()


@functools.lru_cache(maxsize=1)
def _disable_userns() -> list[str]:
    """bwrap's ``--disable-userns`` (bubblewrap 0.8+, only with ``--unshare-user``, so not as root, where the
    seccomp program alone refuses user namespaces), or nothing where this bwrap lacks it."""
    help_text = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, check=False).stdout
    return ["--disable-userns"] if "--disable-userns" in help_text else []


class SandboxUnavailable(UsageError):
    """No isolation level that satisfies the request works on this host."""


@dataclass
class Limits:
    memory_mb: int = 1024
    processes: int = 32
    file_mb: int = 16
    open_files: int = 64
    disk_mb: int = 64  # the size of each of /scratch, /tmp and /dev/shm, all tmpfs, at the bwrap level

    @property
    def disk_bytes(self) -> int:
        return self.disk_mb << 20

    def prlimit_args(self, timeout: float, bind_nproc: bool) -> list[str]:
        cpu = math.ceil(timeout) + 1
        args = [
            "prlimit",
            f"--as={self.memory_mb << 20}",
            f"--cpu={cpu}:{cpu + 1}",
            f"--fsize={self.file_mb << 20}",
            f"--nofile={self.open_files}",
            "--core=0",
        ]
        if bind_nproc:
            args.append(f"--nproc={self.processes}")
        return args + ["--"]


@dataclass
class RunResult:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    output_overflow: bool


def blocked_for_others(path: str) -> str | None:
    """Why a uid that owns nothing on the host (a slot uid) cannot execute (a file) or cross (a folder)
    ``path``, or None if it can."""
    target = Path(os.path.realpath(path))
    for folder in reversed(target.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            return f"{folder} is mode {stat.S_IMODE(mode):04o}"
    mode = target.stat().st_mode
    if not mode & stat.S_IXOTH:
        return f"{target} is mode {stat.S_IMODE(mode):04o}"
    return None


def _usr_merged_links() -> list[str]:
    """bwrap arguments recreating /bin, /lib, /lib64 and /sbin as the host has them."""
    args: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


def _bind_with_parents(paths: list[str], writable: list[str] = ()) -> list[str]:
    """Binds of ``paths`` (read-only) and ``writable`` (read-write) at the same place, with traversable
    parent folders.

    bwrap creates missing parents mode 0700, which the slot uid could not cross.
    """
    args: list[str] = []
    made: set[str] = {"/", "/usr", "/proc", "/dev", "/tmp", SCRATCH}
    for path in sorted(set(paths) | set(writable)):
        if (path == "/usr" or path.startswith("/usr/")) and path not in writable:
            continue
        for parent in reversed(Path(path).parents):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--bind" if path in writable else "--ro-bind", path, path]
        made.add(path)
    return args


def slot_uid_base() -> int:
    text = os.environ.get("REWARDS_SLOT_UID_BASE")
    if text is None:
        return SLOT_UID_BASE
    if not text.isdigit() or not 65536 <= int(text) <= (1 << 31) - SLOT_UID_COUNT:
        raise SandboxUnavailable(f"REWARDS_SLOT_UID_BASE={text!r} must be a whole number from 65536 to "
                                 f"{(1 << 31) - SLOT_UID_COUNT}; unset it to use {SLOT_UID_BASE}")
    return int(text)


def _uid_is_assigned(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


class SlotUids:
    """Unprivileged uids claimed for this process's worker slots.

    A uid is claimed with an exclusive lock on a file in a root-only folder, so several trainer
    processes on one machine (one per GPU) never share a uid.
    """

    def __init__(self, count: int):
        SLOT_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = SLOT_LOCK_DIR.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077:
            raise SandboxUnavailable(f"{SLOT_LOCK_DIR} must be a folder owned by root with mode 0700; remove it")
        base = slot_uid_base()
        self._locks: list[int] = []
        self.uids: list[int] = []
        for uid in range(base, base + SLOT_UID_COUNT):
            if len(self.uids) == count:
                break
            if _uid_is_assigned(uid):
                continue
            fd = os.open(SLOT_LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._locks.append(fd)
            self.uids.append(uid)
        if len(self.uids) < count:
            self.release()
            raise SandboxUnavailable(f"fewer than {count} free sandbox uids in {base}-{base + SLOT_UID_COUNT - 1}")

    def release(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()


class Sandbox:
    """Builds and runs sandboxed command lines; one instance per judge and program kind.

    ``read_only`` are host paths the program needs (interpreter prefix, q binary, QHOME, ...);
    ``env`` is the complete environment the program sees. ``read_write`` are host files it may write
    (q's KX_ACCT); ``hostname`` is the name it sees (q keeps the host's: k4.lic is bound to it).
    ``netns`` maps each slot uid to a network namespace (an open fd) the program runs in instead of a
    fresh one: the licence proxy's slot namespaces (judging/licence_proxy.py). ``hidden`` are folders inside
    the view that the program must not see (the interpreter's site-packages): each is covered by an empty one.
    """

    def __init__(self, level: str, limits: Limits, read_only: list[str], env: dict[str, str],
                 read_write: list[str] = (), hostname: str = "sandbox", netns: dict[int, int] | None = None,
                 hidden: list[str] = ()):
        if level not in LEVELS:
            raise ValueError(f"unknown sandbox level {level!r}; use one of {', '.join(LEVELS)}")
        self.level = level
        self.limits = limits
        self.env = dict(env)
        self.as_root = os.geteuid() == 0
        self.hostname = hostname
        self.netns = netns
        self.prefix = self._build_prefix(read_only, list(read_write), list(hidden))

    def _build_prefix(self, read_only: list[str], read_write: list[str], hidden: list[str]) -> list[str]:
        if self.level == "bwrap":
            namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            if self.netns is not None:
                namespaces.remove("--unshare-net")
            if not self.as_root:
                namespaces += ["--unshare-user", *_disable_userns()]
            args = ["bwrap", *namespaces, "--die-with-parent", "--new-session", "--clearenv",
                    "--hostname", self.hostname, "--ro-bind", "/usr", "/usr", *_usr_merged_links(),
                    "--proc", "/proc", "--dev", "/dev",
                    "--perms", "1777", "--size", str(self.limits.disk_bytes), "--tmpfs", "/tmp",
                    "--perms", "1777", "--size", str(self.limits.disk_bytes), "--tmpfs", "/dev/shm",  # multiprocessing
                    *_bind_with_parents(read_only, read_write)]
            for path in hidden:  # an empty, unwritable folder over it (0555: the root warm worker cannot write it)
                args += ["--perms", "0555", "--size", "4096", "--tmpfs", path]
            for key, value in self.env.items():
                args += ["--setenv", key, value]
            return args
        if self.level == "unshare":
            net = [] if self.netns is not None else ["--net"]
            return ["unshare", *net, "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
        return []

    def describe(self, slot_uids: bool) -> str:
        if slot_uids:
            uid = f"uid {slot_uid_base()}+ per slot"
        elif self.as_root:
            uid = ("judged code runs as root: it can read every file and the trainer's environment and kill "
                   "the trainer; fork bombs not contained")
        else:
            uid = f"judged code runs as the trainer's user (uid {os.geteuid()}) and can read its files"
        limits = f"rlimits as={self.limits.memory_mb}MB cpu nproc fsize nofile core"
        if self.level == "bwrap":
            keyring = ", seccomp: no new namespaces, setns, io_uring or kernel keyring" if SECCOMP_FILTER else ""
            disk = f"/scratch, /tmp, /dev/shm tmpfs of {self.limits.disk_mb} MB each (nothing reaches the host disk)"
            return f"bwrap: pid+net+ipc+uts namespaces, private read-only fs, {disk}, {uid}, {limits}{keyring}"
        disk = "disk unbounded but for fsize (scratch is a host folder)"
        if self.level == "unshare":
            return f"unshare: pid+net+ipc+uts namespaces, host fs visible, {disk}, {uid}, {limits}"
        return f"rlimits (weak): no namespaces, network and host fs reachable, {disk}, {uid}, {limits}"

    def command(self, argv: list[str], scratch: str | None, uid: int | None, timeout: float,
                seccomp_fd: int | None = None, program: tuple[str, int] | None = None,
                cgroup: SlotCgroup | None = None) -> list[str]:
        """The command line; at the bwrap level /scratch is a fresh tmpfs and ``program`` (a file name and a
        descriptor holding it) is copied into it, else ``scratch`` (a host folder) is the working folder. The
        program joins the slot's ``cgroup`` before anything else runs."""
        drop = []
        if uid is not None:
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs", "--"]
        limits = self.limits.prlimit_args(timeout, bind_nproc=uid is not None)
        outer = []
        if self.netns is not None and self.level in NAMESPACE_LEVELS:
            # nsenter opens the judge's fd through /proc and closes it before exec: no fd leaks inside.
            outer = ["nsenter", f"--net=/proc/{os.getpid()}/fd/{self.netns[uid]}", "--"]
        if self.level == "bwrap":
            seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
            files = ["--perms", "0644", "--file", str(program[1]), f"{SCRATCH}/{program[0]}"] if program else []
            binds, join = cgroup.join_inside() if cgroup else ([], [])
            return [*outer, *self.prefix, *seccomp, *binds, "--perms", "0777", "--size", str(self.limits.disk_bytes),
                    "--tmpfs", SCRATCH, *files, "--chdir", SCRATCH, "--setenv", "HOME", SCRATCH, *join, *drop,
                    *limits, *argv]
        command = [*outer, *self.prefix, *drop, *limits, *argv]
        return cgroup.enter_command(command) if cgroup else command

    def run(self, argv: list[str], scratch: str | None, uid: int | None, timeout: float,
            program: tuple[str, bytes] | None = None, cgroup: SlotCgroup | None = None) -> RunResult:
        """Run ``argv`` in ``scratch`` (a host folder; at the bwrap level a fresh tmpfs holding ``program``, a
        file name and its bytes, instead), inside the slot's ``cgroup`` when there is one; everything it started
        is dead when this returns."""
        env = None
        cwd = None
        if self.level != "bwrap":
            env = {**self.env, "HOME": scratch}
            cwd = scratch
        passed: list[int] = []
        try:
            seccomp = None
            if self.level == "bwrap" and SECCOMP_FILTER:
                seccomp = _pipe_holding(SECCOMP_FILTER)
                passed.append(seccomp)
            held = None
            if self.level == "bwrap" and program:
                held = (program[0], _memfd_holding(program[1]))
                passed.append(held[1])
            command = self.command(argv, scratch, uid, timeout, seccomp, held, cgroup)
            start = time.monotonic()
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True,
                close_fds=True, pass_fds=passed,
            )
        finally:
            for fd in passed:
                os.close(fd)
        try:
            out, err, timed_out, overflow = _read_capped(proc, start + timeout, OUTPUT_CAP)
        finally:
            _kill_group(proc)
            if uid is not None and self.level == "rlimits":
                _kill_uid(uid)
            if cgroup:
                cgroup.wait_settled()
        seconds = time.monotonic() - start
        return RunResult(
            returncode=None if timed_out or overflow else proc.returncode,
            stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
            seconds=seconds, timed_out=timed_out, output_overflow=overflow,
        )


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (bwrap reads a seccomp program from a descriptor to its end)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def _memfd_holding(data: bytes) -> int:
    """A memory file holding ``data``, read from its start (bwrap's ``--file`` copies it into the sandbox)."""
    fd = os.memfd_create("program", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read_capped(out_fd: int, err_fd: int, deadline: float, cap: int) -> tuple[bytes, bytes, bool, bool]:
    """Read both pipes until EOF, the deadline, or either stream passing ``cap`` bytes:
    (stdout, stderr, timed out, over the cap)."""
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(buffers[out_fd]), bytes(buffers[err_fd]), True, False
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffers[key.fd] += chunk
                if len(buffers[key.fd]) > cap:
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
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "kill", "-9", "-1"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
