"""The system calls judged code may not make: a seccomp program built with libseccomp (rules by call name, arguments
compared by the library) and exported as classic BPF, the bytes bwrap's ``--seccomp`` and prctl take; applied on both
bwrap paths (cold: bwrap ``--seccomp``; warm: prctl in the child, judging/worker/isolation.py).

Why a block-list and not an allow-list: a judged program is a whole CPython (or q) with its standard library,
``subprocess``, ``multiprocessing``, threads and ``ctypes``; the calls it legitimately makes vary with the
interpreter's version, libc and what the solution imports, and an allow-list that missed one would turn a correct
answer into ``runtime_error`` (a wrong reward), on one host and not another. The sandbox's other layers already
bound what an allowed call can reach (an unprivileged uid with no capabilities, namespaces, a read-only view,
rlimits and a cgroup). What the program adds is the few calls that those layers do not cover and that are where
most recent local privilege escalations start, refused here with EPERM:

- new namespaces (``unshare``, and ``clone`` with a CLONE_NEW* flag) and ``setns``: a user namespace gives uid 0
  with every capability inside it, a network or mount namespace one to configure (Docker's default profile
  refuses them too);
- ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register``, for the same reason (Docker since 25);
- the kernel keyring (``add_key``, ``request_key``, ``keyctl``): a uid's user keyring outlives its processes, so a
  program could leave keys that a later program of the same slot uid (a later test or run) reads;
- every call of another ABI (i386, x32), whose numbers the checks below would not match;
- for Python only (``SECCOMP_FILTER_PYTHON``), ``sysinfo``: its load averages, process count and free
  memory are the machine's, moved by any test judged at the same time (the channel judging/policy.py closes under
  /proc; ``os.getloadavg`` then raises OSError). q keeps it: q may read its physical memory through it at start,
  and without a licensed q here that cannot be tried, so a q test can still read those counters;
- for Python only, every socket but a Unix one (``socket`` and ``socketpair`` of another family get
  EAFNOSUPPORT): a TCP connection's TIME_WAIT entry, the stack's counters (/proc/net/snmp, the loopback's
  statistics) and its caches outlive the processes that made them, so a test with network sockets would need a
  network namespace of its own, where a Unix socket dies with its processes and a warm worker's tests can share one
  (judging/worker/loop.py). multiprocessing and asyncio need only Unix sockets; q keeps the network (its licence
  check, ``hopen``) and a fresh namespace per test;
- for Python only (``file_locks``), every file lock: ``flock`` and fcntl's lock commands (F_SETLK, F_SETLKW,
  F_GETLK and their OFD forms; ``lockf`` is built on them). A lock is the inode's, and every sandbox shares the
  inodes of its read-only view (the standard library, the interpreter, /dev/null): a lock one test takes there,
  any other test on the machine sees (F_GETLK answers with the holder's offset and length, two 63-bit numbers;
  flock with "busy"): a channel of ~120 bits a lock between tests judged at the same time, and between judges. A test's
  own files are its own, but seccomp cannot tell one file from another, so a program that locks even those gets
  EPERM: ``sqlite3`` on a database file fails at once ("access permission denied"; ENOLCK would make it wait out
  its busy timeout), while ``:memory:`` and the ``unix-none`` VFS (``file:db?vfs=unix-none``) take no lock and
  work. q keeps locks (untried without a licensed q: kdb+ may lock its files), so q tests can still signal to
  each other through them;
- for Python only (``file_watches``), inotify (``inotify_init``, ``inotify_init1``): a watch is the inode's too,
  so a test watching a folder of the shared view is told the name of every file in it that any process on the
  machine opens or reads (another test, another judge, the trainer), a channel of a file name an open. Nothing
  in the standard library watches files; q keeps inotify (untried);

and ``clone3`` is answered with ENOSYS: its flags sit in memory, where seccomp cannot read them, and libc then falls
back to ``clone``, whose flags it can. Where libseccomp is missing (``pyseccomp`` finds none), or on an architecture
not listed in ``CLONE_FLAGS``, there is no program (None) and all of these stay reachable (``Sandbox.describe`` then
says so in the isolation line, with ``UNAVAILABLE``'s reason).

The comparisons are libseccomp's, of whole 64-bit arguments unless masked: clone's and unshare's flags and fcntl's
command are read through a 32-bit mask, as the kernel reads them (a command with upper bits set would otherwise pass
as another and run as itself); a socket family is compared whole, so one with upper bits set, which no libc call
passes, is refused even where its low half, all the kernel reads, is AF_UNIX.
"""

