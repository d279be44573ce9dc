"""The system calls judged code may make: an allow-list, as a seccomp program built with libseccomp (rules by call
name, arguments compared by the library) and exported as classic BPF, the bytes bwrap's ``--seccomp`` and prctl
take; applied on both bwrap paths (cold: bwrap ``--seccomp``, just before it executes setpriv; warm: prctl in the
program's process, judging/worker/isolation.py, after the worker's own set-up).

Every call is refused with EPERM (the default action, as in Docker's default profile and nsjail) unless ``ALLOWED``
lists it; ``clone3`` alone is answered ENOSYS (seccomp cannot read its flags, which sit in memory, and libc then
falls back to ``clone``, whose flags it can), and, for Python, a socket of any family but AF_UNIX EAFNOSUPPORT.
Only the machine's own ABI is admitted (x86-64 here): a call through another (i386's ``int 0x80``, x32's numbers)
is refused with EPERM, whatever its number. ``ALLOWED`` is what a judged Python program (CPython with its standard
library: threads, ``subprocess``, ``multiprocessing``, ``asyncio``, ``ctypes``) and a judged q program (kdb+ and
the shell its ``system`` starts) need, and on the cold path what setpriv and prlimit, which run under the program,
do before they execute the interpreter. Why the list and not a block-list: a call no one listed is one no one
judged; the kernel gains calls every release (``fanotify_init`` for unprivileged users, ``userfaultfd``,
``memfd_secret``, ``cachestat``), and several reach kernel-wide state the sandbox's other layers (an unprivileged
uid with no capabilities, namespaces, a read-only view, rlimits, a cgroup) do not bound: a machine-wide pool (AIO
events, ptys), a uid's charges that outlive a test (SHM_LOCK pages, POSIX message-queue bytes), what other
processes do (fanotify, perf, ptrace, process_vm_readv).

The price: a program that makes a call not listed gets EPERM (usually an OSError, a ``runtime_error``), on every
host alike. ``tests/judging/test_system_call_allow_list.py`` judges a corpus of real programs under it, both paths (the
bundled problems' solutions with their tests, tests/helpers/parity_programs/, HumanEval's canonical solutions with their
checks), and tries the calls left out from judged code. A newer libc that calls a new system call without falling
back on EPERM (it falls back on ENOSYS) would fail that corpus on its host: add the call here, in its group, with
why.

q has no licensed binary here, so its needs are from what kdb+ is known to do (it maps files and memory, runs an
epoll loop, opens TCP and Unix sockets for IPC, ``hopen`` and an on-demand licence's check through the judge's
proxy, starts threads with ``-s``, reads its memory and cores at start, runs ``system`` through /bin/sh) and what
tests/helpers/fake_q (a shell script standing in for it) does: ``Q_ONLY`` adds, to the common list, network sockets, file
locks, inotify and ``sysinfo``, which Python does not get (why in each group). A kdb+ call missing here shows as q
tests failing with EPERM (``tests/judging/test_real_q.py`` against a real q).

How arguments are compared: each listed value through the argument's width as the kernel reads it (an int's low
32 bits, for clone's flags, fcntl's, ioctl's, prctl's and personality's commands; a command with upper bits set runs
as its low half, so it is allowed or refused as that); a socket family is compared whole, so one with upper bits
set, which no libc call passes, is refused.

Where libseccomp is missing (``pyseccomp`` finds none), or on an architecture not in ``ARCHITECTURES``, there is no
program (None) and every call is reachable (``Sandbox.describe`` then says so in the isolation line, with
``UNAVAILABLE``'s reason).
"""

from __future__ import annotations

import errno
import os

try:
    import pyseccomp

    UNAVAILABLE = ""
except (ImportError, RuntimeError, OSError) as error:  # RuntimeError: pyseccomp found no libseccomp
    pyseccomp, UNAVAILABLE = None, f"no libseccomp ({error})"

