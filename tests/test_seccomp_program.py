"""The seccomp programs themselves, run here on a classic BPF interpreter against every system call number and the
arguments each rule reads: each program must decide exactly what judging/seccomp.py's docstring says, no more and
no less. The kernel's side (the same calls refused from judged code, warm and cold) is in
tests/test_sandbox_isolation.py; this test covers every call the programs allow, which those cannot."""

import os
import struct

import pytest

from judging.seccomp import SECCOMP_FILTER, SECCOMP_FILTER_PYTHON

# This test's own table of the rules (not judging/seccomp.py's): x86-64 numbers, the architecture CI runs on.
X86_64, I386, AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7
X32_BIT = 0x40000000
CLONE, UNSHARE, CLONE3, SOCKET, SOCKETPAIR, SYSINFO, FCNTL, FLOCK = 56, 272, 435, 41, 53, 99, 72, 73
INOTIFY_INIT, INOTIFY_INIT1 = 253, 294
# fcntl's lock commands: F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW; and some that are not
# (F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_SETOWN, F_SETLEASE, F_GETLEASE, F_DUPFD_CLOEXEC, F_ADD_SEALS).
LOCKS = (5, 6, 7, 36, 37, 38)
NOT_LOCKS = (0, 1, 2, 3, 4, 8, 1024, 1025, 1030, 1033)
UPPER_BITS = (1 << 32 | 6, 1 << 63 | 37, 1 << 32 | 1)  # the kernel reads an unsigned int: F_SETLK, F_OFD_SETLK, F_GETFD
EPERM_CALLS = {248: "add_key", 249: "request_key", 250: "keyctl", 308: "setns", 425: "io_uring_setup",
               426: "io_uring_enter", 427: "io_uring_register"}
CLONE_NEW = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]
CLONE_NEWTIME = 0x80
SIGCHLD, CLONE_THREADS = 17, 0x003D0F00  # fork's and pthread_create's clone flags carry no CLONE_NEW*
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16

ALLOW, KILL = 0x7FFF0000, 0x00000000


def errno_action(number: int) -> int:
    return 0x00050000 | number


EPERM, ENOSYS, EAFNOSUPPORT = errno_action(1), errno_action(38), errno_action(97)


ALU = {0x00: lambda a, k: a + k, 0x10: lambda a, k: a - k, 0x20: lambda a, k: a * k, 0x40: lambda a, k: a | k,
       0x50: lambda a, k: a & k, 0x60: lambda a, k: a << (k & 31), 0x70: lambda a, k: a >> (k & 31),
       0x80: lambda a, k: -a, 0xA0: lambda a, k: a ^ k}


def instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    """A classic BPF program (an array of struct sock_filter) as (code, jt, jf, k) tuples."""
    return list(struct.iter_unpack("=HBBI", program))


def run_bpf(code: list, data: bytes) -> int:
    """A classic BPF interpreter (the subset seccomp accepts): the return value of ``code`` (``instructions``) for
    ``data`` (struct seccomp_data)."""
    a = x = pc = 0
    memory = [0] * 16
    while True:
        op, jt, jf, k = code[pc]
        pc += 1
        kind = op & 0x07
        if kind == 0x00:  # LD
            mode = op & 0xE0
            a = struct.unpack_from("=I", data, k)[0] if mode == 0x20 else memory[k] if mode == 0x60 else k
        elif kind == 0x01:  # LDX
            x = memory[k] if op & 0xE0 == 0x60 else k
        elif kind == 0x02:  # ST
            memory[k] = a
        elif kind == 0x03:  # STX
            memory[k] = x
        elif kind == 0x04:  # ALU
            operand = x if op & 0x08 else k
            a = ALU[op & 0xF0](a, operand) & 0xFFFFFFFF
        elif kind == 0x05:  # JMP
            test = op & 0xF0
            if test == 0x00:
                pc += k
                continue
            operand = x if op & 0x08 else k
            taken = {0x10: a == operand, 0x20: a > operand, 0x30: a >= operand, 0x40: bool(a & operand)}[test]
            pc += jt if taken else jf
        elif kind == 0x06:  # RET
            return a if op & 0x18 == 0x10 else k
        else:  # MISC: TAX, TXA
            if op & 0xF8 == 0x00:
                x = a
            else:
                a = x


