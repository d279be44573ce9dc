"""Adversarial programs against the sandbox: each test fails if the property it names breaks.

Every test that runs Python runs twice: with warm workers (``bwrap``, a child forked per test; as root the warm
workers must really start) and with a fresh interpreter per test (``bwrap-cold``). The warm design's own
threats are in tests/test_warm_worker.py."""

import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from judging import Judge, JudgeUnavailable
from judging.cgroups import V2_ROOT_ENV, Cgroups
from judging.executors import PythonExecutor
from judging.scratch import remove_tree
from judging.seccomp import SECCOMP_FILTER
from judging.slots import SLOT_LOCK_DIR, SLOT_UID_BASE, SandboxUnavailable, blocked_for_others

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", params=["bwrap", "bwrap-cold"])
def sandbox(request):
    return request.param


@pytest.fixture(scope="module")
def judge(sandbox):
    with Judge(timeout=1.0, workers=2, sandbox=sandbox) as judge:
        if sandbox == "bwrap" and os.geteuid() == 0:
            assert judge.warm, f"the warm workers must start here: {judge.isolation}"
        yield judge


@pytest.fixture(autouse=True)
def warm_workers_handle_it_themselves(request):
    """A warm worker that fails has its test rerun cold, which would hide a warm-path hole: none may fail."""
    judge = request.getfixturevalue("judge") if "judge" in request.fixturenames else None
    failures = judge.setup.warm.failures if judge is not None and judge.warm else 0
    yield
    if judge is not None and judge.warm:
        assert judge.setup.warm.failures == failures, f"a warm worker failed: {judge.setup.warm.failure}"


def run(judge, code, expected="unused", timeout=None):
    """Run ``code`` as the test code (after the marker), so what it prints is what the judge compares."""
    return judge.run("", [{"test_code": code, "expected_output": expected}], "python", timeout)


def slot_processes(judge):
    """Processes still owned by the judge's slot uids, or whose command line names a planted marker."""
    uids = set(judge.setup.slots.uids.uids) if judge.setup.slots.uids else set()
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        uid = int(text.split("\nUid:")[1].split()[0])
        if uid in uids:
            found.append(status.parent.name)
    return found


def command_lines():
    """Every process's command line; a process that ends while we read (this machine is shared) is skipped."""
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            yield path.read_bytes()
        except OSError:
            continue


def wait_until_gone(judge, seconds=3.0):
    """The PID namespace's init takes its descendants down asynchronously; give the kernel a moment."""
    deadline = time.monotonic() + seconds
    while slot_processes(judge) and time.monotonic() < deadline:
        time.sleep(0.05)
    return slot_processes(judge)


def test_isolation_level_is_reported(judge, sandbox):
    assert judge.level == "bwrap", f"bubblewrap is installed here; got {judge.isolation}"
    assert "namespaces" in judge.isolation and f"uid {SLOT_UID_BASE}+" in judge.isolation
    assert ("Python: warm workers" in judge.isolation) == judge.warm
    if sandbox == "bwrap-cold":
        assert "Python: a fresh interpreter per test (bwrap-cold)" in judge.isolation


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
def test_slot_uids_are_unassigned_outside_systemd_ranges_and_locked_in_a_fixed_folder(judge, tmp_path, monkeypatch):
    for uid in judge.setup.slots.uids.uids:
        assert 65535 < uid < 1 << 31 and not 524288 <= uid <= 1879048191, "systemd hands out that uid"
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)
        assert (SLOT_LOCK_DIR / f"{uid}.lock").is_file()
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with Judge(workers=1) as other:
        assert not set(other.setup.slots.uids.uids) & set(judge.setup.slots.uids.uids), "another TMPDIR must not free a uid"
    monkeypatch.setenv("REWARDS_SLOT_UID_BASE", str(SLOT_UID_BASE + 500))
    with Judge(workers=1) as other:
        assert other.setup.slots.uids.uids[0] >= SLOT_UID_BASE + 500
    monkeypatch.setenv("REWARDS_SLOT_UID_BASE", "61184")
    with pytest.raises(SandboxUnavailable, match="REWARDS_SLOT_UID_BASE"):
        Judge(workers=1)


