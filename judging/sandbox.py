"""The sandbox levels and the command line that builds each: how one untrusted program is isolated from the host.

Levels, strongest first (picked once by probing, judging/setup.py, never per execution):

- ``bwrap``: bubblewrap started as root builds PID, network, IPC and UTS namespaces and a private,
  read-only filesystem view holding only /usr, /proc, /dev, the interpreter's own files, and the test's own
  tmpfs folders (judging/policy.py: /scratch, the working directory holding the program, /tmp and /dev/shm,
  each of ``--judge_disk_mb``): nothing a test writes reaches the host disk (its pages are memory, counted in the
  slot's cgroup: judging/cgroups/).
  Inside, ``setpriv`` drops to a per-slot unprivileged uid (judging/slots.py: so RLIMIT_NPROC binds and slots
  cannot signal each other) and ``prlimit`` sets the resource limits. bwrap runs as root rather than after the
  uid drop because the interpreter may live in a folder the slot uid cannot enter (pyenv under /root is 0700);
  the program itself still runs unprivileged with an empty capability set, under the seccomp program
  (judging/seccomp.py).
  Python tests run in warm workers instead when they start (``judging/warm.py``: the same sandbox, started
  once per slot, forking a child per test, under the same policy); ``bwrap-cold`` in the judge keeps this path
  for them.
- ``unshare``: util-linux ``unshare`` gives PID, network, IPC and UTS namespaces, then ``setpriv`` and
  ``prlimit`` as above; the host filesystem stays visible with the slot uid's permissions.
- ``rlimits``: only a new session, the slot uid (when root) and resource limits; logged as weak, and
  never chosen automatically as root.

judging/levels.py holds the levels as values (what each needs and isolates, where the program lies);
judging/running.py runs the command line this builds.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from judging.cgroups import SlotCgroup
from judging.levels import Level
from judging.policy import DEV_EMPTIED, EMPTY_TMPFS, PROGRAM_MODE, SCRATCH, TMPFS, Limits, environment, proc_emptied
from judging.seccomp import SECCOMP_FILTER, UNAVAILABLE, allowed_calls
from judging.slots import slot_uid_base


@functools.lru_cache(maxsize=1)
def _disable_userns() -> list[str]:
    """bwrap's ``--disable-userns`` (bubblewrap 0.8+, only with ``--unshare-user``, so not as root, where the
    seccomp program alone refuses user namespaces), or nothing where this bwrap lacks it."""
    help_text = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, check=False).stdout
    return ["--disable-userns"] if "--disable-userns" in help_text else []


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
    made: set[str] = {"/", "/usr", "/proc", "/dev", *TMPFS}
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


def tmpfs(path: str, limits: Limits) -> list[str]:
    """bwrap arguments mounting one of the test's own tmpfs folders (judging/policy.py: TMPFS) at ``path``."""
    return ["--perms", f"{TMPFS[path]:04o}", "--size", str(limits.disk_bytes), "--tmpfs", path]


