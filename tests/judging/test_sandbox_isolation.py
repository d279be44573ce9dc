"""Adversarial programs against the sandbox: what judged code can see, reach and leave for the next test (uid,
limits, network, host files, disk, environment, kernel surface, channels between tests). Each test fails if the
property it names breaks.

Every test that runs Python runs twice: with warm workers (``bwrap``, a child forked per test; as root the warm
workers must really start) and with a fresh interpreter per test (``bwrap-cold``). The warm design's own
threats are in tests/judging/test_warm_worker.py."""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from bwrap_paths import ROOT, judge, run, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Judge, Test
from judging.executors import PythonExecutor
from judging.seccomp import SECCOMP_FILTER
from judging.slots import SLOT_UID_BASE


def test_isolation_level_is_reported(judge, sandbox):
    assert judge.level == "bwrap", f"bubblewrap is installed here; got {judge.isolation}"
    assert "namespaces" in judge.isolation and f"uid {SLOT_UID_BASE}+" in judge.isolation
    assert ("Python: warm workers" in judge.isolation) == judge.warm
    if sandbox == "bwrap-cold":
        assert "Python: a fresh interpreter per test (bwrap-cold)" in judge.isolation


def test_program_runs_unprivileged_with_limits(judge):
    code = (
        "import os, resource\n"
        "print(os.getuid() != 0, os.getgid() != 0, os.getgroups())\n"
        "for name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_CORE'):\n"
        "    print(name, resource.getrlimit(getattr(resource, name))[0])\n"
        "status = dict(line.split(':\\t') for line in open('/proc/self/status').read().splitlines())\n"
        "for name in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs'):\n"
        "    print(name, int(status[name], 16))\n"
    )
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
        code = (
            "import socket\n"
            f"for host in ('127.0.0.1', '1.1.1.1'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=0.5)\n"
            "        print('connected', host)\n"
            "    except OSError:\n"
            "        print('blocked', host)\n"
        )
        assert run(judge, code).tests[0].stdout.split() == ["blocked", "127.0.0.1", "blocked", "1.1.1.1"]


def test_writes_outside_scratch_fail_and_leave_nothing(judge, tmp_path):
    tmp_path.chmod(0o777)
    targets = [tmp_path / "escaped.txt", ROOT / "escaped.txt", Path("/usr/escaped.txt"), Path("/escaped.txt")]
    code = (
        "import os\n"
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('wrote')\n"
        "    except OSError:\n"
        "        print('refused')\n"
        "open('inside.txt', 'w').write('scratch is writable')\n"
        "print(open('inside.txt').read())\n"
    )
    out = run(judge, code).tests[0].stdout.splitlines()
    assert out[-1] == "scratch is writable"
    for target in targets:
        assert not target.exists(), f"{target} appeared on the host"


def test_files_too_big_are_refused(judge):
    code = (
        "try:\n"
        "    open('big', 'wb').write(b'x' * (32 << 20))\n"
        "    print('wrote')\n"
        "except OSError as e:\n"
        "    print('refused')\n"
    )
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


DISK_FILL = (
    "import os\n"
    "for folder in ('/scratch', '/tmp', '/dev/shm'):\n"
    "    written = 0\n"
    "    try:\n"
    "        for n in range(20):\n"
    "            with open(f'{folder}/fill{n}', 'wb', buffering=0) as file:\n"
    "                for _ in range(10):\n"
    "                    written += file.write(b'x' * (1 << 20))\n"
    "    except OSError as error:\n"
    "        size = os.statvfs(folder)\n"
    "        print(folder, error.errno, written >> 20, size.f_blocks * size.f_frsize >> 20)\n"
)


def test_disk_is_bounded_per_test_and_nothing_reaches_the_host_disk(judge):
    """200 MB in each of /scratch, /tmp and /dev/shm: each stops at --judge_disk_mb (64) with ENOSPC."""
    with DiskWatch(judge.setup.slots.base) as disk:
        judgement = run(judge, DISK_FILL, timeout=10.0)
        unchecked = run(
            judge, "for n in range(20):\n    open(f'fill{n}', 'wb').write(b'x' * (10 << 20))\n", timeout=10.0
        )
    lines = [line.split() for line in judgement.tests[0].stdout.splitlines()]
    assert [line[:2] for line in lines] == [["/scratch", "28"], ["/tmp", "28"], ["/dev/shm", "28"]], lines
    assert all(60 <= int(line[2]) <= 64 and line[3] == "64" for line in lines), lines
    assert unchecked.status == "runtime_error" and "No space left on device" in unchecked.tests[0].stderr
    assert disk.before - disk.lowest < 50 << 20, "what the test wrote reached the host disk"