def test_program_runs_unprivileged_with_limits(judge):
    code = ("import os, resource\n"
            "print(os.getuid() != 0, os.getgid() != 0, os.getgroups())\n"
            "for name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_CORE'):\n"
            "    print(name, resource.getrlimit(getattr(resource, name))[0])\n"
            "status = dict(line.split(':\\t') for line in open('/proc/self/status').read().splitlines())\n"
            "for name in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs'):\n"
            "    print(name, int(status[name], 16))\n")
    out = run(judge, code).tests[0].stdout.split("\n")
    assert out[0] == "True True []"
    limits = dict(line.split() for line in out[1:] if line)
    assert [limits[name] for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")] == ["0"] * 5
    assert limits["NoNewPrivs"] == "1"
    assert int(limits["RLIMIT_AS"]) == 1024 << 20
    assert 0 < int(limits["RLIMIT_CPU"]) <= 3
    assert 0 < int(limits["RLIMIT_NPROC"]) <= 64
    assert int(limits["RLIMIT_FSIZE"]) == 16 << 20
    assert int(limits["RLIMIT_CORE"]) == 0


def test_network_is_unreachable(judge):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = ("import socket\n"
                f"for host in ('127.0.0.1', '1.1.1.1'):\n"
                "    try:\n"
                f"        socket.create_connection((host, {port}), timeout=0.5)\n"
                "        print('connected', host)\n"
                "    except OSError:\n"
                "        print('blocked', host)\n")
        assert run(judge, code).tests[0].stdout.split() == ["blocked", "127.0.0.1", "blocked", "1.1.1.1"]


def test_writes_outside_scratch_fail_and_leave_nothing(judge, tmp_path):
    tmp_path.chmod(0o777)
    targets = [tmp_path / "escaped.txt", ROOT / "escaped.txt", Path("/usr/escaped.txt"), Path("/escaped.txt")]
    code = ("import os\n"
            f"for path in {[str(t) for t in targets]!r}:\n"
            "    try:\n"
            "        open(path, 'w').write('x')\n"
            "        print('wrote')\n"
            "    except OSError:\n"
            "        print('refused')\n"
            "open('inside.txt', 'w').write('scratch is writable')\n"
            "print(open('inside.txt').read())\n")
    out = run(judge, code).tests[0].stdout.splitlines()
    assert out[-1] == "scratch is writable"
    for target in targets:
        assert not target.exists(), f"{target} appeared on the host"


def test_files_too_big_are_refused(judge):
    code = ("try:\n"
            "    open('big', 'wb').write(b'x' * (32 << 20))\n"
            "    print('wrote')\n"
            "except OSError as e:\n"
            "    print('refused')\n")
    assert run(judge, code).tests[0].stdout.strip() == "refused"


class DiskWatch:
    """The least free space seen on the host file system holding ``folder`` while the block runs."""

    def __init__(self, folder):
        self.folder, self.lowest, self._done = folder, shutil.disk_usage(folder).free, threading.Event()

    def _watch(self):
        while not self._done.wait(0.01):
            self.lowest = min(self.lowest, shutil.disk_usage(self.folder).free)

    def __enter__(self):
        self.before = shutil.disk_usage(self.folder).free
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


DISK_FILL = ("import os\n"
             "for folder in ('/scratch', '/tmp', '/dev/shm'):\n"
             "    written = 0\n"
             "    try:\n"
             "        for n in range(20):\n"
             "            with open(f'{folder}/fill{n}', 'wb', buffering=0) as file:\n"
             "                for _ in range(10):\n"
             "                    written += file.write(b'x' * (1 << 20))\n"
             "    except OSError as error:\n"
             "        size = os.statvfs(folder)\n"
             "        print(folder, error.errno, written >> 20, size.f_blocks * size.f_frsize >> 20)\n")


def test_disk_is_bounded_per_test_and_nothing_reaches_the_host_disk(judge):
    """200 MB in each of /scratch, /tmp and /dev/shm: each stops at --judge_disk_mb (64) with ENOSPC (issue 19)."""
    with DiskWatch(judge.setup.slots.base) as disk:
        judgement = run(judge, DISK_FILL, timeout=10.0)
        unchecked = run(judge, "for n in range(20):\n    open(f'fill{n}', 'wb').write(b'x' * (10 << 20))\n",
                        timeout=10.0)
    lines = [line.split() for line in judgement.tests[0].stdout.splitlines()]
    assert [line[:2] for line in lines] == [["/scratch", "28"], ["/tmp", "28"], ["/dev/shm", "28"]], lines
    assert all(60 <= int(line[2]) <= 64 and line[3] == "64" for line in lines), lines
    assert unchecked.status == "runtime_error" and "No space left on device" in unchecked.tests[0].stderr
    assert disk.before - disk.lowest < 50 << 20, "what the test wrote reached the host disk"


def test_judge_disk_mb_sizes_scratch_and_tmp(sandbox):
    code = ("import os\nfor folder in ('/scratch', '/tmp', '/dev/shm'):\n"
            "    print(os.statvfs(folder).f_blocks * os.statvfs(folder).f_frsize)")
    with Judge(workers=1, sandbox=sandbox, disk_mb=8) as judge:
        assert run(judge, code, f"{8 << 20}\n{8 << 20}\n{8 << 20}").status == "passed"


def test_host_files_and_problem_data_are_not_readable(judge, tmp_path):
    planted = tmp_path / "planted.txt"
    planted.write_text("secret")
    planted.chmod(0o644)
    data_file = next(ROOT.glob("data/*.jsonl"), ROOT / "requirements.txt")
    code = ("import os\n"
            f"for path in {[str(planted), str(data_file), '/etc/passwd', str(ROOT)]!r}:\n"
            "    try:\n"
            "        open(path).read() if not os.path.isdir(path) else os.listdir(path)\n"
            "        print('read')\n"
            "    except OSError:\n"
            "        print('hidden')\n")
    assert run(judge, code).tests[0].stdout.split() == ["hidden"] * 4


def test_the_view_shows_the_standard_library_not_site_packages_nor_installed_data(judge):
    """A non-editable install puts data/*.jsonl (every bundled test and solution) into site-packages: a planted
    copy there must be out of sight, as must the rest of site-packages; the standard library stays (issue 19,
    item 8)."""
    from judging.executors import site_packages_in_view

    shown = site_packages_in_view(PythonExecutor().read_only)
    assert shown, "this interpreter's site-packages lies in the sandbox's view: the test needs it"
    planted = Path(shown[0]) / f"rewards_planted_{secrets.token_hex(4)}" / "data" / "problems.jsonl"
    planted.parent.mkdir(parents=True)
    try:
        planted.write_text('{"id": "x", "tests": [{"expected_output": "planted-answer"}]}\n')
        code = ("import os\n"
                f"for path in {shown + [str(planted.parent.parent)]!r}:\n"
                "    try:\n"
                "        print(len(os.listdir(path)))\n"
                "    except OSError:\n"
                "        print('hidden')\n"
                "try:\n"
                f"    print(open({str(planted)!r}).read())\n"
                "except OSError:\n"
                "    print('hidden')\n"
                "import json, decimal, sqlite3, ctypes\n"
                "print('standard-library')\n")
        out = run(judge, code).tests[0].stdout.split()
    finally:
        shutil.rmtree(planted.parent.parent)
    assert out == ["0"] * len(shown) + ["hidden", "hidden", "standard-library"], out


def test_expected_output_is_nowhere_the_program_can_look(judge):
    expected = "zebra-7f3c91-expected"
    code = ("import os\n"
            "found = []\n"
            "for top in ('/scratch', '/tmp', '/proc', '/dev/shm'):\n"
            "    for folder, dirs, files in os.walk(top):\n"
            "        if folder.startswith('/proc/') and folder.count('/') > 2 and not folder.endswith(('environ', 'cmdline')):\n"
            "            dirs[:] = [d for d in dirs if d.isdigit()]\n"
            "        for name in files:\n"
            "            path = os.path.join(folder, name)\n"
            "            if top == '/proc' and name not in ('cmdline', 'environ'):\n"
            "                continue\n"
            "            try:\n"
            "                if b'zebra-' + b'7f3c91' in open(path, 'rb').read(1 << 20):\n"
            "                    found.append(path)\n"
            "            except OSError:\n"
            "                pass\n"
            "print('found' if found else 'nothing', found)\n")
    result = run(judge, code, expected).tests[0]
    assert result.stdout.startswith("nothing"), result.stdout


def test_environment_is_scrubbed(judge, monkeypatch):
    for name in ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "leaked-credential")
    code = "import os\nprint(sorted(os.environ))\nprint(any('leaked' in v for v in os.environ.values()))\n"
    out = run(judge, code).tests[0].stdout.splitlines()
    assert set(eval(out[0])) <= {"HOME", "LANG", "PATH", "PWD"}
    assert out[1] == "False"


