"""The rules one judged test runs under, declared once: what it may take (``Limits``), what it sees (its own tmpfs
folders, /proc, its working folder and environment) and which system calls it may not make (judging/seccomp.py).

Both ways a test runs at the bwrap level read them from here: the bwrap command line of a cold execution
(judging/sandbox.py) and the warm worker that forks a child per test (judging/warm.py starts it). The worker runs
``python -I -S -B`` inside its sandbox, where this package is not in view: it gets ``worker_rules`` as JSON once,
when it starts, and ``Limits.rlimits`` packed with every request (judging/worker/protocol.py). The weaker levels
(unshare, rlimits) take the limits and the environment; they have no view of their own.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


# A test's program is pid 1 of a PID namespace of its own, with no init above it (bwrap --as-pid-1 cold; the warm
# worker forks it so, judging/worker/loop.py): when it exits, the kernel kills every process it left. As pid 1 it
# ignores a signal it sends itself while that signal's action is the default (os.kill(os.getpid(), SIGTERM) does not
# end it; a handler still runs), and it inherits its orphans (unreaped, they wait as zombies until the test ends).
SCRATCH = "/scratch"  # the test's working folder and HOME, holding its program (mode PROGRAM_MODE)
PROGRAM_MODE = 0o644
# The folders of each test's own, each a fresh tmpfs of ``Limits.disk_mb`` (memory, counted in the slot's cgroup;
# nothing reaches the host disk), and their modes. /dev/shm is there for multiprocessing's locks.
TMPFS = {SCRATCH: 0o777, "/tmp": 0o1777, "/dev/shm": 0o1777}
# A fresh /proc of the test's own PID namespace, with these covered read-only (what bwrap's --proc does).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
# Machine-wide counters under /proc that one test reads and another, judged at the same time, moves (load, threads,
# memory, interrupts, disk, pressure, open files): a channel between concurrent tests, measured at 22 of 32 bits a
# round through /proc/loadavg alone (benchmarks/proc_channel.py). A test sees fixed content in each of these files
# (``frozen_proc``: the same for every test) and an empty read-only folder over each of PROC_EMPTIED; what stays
# live under /proc is the test's own (/proc/self, its PID namespace's pids, /proc/net, /proc/sysvipc) or static.
# /proc/sys/fs holds the machine's file, inode, AIO and pipe counts; /proc/sys/kernel/pty the machine's pty count
# (every sandbox's devpts draws on one pool, /proc/sys/kernel/pty/max less the host's reserve).
PROC_EMPTIED = ("fs", "irq", "pressure", "sys/fs", "sys/kernel/pty")
# A test's /dev/pts: an empty read-only folder over the devpts bwrap's --dev mounts (so /dev/ptmx, its link, leads
# nowhere). Judged code gets no pty: ptys are one machine-wide pool (above), which one test could drain for every
# other sandbox, and a count that moves with every test's.
DEV_EMPTIED = ("/dev/pts",)
# Where a warm worker sees the frozen files: unmounted before a test runs, under SCRATCH, which the test's own tmpfs
# then covers (the test never sees even the empty mount point).
PROC_VIEW = f"{SCRATCH}/.proc-view"
# Where a warm worker keeps one empty read-only tmpfs (mode 0555, 4 KiB), made as bwrap makes each of PROC_EMPTIED
# cold: each child binds it over each of PROC_EMPTIED (a bind keeps its source's read-only, nosuid and nodev flags,
# so one mount call instead of a tmpfs and a remount each), then unmounts it, as PROC_VIEW.
PROC_EMPTY = f"{SCRATCH}/.proc-empty"
# bwrap's arguments for an empty 4 KiB tmpfs of mode 0555 at a path (the cold path's PROC_EMPTIED, remounted
# read-only, and the folders a view hides).
EMPTY_TMPFS = ("--perms", "0555", "--size", "4096", "--tmpfs")
# prlimit's flag for each resource limit.
PRLIMIT_FLAGS = {
    "RLIMIT_AS": "as",
    "RLIMIT_CPU": "cpu",
    "RLIMIT_FSIZE": "fsize",
    "RLIMIT_NOFILE": "nofile",
    "RLIMIT_CORE": "core",
    "RLIMIT_NPROC": "nproc",
}


# The judge's defaults, declared here only: ``Judge`` (judging/judge.py) and the judge's flags
# (judging/arguments.py: ``JudgeArguments``) read them.
DEFAULT_TIMEOUT = 1.0  # seconds per test of the training reward
DEFAULT_EVAL_TIMEOUT = 2.0  # seconds per test where nothing trains: pass@k, `rewards score`, `data verify|strengthen`
COMPLETION_BUDGET_TIMEOUTS = 3.0  # all tests of one completion together: this many timeouts, unless given
DEFAULT_SANDBOX = "auto"  # the strongest level that works here (judging/levels.py: SANDBOX_CHOICES)
DEFAULT_LICENCE_HOSTS = "auto"  # what judged q may reach (judging/licence_proxy.py)
DEFAULT_MEMORY_MB = 1024
DEFAULT_DISK_MB = 64


def default_workers(local_ranks: int = 1) -> int:
    """Slots (executions at once) of a judge: one per core this process may run on (its affinity: a Slurm job's or
    a container's cpuset, not the machine's cores, so each slot's CPU (judging/cgroups/pinning.py) is one the others cannot
    take), the cores shared among the processes (ranks) of a node that each judge their own completions."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // local_ranks)


