"""The seccomp programs themselves, run here on a classic BPF interpreter against every system call number and the
arguments each rule reads: each program must decide exactly what judging/seccomp.py's list says, no more and no
less, and never allow the calls this test names as the ones to keep out. The kernel's side (the calls refused from
judged code, real programs running unchanged, warm and cold) is in tests/judging/test_system_call_allow_list.py; this test
covers every call number and argument, which those cannot."""

import os
import struct

import pytest

from judging.seccomp import SECCOMP_FILTER, SECCOMP_FILTER_PYTHON, allowed_calls

pyseccomp = pytest.importorskip("pyseccomp")
pytestmark = pytest.mark.skipif(
    os.uname().machine != "x86_64" or SECCOMP_FILTER is None, reason="the table below is x86-64's"
)

# This test's own table of the rules (not judging/seccomp.py's): x86-64 numbers, the architecture CI runs on.
X86_64, I386, AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7
X32_BIT = 0x40000000
CLONE, CLONE3, SOCKET, SOCKETPAIR, FCNTL, IOCTL, PRCTL, PERSONALITY, MKNOD, MKNODAT, FADVISE64 = (
    56,
    435,
    41,
    53,
    72,
    16,
    157,
    135,
    133,
    259,
    221,
)
# Never allowed to either language: a machine-wide pool, a uid's charges that outlive a test, another process's
# memory or events, the kernel's own state, namespaces, mounts, the keyring, modules, the page cache's eviction.
NEVER = {
    300: "fanotify_init",
    323: "userfaultfd",
    298: "perf_event_open",
    447: "memfd_secret",
    103: "syslog",
    206: "io_setup",
    209: "io_submit",
    425: "io_uring_setup",
    426: "io_uring_enter",
    427: "io_uring_register",
    321: "bpf",
    248: "add_key",
    249: "request_key",
    250: "keyctl",
    246: "kexec_load",
    320: "kexec_file_load",
    165: "mount",
    166: "umount2",
    272: "unshare",
    308: "setns",
    101: "ptrace",
    310: "process_vm_readv",
    311: "process_vm_writev",
    303: "name_to_handle_at",
    304: "open_by_handle_at",
    240: "mq_open",
    29: "shmget",
    30: "shmat",
    31: "shmctl",
    64: "semget",
    68: "msgget",
    438: "pidfd_getfd",
    312: "kcmp",
    175: "init_module",
    313: "finit_module",
    176: "delete_module",
    167: "swapon",
    169: "reboot",
    155: "pivot_root",
    161: "chroot",
    430: "fsopen",
    428: "open_tree",
    429: "move_mount",
    442: "mount_setattr",
    451: "cachestat",
    317: "seccomp",
    149: "mlock",
    151: "mlockall",
    278: "vmsplice",
    238: "set_mempolicy",
    237: "mbind",
    256: "migrate_pages",
    279: "move_pages",
    162: "sync",
    306: "syncfs",
    163: "acct",
    164: "settimeofday",
    227: "clock_settime",
    159: "adjtimex",
    170: "sethostname",
    171: "setdomainname",
    172: "iopl",
    173: "ioperm",
    154: "modify_ldt",
    212: "lookup_dcookie",
    179: "quotactl",
    134: "uselib",
    136: "ustat",
    139: "sysfs",
    153: "vhangup",
    187: "readahead",
    444: "landlock_create_ruleset",
}
# Never allowed to Python, q keeps them (judging/seccomp.py says why).
NEVER_PYTHON = {99: "sysinfo", 73: "flock", 253: "inotify_init", 294: "inotify_init1", 254: "inotify_add_watch"}
CLONE_NEW = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]
SIGCHLD, CLONE_THREADS, CLONE_VFORK_VM = 17, 0x003D0F00, 0x4100  # fork's, pthread_create's, posix_spawn's flags
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET = 1, 2, 10, 16, 17
INT = 0xFFFFFFFF
FCNTL_ALLOWED = {0, 1, 2, 3, 4, 8, 9, 10, 11, 15, 16, 1030, 1032, 1033, 1034}
FCNTL_LOCKS = {5, 6, 7, 36, 37, 38}
FCNTL_SAMPLES = sorted(FCNTL_ALLOWED | FCNTL_LOCKS | {1024, 1025, 1026, 1031, 12, 13, 14, 1 << 32 | 6, 1 << 32 | 1})
IOCTL_ALLOWED = {0x5401, 0x5413, 0x540F, 0x541B, 0x5421, 0x5450, 0x5451}
IOCTL_SAMPLES = sorted(IOCTL_ALLOWED | {0x5412, 0x5402, 0x8912, 0x4004_5402, 1 << 32 | 0x5401, 1 << 32 | 0x5412})
PRCTL_ALLOWED = {1, 2, 3, 7, 8, 15, 16, 23, 24, 27, 38, 39, 47}
PRCTL_SAMPLES = sorted(PRCTL_ALLOWED | {4, 22, 35, 36, 0x59616D61, 1 << 32 | 22})
PERSONALITY_SAMPLES = [0, 0xFFFFFFFF, 0x0040000, 0x0400000, 8, 1 << 32]
MODES = [0o010644, 0o020644, 0o060644, 0o100644, 0o140644, 0]
ADVICE = [0, 1, 2, 3, 4, 5, 1 << 32 | 4]