@pytest.mark.skipif(SECCOMP_FILTER is None, reason="no seccomp program for this architecture")
def test_the_kernel_keyring_is_refused(judge):
    """A uid's user keyring outlives its processes: a key left there would reach later tests of the slot uid."""
    add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
    code = ("import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"print(libc.syscall({add_key}, b'user', b'left-for-later', b'x', 1, ctypes.c_int(-4)), ctypes.get_errno())\n"
            f"print(libc.syscall({keyctl}, 0, ctypes.c_int(-4), 0), ctypes.get_errno())\n")
    assert run(judge, code).tests[0].stdout.split() == ["-1", "1", "-1", "1"]


SYSCALLS = {"x86_64": {"clone": 56, "unshare": 272, "setns": 308, "clone3": 435, "io_uring_setup": 425,
                        "io_uring_enter": 426, "io_uring_register": 427},
            "aarch64": {"clone": 220, "unshare": 97, "setns": 268, "clone3": 435, "io_uring_setup": 425,
                        "io_uring_enter": 426, "io_uring_register": 427}}.get(os.uname().machine)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x00020000, 0x10000000, 0x40000000, 17
EPERM, ENOSYS = 1, 38
# Each line prints "result errno" for one call: a namespace, setns into one, clone3 (whose flags seccomp cannot
# read), io_uring. Unrefused, the first ones create namespaces (uid 0 with every capability in a user namespace).
KERNEL_SURFACE = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def show(name, result):\n"
    "    print(name, result if result <= 0 else 'made', ctypes.get_errno() if result == -1 else 0, flush=True)\n"
    "    if result == 0 and os.getpid() != me:\n"
    "        os._exit(0)  # a raw clone that succeeded: the child leaves at once\n"
    "me = os.getpid()\n"
    f"for flags in ({CLONE_NEWUSER}, {CLONE_NEWNET}, {CLONE_NEWNS}, {CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS}):\n"
    "    show('unshare', libc.unshare(flags))\n"
    "    show('clone', libc.syscall({clone}, flags | {SIGCHLD}, 0, 0, 0, 0))\n"
    "fd = os.open('/proc/self/ns/net', os.O_RDONLY)\n"
    "show('setns', libc.setns(fd, 0))\n"
    "arguments = (ctypes.c_uint64 * 11)(0)\n"
    "show('clone3', libc.syscall({clone3}, arguments, 88))\n"
    "params = (ctypes.c_uint8 * 120)()\n"
    "show('io_uring_setup', libc.syscall({io_uring_setup}, 4, params))\n"
    "show('io_uring_enter', libc.syscall({io_uring_enter}, 0, 0, 0, 0, 0, 0))\n"
    "show('io_uring_register', libc.syscall({io_uring_register}, 0, 0, 0, 0))\n"
)
REFUSED = ([f"unshare -1 {EPERM}", f"clone -1 {EPERM}"] * 4 + [f"setns -1 {EPERM}", f"clone3 -1 {ENOSYS}"]
           + [f"io_uring_{call} -1 {EPERM}" for call in ("setup", "enter", "register")])