# The architectures a program is built for (the machine's own ABI only), and where ``clone`` reads its flags on each
# (its first argument on both; s390 has them second).
ARCHITECTURES = {"x86_64": 0, "aarch64": 0}

# Every CLONE_NEW* flag: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (clone reads 0x80, NEWTIME, as
# part of its exit signal). A clone with any of them set is refused: no namespace of its own.
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, NETLINK_ROUTE = 1, 2, 10, 16, 0
S_IFMT, S_IFIFO = 0o170000, 0o010000
INT = 0xFFFFFFFF  # the kernel reads these arguments as 32-bit ints

# fcntl's commands judged code may use: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_SETOWN, F_GETOWN, F_SETSIG,
# F_GETSIG, F_SETOWN_EX, F_GETOWN_EX, F_DUPFD_CLOEXEC, F_GETPIPE_SZ, F_ADD_SEALS, F_GET_SEALS. Not: the locks (below),
# leases (F_SETLEASE: one on a file every sandbox shares is another test's to see), F_NOTIFY (dnotify: told of
# accesses in a shared folder, as inotify is) and F_SETPIPE_SZ (a pipe's pages are charged to the uid, up to
# /proc/sys/fs/pipe-user-pages-soft: pipes a test leaves in flight would hand the next test of its uid a number).
FCNTL_COMMANDS = (0, 1, 2, 3, 4, 8, 9, 10, 11, 15, 16, 1030, 1032, 1033, 1034)
# fcntl's lock commands: F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW (the 64-bit architectures
# have no separate F_*LK64). q only.
LOCK_COMMANDS = (5, 6, 7, 36, 37, 38)
# ioctl's requests: TCGETS (isatty, at every interpreter's start), TIOCGWINSZ (a terminal's size), TIOCGPGRP (the
# shell's job control), FIONREAD (bytes waiting), FIONBIO (non-blocking), FIONCLEX and FIOCLEX (close-on-exec).
# Not: every other request, a terminal's (TIOCSTI) or a device's.
IOCTL_REQUESTS = (0x5401, 0x5413, 0x540F, 0x541B, 0x5421, 0x5450, 0x5451)
# prctl's options: what setpriv does on the cold path (PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_CAP_AMBIENT,
# PR_GET_SECUREBITS, PR_GET_KEEPCAPS, PR_SET_KEEPCAPS, PR_GET_NO_NEW_PRIVS, PR_SET_NO_NEW_PRIVS), and reads of the
# process's own state (PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME, PR_SET_PDEATHSIG, PR_GET_PDEATHSIG). With no
# capability and no_new_privs, none of them can gain anything.
PRCTL_OPTIONS = (23, 24, 47, 27, 7, 8, 39, 38, 3, 15, 16, 1, 2)
# personality's: the query (0xffffffff) and PER_LINUX; not ADDR_NO_RANDOMIZE and the other flags.
PERSONALITIES = (0xFFFFFFFF, 0)
# fadvise64's advice: NORMAL, RANDOM, SEQUENTIAL, WILLNEED (coreutils' cat asks for SEQUENTIAL); not DONTNEED or
# NOREUSE, which drop a shared file's pages from the page cache, for every other test.
FADVICE = (0, 1, 2, 3)