from __future__ import annotations

import errno
import os

try:
    import pyseccomp
    UNAVAILABLE = ""
except (ImportError, RuntimeError, OSError) as error:  # RuntimeError: pyseccomp found no libseccomp
    pyseccomp, UNAVAILABLE = None, f"no libseccomp ({error})"

# Where ``clone`` reads its flags, on each architecture that has a program (its first argument on both; s390 has
# them second).
CLONE_FLAGS = {"x86_64": 0, "aarch64": 0}
# Refused with EPERM, everywhere: the kernel keyring, setns, io_uring.
REFUSED = ("add_key", "request_key", "keyctl", "setns", "io_uring_setup", "io_uring_enter", "io_uring_register")
# Refused with EPERM for Python only: calls that read the machine's counters.
MACHINE_WIDE = ("sysinfo",)
# fcntl's lock commands (its second argument): F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW
# (the 64-bit architectures have no separate F_*LK64); refused with EPERM for Python only, as is flock.
LOCK_COMMANDS = (5, 6, 7, 36, 37, 38)
# Refused with EPERM for Python only: inotify, which reports other processes' opens and reads of shared files.
FILE_WATCHES = ("inotify_init", "inotify_init1")
# Every CLONE_NEW* flag: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET; unshare also takes NEWTIME.
CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
CLONE_NEWTIME = 0x00000080
AF_UNIX = 1


def seccomp_filter(machine_wide: bool = False, unix_sockets_only: bool = False, file_locks: bool = False,
                   file_watches: bool = False) -> bytes | None:
    """The program for this machine's architecture (what the module docstring lists), refusing the calls that read
    machine-wide counters too when ``machine_wide``, sockets of every family but AF_UNIX when ``unix_sockets_only``,
    every file lock when ``file_locks`` and inotify when ``file_watches``; None where there is no program
    (``UNAVAILABLE``, or an architecture not in ``CLONE_FLAGS``)."""
    flags = CLONE_FLAGS.get(os.uname().machine)
    if pyseccomp is None or flags is None:
        return None
    refuse, has_bit = pyseccomp.ERRNO(errno.EPERM), pyseccomp.MASKED_EQ
    program = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    program.set_attr(pyseccomp.Attr.ACT_BADARCH, refuse)  # another ABI (i386, and x32 on x86_64)
    for call in REFUSED + (MACHINE_WIDE if machine_wide else ()) + (FILE_WATCHES if file_watches else ()):
        program.add_rule(refuse, call)
    program.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACES + (CLONE_NEWTIME,):
        program.add_rule(refuse, "unshare", pyseccomp.Arg(0, has_bit, flag, flag))
    for flag in CLONE_NAMESPACES:
        program.add_rule(refuse, "clone", pyseccomp.Arg(flags, has_bit, flag, flag))
    if unix_sockets_only:
        for call in ("socket", "socketpair"):
            program.add_rule(pyseccomp.ERRNO(errno.EAFNOSUPPORT), call, pyseccomp.Arg(0, pyseccomp.NE, AF_UNIX))
    if file_locks:
        program.add_rule(refuse, "flock")
        for command in LOCK_COMMANDS:
            # The kernel reads the command as an unsigned int: its low half alone is compared, or a command with
            # upper bits set would pass as another and run as itself.
            program.add_rule(refuse, "fcntl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, command))
    return _exported(program)


def _exported(program) -> bytes:
    """The program as classic BPF (``seccomp_export_bpf``): an array of struct sock_filter."""
    memory = os.memfd_create("seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(memory), "rb") as file:
            program.export_bpf(file)
        size = os.lseek(memory, 0, os.SEEK_END)
        return os.pread(memory, size, 0)
    finally:
        os.close(memory)


SECCOMP_FILTER = seccomp_filter()
SECCOMP_FILTER_PYTHON = seccomp_filter(machine_wide=True, unix_sockets_only=True, file_locks=True,
                                       file_watches=True)
