"""Choosing the sandbox level and the slot uids: where bwrap or the namespace tools are missing, where the slot
uid cannot reach the interpreter or the judge's folder, the weaker levels (unshare, rlimits) and how slot uids are
claimed."""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bwrap_paths import judge, run, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Judge, JudgeUnavailable
from judging.levels import candidates, level_named
from judging.policy import Limits
from judging.sandbox import Sandbox
from judging.slots import SLOT_LOCK_DIR, SLOT_UID_BASE, SandboxUnavailable, blocked_for_others


HOST_VIEW = "disk unbounded but for fsize (scratch is a host folder)"


@pytest.mark.parametrize(
    "name, tool, warm, program, described",
    [
        (
            "bwrap",
            "bwrap",
            True,
            "/scratch/p.py",
            "bwrap: pid+net+ipc+uts namespaces, private read-only fs, /scratch, "
            "/tmp, /dev/shm tmpfs of 64 MB each (nothing reaches the host disk)",
        ),
        (
            "unshare",
            "unshare",
            False,
            "/host/p.py",
            f"unshare: pid+net+ipc+uts namespaces, host fs visible, {HOST_VIEW}",
        ),
        (
            "rlimits",
            "prlimit",
            False,
            "/host/p.py",
            f"rlimits (weak): no namespaces, network and host fs reachable, {HOST_VIEW}",
        ),
    ],
)
def test_each_level_says_what_it_runs_where_the_program_lies_and_what_it_isolates(name, tool, warm, program, described):
    level = level_named(name)
    assert (level.name, level.tool, level.warm, level.program_path("p.py", "/host")) == (name, tool, warm, program)
    sandbox = Sandbox(level, Limits(disk_mb=64), [], {})
    assert sandbox.command(["python3", program], None, 1.0)[0] == tool
    assert sandbox.describe(slot_uids=False).startswith(f"{described}, judged code runs as ")
    with pytest.raises(ValueError, match="unknown sandbox level 'bwrap-cold'; use one of bwrap, unshare, rlimits"):
        level_named("bwrap-cold")


def test_each_sandbox_choice_tries_its_levels_strongest_first():
    def tried(choice, as_root):
        return [level.name for level in candidates(choice, as_root)]

    assert tried("auto", as_root=False) == ["bwrap", "unshare", "rlimits"]
    assert tried("auto", as_root=True) == tried("strict", as_root=False) == ["bwrap", "unshare"], "no namespaces"
    assert [tried(choice, True) for choice in ("bwrap", "bwrap-cold", "unshare", "rlimits")] == [
        ["bwrap"],
        ["bwrap"],
        ["unshare"],
        ["rlimits"],
    ]


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
        claimed = set(judge.setup.slots.uids.uids)
        assert not set(other.setup.slots.uids.uids) & claimed, "another TMPDIR must not free a uid"
    monkeypatch.setenv("JUDGE_SLOT_UID_BASE", str(SLOT_UID_BASE + 500))
    with Judge(workers=1) as other:
        assert other.setup.slots.uids.uids[0] >= SLOT_UID_BASE + 500
    monkeypatch.setenv("JUDGE_SLOT_UID_BASE", "61184")
    with pytest.raises(SandboxUnavailable, match="JUDGE_SLOT_UID_BASE"):
        Judge(workers=1)


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
        subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(private / "venv")], check=True)
        python = str(private / "venv" / "bin" / "python3")
        assert blocked_for_others(python) == f"{private} is mode 0700"
        monkeypatch.setattr(sys, "executable", python)
        yield python
    finally:
        shutil.rmtree(private)


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
def test_explicit_rlimits_with_python_out_of_slot_reach_runs_as_root_and_says_so(
    path_without_namespace_tools, python_out_of_slot_reach
):
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


def warm_worker_processes() -> set[int]:
    """The pids of the warm workers running on this machine (their command line runs the worker's program). Not
    bubblewrap's own processes, whose arguments name it too: bwrap's init in a PID namespace dies after the worker,
    reaped by the host's init whenever that gets to it (judging/cgroups/slot.py: ``SlotCgroup.wait_settled``)."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            arguments = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0") if entry.isdigit() else []
            if b"/warm_worker/main.py" in arguments and not arguments[0].endswith(b"bwrap"):
                found.add(int(entry))
        except OSError:
            pass
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids need root")
@pytest.mark.skipif(not unshare_works(), reason="unshare cannot create namespaces here")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_warm_workers_started_beside_a_failing_bwrap_probe_are_closed(tmp_path, monkeypatch):
    """Warm workers start while bwrap's level is probed; when the probe fails and the judge takes the next level,
    none of them is left running. The stand-in bwrap refuses cold runs (``--as-pid-1``) and starts the rest."""
    started = tmp_path / "started"
    stand_in = tmp_path / "bwrap"
    stand_in.write_text(
        "#!/bin/sh\n"
        'for arg; do [ "$arg" = --as-pid-1 ] && { echo "stand-in bwrap: cold runs refused" >&2; '
        "exit 1; }; done\n"
        f'echo warm >> "{started}"\n'
        f'exec {shutil.which("bwrap")} "$@"\n'
    )
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")  # the system Python, which unshare's slot uid can run
    before = warm_worker_processes()
    with Judge(sandbox="auto", workers=2) as judge:
        assert started.read_text().split() == ["warm", "warm"]  # both slots' workers started beside the probe
        assert (judge.level, judge.warm) == ("unshare", False)
        if not judge.setup.slots.warm_cgroups.version:
            pytest.skip("closing waits for a worker's last process through its cgroup; none here")
        assert warm_worker_processes() == before  # closed, and waited for: not left to exit whenever
        judgement = run(judge, "print(6 * 7)", "42")
        assert judgement.status == "passed", judgement.tests[0].stderr
