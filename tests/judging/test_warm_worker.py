"""The warm workers' own threats: a judged child attacking the worker it was forked from, or the next child.

Each test fails if the property it names breaks: the child cannot signal, ptrace or reach the worker; it
leaves no process, file, IPC object or interpreter state behind; a harmed or dead worker costs at most the
execution it was running (rerun cold, same result) and is replaced. tests/judging/test_sandbox_*.py run the general
sandbox attacks against warm workers too.
"""

import ast
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import judging.warm
from judging import Judge, Test

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="warm workers need root")


@pytest.fixture(scope="module")
def judge():
    """One slot, so every execution goes to the same worker."""
    with Judge(timeout=1.0, workers=1) as judge:
        assert judge.warm, judge.isolation
        yield judge


@pytest.fixture()
def unharmed(judge):
    """The test's attacks must leave the slot's worker in place: a replaced worker reruns the test cold,
    which would hide a hole in the warm path."""
    run(judge, "pass")
    worker, failures = the_worker(judge), judge.setup.warm.failures
    yield
    assert judge.setup.warm.failures == failures, f"the worker failed: {judge.setup.warm.failure}"
    assert the_worker(judge) is worker and worker.alive()


def run(judge, code, expected="unused"):
    return judge.run("", [Test(code, expected)], "python")


def out(judge, code):
    judgement = run(judge, code)
    assert judgement.tests[0].stderr == "", judgement.tests[0].stderr
    return judgement.tests[0].stdout


def the_worker(judge):
    (worker,) = judge.setup.warm.workers.values()
    return worker


def worker_pid(judge, worker):
    """The worker's host pid: the descendant of bubblewrap that runs the interpreter."""
    interpreter = judge.setup.warm.interpreter.encode()
    pending = [worker.process.pid]
    while pending:
        pid = pending.pop()
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == interpreter:
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            pending += [int(child) for child in (task / "children").read_text().split()]
    raise AssertionError("no worker process under bubblewrap")