@pytest.mark.skipif(SYSCALLS is None, reason="no seccomp program for this architecture")
def test_namespaces_and_io_uring_are_refused(judge):
    """Namespaces and io_uring are where most recent local privilege escalations start."""
    code = KERNEL_SURFACE.format(SIGCHLD=SIGCHLD, **SYSCALLS)
    result = run(judge, code).tests[0]
    assert result.stdout.splitlines() == REFUSED, result.stdout + result.stderr


@pytest.mark.skipif(SYSCALLS is None or os.geteuid() != 0, reason="needs root and a seccomp program")
def test_the_seccomp_program_itself_refuses_what_root_could_do():
    """As root (every capability) the same calls succeed; under the judge's seccomp program they are refused: the
    refusals above come from the program, not only from the slot uid's missing capabilities."""
    code = KERNEL_SURFACE.format(SIGCHLD=SIGCHLD, **SYSCALLS)
    plain = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30)
    made = [line for line in plain.stdout.splitlines() if line.split()[1] != "-1"]
    assert {line.split()[0] for line in made} == {"unshare", "clone", "setns", "clone3", "io_uring_setup"}, plain.stdout
    install = ("import ctypes, sys\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "program = bytes.fromhex(sys.argv[1])\n"
               "class Fprog(ctypes.Structure):\n"
               "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]\n"
               "assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.byref(Fprog(len(program) // 8, "
               "program)), 0, 0) == 0\n")
    filtered = subprocess.run([sys.executable, "-I", "-S", "-c", install + code, SECCOMP_FILTER.hex()],
                              capture_output=True, text=True, timeout=30)
    assert filtered.stdout.splitlines() == REFUSED, filtered.stdout + filtered.stderr


def test_processes_threads_and_multiprocessing_still_work(judge):
    code = ("import multiprocessing, subprocess, threading\n"
            "print(subprocess.run(['/usr/bin/echo', 'spawned'], capture_output=True, text=True).stdout.strip())\n"
            "done = []\n"
            "thread = threading.Thread(target=done.append, args=('thread',))\n"
            "thread.start()\n"
            "thread.join()\n"
            "print(*done)\n"
            "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
            "    print(sum(pool.map(abs, range(-5, 5))))\n")
    result = run(judge, code, "spawned\nthread\n25").tests[0]
    assert result.status == "passed", result.stdout + result.stderr


@pytest.fixture(scope="module")
def one_slot(sandbox):
    """A one-slot judge: consecutive tests run on the same slot (and, warm, in the same worker)."""
    with Judge(timeout=2.0, workers=1, sandbox=sandbox) as judge:
        yield judge