class Sandbox:
    """Builds sandboxed command lines; one instance per judge and program kind.

    ``read_only`` are host paths the program needs (interpreter prefix, q binary, QHOME, ...);
    ``env`` is the environment the program sees besides HOME (judging/policy.py: environment). ``read_write``
    are host files it may write (q's KX_ACCT); ``hostname`` is the name it sees (q keeps the host's: k4.lic is bound to it).
    ``netns`` maps each slot uid to a network namespace (an open fd) the program runs in instead of a
    fresh one: the licence proxy's slot namespaces (judging/licence_proxy.py). ``hidden`` are folders inside
    the view that the program must not see (the interpreter's site-packages): each is covered by an empty one.
    ``proc_frozen`` maps each fixed /proc file's name to its content (judging/policy.py: frozen_proc), bound over
    the live one at the bwrap level from a descriptor (bwrap ``--ro-bind-data``: no host path shows in a test's
    /proc/self/mountinfo). ``seccomp`` is the seccomp program the program runs under there
    (judging/seccomp.py; the executor's).
    """

    def __init__(
        self,
        level: Level,
        limits: Limits,
        read_only: list[str],
        env: dict[str, str],
        read_write: list[str] = (),
        hostname: str = "sandbox",
        netns: dict[int, int] | None = None,
        hidden: list[str] = (),
        proc_frozen: dict[str, bytes] | None = None,
        seccomp: bytes | None = SECCOMP_FILTER,
    ):
        self.level = level
        self.limits = limits
        self.env = dict(env)
        self.as_root = os.geteuid() == 0
        self.hostname = hostname
        self.netns = netns
        self.proc_frozen = dict(proc_frozen or {})
        self.seccomp = seccomp
        self.prefix = self._build_prefix(read_only, list(read_write), list(hidden))
        # A warm worker's sandbox (judging/warm.py): its children mount /proc afresh and mask it themselves, so its
        # own /proc needs no masks, which every child's mount namespace would otherwise copy and tear down again.
        # Its cgroup namespace comes once it has joined its slot (judging/cgroups/slot.py: warm_joining).
        self.warm_prefix = self._build_prefix(
            read_only, list(read_write), list(hidden), proc_masks=False, cgroup_namespace=False
        )

    def _proc_emptied(self) -> list[str]:
        """bwrap arguments emptying the machine-wide folders of /proc (judging/policy.py)."""
        if not self.proc_frozen:
            return []
        args = []
        for name in proc_emptied():
            args += [*EMPTY_TMPFS, f"/proc/{name}", "--remount-ro", f"/proc/{name}"]
        return args

    def _build_prefix(
        self,
        read_only: list[str],
        read_write: list[str],
        hidden: list[str],
        proc_masks: bool = True,
        cgroup_namespace: bool = True,
    ) -> list[str]:
        if self.level.own_view:
            namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
            if cgroup_namespace:
                namespaces.append("--unshare-cgroup-try")
            if self.netns is not None:
                namespaces.remove("--unshare-net")
            if not self.as_root:
                namespaces += ["--unshare-user", *_disable_userns()]
            args = [
                "bwrap",
                *namespaces,
                "--die-with-parent",
                "--new-session",
                "--clearenv",
                "--hostname",
                self.hostname,
                "--ro-bind",
                "/usr",
                "/usr",
                *_usr_merged_links(),
                "--proc",
                "/proc",
                *(self._proc_emptied() if proc_masks else []),
                "--dev",
                "/dev",
                *(arg for path in DEV_EMPTIED for arg in (*EMPTY_TMPFS, path, "--remount-ro", path)),
                *(arg for path in TMPFS if path != SCRATCH for arg in tmpfs(path, self.limits)),
                *_bind_with_parents(read_only, read_write),
            ]
            for path in hidden:  # an empty, unwritable folder over it (0555: the root warm worker cannot write it)
                args += [*EMPTY_TMPFS, path]
            for key, value in environment(self.env).items():
                args += ["--setenv", key, value]
            return args
        if self.level.namespaces:
            net = [] if self.netns is not None else ["--net"]
            return ["unshare", *net, "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
        return []

    def describe(self, slot_uids: bool) -> str:
        if slot_uids:
            uid = f"uid {slot_uid_base()}+ per slot"
        elif self.as_root:
            uid = (
                "judged code runs as root: it can read every file and the trainer's environment and kill "
                "the trainer; fork bombs not contained"
            )
        else:
            uid = f"judged code runs as the trainer's user (uid {os.geteuid()}) and can read its files"
        limits = f"rlimits as={self.limits.memory_mb}MB cpu nproc fsize nofile core"
        calls = ""
        if self.level.own_view:
            counts = f"{len(allowed_calls('python'))} for Python, {len(allowed_calls('q'))} for q"
            calls = (
                f", seccomp: an allow-list of system calls ({counts}), the rest refused, no pty"
                if self.seccomp
                else f", NO seccomp program ({UNAVAILABLE or f'none for {os.uname().machine}'})"
            )
        return f"{self.level.describe(self.limits.disk_mb)}, {uid}, {limits}{calls}"

    def command(
        self,
        argv: list[str],
        uid: int | None,
        timeout: float,
        seccomp_fd: int | None = None,
        program: tuple[str, int] | None = None,
        cgroup: SlotCgroup | None = None,
        info_fd: int | None = None,
        proc_fds: dict[str, int] | None = None,
    ) -> list[str]:
        """The command line; at a level with a view of its own /scratch is a fresh tmpfs and ``program`` (a file
        name and a descriptor holding it) is copied into it, else the caller runs it in a host folder. The program
        joins the slot's ``cgroup`` before anything else runs (bwrap too, whose cgroup namespace is then rooted
        there). bwrap writes the pid of the program's process to ``info_fd`` and reads each fixed /proc file from
        ``proc_fds`` (its name: a descriptor holding ``proc_frozen[name]``)."""
        drop = []
        if uid is not None:
            drop = [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        limits = self.limits.prlimit_args(timeout, bind_nproc=uid is not None)
        outer = []
        if self.netns is not None and self.level.namespaces:
            # nsenter opens the judge's fd through /proc and closes it before exec: no fd leaks inside.
            outer = ["nsenter", f"--net=/proc/{os.getpid()}/fd/{self.netns[uid]}", "--"]
        if self.level.own_view:
            seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
            info = ["--info-fd", str(info_fd)] if info_fd is not None else []
            files = (
                ["--perms", f"{PROGRAM_MODE:04o}", "--file", str(program[1]), f"{SCRATCH}/{program[0]}"]
                if program
                else []
            )
            frozen = [
                arg
                for name, fd in (proc_fds or {}).items()
                for arg in ("--perms", "0444", "--ro-bind-data", str(fd), f"/proc/{name}")
            ]
            # --as-pid-1: no init; the program is pid 1 of its PID namespace, as a warm one is (judging/policy.py).
            command = [
                *outer,
                *self.prefix,
                *frozen,
                "--as-pid-1",
                *info,
                *seccomp,
                *tmpfs(SCRATCH, self.limits),
                *files,
                "--chdir",
                SCRATCH,
                *drop,
                *limits,
                *argv,
            ]
        else:
            command = [*outer, *self.prefix, *drop, *limits, *argv]
        return cgroup.enter_command(command) if cgroup else command