# Every call judged code may make, by group: why the group is needed, then its calls. A name with a condition
# (``ARGUMENTS``) is allowed only when its arguments meet it.
ALLOWED = {
    "start, run and end a program": (
        "the dynamic loader and libc as a program starts (the interpreter, q, subprocess's and system's programs), "
        "libc's thread bookkeeping and its own clock and random reads",
        "execve execveat exit exit_group brk arch_prctl set_tid_address set_robust_list rseq uname getrandom "
        "restart_syscall rt_sigreturn",
    ),
    "memory of its own": (
        "the heap, mapped files (q maps its tables), stacks; a memory file's pages count in the slot's cgroup, its "
        "size under RLIMIT_FSIZE",
        "mmap munmap mprotect mremap madvise msync memfd_create",
    ),
    "files and folders": (
        "the read-only view and the test's own tmpfs folders (/scratch, /tmp, /dev/shm): open, read, write, list, "
        "make, rename, remove, copy (shutil uses sendfile and copies extended attributes), a FIFO (``mknod``: FIFOs "
        "only); page-cache advice (``fadvise64``: not the advice that drops pages)",
        "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 open openat creat close "
        "close_range lseek stat fstat lstat newfstatat statx statfs fstatfs access faccessat faccessat2 readlink "
        "readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat rename renameat "
        "renameat2 link linkat symlink symlinkat chmod fchmod fchmodat truncate ftruncate fallocate fsync fdatasync "
        "utime utimes utimensat futimesat umask getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr "
        "setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr sendfile copy_file_range splice tee "
        "mknod mknodat fadvise64",
    ),
    "descriptors, pipes and waiting on them": (
        "dup, pipes, poll/select/epoll (selectors, asyncio, q's event loop), eventfd and signalfd; fcntl and ioctl "
        "only with the commands above",
        "dup dup2 dup3 pipe pipe2 poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait "
        "epoll_pwait epoll_pwait2 eventfd eventfd2 signalfd signalfd4 fcntl ioctl",
    ),
    "processes and threads": (
        "fork, threads, subprocess, multiprocessing, q's -s threads and system: clone with no CLONE_NEW* flag, "
        "waiting, signalling the test's own processes (its PID namespace is all it can name), futexes, scheduling "
        "reads, its own limits and usage",
        "clone fork vfork wait4 waitid kill tgkill tkill getpid getppid gettid getpgrp getpgid setpgid getsid "
        "setsid futex sched_yield sched_getaffinity sched_setaffinity sched_getparam sched_getscheduler "
        "sched_get_priority_max sched_get_priority_min getpriority setpriority getrusage prlimit64 getrlimit "
        "setrlimit pidfd_open pidfd_send_signal getcpu",
    ),
    "signals": (
        "handlers, masks, waiting for a signal, alarms (the signal module, faulthandler's alternate stack)",
        "rt_sigaction rt_sigprocmask rt_sigpending rt_sigtimedwait rt_sigsuspend rt_sigqueueinfo rt_tgsigqueueinfo "
        "sigaltstack pause alarm",
    ),
    "time": (
        "clocks, sleeps, interval and POSIX timers, timerfd (libc reads most clocks without a call, through the vDSO)",
        "clock_gettime clock_getres gettimeofday time nanosleep clock_nanosleep times setitimer getitimer "
        "timer_create timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create timerfd_settime "
        "timerfd_gettime",
    ),
    "who it is, and the cold path's uid drop": (
        "reads of its own ids and capabilities; setpriv, which runs under the program on the cold path, sets the "
        "slot uid, gid and no groups, drops capabilities and sets no_new_privs (prctl: only the options above): "
        "the program, unprivileged with none, can only set the ids it has and drop what it lacks; "
        "personality: only the query and PER_LINUX",
        "getuid geteuid getgid getegid getresuid getresgid getgroups capget capset setresuid setresgid setgroups "
        "prctl personality",
    ),
    "sockets": (
        "Unix sockets (multiprocessing, asyncio's self-pipe, libc's nscd probe); socket and socketpair only of the "
        "families in ``SOCKET_FAMILIES``",
        "socket socketpair bind listen accept accept4 connect getsockname getpeername setsockopt getsockopt sendto "
        "recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown",
    ),
}
# Added for q only.
Q_ONLY = {
    "q's machine reads, locks and watches": (
        "kdb+ reads its physical memory at start (libc's sysconf reads it through sysinfo) and may lock or watch "
        "its files (untried without a licence). Python is refused these: sysinfo returns the machine's load, "
        "process count and free memory, moved by any test judged at the same time (the channel judging/policy.py "
        "closes under /proc); a lock or an inotify watch is the inode's, and every sandbox shares the inodes of its "
        "read-only view, so a lock or watch there reaches every other test (sqlite3 on a file then fails at once, "
        "in memory it works). q keeps them: two q tests can still signal through them",
        "sysinfo flock inotify_init inotify_init1 inotify_add_watch inotify_rm_watch",
    ),
}
# The families socket and socketpair may make: Unix sockets for Python (a network socket's state, TIME_WAIT
# entries, the stack's counters, outlives its processes; a Unix socket dies with them, so a warm worker's tests can
# share one network namespace: judging/worker/loop.py); q keeps the network (its licence check, hopen) in a network
# namespace of its own per test, and netlink's routing family (libc's getaddrinfo asks it which addresses exist).
SOCKET_FAMILIES = {"python": (AF_UNIX,), "q": (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)}
# The conditions: for each call, (argument, mask, allowed values); an allowed call whose argument, read through the
# mask, is none of the values is refused (EPERM).
ARGUMENTS = {
    "clone": (0, CLONE_NAMESPACES, (0,)),  # no CLONE_NEW* flag
    "fcntl": (1, INT, FCNTL_COMMANDS),
    "ioctl": (1, INT, IOCTL_REQUESTS),
    "prctl": (0, INT, PRCTL_OPTIONS),
    "personality": (0, INT, PERSONALITIES),
    "mknod": (1, S_IFMT, (S_IFIFO,)),
    "mknodat": (2, S_IFMT, (S_IFIFO,)),
    "fadvise64": (3, INT, FADVICE),
}
Q_ARGUMENTS = {"fcntl": (1, INT, FCNTL_COMMANDS + LOCK_COMMANDS)}