def rss_kib(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


def test_the_child_cannot_signal_ptrace_or_open_the_worker(judge, unharmed):
    """The child is pid 1 of a PID namespace of its own: the worker (its parent, outside) has no pid there, so the
    child can name no process but its own to signal or open; ptrace it may not call at all (judging/seccomp.py)."""
    code = (
        "import ctypes, os, signal\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(os.getpid(), os.getppid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGSEGV):\n"
        "    try:\n"
        "        os.kill(-1, sig)  # every process it may signal, but itself\n"
        "        print('sent')\n"
        "    except ProcessLookupError:\n"
        "        print('none')\n"
        "reached, traced = [], set()\n"
        "for pid in range(2, 4096):\n"
        "    for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE\n"
        "        if libc.ptrace(request, pid, 0, 0) == 0:\n"
        "            reached.append(pid)\n"
        "        traced.add(ctypes.get_errno())\n"
        "    try:\n"
        "        os.close(os.pidfd_open(pid))\n"
        "        reached.append(pid)\n"
        "    except ProcessLookupError:\n"
        "        pass\n"
        "print(reached, sorted(traced))\n"
    )
    assert out(judge, code).split("\n") == ["1 0 [1]", "none", "none", "none", "none", "[] [1]", ""]  # 1: EPERM


def test_the_child_holds_no_descriptor_but_its_own(judge, unharmed):
    code = (
        "import os, stat\n"
        "print(sorted(os.listdir('/proc/self/fd')))\n"
        "print(stat.S_ISFIFO(os.fstat(1).st_mode), stat.S_ISFIFO(os.fstat(2).st_mode), os.read(0, 10))\n"
        "written = 0\n"
        "for fd in range(3, 1024):\n"
        "    try:\n"
        '        os.write(fd, b\'{"folder": "../..", "timeout": 1e9}\')\n'
        "        written += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print(written)\n"
    )
    assert out(judge, code).splitlines() == ["['0', '1', '2', '3']", "True True b''", "0"]


def test_no_process_outlives_its_child(judge, unharmed):
    uid = judge.setup.slots.uids.uids[0]
    code = (
        "import os, subprocess, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/usr/bin/sleep', ['sleep', '313.37'])\n"
        "    os._exit(0)\n"
        "subprocess.Popen(['/usr/bin/sleep', '313.38'], start_new_session=True)\n"
        "time.sleep(0.2)\n"
        "print('left them running')\n"
    )
    assert out(judge, code) == "left them running\n"
    others = out(
        judge,
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() "
        "and int(p) not in (1, os.getppid(), os.getpid())))\n",
    )
    assert others == "[]\n"
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            assert f"\nUid:\t{uid}\t" not in status.read_text(), f"{status.parent} outlived its child"
        except FileNotFoundError:
            pass


def test_poison_does_not_reach_the_next_child(judge, unharmed):
    # A POSIX semaphore (multiprocessing's, a file in /dev/shm); SysV IPC judged code may not make (judging/seccomp.py).
    poison = (
        "import _multiprocessing, builtins, ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "semaphore = _multiprocessing.SemLock(1, 1, 1, '/poison', False)\n"
        "print(os.listdir('/dev/shm') == ['sem.poison'], libc.shmget(0x5eed, 4096, 0o1666) == -1)\n"
        "open('/tmp/poison', 'w').write('x')\n"
        "open('/tmp/json.py', 'w').write('raise SystemExit(7)')\n"
        "open('left.txt', 'w').write('x')\n"
        "sys.path.insert(0, '/tmp')\n"
        "sys.modules['json'] = None\n"
        "os.environ['POISON'] = '1'\n"
        "sys.stdout.flush()\n"
        "builtins.print = lambda *args, **kwargs: None\n"
        "builtins.len = lambda thing: 42\n"
        "sys.modules['random'] = 'poisoned'\n"
    )
    assert out(judge, poison) == "True True\n", "the poison must be laid for the test to mean anything"
    check = (
        "import ctypes, json, os, random, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(len([1]), json.dumps([1]), 'POISON' in os.environ, '/tmp' in sys.path)\n"
        "print(os.listdir('/tmp'), os.listdir('.'), os.listdir('/dev/shm'))\n"
        "print(type(random).__name__)\n"
    )
    assert out(judge, check).splitlines() == ["1 [1] False False", "[] ['main.py'] []", "module"]


def test_randomness_is_fresh_per_child(judge, unharmed):
    code = "import random, os\nprint(random.random(), os.urandom(8).hex())\n"
    assert out(judge, code) != out(judge, code)


def test_memory_exhaustion_costs_only_its_own_execution(judge, unharmed):
    worker = the_worker(judge)
    before = rss_kib(worker_pid(judge, worker))
    fill_tmp = (
        "try:\n"
        "    for name in 'abcdefg':  # each under the 16 MB file size limit, together over the 64 MB /tmp\n"
        "        open(f'/tmp/{name}', 'wb').write(b'x' * (10 << 20))\n"
        "except OSError as error:\n"
        "    print(error.errno == 28)\n"
    )
    assert out(judge, fill_tmp) == "True\n", "the 64 MB /tmp (--judge_disk_mb) must fill up"
    hog = (
        "import mmap\n"
        "maps = []\n"
        "try:\n"
        "    while True:  # the whole address space the limit allows, then more\n"
        "        maps.append(mmap.mmap(-1, 64 << 20))\n"
        "except OSError:\n"
        "    pass\n"
        "hog = bytearray(4 << 30)\n"
    )
    assert run(judge, hog).status == "memory"
    assert run(judge, "print(len(open('/proc/self/mounts').read()) > 0)", "True").status == "passed"
    assert rss_kib(worker_pid(judge, worker)) < before + 4096


def test_the_program_runs_as_a_fresh_interpreter_would_run_it(judge, unharmed):
    code = (
        "import os, sys\n"
        "print(__name__, sys.argv, os.getcwd(), os.environ['HOME'], sys.flags.isolated, sys.flags.no_site,\n"
        "      sys.dont_write_bytecode, sys.stdin.read() == '', os.path.exists('/slots'))\n"
    )
    assert out(judge, code) == "__main__ ['/scratch/main.py'] /scratch /scratch 1 1 True True False\n"
    ending = (
        "import atexit, threading, time\n"
        "atexit.register(print, 'at exit')\n"
        "threading.Thread(target=lambda: (time.sleep(0.1), print('thread done'))).start()\n"
    )
    assert out(judge, ending) == "thread done\nat exit\n"
    failing = run(judge, "def f():\n    raise ValueError('bad')\nf()\n").tests[0]
    assert failing.status == "runtime_error" and 'File "/scratch/main.py", line 5' in failing.stderr
    assert "warm" not in failing.stderr and "<string>" not in failing.stderr
    assert run(judge, "import sys\nsys.exit(3)").status == "runtime_error"
    exited = run(judge, "import sys\nprint(1)\nsys.exit('bye')").tests[0]
    assert exited.status == "runtime_error" and exited.stderr == "bye\n"
    assert run(judge, "import sys\nprint(1)\nsys.exit(0)", "1").status == "passed"


def descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        try:
            for task in Path(f"/proc/{parent}/task").iterdir():
                children = [int(child) for child in (task / "children").read_text().split()]
                found += children
                pending += children
        except OSError:
            continue
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# The event the killer waits for: the program names its process (PR_SET_NAME), which the host sees in /proc.
STARTED = "import ctypes, time\nctypes.CDLL(None).prctl(15, b'started', 0, 0, 0)\n"


def kill_once_started(judge, worker) -> threading.Thread:
    """SIGKILL the worker as soon as the program it runs has named its process `started` (STARTED): an event, not a
    timer, so the kill lands mid-execution however loaded the machine is."""
    pid = worker_pid(judge, worker)

    def kill():
        deadline = time.monotonic() + 60
        while not any(comm(child) == "started" for child in descendants(pid)) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killer


def test_a_worker_killed_mid_execution_costs_that_execution_only(judge):
    run(judge, "pass")
    worker, failures = the_worker(judge), judge.setup.warm.failures
    killer = kill_once_started(judge, worker)
    judgement = run(judge, STARTED + "time.sleep(0.6)\nprint('survived')", "survived")
    killer.join()
    assert judgement.status == "passed", "the execution is run again, cold, and judged on its own output"
    assert judge.setup.warm.failures == failures + 1 and "hung up" in judge.setup.warm.failure
    assert run(judge, "print(6)", "6").status == "passed"
    assert the_worker(judge) is not worker and the_worker(judge).alive()


@pytest.mark.slow
def test_a_stopped_worker_is_replaced(judge):
    run(judge, "pass")
    worker, failures = the_worker(judge), judge.setup.warm.failures
    os.kill(worker_pid(judge, worker), signal.SIGSTOP)
    start = time.monotonic()
    assert run(judge, "print(7)", "7").status == "passed"
    assert time.monotonic() - start < 1.0 + judging.warm.REPLY_GRACE + 5.0
    assert judge.setup.warm.failures == failures + 1 and "did not answer in time" in judge.setup.warm.failure
    assert run(judge, "print(8)", "8").status == "passed" and the_worker(judge) is not worker


def test_a_worker_that_breaks_the_protocol_is_replaced(judge):
    run(judge, "pass")
    worker = the_worker(judge)
    worker.control.send(b"not json")
    assert run(judge, "print(9)", "9").status == "passed"
    assert run(judge, "print(9)", "9").status == "passed" and the_worker(judge) is not worker


def test_the_cold_path_takes_over_when_warm_workers_cannot_start(monkeypatch):
    monkeypatch.setattr(judging.warm, "CAPABILITIES", ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETPCAP"))
    with Judge(timeout=1.0, workers=1) as judge:
        assert not judge.warm
        assert "Python: a fresh interpreter per test (warm workers did not start: " in judge.isolation
        # Without CAP_SYS_ADMIN the first step to fail is unmounting the slot cgroup's files (after joining it), or
        # without a cgroup the worker's unshare.
        assert "umount" in judge.isolation or "unshare" in judge.isolation, "the reason must name the failed step"
        assert run(judge, "print(6)", "6").status == "passed"


def test_bwrap_cold_starts_no_worker():
    with Judge(timeout=1.0, workers=1, sandbox="bwrap-cold") as judge:
        assert not judge.warm and judge.setup.warm is None
        assert run(judge, "print(6)", "6").status == "passed"


def test_the_program_sees_what_a_cold_interpreter_shows_it(judge, unharmed):
    code = (
        "import os, sys\n"
        "print(sys.path, sys.flags, sys.executable, sorted(os.environ), os.getcwd(), os.umask(0o22),\n"
        "      sys.getrecursionlimit(), sys.stdout.encoding, sys.stdout.line_buffering, sys.stderr.errors,\n"
        "      sys.stderr.line_buffering, os.getuid() == judge_uid)\n"
    )
    with Judge(timeout=1.0, workers=1, sandbox="bwrap-cold") as cold:
        cold_uid, warm_uid = cold.setup.slots.uids.uids[0], judge.setup.slots.uids.uids[0]
        cold_view = out(cold, f"judge_uid = {cold_uid}\n{code}")
    warm_view = out(judge, f"judge_uid = {warm_uid}\n{code}")
    assert warm_view == cold_view


def test_the_cold_rerun_starts_from_a_fresh_folder(judge):
    run(judge, "pass")
    worker, failures = the_worker(judge), judge.setup.warm.failures
    killer = kill_once_started(judge, worker)
    code = (
        "import os\n"
        "print(sorted(os.listdir('.')))\n"
        "open('partial.txt', 'w').write('from the warm attempt')\n" + STARTED + "time.sleep(0.6)\n"
    )
    judgement = run(judge, code, "['main.py']")
    killer.join()
    assert judge.setup.warm.failures == failures + 1 and "hung up" in judge.setup.warm.failure  # the warm attempt died
    assert judgement.status == "passed", judgement.tests[0].stdout


STAND_IN_WORKER = '''"""A stand-in for judging/worker/main.py, NOT the worker: it says ready, then answers every
request with a reply of the right shape and a nonsense exit status, running nothing."""
import os
import socket
import sys

control = socket.socket(fileno=int(sys.argv[1]))
control.send(b'{"ready": true}')
while True:
    message, fds, _, _ = socket.recv_fds(control, 4096, 2)
    if not message:
        break
    for fd in fds:
        os.close(fd)
    control.send(b'{"status": "nonsense", "timed_out": false, "stopped": false, "setup": true}')
'''


def test_a_worker_answering_nonsense_is_replaced(judge, tmp_path, monkeypatch):
    (tmp_path / "main.py").write_text(STAND_IN_WORKER)  # a worker's folder holding only the stand-in
    tmp_path.chmod(0o755)
    run(judge, "pass")
    the_worker(judge).close()  # the slot's next execution starts a worker from the stand-in
    monkeypatch.setattr(judging.warm, "WORKER", str(tmp_path))
    failures = judge.setup.warm.failures
    assert run(judge, "print(5)", "5").status == "passed", "the execution reruns cold"
    assert "answered nonsense" in judge.setup.warm.failure and judge.setup.warm.failures == failures + 2
    monkeypatch.undo()
    assert run(judge, "print(5)", "5").status == "passed" and judge.warm


# Programs a cold and a warm interpreter could judge differently, one a file: a comment saying what it probes and
# its expected output, the solution, a ``# test`` line (where the judge prints its marker), the test code.
PARITY_PROGRAMS = sorted((Path(__file__).parents[1] / "helpers" / "parity_programs").glob("*.py"))


def parity_program(path: Path) -> tuple[str, str, str]:
    """(solution, test code, expected output) of one of PARITY_PROGRAMS."""
    _, _, rest = path.read_text().partition("# expected output: ")
    expected, _, program = rest.partition("\n")
    if program.startswith("# test\n"):
        solution, test_code = "", program[len("# test\n") :]
    else:
        solution, _, test_code = program.partition("\n# test\n")
        solution += "\n"
    return solution, test_code.removesuffix("\n"), ast.literal_eval(expected)


def test_warm_and_cold_judge_every_program_alike(judge, unharmed):
    """The same program gets the same verdict, output and errors on both paths, or a cold rerun (a warm worker
    that failed) would change a reward."""
    assert len(PARITY_PROGRAMS) >= 50, "the parity programs are missing"
    with Judge(timeout=1.0, workers=1, sandbox="bwrap-cold") as cold:
        differences = []
        for path in PARITY_PROGRAMS:
            solution, test_code, expected = parity_program(path)
            test = [Test(test_code, expected)]
            warm_result, cold_result = (one.run(solution, test, "python").tests[0] for one in (judge, cold))
            verdicts = [(result.status, result.stdout, result.stderr) for result in (warm_result, cold_result)]
            if verdicts[0] != verdicts[1]:
                differences.append(f"{path.name}: warm {verdicts[0]} cold {verdicts[1]}")
    assert not differences, "\n".join(differences)


def test_signals_the_judge_ignores_stay_ignored_on_both_paths():
    """An ignored signal survives exec, so a cold program inherits what the judge's process ignores (under nohup,
    SIGHUP); a warm child must inherit the same, not reset it. (The program is pid 1, which ignores a signal it sends
    itself anyway: its child sends it.)"""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    code = (
        "import os, signal\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    os._exit(3)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))"
    )
    try:
        for sandbox in ("bwrap", "bwrap-cold"):
            with Judge(timeout=1.0, workers=1, sandbox=sandbox) as judge:
                assert (sandbox == "bwrap") == judge.warm
                assert run(judge, code, "3").status == "passed", sandbox
    finally:
        signal.signal(signal.SIGHUP, previous)
    with Judge(timeout=1.0, workers=1) as judge:
        assert out(judge, code) == f"{-signal.SIGHUP}\n", "not ignored: SIGHUP ends the child"