ALLOW, KILL = 0x7FFF0000, 0x00000000


def errno_action(number: int) -> int:
    return 0x00050000 | number


EPERM, ENOSYS, EAFNOSUPPORT = errno_action(1), errno_action(38), errno_action(97)


ALU = {
    0x00: lambda a, k: a + k,
    0x10: lambda a, k: a - k,
    0x20: lambda a, k: a * k,
    0x40: lambda a, k: a | k,
    0x50: lambda a, k: a & k,
    0x60: lambda a, k: a << (k & 31),
    0x70: lambda a, k: a >> (k & 31),
    0x80: lambda a, k: -a,
    0xA0: lambda a, k: a ^ k,
}


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


def listed_numbers(language: str) -> set[int]:
    """The x86-64 numbers of the calls judging/seccomp.py lists for ``language`` (libseccomp's names to numbers)."""
    return {pyseccomp.resolve_syscall(pyseccomp.Arch.X86_64, name) for name in allowed_calls(language)}


def expected(nr: int, arch: int, args: tuple, language: str, listed: set[int]) -> int:
    """What the rules say for one call."""
    if arch != X86_64 or nr & X32_BIT:
        return EPERM  # another ABI
    if nr == CLONE3:
        return ENOSYS
    if nr in (SOCKET, SOCKETPAIR):
        if language == "python":
            return ALLOW if args[0] == AF_UNIX else EAFNOSUPPORT
        family_ok = args[0] in (AF_UNIX, AF_INET, AF_INET6) or (args[0] == AF_NETLINK and args[2] == 0)
        return ALLOW if family_ok else EPERM
    if nr not in listed:
        return EPERM
    conditions = {
        CLONE: lambda: args[0] & sum(CLONE_NEW) == 0,
        FCNTL: lambda: args[1] & INT in (FCNTL_ALLOWED | (FCNTL_LOCKS if language == "q" else set())),
        IOCTL: lambda: args[1] & INT in IOCTL_ALLOWED,
        PRCTL: lambda: args[0] & INT in PRCTL_ALLOWED,
        PERSONALITY: lambda: args[0] & INT in (0, 0xFFFFFFFF),
        MKNOD: lambda: args[1] & 0o170000 == 0o010000,
        MKNODAT: lambda: args[2] & 0o170000 == 0o010000,
        FADVISE64: lambda: args[3] & INT in (0, 1, 2, 3),
    }
    return ALLOW if nr not in conditions or conditions[nr]() else EPERM


