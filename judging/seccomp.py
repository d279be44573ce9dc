"""The system calls judged code may not make: a seccomp program (classic BPF, as bwrap's ``--seccomp`` and prctl take
it), applied on both bwrap paths (cold: bwrap ``--seccomp``; warm: prctl in the child, judging/warm_worker.py).

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
  (judging/warm_worker.py). multiprocessing and asyncio need only Unix sockets; q keeps the network (its licence
  check, ``hopen``) and a fresh namespace per test;

and ``clone3`` is answered with ENOSYS: its flags sit in memory, where seccomp cannot read them, and libc then falls
back to ``clone``, whose flags it can. On an architecture not listed in ``CALLS`` there is no program (None) and
all of these stay reachable (``Sandbox.describe`` then leaves seccomp out of the isolation line).
"""

from __future__ import annotations

import os
import struct

# Per architecture: the audit arch and the call numbers.
CALLS = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "unshare": 272, "clone3": 435, "sockets": (41, 53),
               "refused": {"add_key": 248, "request_key": 249, "keyctl": 250, "setns": 308, "io_uring_setup": 425,
                           "io_uring_enter": 426, "io_uring_register": 427},
               "machine_wide": {"sysinfo": 99}},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "unshare": 97, "clone3": 435, "sockets": (198, 199),
                "refused": {"add_key": 217, "request_key": 218, "keyctl": 219, "setns": 268, "io_uring_setup": 425,
                            "io_uring_enter": 426, "io_uring_register": 427},
                "machine_wide": {"sysinfo": 179}},
}
# Every CLONE_NEW* flag: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET; unshare also takes NEWTIME.
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_NEWTIME = 0x00000080
AF_UNIX = 1
EAFNOSUPPORT = 97


def seccomp_filter(machine_wide: bool = False, unix_sockets_only: bool = False) -> bytes | None:
    """The program for this machine's architecture (what the module docstring lists), refusing the calls that read
    machine-wide counters too when ``machine_wide`` and sockets of every family but AF_UNIX when
    ``unix_sockets_only``; None where this architecture has no program."""
    calls = CALLS.get(os.uname().machine)
    if calls is None:
        return None
    load, equal, at_least, has_bits, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    # ALLOW, ERRNO | EPERM, ERRNO | ENOSYS, ERRNO | EAFNOSUPPORT
    allow, refuse, no_such_call, no_family = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38, 0x00050000 | EAFNOSUPPORT
    number, arch, flags = 0, 4, 16  # offsets in struct seccomp_data: nr, arch, the low half of args[0] (the family)
    # (operation, jump if true, jump if false, operand); jumps name a label, resolved below.
    program = [(load, 0, 0, arch), (equal, "check_number", "refuse", calls["arch"]),
               ("check_number",), (load, 0, 0, number),
               (at_least, "refuse", 0, 0x40000000)]  # x32 numbers on x86_64
    refused = {**calls["refused"], **(calls["machine_wide"] if machine_wide else {})}
    program += [(equal, "refuse", 0, call) for call in refused.values()]
    program += [(equal, "no_such_call", 0, calls["clone3"]), (equal, "unshare", 0, calls["unshare"])]
    if unix_sockets_only:
        program += [(equal, "socket", 0, call) for call in calls["sockets"]]
    program += [(equal, "clone", "allow", calls["clone"]),
                ("unshare",), (load, 0, 0, flags), (has_bits, "refuse", "allow", CLONE_NAMESPACES | CLONE_NEWTIME),
                ("clone",), (load, 0, 0, flags), (has_bits, "refuse", "allow", CLONE_NAMESPACES)]
    if unix_sockets_only:
        program += [("socket",), (load, 0, 0, flags), (equal, "allow", "no_family", AF_UNIX),
                    ("no_family",), (ret, 0, 0, no_family)]
    program += [("allow",), (ret, 0, 0, allow), ("refuse",), (ret, 0, 0, refuse),
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
SECCOMP_FILTER_PYTHON = seccomp_filter(machine_wide=True, unix_sockets_only=True)