def test_the_test_after_one_that_filled_its_process_limit_starts(one_slot):
    """A test's processes die after its sandbox does and count against its slot's process limit until reaped:
    the slot's next test must not find them there (cold, bwrap failed to start it: a runtime_error)."""
    fill = ("import os\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    (cgroup,) = one_slot.setup.slots.cgroups.slots.values() or [None]
    listed = [folder / "cgroup.procs" for folder in cgroup.folders] if cgroup else []
    run(one_slot, "pass")
    idle = {path: path.read_text().split() for path in listed}  # a warm worker's sandbox, or nothing
    for _ in range(3):
        assert run(one_slot, fill).status == "timeout"
        left = {path: path.read_text().split() for path in listed}
        result = run(one_slot, "print(6)", "6").tests[0]
        assert result.status == "passed", result.stderr
        assert left == idle, f"processes of the fork bomb still in the slot's cgroup: {left}, idle {idle}"


SECRET_PORT = 40000 + 1234
TIME_WAIT = "06"


def test_no_tcp_state_reaches_the_next_test(one_slot):
    """A loopback connection's TIME_WAIT entry outlives its processes by 60 s: a test that encodes a secret in
    its port must not be able to hand it to the next test of the slot (/proc/net/tcp, or a refused bind)."""
    leave = ("import socket\n"
             f"server = socket.create_server(('127.0.0.1', {SECRET_PORT}))\n"
             f"client = socket.create_connection(('127.0.0.1', {SECRET_PORT}))\n"
             "peer, _ = server.accept()\n"
             "client.close()  # the side that closes first holds TIME_WAIT\n"
             "peer.close()\n"
             "server.close()\n"
             "rows = [line.split() for line in open('/proc/net/tcp').read().splitlines()[1:]]\n"
             f"print(any(row[2].endswith(':{SECRET_PORT:04X}') and row[3] == '{TIME_WAIT}' for row in rows))\n")
    assert run(one_slot, leave, "True").status == "passed", "the TIME_WAIT entry must exist, or the test means nothing"
    look = ("import socket\n"
            "rows = [line for name in ('tcp', 'tcp6', 'udp', 'unix') "
            "for line in open(f'/proc/net/{name}').read().splitlines()[1:]]\n"
            "probe = socket.socket()\n"
            f"probe.bind(('127.0.0.1', {SECRET_PORT}))\n"
            "print(rows, 'bound')\n")
    seen = run(one_slot, look, "[] bound").tests[0]
    assert seen.status == "passed", seen.stdout + seen.stderr


def test_the_pid_counter_carries_nothing_to_the_next_test(one_slot):
    """Process ids must not reveal how many processes the previous test of the slot made."""
    look = ("import os\n"
            "last = open('/proc/sys/kernel/ns_last_pid').read().split()\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    os._exit(0)\n"
            "os.waitpid(child, 0)\n"
            "print(os.getpid(), child, last, open('/proc/loadavg').read().split()[-1])\n")
    after_quiet = run(one_slot, "pass"), run(one_slot, look).tests[0].stdout
    busy = ("import os\n"
            "for _ in range(20):\n"
            "    if os.fork() == 0:\n"
            "        os._exit(0)\n"
            "    os.wait()\n")
    assert run(one_slot, busy).status == "failed", "the busy test must run to its end"
    after_busy = run(one_slot, look).tests[0].stdout
    assert after_busy == after_quiet[1] != "", (after_quiet[1], after_busy)


def test_fork_bomb_is_contained_and_cleaned_up(judge):
    code = ("import os\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    assert run(judge, code).status == "timeout"
    assert wait_until_gone(judge) == []


def test_double_forked_daemon_dies_with_the_test(judge):
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.execv('/usr/bin/sleep', ['sleep', '313.37'])\n"
            "    os._exit(0)\n"
            "time.sleep(0.2)\n"
            "print('parent done')\n")
    assert run(judge, code).tests[0].stdout.strip() == "parent done"
    assert wait_until_gone(judge) == []
    assert not any(b"313.37" in command for command in command_lines())


def test_sigterm_ignoring_children_die_on_timeout(judge):
    code = ("import os, signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "for _ in range(3):\n"
            "    if os.fork() == 0:\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "        while True:\n"
            "            time.sleep(0.01)\n"
            "while True:\n"
            "    time.sleep(0.01)\n")
    assert run(judge, code).status == "timeout"
    assert wait_until_gone(judge) == []


def test_huge_output_is_capped_without_hanging(judge):
    for stream in ("sys.stdout", "sys.stderr"):
        code = f"import sys\nwhile True:\n    {stream}.write('x' * 65536)\n"
        judgement = run(judge, code)
        assert judgement.status == "output_limit"
        assert len(judgement.tests[0].stdout) <= 4096 and len(judgement.tests[0].stderr) <= 4096


def test_memory_hog_reports_memory(judge):
    assert run(judge, "hog = bytearray(4 << 30)\n").status == "memory"


def memory_spread(children_mb, memfd_mb):
    """8 processes holding ``children_mb`` each (written, so charged) and a memfd of ``memfd_mb`` written with
    write(): under a 64 MB address-space limit per process, 8 x 16 + 24 MB holds 152 MB in all."""
    return ("import os, time\n"
            "fds = [os.memfd_create('outside-every-address-space') for _ in range(2)]  # each under fsize\n"
            f"for n in range({memfd_mb}):\n"
            "    os.write(fds[n % 2], b'x' * (1 << 20))\n"
            "children = []\n"
            "for _ in range(8):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            f"        held = b'x' * ({children_mb} << 20)\n"
            "        time.sleep(0.5)\n"
            "        os._exit(0)\n"
            "    children.append(pid)\n"
            "print(sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_memory_is_bounded_per_test_for_all_its_processes_together(sandbox):
    """--judge_memory_mb is the whole test's memory, memfd pages included, not each process's (issue 19, item 2)."""
    with Judge(timeout=10.0, workers=1, sandbox=sandbox, memory_mb=64) as judge:
        assert "memory: a cgroup" in judge.isolation, judge.isolation
        within = run(judge, memory_spread(children_mb=2, memfd_mb=8), "[0, 0, 0, 0, 0, 0, 0, 0]")
        assert within.status == "passed", within.tests[0].stderr
        judgement = run(judge, memory_spread(children_mb=16, memfd_mb=24), "[0, 0, 0, 0, 0, 0, 0, 0]")
        assert judgement.status == "memory", judgement.tests[0]
        assert run(judge, "print(6)", "6").status == "passed"
        assert not judge.warm or judge.setup.warm.failures == 0, f"the slot's worker was killed: {judge.setup.warm.failure}"


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_the_slot_cgroup_counts_the_tests_processes_not_bwraps(sandbox):
    """bwrap's PID-namespace init outlives bwrap and waits for the host's init to reap it: 50 tests in a row
    (pids.max is 40) must not leave a slot unable to fork."""
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        statuses = [run(judge, "pass", "").status for _ in range(50)]
        [slot] = judge.setup.slots.cgroups.slots.values()
        tasks = [int((folder / "pids.current").read_text()) for folder in slot.folders if
                 (folder / "pids.current").exists()]
    assert statuses == ["passed"] * 50
    assert tasks and tasks[0] <= 1, "only the warm worker may stay in the slot between tests"


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_cgroup_v2_layout_on_a_stand_in_hierarchy(tmp_path, monkeypatch):
    """A STAND-IN v2 hierarchy (a plain folder, no kernel behind it): the knobs written and the join command.
    This machine runs cgroup v1; GPU nodes mostly v2."""
    monkeypatch.setenv(V2_ROOT_ENV, str(tmp_path))
    (tmp_path / "cgroup.subtree_control").touch()
    cgroups = Cgroups(["a", "b"], 64 << 20, 32)
    assert cgroups.version == "v2" and not cgroups.unavailable
    [parent] = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids"
    for index, key in enumerate(["a", "b"]):
        slot = parent / f"slot-{index}"
        assert (slot / "memory.max").read_text() == str(64 << 20) and (slot / "pids.max").read_text() == "40"
        subprocess.run(cgroups.slots[key].enter_command(["true"]), check=True)
        assert (slot / "cgroup.procs").read_text() == "0\n", "the process writes itself in before it execs"
        (slot / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
        assert cgroups.slots[key].oom_kills() == 2
    cgroups.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_without_a_writable_cgroup_the_isolation_line_says_what_still_bounds_memory(monkeypatch, sandbox):
    monkeypatch.setenv(V2_ROOT_ENV, "/proc/self")  # no cgroup can be made there, even as root
    with Judge(workers=1, sandbox=sandbox, memory_mb=256) as judge:
        assert "memory: NOT bounded per test (cgroup v2 not writable here" in judge.isolation
        assert "address space 256 MB each, at most 32 processes per slot uid" in judge.isolation
        assert run(judge, "print(6)", "6").status == "passed"


def test_hang_times_out_and_later_tests_are_skipped(sandbox):
    tests = [{"test_code": "print(1)", "expected_output": "1"}] * 4
    with Judge(timeout=1.0, workers=1, sandbox=sandbox) as judge:
        judgement = judge.run("while True:\n    pass\n", tests, "python")
        assert not judge.warm or judge.setup.warm.failures == 0, judge.setup.warm.failure
    assert judgement.status == "timeout"
    assert [t.status for t in judgement.tests] == ["timeout"] * 4
    assert [t.seconds for t in judgement.tests[1:]] == [0.0] * 3


def test_completion_budget_cuts_the_first_test_short(sandbox):
    tests = [{"test_code": "print(1)", "expected_output": "1"}] * 3
    with Judge(timeout=5.0, completion_budget=0.5, workers=1, sandbox=sandbox) as judge:
        judgement = judge.run("import time\ntime.sleep(60)\n", tests, "python")
        assert not judge.warm or judge.setup.warm.failures == 0, judge.setup.warm.failure
    assert [t.status for t in judgement.tests] == ["timeout"] * 3
    assert 0.0 < judgement.tests[0].seconds < 4.0, "the test must stop at the budget, not the 5 s timeout"


def test_trainer_survives_the_program_attacking_it(judge):
    me = os.getpid()
    code = ("import os, signal\n"
            f"for pid in (os.getppid(), 1, {me}, -1):\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "    except OSError:\n"
            "        pass\n"
            "try:\n"
            "    os.killpg(0, signal.SIGKILL)\n"
            "except OSError:\n"
            "    pass\n"
            "print('still here')\n")
    run(judge, code)
    assert run(judge, "print(6)", "6").status == "passed"


def test_scratch_folders_are_removed(judge):
    run(judge, "open('left-behind.txt', 'w').write('x')\nimport os\nos.mkdir('sub')\n")
    assert_only_warm_folders_left(judge)


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged uid to build and remove the tree")
def test_remove_tree_without_root_opens_up_mode_000_folders():
    """A judge that is not root runs judged code as its own user, who may chmod 000 a folder the judge then must
    enter: remove_tree makes it 0700 through a descriptor of the folder itself."""
    top = tempfile.mkdtemp(prefix="remove-tree-")
    os.chown(top, 65534, 65534)
    try:
        pid = os.fork()
        if pid == 0:  # as nobody: build the tree, lock it up, remove it
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                os.makedirs(f"{top}/scratch/u/v/w")
                Path(f"{top}/scratch/u/v/w/f").write_text("x")
                for path in ("u/v/w", "u/v", "u"):
                    os.chmod(f"{top}/scratch/{path}", 0)
                os.chmod(f"{top}/scratch", 0o500)
                code = 0 if remove_tree(f"{top}/scratch") is None and not os.path.exists(f"{top}/scratch") else 2
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0, "remove_tree left the tree (or raised) without root"
    finally:
        shutil.rmtree(top)


def cleanup_breakers(host_folder):
    """Programs that leave a scratch tree built to break its removal on the host (issue 19, item 1)."""
    return {
        "1500_nested_folders": ("import os\n"
                                "for _ in range(1500):\n"
                                "    os.mkdir('d' * 40)\n"
                                "    os.chdir('d' * 40)\n"),
        "links_to_host_paths_and_loops": ("import os\n"
                                          f"os.symlink({host_folder!r}, 'host')\n"
                                          f"os.symlink({host_folder + '/keep.txt'!r}, 'host_file')\n"
                                          "os.symlink('loop', 'loop')\n"
                                          "os.symlink('b', 'a')\n"
                                          "os.symlink('a', 'b')\n"
                                          "os.mkdir('sub')\n"
                                          "os.symlink('..', 'sub/up')\n"),
        "unreadable_folders": ("import os\n"
                               "os.makedirs('u/v/w')\n"
                               "open('u/v/w/f', 'w').write('x')\n"
                               "for path in ('u/v/w/f', 'u/v/w', 'u/v', 'u'):\n"
                               "    os.chmod(path, 0)\n"),
    }


def host_folder_to_keep(tmp_path):
    folder = tmp_path / "keep-me"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    return folder


def assert_only_warm_folders_left(judge):
    warm_folders = set(judge.setup.warm.folders.values()) if judge.warm else set()
    for path in Path(judge.setup.slots.base).iterdir():
        assert str(path) in warm_folders or str(path)[:-len(".log")] in warm_folders, f"{path} was left behind"
    assert not [path for folder in warm_folders for path in Path(folder).iterdir()]


@pytest.mark.parametrize("breaker", ["1500_nested_folders", "links_to_host_paths_and_loops", "unreadable_folders"])
def test_cleanup_breakers_get_a_verdict_free_the_slot_and_leave_nothing(judge, breaker, tmp_path):
    kept = host_folder_to_keep(tmp_path)
    code = cleanup_breakers(str(kept))[breaker]
    judgement = run(judge, code + "print(6)\n", "6", timeout=10.0)  # 1,500 mkdirs take ~1 s on a loaded machine
    assert judgement.status == "passed", judgement.tests[0].stderr
    assert run(judge, code + "print(5)\n", "6", timeout=10.0).status == "failed", "its output is judged as any other"
    assert judge.setup.slots.free.qsize() == judge.workers, "every slot must be handed back"
    assert_only_warm_folders_left(judge)
    assert (kept / "keep.txt").read_text() == "keep", "removal followed a link to the host"


def test_close_after_cleanup_breakers_never_raises(sandbox, tmp_path):
    judge = Judge(timeout=10.0, workers=1, sandbox=sandbox)
    base = Path(judge.setup.slots.base)
    for code in cleanup_breakers(str(host_folder_to_keep(tmp_path))).values():
        judge.run("", [{"test_code": code, "expected_output": ""}] * 2, "python")
    judge.close()
    judge.close()
    assert not base.exists()


def test_remove_tree_holds_against_deep_linked_and_unreadable_trees(tmp_path):
    """The remover alone, on a tree deeper than PATH_MAX (names of 50 characters, 1,500 deep)."""
    kept = host_folder_to_keep(tmp_path)
    top = tmp_path / "scratch"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("n" * 50, dir_fd=fd)
        inner = os.open("n" * 50, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.symlink(str(kept), "host", dir_fd=fd)
    os.symlink("loop", "loop", dir_fd=fd)
    os.close(fd)
    (top / "u" / "v").mkdir(parents=True)
    (top / "u" / "v" / "f").write_text("x")
    (top / "u" / "v").chmod(0)
    (top / "u").chmod(0)
    assert remove_tree(str(top)) is None
    assert not top.exists() and (kept / "keep.txt").read_text() == "keep"
    assert remove_tree(str(top)) is None, "a folder already gone is not an error"


FAKE_Q = str(ROOT / "tests" / "fake_q" / "q")  # a STAND-IN for q (see the file); it evaluates no q code
# Each judged behaviour once known to end in sandbox_error (issue 19): (language, solution, test code, the verdict
# it gets now). sandbox_error scores None, which spares a wrong answer its penalty: only the judge's own faults
# may end there.
ONCE_SANDBOX_ERRORS = {
    "q_prints_licence_failure_text": ("q", "solve:{5}\n'k4.lic\nexit 1;", '-1 "5";', "runtime_error"),
    "1500_nested_scratch_folders": ("python", cleanup_breakers("/")["1500_nested_folders"], "print(6)", "passed"),
    "links_in_scratch": ("python", cleanup_breakers("/")["links_to_host_paths_and_loops"], "print(6)", "passed"),
    "mode_000_folders": ("python", cleanup_breakers("/")["unreadable_folders"], "print(6)", "passed"),
    "closes_stdout_and_stderr": ("python", "import os\nos.close(1)\nos.close(2)\n", "print(6)", "runtime_error"),
    "signals_its_parent_and_all": ("python", "import os, signal\nfor pid in (os.getppid(), 1, -1):\n"
                                             "    try:\n        os.kill(pid, signal.SIGKILL)\n"
                                             "    except OSError:\n        pass\n", "print(6)", "passed"),
    "its_warm_worker_is_killed": ("python", "import time\ntime.sleep(1.0)\n", "print(6)", "passed"),
}


@pytest.mark.parametrize("behaviour", list(ONCE_SANDBOX_ERRORS))
def test_judged_behaviours_that_ended_in_sandbox_error_now_get_their_verdict(sandbox, behaviour, tmp_path,
                                                                              monkeypatch):
    language, solution, test_code, verdict = ONCE_SANDBOX_ERRORS[behaviour]
    if behaviour == "its_warm_worker_is_killed" and sandbox == "bwrap-cold":
        pytest.skip("no warm worker on the cold path")
    (tmp_path / "qhome").mkdir(mode=0o755)
    monkeypatch.setenv("QHOME", str(tmp_path / "qhome"))
    monkeypatch.delenv("QLIC", raising=False)
    with Judge(timeout=10.0, workers=1, sandbox=sandbox, q_binary=FAKE_Q, q_licence_hosts="none") as judge:
        killer = None
        if behaviour == "its_warm_worker_is_killed":
            run(judge, "pass")
            killer = threading.Timer(0.5, os.killpg, (next(iter(judge.setup.warm.workers.values())).process.pid,
                                                      signal.SIGKILL))
            killer.start()
        judgement = judge.run(solution, [{"test_code": test_code, "expected_output": "6"}], language)
        if killer:
            killer.join()
            assert judge.setup.warm.failures == 1, "the worker must really have died mid-test"
        assert judgement.status == verdict, judgement.tests[0].stderr
        assert judge.counters()["judge/licence_retries"] == 0
        assert judge.setup.slots.free.qsize() == 1
        assert run(judge, "print(6)", "6").status == "passed"


@pytest.fixture()
def path_without_namespace_tools(tmp_path, monkeypatch):
    for tool in ("prlimit", "setpriv", "kill"):
        (tmp_path / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for root")
def test_without_namespaces_auto_and_strict_refuse_to_run_code_as_root(path_without_namespace_tools):
    with pytest.raises(JudgeUnavailable, match="bubblewrap"):
        Judge(sandbox="strict", workers=1)
    with pytest.raises(JudgeUnavailable, match=r"bwrap: bwrap not installed.*bubblewrap.*sandbox='rlimits'.*as root"):
        Judge(sandbox="auto", workers=1)


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
def test_explicit_rlimits_runs_as_a_slot_uid_when_it_can_run_python(path_without_namespace_tools, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    with Judge(sandbox="rlimits", workers=1) as judge:
        assert judge.level == "rlimits" and "weak" in judge.isolation
        uid = run(judge, "import os\nprint(os.getuid())").tests[0].stdout.strip()
        assert uid == str(judge.setup.slots.uids.uids[0]) != "0"


@pytest.fixture()
def python_out_of_slot_reach(monkeypatch):
    """This Python, copied (a venv with --copies) into a folder of mode 0700 under /tmp that a slot uid cannot
    cross, and made sys.executable: the condition of a Python under /root, on any machine."""
    private = Path(tempfile.mkdtemp(prefix="python-out-of-reach-"))  # mode 0700
    try:
        subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(private / "venv")],
                       check=True)
        python = str(private / "venv" / "bin" / "python3")
        assert blocked_for_others(python) == f"{private} is mode 0700"
        monkeypatch.setattr(sys, "executable", python)
        yield python
    finally:
        shutil.rmtree(private)


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
def test_explicit_rlimits_with_python_out_of_slot_reach_runs_as_root_and_says_so(path_without_namespace_tools,
                                                                                python_out_of_slot_reach):
    with Judge(sandbox="rlimits", workers=1) as judge:
        assert "judged code runs as root" in judge.isolation
        assert run(judge, "import os\nprint(os.getuid())", "0").status == "passed"


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
def test_unshare_with_python_out_of_slot_reach_names_the_cause(python_out_of_slot_reach):
    with pytest.raises(JudgeUnavailable, match=re.escape(blocked_for_others(python_out_of_slot_reach))):
        Judge(sandbox="unshare", workers=1)

def unshare_works():
    command = ["unshare", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc", "true"]
    return shutil.which("unshare") is not None and subprocess.run(command, capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
@pytest.mark.skipif(not unshare_works(), reason="unshare cannot create namespaces here")
def test_unshare_level_runs_a_real_test_as_a_slot_uid(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")  # the system Python, readable by any uid
    with Judge(sandbox="unshare", workers=1) as judge:
        assert judge.level == "unshare"
        judgement = run(judge, "import os\nprint(os.getuid())", str(judge.setup.slots.uids.uids[0]))
        assert judgement.status == "passed", judgement.tests[0].stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
@pytest.mark.skipif(not unshare_works(), reason="unshare cannot create namespaces here")
def test_a_private_tmpdir_is_named_as_the_cause(tmp_path, monkeypatch):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    with pytest.raises(JudgeUnavailable, match="set TMPDIR to a folder others can cross.*is mode 0700"):
        Judge(sandbox="unshare", workers=1)
