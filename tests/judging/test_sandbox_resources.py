"""Adversarial programs against the sandbox: what one test may take (processes, output, memory, time) and what
it cannot do to the judge or the trainer. Each test fails if the property it names breaks; Python runs on both
bwrap paths (tests/helpers/bwrap_paths.py)."""

import os
import re
import subprocess
import time

import pytest

from bwrap_paths import command_lines, wait_until_gone
from bwrap_paths import judge, run, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Judge, Test
from judging.cgroups import Cgroups
from judging.env_vars import CGROUP_V2_ROOT


def test_fork_bomb_is_contained_and_cleaned_up(judge):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    assert run(judge, code).status == "timeout"
    assert wait_until_gone(judge) == []


def test_double_forked_daemon_dies_with_the_test(judge):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/usr/bin/sleep', ['sleep', '313.37'])\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "print('parent done')\n"
    )
    assert run(judge, code).tests[0].stdout.strip() == "parent done"
    assert wait_until_gone(judge) == []
    assert not any(b"313.37" in command for command in command_lines())


def test_sigterm_ignoring_children_die_on_timeout(judge):
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        while True:\n"
        "            time.sleep(0.01)\n"
        "while True:\n"
        "    time.sleep(0.01)\n"
    )
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
    return (
        "import os, time\n"
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
        "print(sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))\n"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_memory_is_bounded_per_test_for_all_its_processes_together(sandbox):
    """--judge_memory_mb is the whole test's memory, memfd pages included, not each process's."""
    with Judge(timeout=10.0, workers=1, sandbox=sandbox, memory_mb=64) as judge:
        assert "memory: a cgroup" in judge.isolation, judge.isolation
        within = run(judge, memory_spread(children_mb=2, memfd_mb=8), "[0, 0, 0, 0, 0, 0, 0, 0]")
        assert within.status == "passed", within.tests[0].stderr
        judgement = run(judge, memory_spread(children_mb=16, memfd_mb=24), "[0, 0, 0, 0, 0, 0, 0, 0]")
        assert judgement.status == "memory", judgement.tests[0]
        assert run(judge, "print(6)", "6").status == "passed"
        warm = judge.setup.warm
        assert not warm or warm.failures == 0, f"the slot's worker was killed: {warm and warm.failure}"


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_the_slot_cgroup_counts_the_tests_processes_not_bwraps(sandbox):
    """bwrap's PID-namespace init outlives bwrap and waits for the host's init to reap it: 50 tests in a row
    (pids.max is 40) must not leave a slot unable to fork."""
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        statuses = [run(judge, "pass", "").status for _ in range(50)]
        [slot] = judge.setup.slots.cgroups.slots.values()
        tasks = [
            int((folder / "pids.current").read_text()) for folder in slot.folders if (folder / "pids.current").exists()
        ]
    assert statuses == ["passed"] * 50
    assert tasks and tasks[0] <= 1, "only the warm worker may stay in the slot between tests"


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_cgroup_v2_layout_on_a_stand_in_hierarchy(tmp_path, monkeypatch):
    """A STAND-IN v2 hierarchy (a plain folder, no kernel behind it): the knobs written and the join command.
    This machine runs cgroup v1; GPU nodes mostly v2: tests/judging/test_cgroup_v2_guest.py runs the judge on a real v2
    kernel."""
    monkeypatch.setenv(CGROUP_V2_ROOT, str(tmp_path))
    (tmp_path / "cgroup.subtree_control").touch()
    cgroups = Cgroups(["a", "b"], 64 << 20, 32)
    assert cgroups.version == "v2" and not cgroups.unavailable and cgroups.cpu == "cpu.max, cpu.weight"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    [parent] = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (parent / "cpu.weight").read_text() == "10000", "the judge's tests keep their CPUs beside busy processes"
    for index, key in enumerate(["a", "b"]):
        slot = parent / f"slot-{index}"
        assert (slot / "memory.max").read_text() == str(64 << 20) and (slot / "pids.max").read_text() == "40"
        assert (slot / "cpu.max").read_text() == "100000 100000" and (slot / "cpu.weight").read_text() == "100"
        subprocess.run(cgroups.slots[key].enter_command(["true"]), check=True)
        assert (slot / "cgroup.procs").read_text() == "0\n", "the process writes itself in before it execs"
        (slot / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
        assert cgroups.slots[key].oom_kills() == 2
    cgroups.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_a_dead_judges_cgroups_are_removed_a_live_ones_kept(tmp_path, monkeypatch):
    """A judge's cgroup folder is named at random (a test sees the name, so no pid in it); a later judge takes it
    for stale when its lock is free (its judge is dead) and it is old enough to have been locked. On the STAND-IN
    v2 hierarchy of the test above."""
    import judging.cgroups.folders

    monkeypatch.setenv(CGROUP_V2_ROOT, str(tmp_path))
    (tmp_path / "cgroup.subtree_control").touch()
    monkeypatch.setattr(judging.cgroups.folders, "STALE_AFTER", 0.0)
    alive = Cgroups(["a"], 64 << 20, 32)
    [kept] = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert re.fullmatch(r"judge-[0-9a-f]{16}", kept.name) and str(os.getpid()) not in kept.name
    dead = tmp_path / "judge-0123456789abcdef"  # a killed judge's, its lock gone with it
    dead.mkdir()
    dead_earlier = tmp_path / "rewards-judge-0123456789abcdef"  # the name earlier judges gave theirs
    dead_earlier.mkdir()
    other = tmp_path / "judge-other"  # not a judge's name: not ours to remove
    other.mkdir()
    later = Cgroups(["b"], 64 << 20, 32)
    assert kept.is_dir() and not dead.exists() and not dead_earlier.exists() and other.is_dir()
    later.close()
    alive.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_a_controller_not_delegated_is_named(tmp_path, monkeypatch):
    """A STAND-IN v2 cgroup whose parent gives it pids and cpu but not memory: nothing is written, and the reason
    names the cgroup, the missing controller and where to delegate it."""
    monkeypatch.setenv(CGROUP_V2_ROOT, str(tmp_path))
    (tmp_path / "cgroup.controllers").write_text("cpu pids\n")
    (tmp_path / "cgroup.subtree_control").touch()
    cgroups = Cgroups(["a"], 64 << 20, 32)
    assert not cgroups.version and not cgroups.slots
    assert cgroups.unavailable == (
        f"cgroup v2: {tmp_path} is not given the memory controller (its cgroup.controllers: cpu pids): the cgroup "
        f"above it must delegate it (+memory in {tmp_path.parent}/cgroup.subtree_control, as Slurm's cgroup plugin "
        f"and systemd's Delegate=yes do)"
    )
    assert (tmp_path / "cgroup.subtree_control").read_text() == ""
    assert [path for path in tmp_path.iterdir() if path.is_dir()] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_without_a_writable_cgroup_the_isolation_line_says_what_still_bounds_memory(monkeypatch, sandbox):
    monkeypatch.setenv(CGROUP_V2_ROOT, "/proc/self")  # no cgroup can be made there, even as root
    with Judge(workers=1, sandbox=sandbox, memory_mb=256) as judge:
        assert (
            "memory: NOT bounded per test (cgroup v2: /proc/self/cgroup.subtree_control: No such file or directory)"
        ) in judge.isolation
        assert "address space 256 MB each, at most 32 processes per slot uid" in judge.isolation
        assert "cpu: NOT bounded per slot (no cgroup per slot, as for memory)" in judge.isolation
        assert run(judge, "print(6)", "6").status == "passed"


def test_hang_times_out_and_later_tests_are_skipped(sandbox):
    tests = [Test("print(1)", "1")] * 4
    with Judge(timeout=1.0, workers=1, sandbox=sandbox) as judge:
        judgement = judge.run("while True:\n    pass\n", tests, "python")
        assert not judge.warm or judge.setup.warm.failures == 0, judge.setup.warm.failure
    assert judgement.status == "timeout"
    assert [t.status for t in judgement.tests] == ["timeout"] * 4
    assert [t.seconds for t in judgement.tests[1:]] == [0.0] * 3


def test_completion_budget_cuts_the_first_test_short(sandbox):
    tests = [Test("print(1)", "1")] * 3
    with Judge(timeout=5.0, completion_budget=0.5, workers=1, sandbox=sandbox) as judge:
        judgement = judge.run("import time\ntime.sleep(60)\n", tests, "python")
        assert not judge.warm or judge.setup.warm.failures == 0, judge.setup.warm.failure
    assert [t.status for t in judgement.tests] == ["timeout"] * 3
    assert 0.0 < judgement.tests[0].seconds < 4.0, "the test must stop at the budget, not the 5 s timeout"


def test_trainer_survives_the_program_attacking_it(judge):
    me = os.getpid()
    code = (
        "import os, signal\n"
        f"for pid in (os.getppid(), 1, {me}, -1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    os.killpg(0, signal.SIGKILL)\n"
        "except OSError:\n"
        "    pass\n"
        "print('still here')\n"
    )
    run(judge, code)
    assert run(judge, "print(6)", "6").status == "passed"


@pytest.mark.slow
def test_killed_programs_leave_no_zombie_of_the_slot_uid(judge):
    """A cold program is pid 1 of its namespace with no init above it: killed at its timeout, it must be reaped by
    bwrap, its parent. With bwrap killed first it became a zombie of the slot uid until the host's init got to it,
    counted against the uid's process limit (judge_fuzz found one in 913 cold tests)."""
    for _ in range(40):
        assert run(judge, "import time\ntime.sleep(5)", timeout=0.3).status == "timeout"
    assert wait_until_gone(judge, seconds=1.0) == []


SOLVE = "def solve(n):\n    total = 0\n    for i in range(n):\n        total += i * i % 7\n    return total\n"


def saboteur(sessions: int, seconds: float) -> str:
    """A correct ``solve`` whose program first forks ``sessions`` processes, each in a session of its own, spinning
    for ``seconds``, and waits for them."""
    return (
        "import os, time\n"
        "children = []\n"
        f"for _ in range({sessions}):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.setsid()\n"
        f"        end = time.monotonic() + {seconds}\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "for pid in children:\n"
        "    os.waitpid(pid, 0)\n" + SOLVE
    )


def loop_for(cpu_seconds: float) -> int:
    """How many iterations of ``SOLVE``'s loop take ``cpu_seconds`` of CPU in this interpreter (the sandbox's)."""
    n = 300_000
    start = time.process_time()
    sum(i * i % 7 for i in range(n))
    return max(1000, int(n * cpu_seconds / max(time.process_time() - start, 1e-3)))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_a_test_forking_many_sessions_cannot_take_the_cpu_of_the_test_beside_it(sandbox):
    """A correct program that forks 30 sessions spinning (without a CPU bound per slot each is one more scheduling
    entity) beside an honest one in the other slot, which needs 0.2 s of CPU within its 2 s: the honest one passes,
    as alone (each slot has one CPU's time at most, on a CPU of its own). On 2 cores without the bound it got about 1/16 of a core and timed out. Verdicts, not times:
    benchmarks/saboteur_cpu.py prints the ratio of the honest program's times."""
    n = loop_for(0.2)
    expected = str(sum(i * i % 7 for i in range(n)))
    honest = (SOLVE, [Test(f"import time\ntime.sleep(0.3)\nprint(solve({n}))", expected)], "python")
    evil = (saboteur(30, 1.9), [Test("print(solve(10))", "19")], "python")
    with Judge(timeout=2.0, workers=2, sandbox=sandbox) as judge:
        assert "cpu: a cgroup v1 per slot, one CPU's time at most" in judge.isolation, judge.isolation
        assert "each slot kept on a CPU of its own (cpuset)" in judge.isolation, judge.isolation
        for _ in range(3):
            _, beside = judge.run_many([evil, honest])
            assert beside.status == "passed", beside.tests[0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin slots apart")
def test_a_judge_never_pins_two_of_its_own_slots_to_one_cpu(monkeypatch):
    """Two judges claiming uids at once take every other uid: pinned by uid number round two CPUs, one judge's two
    slots shared a CPU while the other judge's shared the other. A judge's slots take CPUs next to each other, after
    the ranks before it."""
    from judging.slots import cpu_pins, slot_uid_base

    cpus = sorted(os.sched_getaffinity(0))
    base = slot_uid_base()
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    interleaved = cpu_pins([base + 1, base + 3])
    assert len(set(interleaved.values())) == 2
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert cpu_pins([base + 4]) == {base + 4: cpus[1 % len(cpus)]}
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert cpu_pins([base + 5]) == {base + 5: cpus[0]}
    assert cpu_pins([base + index for index in range(len(cpus) + 1)]) == {}  # more slots than CPUs: no pins