FIRST_ARGUMENTS = (
    [
        0,
        SIGCHLD,
        CLONE_THREADS | SIGCHLD,
        CLONE_VFORK_VM | SIGCHLD,
        0x80 | SIGCHLD,
        AF_UNIX,
        AF_INET,
        AF_INET6,
        AF_NETLINK,
        AF_PACKET,
        0xFFFFFFFF,
        1 << 31,
        1 << 32 | SIGCHLD,
        1 << 32 | CLONE_NEW[0],
        1 << 32 | AF_UNIX,
    ]  # the last: upper bits no libc call sets (a family is compared whole)
    + CLONE_NEW
    + [flag | CLONE_THREADS | SIGCHLD for flag in CLONE_NEW]
)


def calls():
    """Every call number this kernel could have (and past it), with the arguments each rule reads; the other ABIs'
    calls."""
    for nr in range(0, 600):
        if nr in (CLONE, SOCKET, SOCKETPAIR):
            for first in FIRST_ARGUMENTS:
                for third in (0, 9):  # netlink's protocol: NETLINK_ROUTE, NETLINK_AUDIT
                    yield nr, X86_64, (first, 1, third)
        elif nr == FCNTL:
            yield from ((nr, X86_64, (0, command)) for command in FCNTL_SAMPLES)
        elif nr == IOCTL:
            yield from ((nr, X86_64, (0, request)) for request in IOCTL_SAMPLES)
        elif nr == PRCTL:
            yield from ((nr, X86_64, (option,)) for option in PRCTL_SAMPLES)
        elif nr == PERSONALITY:
            yield from ((nr, X86_64, (value,)) for value in PERSONALITY_SAMPLES)
        elif nr in (MKNOD, MKNODAT):
            yield from ((nr, X86_64, (0, mode, 0) if nr == MKNOD else (0, 0, mode)) for mode in MODES)
        elif nr == FADVISE64:
            yield from ((nr, X86_64, (0, 0, 0, advice)) for advice in ADVICE)
        else:
            yield nr, X86_64, (0, 0)
    for nr in (0, 1, CLONE, SOCKET, 39, 59, 100, 335, 547, 0x3FFFFFFF):
        yield nr | X32_BIT, X86_64, (0, 0)
        for arch in (I386, AARCH64, 0):
            yield nr, arch, (0, 0)


@pytest.mark.parametrize("language", ["q", "python"])
def test_each_program_decides_every_call_as_its_list_says(language):
    code = instructions(SECCOMP_FILTER_PYTHON if language == "python" else SECCOMP_FILTER)
    listed = listed_numbers(language)
    wrong = []
    for nr, arch, args in calls():
        got, wanted = run_bpf(code, seccomp_data(nr, arch, *args)), expected(nr, arch, args, language, listed)
        if got != wanted:
            wrong.append((nr, hex(arch), [hex(arg) for arg in args], hex(got), hex(wanted)))
    assert not wrong, f"{len(wrong)} calls decided otherwise, e.g. {wrong[:5]}"


@pytest.mark.parametrize("language", ["q", "python"])
def test_no_program_allows_the_calls_kept_out(language):
    code = instructions(SECCOMP_FILTER_PYTHON if language == "python" else SECCOMP_FILTER)
    never = {**NEVER, **(NEVER_PYTHON if language == "python" else {})}
    allowed = {name for nr, name in never.items() if run_bpf(code, seccomp_data(nr, X86_64)) == ALLOW}
    assert not allowed, f"{language}'s program allows {sorted(allowed)}"
    assert listed_numbers(language).isdisjoint(never), "judging/seccomp.py lists a call kept out"


def test_the_list_is_what_the_two_languages_need_and_no_more():
    """The size of the list, so that a change to it is a change a reviewer sees here too: Python's calls, and the
    ones q adds (network sockets' families aside, which are arguments)."""
    python, q = set(allowed_calls("python")), set(allowed_calls("q"))
    assert python < q and q - python == {
        "sysinfo",
        "flock",
        "inotify_init",
        "inotify_init1",
        "inotify_add_watch",
        "inotify_rm_watch",
    }
    assert len(python) == 210, len(python)
