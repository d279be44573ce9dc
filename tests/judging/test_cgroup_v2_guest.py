"""The judge on a real cgroup v2 kernel: a Debian kernel booted under qemu (tests/helpers/cgroup_v2_guest.py) runs
tests/helpers/cgroup_v2_inside.py, which judges in each cgroup layout users run in, on both bwrap paths. This machine is
cgroup v1; GPU nodes (Slurm's cgroup v2 plugin, systemd, containers) are v2.

One boot for the module (2 to 4 minutes under TCG); each test checks one layout's results. Needs root, qemu and
busybox (scripts/install.sh --cgroup-v2-guest) and apt to fetch the kernel once; skips saying why where those fail.
"""

import json
import os
import shutil
import time

import pytest

from cgroup_v2_guest import GuestUnavailable, run_in_guest
from conftest import ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the guest's qemu and the judge's cgroups need root"),
]
PATHS = ("bwrap", "bwrap-cold")
BOUNDED = "memory: a cgroup v2 per slot, 256 MB for all of a test's processes together"
CPU_BOUNDED = "cpu: a cgroup v2 per slot, one CPU's time at most"


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    """What tests/helpers/cgroup_v2_inside.py found inside the guest."""
    started = time.monotonic()
    try:
        rc, output, files = run_in_guest(
            f"cd {ROOT} && PYTHONDONTWRITEBYTECODE=1 python tests/helpers/cgroup_v2_inside.py", timeout=900
        )
    except GuestUnavailable as error:
        pytest.skip(f"no cgroup v2 guest here: {error}")
    try:
        assert rc == 0, f"the guest's run failed ({rc}):\n{output[-6000:]}"
        results = json.loads((files / "results.json").read_text())
    finally:
        shutil.rmtree(files.parent, ignore_errors=True)
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in results["seconds"].items())
    print(f"cgroup v2 guest ({results['kernel']}): {time.monotonic() - started:.0f} s ({phases})")
    return results


def line(result: dict, part: str) -> str:
    """The part of an isolation line that starts with ``part`` ("memory", "cpu")."""
    assert "isolation" in result, result.get("error")
    return next(piece for piece in result["isolation"].split("; ") if piece.startswith(part))


@pytest.mark.parametrize("path", PATHS)
def test_in_the_root_cgroup_a_tests_processes_are_bounded_together(guest, path):
    result = guest[f"root {path}"]
    assert line(result, "memory").startswith(BOUNDED)
    assert result["warm"] == (path == "bwrap")
    assert (result["six"], result["four_processes"], result["after"]) == ("passed", "memory", "passed")
    assert guest["root left"] == [], "the judge's cgroups were not all removed"


@pytest.mark.parametrize("path", PATHS)
def test_in_a_delegated_leaf_judges_starting_at_once_both_bound_a_tests_processes_together(guest, path):
    """Two trainer ranks in one delegated leaf (as Slurm's task cgroup), one judging on each path, starting at the
    same moment: each moves the leaf's processes into a child leaf and gets slots bounded as in the root cgroup."""
    result = guest[f"leaf {path}"]
    assert line(result, "memory").startswith(BOUNDED)
    assert result["warm"] == (path == "bwrap")
    assert (result["six"], result["four_processes"], result["after"]) == ("passed", "memory", "passed")
    assert result["own"] == "0::/job/task/judge-leaf"


def test_after_the_judges_close_the_leaf_is_as_the_scheduler_made_it(guest):
    """No judge's cgroup, no child leaf, no controllers enabled; its other process is back in it."""
    for layout in ("leaf", "read_only"):
        assert guest[f"{layout} left"] == {"below": [], "subtree_control": "", "procs": [guest["bystander"]]}


def test_a_read_only_cgroup_file_system_is_named_in_the_isolation_line(guest):
    for path in PATHS:
        result = guest[f"read_only {path}"]
        assert line(result, "memory") == (
            "memory: NOT bounded per test (cgroup v2: /sys/fs/cgroup/job/task/cgroup.subtree_control is on a "
            "read-only cgroup file system (mount it read-write, or delegate a writable subtree))"
        )
        assert line(result, "cpu") == "cpu: NOT bounded per slot (no cgroup per slot, as for memory)"
        assert result["four_processes"] == "passed", "nothing bounds the test's processes together here"


def test_a_controller_not_delegated_is_named_in_the_isolation_line(guest):
    """And with no cgroup per slot, the spinning test of the CPU bound (below) gets both CPUs: it fails."""
    assert guest["undelegated"]["spin"] == "failed"
    assert line(guest["undelegated"], "memory").startswith(
        "memory: NOT bounded per test (cgroup v2: /sys/fs/cgroup/pids-only/task is not given the memory "
        "controller (its cgroup.controllers: pids): the cgroup above it must delegate it (+memory in "
        "/sys/fs/cgroup/pids-only/cgroup.subtree_control"
    )


@pytest.mark.parametrize("layout", ("root", "leaf"))
@pytest.mark.parametrize("path", PATHS)
def test_a_slot_gets_at_most_one_cpus_time(guest, layout, path):
    """Three processes spinning for 1.5 s in one test on the guest's 2 CPUs get one CPU's time between them (the
    program checks its children's CPU time against the wall clock); each slot has cpu.max of one CPU and is kept on
    a CPU of its own (cpuset)."""
    result = guest[f"{layout} {path}"]
    assert line(result, "cpu").startswith(CPU_BOUNDED)
    assert "each slot kept on a CPU of its own (cpuset)" in line(result, "cpu")
    assert result["cpu_max"] == ["100000 100000"]
    # Each slot on one of the guest's CPUs. Which one is its uid's number round the CPUs: the guest's judges run side
    # by side (more slots than CPUs between them), so two slots of one judge may share a CPU, by the claim order.
    assert result["cpuset"] and set(result["cpuset"]) <= {"0", "1"}, "each slot on one of the guest's two CPUs"
    assert result["spin"] == "passed", "the test's processes got more than one CPU's time"