@dataclass
class Limits:
    memory_mb: int = DEFAULT_MEMORY_MB  # per process (RLIMIT_AS), and per test in the slot's cgroup (judging/cgroups/)
    processes: int = 32  # per slot uid (RLIMIT_NPROC), and the slot cgroup's pids.max beside the sandbox's own
    file_mb: int = 16
    open_files: int = 64
    disk_mb: int = DEFAULT_DISK_MB  # the size of each of TMPFS, at the bwrap level

    @property
    def disk_bytes(self) -> int:
        return self.disk_mb << 20

    def rlimits(self, timeout: float, bind_nproc: bool = True) -> dict[str, tuple[int, int]]:
        """Each resource limit of one test, (soft, hard): CPU seconds follow the test's timeout; RLIMIT_NPROC counts
        the uid's processes, so it binds only with a slot uid (``bind_nproc``)."""
        cpu = math.ceil(timeout) + 1
        limits = {
            "RLIMIT_AS": (self.memory_mb << 20,) * 2,
            "RLIMIT_CPU": (cpu, cpu + 1),
            "RLIMIT_FSIZE": (self.file_mb << 20,) * 2,
            "RLIMIT_NOFILE": (self.open_files,) * 2,
            "RLIMIT_CORE": (0, 0),
        }
        if bind_nproc:
            limits["RLIMIT_NPROC"] = (self.processes,) * 2
        return limits

    def prlimit_args(self, timeout: float, bind_nproc: bool) -> list[str]:
        """``rlimits`` as a ``prlimit ... --`` command prefix (the cold path and the weaker levels)."""
        args = ["prlimit"]
        for name, (soft, hard) in self.rlimits(timeout, bind_nproc).items():
            args.append(f"--{PRLIMIT_FLAGS[name]}={soft}" if soft == hard else f"--{PRLIMIT_FLAGS[name]}={soft}:{hard}")
        return args + ["--"]


def environment(env: dict[str, str], home: str = SCRATCH) -> dict[str, str]:
    """The complete environment of a test: the executor's ``env`` (nothing of the judge's own) and HOME, its working
    folder."""
    return {**env, "HOME": home}


def frozen_proc(limits: Limits) -> dict[str, str]:
    """What each machine-wide /proc file shows a test: well-formed where programs parse it (an idle machine with
    this host's CPU count and the test's memory bound), empty where nothing a test needs reads it."""
    kib = limits.memory_mb << 10
    cpus = "".join(f"cpu{index} 0 0 0 0 0 0 0 0 0 0\n" for index in range(os.cpu_count() or 1))
    shown = {
        "loadavg": "0.00 0.00 0.00 1/1 1\n",
        "uptime": "0.00 0.00\n",
        "stat": f"cpu  0 0 0 0 0 0 0 0 0 0\n{cpus}intr 0\nctxt 0\nbtime 0\nprocesses 1\nprocs_running 1\n"
        f"procs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n",
        "meminfo": f"MemTotal: {kib} kB\nMemFree: {kib} kB\nMemAvailable: {kib} kB\nBuffers: 0 kB\n"
        f"Cached: 0 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        "swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
    }
    # /proc/locks lists the OFD locks of every PID namespace (the host's, a q test's) with their ranges.
    empty = (
        "vmstat",
        "zoneinfo",
        "buddyinfo",
        "pagetypeinfo",
        "interrupts",
        "softirqs",
        "diskstats",
        "schedstat",
        "cgroups",
        "locks",
    )
    return {
        name: content
        for name, content in {**shown, **dict.fromkeys(empty, "")}.items()
        if os.path.isfile(f"/proc/{name}")
    }


def proc_emptied() -> list[str]:
    """The folders of PROC_EMPTIED this kernel has."""
    return [name for name in PROC_EMPTIED if os.path.isdir(f"/proc/{name}")]


def worker_rules(limits: Limits, program: str, seccomp: bytes | None) -> dict:
    """What a warm worker must do for each child, sent as JSON when it starts: the tmpfs folders and their size,
    /proc (what it covers read-only, freezes from ``PROC_VIEW`` and empties with ``PROC_EMPTY``), where the program
    goes (``SCRATCH``/``program``), and the seccomp program (hex)."""
    return {
        "tmpfs": dict(TMPFS),
        "tmpfs_bytes": limits.disk_bytes,
        "proc_read_only": list(PROC_READ_ONLY),
        "proc_view": PROC_VIEW,
        "proc_empty": PROC_EMPTY,
        "proc_frozen": sorted(frozen_proc(limits)),
        "proc_emptied": proc_emptied(),
        "scratch": SCRATCH,
        "program": program,
        "program_mode": PROGRAM_MODE,
        "seccomp": seccomp.hex() if seccomp else None,
    }