def test_judge_disk_mb_sizes_scratch_and_tmp(sandbox):
    code = (
        "import os\nfor folder in ('/scratch', '/tmp', '/dev/shm'):\n"
        "    print(os.statvfs(folder).f_blocks * os.statvfs(folder).f_frsize)"
    )
    with Judge(workers=1, sandbox=sandbox, disk_mb=8) as judge:
        assert run(judge, code, f"{8 << 20}\n{8 << 20}\n{8 << 20}").status == "passed"


def test_host_files_and_problem_data_are_not_readable(judge, tmp_path):
    planted = tmp_path / "planted.txt"
    planted.write_text("secret")
    planted.chmod(0o644)
    data_file = next(ROOT.glob("data/*.jsonl"), ROOT / "requirements.txt")
    code = (
        "import os\n"
        f"for path in {[str(planted), str(data_file), '/etc/passwd', str(ROOT)]!r}:\n"
        "    try:\n"
        "        open(path).read() if not os.path.isdir(path) else os.listdir(path)\n"
        "        print('read')\n"
        "    except OSError:\n"
        "        print('hidden')\n"
    )
    assert run(judge, code).tests[0].stdout.split() == ["hidden"] * 4


def test_the_view_shows_the_standard_library_not_site_packages_nor_installed_data(judge):
    """A non-editable install puts data/*.jsonl (every bundled test and solution) into site-packages: a planted
    copy there must be out of sight, as must the rest of site-packages; the standard library stays."""
    from judging.executors import site_packages_in_view

    shown = site_packages_in_view(PythonExecutor().read_only)
    assert shown, "this interpreter's site-packages lies in the sandbox's view: the test needs it"
    planted = Path(shown[0]) / f"rewards_planted_{secrets.token_hex(4)}" / "data" / "problems.jsonl"
    planted.parent.mkdir(parents=True)
    try:
        planted.write_text('{"id": "x", "tests": [{"expected_output": "planted-answer"}]}\n')
        code = (
            "import os\n"
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
            "print('standard-library')\n"
        )
        out = run(judge, code).tests[0].stdout.split()
    finally:
        shutil.rmtree(planted.parent.parent)
    assert out == ["0"] * len(shown) + ["hidden", "hidden", "standard-library"], out


# Each mount's root in its file system, mount point and source (/proc/self/mountinfo), then the test's cgroups.
HOST_VIEW = (
    "for line in open('/proc/self/mountinfo'):\n"
    "    fields = line.split()\n"
    "    print(fields[3], fields[4], fields[fields.index('-') + 2])\n"
    "print(open('/proc/self/cgroup').read())\n"
)


def test_the_view_shows_no_host_path_pid_or_user_name(judge):
    """Mount sources, cgroup folder names and temporary folders seen from inside carry no host path, PID or user
    name: not the checkout's path, not the judge's pid (which once named its cgroups), not the judge's own temporary
    folders (the fixed /proc files, its scratch folder), not the home folder. The one host path a test sees is the
    interpreter's own folder (q's binary and QHOME for q), bound where it lies: Python finds its standard library,
    and a shared build its libpython, from there."""
    import getpass

    seen = run(judge, HOST_VIEW).tests[0].stdout
    # It read what it should: mountinfo, and /proc/self/cgroup, whose paths start at the slot (its cgroup namespace).
    assert "/proc/self" not in seen and " /proc " in seen and re.search(r"^\d+:[^:\n]*:/$", seen, re.M), seen
    assert "judge-" not in seen and "slot-" not in seen, f"the slot's cgroup folders seen from inside:\n{seen}"
    outside_interpreter = seen
    for prefix in PythonExecutor().read_only:
        outside_interpreter = outside_interpreter.replace(prefix, "INTERPRETER")
    home, user = os.path.expanduser("~"), getpass.getuser()
    host_facts = {
        "checkout": str(ROOT),
        "judge's folder": Path(judge.setup.slots.base).name,
        "the judge's temporary folders": f"{tempfile.gettempdir()}/",
        "home": f"{home}/",
        "user name": f"/{user}/",
    }
    found = {what: fact for what, fact in host_facts.items() if fact in outside_interpreter}
    assert not found, f"host facts seen from inside: {found}\n{seen}"
    assert not re.search(rf"(?<![0-9]){os.getpid()}(?![0-9])", seen), f"the judge's pid {os.getpid()} seen:\n{seen}"