def seccomp_data(nr: int, arch: int, *args: int) -> bytes:
    args = list(args) + [0] * (6 - len(args))
    return struct.pack("=iIQ6Q", nr, arch, 0, *args)


def expected(nr: int, arch: int, args: tuple, python: bool) -> int:
    """What the rules say for one call."""
    if arch != X86_64 or nr & X32_BIT:
        return EPERM  # another ABI
    first = args[0] & 0xFFFFFFFF
    if nr in EPERM_CALLS or (python and nr in (SYSINFO, INOTIFY_INIT, INOTIFY_INIT1)):
        return EPERM
    if nr == CLONE3:
        return ENOSYS
    if nr == UNSHARE and first & (sum(CLONE_NEW) | CLONE_NEWTIME):
        return EPERM
    if nr == CLONE and first & sum(CLONE_NEW):
        return EPERM
    if python and nr in (SOCKET, SOCKETPAIR) and args[0] != AF_UNIX:
        return EAFNOSUPPORT
    if python and (nr == FLOCK or (nr == FCNTL and args[1] & 0xFFFFFFFF in LOCKS)):
        return EPERM
    return ALLOW


FIRST_ARGUMENTS = ([0, SIGCHLD, CLONE_THREADS | SIGCHLD, CLONE_NEWTIME, CLONE_NEWTIME | SIGCHLD, AF_UNIX, AF_INET,
                    AF_INET6, AF_NETLINK, 0xFFFFFFFF, 1 << 31, 1 << 32 | SIGCHLD, 1 << 32 | CLONE_NEW[0],
                    1 << 32 | AF_UNIX]  # the last: upper bits no libc call sets, compared too (judging/seccomp.py)
                   + CLONE_NEW + [flag | CLONE_THREADS | SIGCHLD for flag in CLONE_NEW])
SECOND_ARGUMENTS = [0, 1, 2, 3, 4, 0xFFFFFFFF]


def calls():
    """Every call number this kernel could have (and past it), with each first argument a rule reads; the other
    ABIs' calls."""
    for nr in range(0, 600):
        firsts = FIRST_ARGUMENTS if nr in (CLONE, UNSHARE, SOCKET, SOCKETPAIR) else [0, SIGCHLD, AF_INET]
        for first in firsts:
            seconds = (SECOND_ARGUMENTS if nr in (SOCKET, SOCKETPAIR) else LOCKS + NOT_LOCKS + UPPER_BITS if nr == FCNTL
                       else [0])
            for second in seconds:
                yield nr, X86_64, (first, second)
    for nr in (0, 1, CLONE, SOCKET, 59, 100, 335, 547, 0x3FFFFFFF):
        yield nr | X32_BIT, X86_64, (0, 0)
        for arch in (I386, AARCH64, 0):
            yield nr, arch, (0, 0)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the table above is x86-64's")
@pytest.mark.parametrize("python", [False, True], ids=["q", "python"])
def test_each_program_decides_every_call_as_its_rules_say(python):
    code = instructions(SECCOMP_FILTER_PYTHON if python else SECCOMP_FILTER)
    wrong = []
    for nr, arch, args in calls():
        got = run_bpf(code, seccomp_data(nr, arch, *args))
        if got != expected(nr, arch, args, python):
            wrong.append((nr, hex(arch), [hex(arg) for arg in args], hex(got), hex(expected(nr, arch, args, python))))
    assert not wrong, f"{len(wrong)} calls decided otherwise, e.g. {wrong[:5]}"
