"""What a test leaves behind on the host, and judged behaviours that once ended in ``sandbox_error``: scratch
folders built to break their removal, ``remove_tree`` alone, and the rule that only the judge's own faults may be
``sandbox_error``. Python runs on both bwrap paths (tests/helpers/bwrap_paths.py)."""

import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import pytest

from bwrap_paths import ROOT, judge, run, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Judge, Test
from judging.scratch import remove_tree


def test_scratch_folders_are_removed(judge):
    run(judge, "open('left-behind.txt', 'w').write('x')\nimport os\nos.mkdir('sub')\n")
    assert_only_warm_logs_left(judge)


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
    """Programs that leave a scratch tree built to break its removal on the host ."""
    return {
        "1500_nested_folders": ("import os\nfor _ in range(1500):\n    os.mkdir('d' * 40)\n    os.chdir('d' * 40)\n"),
        "links_to_host_paths_and_loops": (
            "import os\n"
            f"os.symlink({host_folder!r}, 'host')\n"
            f"os.symlink({host_folder + '/keep.txt'!r}, 'host_file')\n"
            "os.symlink('loop', 'loop')\n"
            "os.symlink('b', 'a')\n"
            "os.symlink('a', 'b')\n"
            "os.mkdir('sub')\n"
            "os.symlink('..', 'sub/up')\n"
        ),
        "unreadable_folders": (
            "import os\n"
            "os.makedirs('u/v/w')\n"
            "open('u/v/w/f', 'w').write('x')\n"
            "for path in ('u/v/w/f', 'u/v/w', 'u/v', 'u'):\n"
            "    os.chmod(path, 0)\n"
        ),
    }


def host_folder_to_keep(tmp_path):
    folder = tmp_path / "keep-me"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    return folder


def assert_only_warm_logs_left(judge):
    logs = set(judge.setup.warm.logs.values()) if judge.warm else set()
    for path in Path(judge.setup.slots.base).iterdir():
        assert str(path) in logs, f"{path} was left behind"


@pytest.mark.parametrize("breaker", ["1500_nested_folders", "links_to_host_paths_and_loops", "unreadable_folders"])
def test_cleanup_breakers_get_a_verdict_free_the_slot_and_leave_nothing(judge, breaker, tmp_path):
    kept = host_folder_to_keep(tmp_path)
    code = cleanup_breakers(str(kept))[breaker]
    judgement = run(judge, code + "print(6)\n", "6", timeout=10.0)  # 1,500 mkdirs take ~1 s on a loaded machine
    assert judgement.status == "passed", judgement.tests[0].stderr
    assert run(judge, code + "print(5)\n", "6", timeout=10.0).status == "failed", "its output is judged as any other"
    assert judge.setup.slots.free.qsize() == judge.workers, "every slot must be handed back"
    assert_only_warm_logs_left(judge)
    assert (kept / "keep.txt").read_text() == "keep", "removal followed a link to the host"


def test_close_after_cleanup_breakers_never_raises(sandbox, tmp_path):
    judge = Judge(timeout=10.0, workers=1, sandbox=sandbox)
    base = Path(judge.setup.slots.base)
    for code in cleanup_breakers(str(host_folder_to_keep(tmp_path))).values():
        judge.run("", [Test(code, "")] * 2, "python")
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


FAKE_Q = str(ROOT / "tests" / "helpers" / "fake_q" / "q")  # a STAND-IN for q (see the file); it evaluates no q code
# Each judged behaviour once known to end in sandbox_error: (language, solution, test code, the verdict
# it gets now). sandbox_error scores None, which spares a wrong answer its penalty: only the judge's own faults
# may end there.
ONCE_SANDBOX_ERRORS = {
    "q_prints_licence_failure_text": ("q", "solve:{5}\n'k4.lic\nexit 1;", '-1 "5";', "runtime_error"),
    "1500_nested_scratch_folders": ("python", cleanup_breakers("/")["1500_nested_folders"], "print(6)", "passed"),
    "links_in_scratch": ("python", cleanup_breakers("/")["links_to_host_paths_and_loops"], "print(6)", "passed"),
    "mode_000_folders": ("python", cleanup_breakers("/")["unreadable_folders"], "print(6)", "passed"),
    "closes_stdout_and_stderr": ("python", "import os\nos.close(1)\nos.close(2)\n", "print(6)", "runtime_error"),
    "signals_its_parent_and_all": (
        "python",
        "import os, signal\nfor pid in (os.getppid(), 1, -1):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\n",
        "print(6)",
        "passed",
    ),
    "its_warm_worker_is_killed": ("python", "import time\ntime.sleep(1.0)\n", "print(6)", "passed"),
}


@pytest.mark.parametrize("behaviour", list(ONCE_SANDBOX_ERRORS))
def test_judged_behaviours_that_ended_in_sandbox_error_now_get_their_verdict(sandbox, behaviour, qhome):
    language, solution, test_code, verdict = ONCE_SANDBOX_ERRORS[behaviour]
    if behaviour == "its_warm_worker_is_killed" and sandbox == "bwrap-cold":
        pytest.skip("no warm worker on the cold path")
    with Judge(timeout=10.0, workers=1, sandbox=sandbox, q_binary=FAKE_Q, q_licence_hosts="none") as judge:
        killer = None
        if behaviour == "its_warm_worker_is_killed":
            run(judge, "pass")
            killer = threading.Timer(
                0.5, os.killpg, (next(iter(judge.setup.warm.workers.values())).process.pid, signal.SIGKILL)
            )
            killer.start()
        judgement = judge.run(solution, [Test(test_code, "6")], language)
        if killer:
            killer.join()
            assert judge.setup.warm.failures == 1, "the worker must really have died mid-test"
        assert judgement.status == verdict, judgement.tests[0].stderr
        assert judge.counters()["judge/licence_retries"] == 0
        assert judge.setup.slots.free.qsize() == 1
        assert run(judge, "print(6)", "6").status == "passed"