def test_expected_output_is_nowhere_the_program_can_look(judge):
    expected = "zebra-7f3c91-expected"
    code = (
        "import os\n"
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
        "print('found' if found else 'nothing', found)\n"
    )
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
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"print(libc.syscall({add_key}, b'user', b'left-for-later', b'x', 1, ctypes.c_int(-4)), ctypes.get_errno())\n"
        f"print(libc.syscall({keyctl}, 0, ctypes.c_int(-4), 0), ctypes.get_errno())\n"
    )
    assert run(judge, code).tests[0].stdout.split() == ["-1", "1", "-1", "1"]


SYSCALLS = {
    "x86_64": {
        "clone": 56,
        "unshare": 272,
        "setns": 308,
        "clone3": 435,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    "aarch64": {
        "clone": 220,
        "unshare": 97,
        "setns": 268,
        "clone3": 435,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
}.get(os.uname().machine)
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
REFUSED = (
    [f"unshare -1 {EPERM}", f"clone -1 {EPERM}"] * 4
    + [f"setns -1 {EPERM}", f"clone3 -1 {ENOSYS}"]
    + [f"io_uring_{call} -1 {EPERM}" for call in ("setup", "enter", "register")]
)


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
    install = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "program = bytes.fromhex(sys.argv[1])\n"
        "class Fprog(ctypes.Structure):\n"
        "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]\n"
        "assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.byref(Fprog(len(program) // 8, "
        "program)), 0, 0) == 0\n"
    )
    filtered = subprocess.run(
        [sys.executable, "-I", "-S", "-c", install + code, SECCOMP_FILTER.hex()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert filtered.stdout.splitlines() == REFUSED, filtered.stdout + filtered.stderr


# What a program reports of the policy it runs under (judging/policy.py): every resource limit, the top mount at
# each mount point (its options, type and size or mode), its environment and the root folder's names.
POLICY_SEEN = (
    "import json, os, resource\n"
    "mounts = {}\n"
    "for line in open('/proc/self/mountinfo'):\n"
    "    fields = line.split()\n"
    "    rest = fields[fields.index('-') + 1:]\n"
    "    options = [option for option in rest[2].split(',') if option.startswith(('size', 'mode', 'ro', 'rw'))]\n"
    "    mounts[fields[4]] = [fields[5], rest[0], options]\n"
    "print(json.dumps({'rlimits': {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource)\n"
    "                              if name.startswith('RLIMIT_')},\n"
    "                  'mounts': mounts, 'environment': dict(os.environ), 'root': sorted(os.listdir('/'))}))\n"
)
# What a warm child sees that a cold program does not, and why it may: the worker's own source (public,
# read-only: a folder of copies, no mount), and /proc/sys covered read-only (policy.PROC_READ_ONLY; bwrap's --proc
# leaves it uncovered here, where the slot uid cannot write it either).
WARM_ONLY_MOUNTS = {"/proc/sys"}
WARM_ONLY_NAMES = {"warm_worker"}


@pytest.mark.skipif(os.geteuid() != 0 or SYSCALLS is None, reason="warm workers need root; seccomp an architecture")
def test_a_warm_and_a_cold_test_run_under_the_same_policy():
    """Both paths read judging/policy.py: a program sees the same limits, mounts, environment and refused system
    calls warm and cold, or a cold rerun (a warm worker that failed) would judge it under other rules."""
    seen = {}
    for sandbox in ("bwrap", "bwrap-cold"):
        with Judge(timeout=2.0, workers=1, sandbox=sandbox) as one:
            assert one.warm == (sandbox == "bwrap"), one.isolation
            policy = run(one, POLICY_SEEN).tests[0]
            refused = run(one, KERNEL_SURFACE.format(SIGCHLD=SIGCHLD, **SYSCALLS)).tests[0]
        assert policy.stderr == "" and refused.stdout.splitlines() == REFUSED, policy.stderr + refused.stdout
        seen[sandbox] = json.loads(policy.stdout)
    warm, cold = seen["bwrap"], seen["bwrap-cold"]
    assert warm["rlimits"] == cold["rlimits"] and warm["rlimits"]["RLIMIT_AS"] == [1024 << 20] * 2
    assert warm["environment"] == cold["environment"] and warm["environment"]["HOME"] == "/scratch"
    assert {point: mount for point, mount in warm["mounts"].items() if point not in WARM_ONLY_MOUNTS} == cold["mounts"]
    assert [name for name in warm["root"] if name not in WARM_ONLY_NAMES] == cold["root"]
    for point in ("/scratch", "/tmp", "/dev/shm"):
        assert "size=65536k" in cold["mounts"][point][2], cold["mounts"]


def test_processes_threads_and_multiprocessing_still_work(judge):
    code = (
        "import multiprocessing, subprocess, threading\n"
        "print(subprocess.run(['/usr/bin/echo', 'spawned'], capture_output=True, text=True).stdout.strip())\n"
        "done = []\n"
        "thread = threading.Thread(target=done.append, args=('thread',))\n"
        "thread.start()\n"
        "thread.join()\n"
        "print(*done)\n"
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "    print(sum(pool.map(abs, range(-5, 5))))\n"
    )
    result = run(judge, code, "spawned\nthread\n25").tests[0]
    assert result.status == "passed", result.stdout + result.stderr


def test_sqlite_on_a_file_fails_at_once_and_in_memory_works(judge):
    """sqlite3 locks a database file, which judged Python may not (judging/seccomp.py): it fails at once with its
    own message, not after its busy timeout (5 s, past the test's); in memory, or with the unix-none VFS, it works."""
    make = (
        "import sqlite3\n"
        "db = sqlite3.connect({where!r}, uri=True)\n"
        "db.execute('create table t (x)')\n"
        "db.execute('insert into t values (7)')\n"
        "print(db.execute('select x from t').fetchone()[0])\n"
    )
    on_file = run(judge, make.format(where="/scratch/kept.db"), "7").tests[0]
    assert on_file.status == "runtime_error" and "access permission denied" in on_file.stderr, on_file
    for where in (":memory:", "file:/scratch/kept.db?vfs=unix-none"):
        result = run(judge, make.format(where=where), "7").tests[0]
        assert result.status == "passed", (where, result)


@pytest.fixture(scope="module")
def one_slot(sandbox):
    """A one-slot judge: consecutive tests run on the same slot (and, warm, in the same worker)."""
    with Judge(timeout=2.0, workers=1, sandbox=sandbox) as judge:
        yield judge


@pytest.mark.slow
def test_the_test_after_one_that_filled_its_process_limit_starts(one_slot):
    """A test's processes die after its sandbox does and count against its slot's process limit until reaped:
    the slot's next test must not find them there (cold, bwrap failed to start it: a runtime_error)."""
    fill = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
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


def test_judged_python_opens_unix_sockets_only(judge):
    """A network socket's state outlives its processes (TIME_WAIT, the stack's counters and caches), so judged Python
    may open Unix sockets only (judging/seccomp.py); multiprocessing's and asyncio's still work."""
    code = (
        "import asyncio, errno, multiprocessing, socket\n"
        "for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET, 40):  # 40: VSOCK\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_DGRAM).close()\n"
        "        print('opened', family)\n"
        "    except OSError as error:\n"
        "        print(errno.errorcode[error.errno])\n"
        "a, b = socket.socketpair()\n"
        "a.send(b'unix')\n"
        "print(b.recv(4).decode(), asyncio.run(asyncio.sleep(0, 'asyncio')))\n"
        "reader, writer = multiprocessing.Pipe()\n"
        "writer.send('pipe')\n"
        "print(reader.recv())\n"
    )
    result = run(judge, code).tests[0]
    assert result.stdout.split() == ["EAFNOSUPPORT"] * 5 + ["unix", "asyncio", "pipe"], result.stderr


# Test 1 binds an abstract Unix socket name and leaves the socket in flight in a cycle that nothing can read (a
# socket pair, each end in the other's queue): it outlives the test's processes until the kernel's garbage collector
# runs, which it may not for several tests. A test after it must neither see the socket nor find its name taken.
LEAVE_A_SOCKET = (
    "import socket\n"
    "held = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "held.bind(b'\\0secret-42')\n"
    "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "socket.send_fds(a, [b'x'], [a.fileno(), held.fileno()])\n"
    "socket.send_fds(b, [b'x'], [b.fileno()])\n"
    "print(any(row.endswith('@secret-42') for row in open('/proc/net/unix').read().splitlines()))\n"
)
LOOK_FOR_IT = (
    "import socket\n"
    "seen = any(row.endswith('@secret-42') for row in open('/proc/net/unix').read().splitlines())\n"
    "probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "probe.bind(b'\\0secret-42')\n"
    "print(seen, 'bound')\n"
)


def test_no_socket_reaches_the_next_test(one_slot):
    """A warm worker's tests share its network namespace while none leaves a socket there (judging/worker/loop.py);
    one that does sends the next test to a fresh one. Checked failing with the worker's check removed: the next
    test saw the sockets and could not bind the name. (The listing is matched by name: the worker's end of a test's
    request channel, unnamed, may still be listed while the test starts.)"""
    for _ in range(3):
        assert run(one_slot, LEAVE_A_SOCKET, "True").status == "passed", (
            "the socket must exist, or the test means nothing"
        )
        seen = run(one_slot, LOOK_FOR_IT, "False bound").tests[0]
        assert seen.status == "passed", seen.stdout + seen.stderr
    assert not one_slot.warm or one_slot.setup.warm.failures == 0, one_slot.setup.warm.failure


def test_the_pid_counter_carries_nothing_to_the_next_test(one_slot):
    """Process ids must not reveal how many processes the previous test of the slot made."""
    look = (
        "import os\n"
        "last = open('/proc/sys/kernel/ns_last_pid').read().split()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os._exit(0)\n"
        "os.waitpid(child, 0)\n"
        "print(os.getpid(), child, last, open('/proc/loadavg').read().split()[-1])\n"
    )
    after_quiet = run(one_slot, "pass"), run(one_slot, look).tests[0].stdout
    busy = "import os\nfor _ in range(20):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\n"
    assert run(one_slot, busy).status == "failed", "the busy test must run to its end"
    after_busy = run(one_slot, look).tests[0].stdout
    assert after_busy == after_quiet[1] != "", (after_quiet[1], after_busy)


# A lock on a file every sandbox shares (the standard library, bound read-only) is seen by every process on the
# machine: F_GETLK answers with the holder's range (two 63-bit numbers), flock with "busy", /proc/locks lists OFD
# locks of every PID namespace. The sender locks a range that spells a secret; the receiver, judged at the same time
# on the other slot, looks for it every 10 ms.
LOCK_SENDER = (
    "import ctypes, errno, fcntl, os, struct, time\n"
    "SECRET = {secret}\n"
    "def lock(kind, start, length):\n"
    "    return struct.pack('hhqqi4x', kind, 0, start, length, 0)\n"
    "shared = os.open(os.__file__, os.O_RDONLY)\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def raw(fd, command, argument):  # the system call itself, its command with upper bits the kernel ignores\n"
    "    if libc.syscall({fcntl}, fd, ctypes.c_ulong(command), argument) == -1:\n"
    "        raise OSError(ctypes.get_errno(), '')\n"
    "said = []\n"
    "for name, call in (('F_SETLK', lambda: fcntl.fcntl(shared, fcntl.F_SETLK, lock(fcntl.F_RDLCK, SECRET, 4))),\n"
    "                   ('F_SETLKW', lambda: fcntl.fcntl(shared, fcntl.F_SETLKW,\n"
    "                                                    lock(fcntl.F_RDLCK, SECRET + 100, 4))),\n"
    "                   ('F_OFD_SETLK', lambda: fcntl.fcntl(os.open(os.__file__, os.O_RDONLY), 37,\n"
    "                                                       lock(fcntl.F_RDLCK, SECRET + 200, 4))),\n"
    "                   ('F_OFD_SETLKW', lambda: fcntl.fcntl(os.open(os.__file__, os.O_RDONLY), 38,\n"
    "                                                        lock(fcntl.F_RDLCK, SECRET + 300, 4))),\n"
    "                   ('flock', lambda: fcntl.flock(shared, fcntl.LOCK_SH)),\n"
    "                   ('lockf', lambda: fcntl.lockf(os.open('/dev/null', os.O_WRONLY), fcntl.LOCK_EX)),\n"
    "                   ('F_SETLK upper bits', lambda: raw(shared, 1 << 32 | fcntl.F_SETLK,\n"
    "                                                      lock(fcntl.F_RDLCK, SECRET + 400, 4)))):\n"
    "    try:\n"
    "        call()\n"
    "        said.append(f'{{name}} held')\n"
    "    except OSError as error:\n"
    "        said.append(f'{{name}} {{errno.errorcode[error.errno]}}')\n"
    "time.sleep({hold})\n"
    "print(*said, sep=', ')\n"
)
LOCK_RECEIVER = (
    "import errno, fcntl, json, os, struct, time\n"
    "def lock(kind, start, length):\n"
    "    return struct.pack('hhqqi4x', kind, 0, start, length, 0)\n"
    "shared = os.open(os.__file__, os.O_RDONLY)\n"
    "null = os.open('/dev/null', os.O_RDONLY)\n"
    "seen, refused = set(), set()\n"
    "end = time.time() + {hold}\n"
    "while time.time() < end:\n"
    "    for name, fd, command in (('F_GETLK', shared, fcntl.F_GETLK), ('F_OFD_GETLK', shared, 36),\n"
    "                              ('F_GETLK /dev/null', null, fcntl.F_GETLK)):\n"
    "        try:\n"
    "            asked = lock(fcntl.F_WRLCK, 0, 0)\n"
    "            kind, _, start, length, _ = struct.unpack('hhqqi4x', fcntl.fcntl(fd, command, asked))\n"
    "            if kind != fcntl.F_UNLCK:\n"
    "                seen.add(f'{{name}} {{start}}+{{length}}')\n"
    "        except OSError as error:\n"
    "            refused.add(f'{{name}} {{errno.errorcode[error.errno]}}')\n"
    "    try:\n"
    "        fcntl.flock(shared, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "        fcntl.flock(shared, fcntl.LOCK_UN)\n"
    "    except OSError as error:\n"
    "        (seen if error.errno == errno.EWOULDBLOCK else refused).add(f'flock {{errno.errorcode[error.errno]}}')\n"
    "    seen.update(f'/proc/locks {{line}}' for line in open('/proc/locks').read().splitlines())\n"
    "    time.sleep(0.01)\n"
    "print(json.dumps({{'seen': sorted(seen), 'refused': sorted(refused)}}))\n"
)

LOCK_CALLS = ("F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW", "flock", "lockf", "F_SETLK upper bits")


@pytest.mark.slow
def test_no_file_lock_reaches_a_concurrent_test(judge):
    """Judged Python may not take or test a file lock (judging/seccomp.py: fcntl's lock commands and flock are
    refused, the command compared as the kernel reads it), and /proc/locks is empty: a lock on a shared file is a
    channel of ~120 bits a lock between tests judged at the same time, and between judges on one host. Checked
    failing without the refusal: the receiver read the secret through F_GETLK, F_OFD_GETLK and /proc/locks, and saw
    the flock and the lock on /dev/null; and with the command compared whole, the upper-bits F_SETLK was held."""
    secret = secrets.randbits(60) + 16
    hold = 1.5
    sender = LOCK_SENDER.format(secret=secret, hold=hold, fcntl={"x86_64": 72, "aarch64": 25}[os.uname().machine])
    receiver = LOCK_RECEIVER.format(hold=hold + 0.5)
    heard, said = judge.run_many(
        [("", [Test(receiver, "")], "python"), ("", [Test(sender, "")], "python")], timeout=4.0
    )
    assert said.tests[0].stderr == "" and heard.tests[0].stderr == "", said.tests[0].stderr + heard.tests[0].stderr
    assert str(secret) not in heard.tests[0].stdout, heard.tests[0].stdout
    heard = json.loads(heard.tests[0].stdout)
    assert heard["seen"] == [], heard
    assert said.tests[0].stdout.strip() == ", ".join(f"{name} EPERM" for name in LOCK_CALLS), said.tests[0].stdout
    assert heard["refused"] == sorted(
        f"{name} EPERM" for name in ("F_GETLK", "F_OFD_GETLK", "F_GETLK /dev/null", "flock")
    ), heard


# A watch on a folder of the shared view (inotify is the inode's) is told the name of every file in it that any
# process opens: the sender opens three files the receiver watches for; the receiver prints what it was told.
WATCH_RECEIVER = (
    "import ctypes, errno, fcntl, os, select, signal, struct, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "folder = os.path.join(os.path.dirname(os.__file__), 'lib2to3', 'fixes').encode()\n"
    "told = set()\n"
    "def inotify_names(data, at=0):\n"
    "    while at < len(data):\n"
    "        length = struct.unpack_from('iIII', data, at)[3]\n"
    "        yield data[at + 16:at + 16 + length].rstrip(bytes(1)).decode()\n"
    "        at += 16 + length\n"
    "def fanotify_names(data, at=0):  # each event's directory-and-name records\n"
    "    while at < len(data):\n"
    "        event_length, _, _, metadata_length = struct.unpack_from('IBBH', data, at)\n"
    "        info = at + metadata_length\n"
    "        while info < at + event_length:\n"
    "            kind, _, length = struct.unpack_from('BBH', data, info)\n"
    "            if kind == 2:  # FAN_EVENT_INFO_TYPE_DFID_NAME: header, fsid, handle, then the name\n"
    "                handle_bytes = struct.unpack_from('I', data, info + 12)[0]\n"
    "                yield data[info + 20 + handle_bytes:info + length].split(bytes(1))[0].decode()\n"
    "            info += length\n"
    "        at += event_length\n"
    "def inotify():\n"
    "    fd = libc.inotify_init1(os.O_NONBLOCK)\n"
    "    return fd, fd >= 0 and libc.inotify_add_watch(fd, folder, 0x21), inotify_names  # IN_ACCESS | IN_OPEN\n"
    "def fanotify():  # an unprivileged user's: FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME, an inode mark\n"
    "    fd = libc.syscall(300, 0xC00, os.O_RDONLY | os.O_NONBLOCK)\n"
    "    mark = fd >= 0 and libc.syscall(301, fd, 1, ctypes.c_uint64(0x08000021), -100, folder)\n"
    "    return fd, mark, fanotify_names  # FAN_MARK_ADD; FAN_ACCESS | FAN_OPEN | FAN_EVENT_ON_CHILD\n"
    "def dnotify():  # fcntl's F_NOTIFY on the folder: a signal at each access, no name\n"
    "    fd = os.open(folder, os.O_RDONLY)\n"
    "    seen = []\n"
    "    signal.signal(signal.SIGIO, lambda *_: seen.append('an access'))\n"
    "    if libc.fcntl(fd, 1026, 0x80000001) != 0:  # F_NOTIFY: DN_ACCESS | DN_MULTISHOT\n"
    "        return -1, False, None\n"
    "    time.sleep({seconds})\n"
    "    told.update(seen)\n"
    "    return None, None, None\n"
    "for watch in (inotify, fanotify, dnotify):\n"
    "    fd, marked, names = watch()\n"
    "    if fd is None:\n"
    "        continue\n"
    "    if fd < 0 or marked != 0:\n"
    "        told.add(errno.errorcode[ctypes.get_errno()])\n"
    "        continue\n"
    "    end = time.time() + {seconds}\n"
    "    while time.time() < end:\n"
    "        if select.select([fd], [], [], 0.05)[0]:\n"
    "            told.update(names(os.read(fd, 65536)))\n"
    "print(sorted(told))\n"
)
WATCH_SENDER = (
    "import os, time\n"
    "folder = os.path.join(os.path.dirname(os.__file__), 'lib2to3', 'fixes')\n"
    "end = time.time() + {seconds}\n"
    "while time.time() < end:\n"
    "    for name in ('fix_apply.py', 'fix_next.py', 'fix_zip.py'):\n"
    "        open(os.path.join(folder, name)).read()\n"
    "    time.sleep(0.05)\n"
)


@pytest.mark.slow
def test_no_file_watch_reaches_a_concurrent_test(judge):
    """Judged Python may not watch files (judging/seccomp.py: inotify, fanotify and fcntl's F_NOTIFY are off the
    allow-list): a watch on the shared view would be told which files a test judged at the same time opens, a file
    name an open. Checked failing without the refusal: through inotify, and through an unprivileged fanotify (on the
    block-list this list replaced), the receiver was told fix_apply.py, fix_next.py and fix_zip.py, on both paths;
    through F_NOTIFY, of an access."""
    heard, said = judge.run_many(
        [
            ("", [Test(WATCH_RECEIVER.format(seconds=0.6), "")], "python"),
            ("", [Test(WATCH_SENDER.format(seconds=2.5), "")], "python"),
        ],
        timeout=5.0,
    )
    assert said.tests[0].stderr == "" and heard.tests[0].stderr == "", said.tests[0].stderr + heard.tests[0].stderr
    assert heard.tests[0].stdout.strip() == "['EPERM']", heard.tests[0].stdout