def allowed_calls(language: str) -> list[str]:
    """The names ``language``'s program allows (``ALLOWED``, with ``Q_ONLY`` for q), sorted."""
    groups = {**ALLOWED, **(Q_ONLY if language == "q" else {})}
    return sorted({name for _, names in groups.values() for name in names.split()})


def seccomp_filter(language: str) -> bytes | None:
    """The program for ``language`` ("python" or "q") on this machine's architecture; None where there is none
    (``UNAVAILABLE``, or an architecture not in ``ARCHITECTURES``)."""
    flags_argument = ARCHITECTURES.get(os.uname().machine)
    if pyseccomp is None or flags_argument is None:
        return None
    refuse = pyseccomp.ERRNO(errno.EPERM)
    program = pyseccomp.SyscallFilter(refuse)
    program.set_attr(pyseccomp.Attr.ACT_BADARCH, refuse)  # another ABI (i386, and x32 on x86_64)
    program.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)  # a binary tree of call numbers: a few comparisons a call
    conditions = {**ARGUMENTS, **(Q_ARGUMENTS if language == "q" else {})}
    conditions["clone"] = (flags_argument, *conditions["clone"][1:])
    arch = pyseccomp.system_arch()
    for name in allowed_calls(language):
        if pyseccomp.resolve_syscall(arch, name) < 0:
            continue  # not a call of this architecture (aarch64 has no open, stat, fork ...)
        if name in ("socket", "socketpair"):
            for family in SOCKET_FAMILIES[language]:
                extra = [pyseccomp.Arg(2, pyseccomp.EQ, NETLINK_ROUTE)] if family == AF_NETLINK else []
                program.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(0, pyseccomp.EQ, family), *extra)
            if language == "python":
                program.add_rule(pyseccomp.ERRNO(errno.EAFNOSUPPORT), name, pyseccomp.Arg(0, pyseccomp.NE, AF_UNIX))
        elif name in conditions:
            argument, mask, values = conditions[name]
            for value in values:
                program.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(argument, pyseccomp.MASKED_EQ, mask, value))
        else:
            program.add_rule(pyseccomp.ALLOW, name)
    program.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
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


SECCOMP_FILTER = seccomp_filter("q")
SECCOMP_FILTER_PYTHON = seccomp_filter("python")
