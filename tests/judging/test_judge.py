"""The judge's contract (docs/judge.md) with real sandboxed runs, and the q executor against a
stand-in executable (tests/helpers/fake_q/q, which is NOT q)."""

import asyncio
import inspect
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judging import STATUSES, Judge, JudgeArguments, JudgeUnavailable, Test, TestResult, policy
from judging.executors import RAN
from judging.grading import completion_status, grade, matches
from judging.running import RunResult

FAKE_Q = str(Path(__file__).resolve().parents[1] / "helpers" / "fake_q" / "q")
SUM_TESTS = [Test("print(solve([1, 2, 3]))", "6"), Test("print(solve([]))", "0"), Test("print(solve([5]))", " 5\n")]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


def test_statuses_are_the_designed_set():
    assert STATUSES == (
        "passed",
        "failed",
        "no_code",
        "syntax_error",
        "runtime_error",
        "timeout",
        "memory",
        "output_limit",
        "sandbox_error",
    )


def test_correct_solution_passes_every_test(judge):
    judgement = judge.run("def solve(xs):\n    return sum(xs)\n", SUM_TESTS, "python")
    assert (judgement.status, judgement.passed, judgement.total) == ("passed", 3, 3)
    assert judgement.tests[0].stdout == "6\n"


def test_partly_wrong_solution(judge):
    judgement = judge.run("def solve(xs):\n    return sum(xs) if xs else -1\n", SUM_TESTS, "python")
    assert (judgement.status, judgement.passed) == ("failed", 2)
    assert [t.status for t in judgement.tests] == ["passed", "failed", "passed"]


def test_printing_the_answer_then_exiting_fails(judge):
    cheat = "import sys\nprint(6)\nprint(0)\nprint(5)\nsys.exit(0)\n"
    judgement = judge.run(cheat, SUM_TESTS, "python")
    assert judgement.passed == 0 and judgement.status == "failed"
    quiet_exit = "import os\nos._exit(0)\n"
    assert judge.run(quiet_exit, [Test("", "")], "python").status == "failed"


def test_output_before_the_marker_does_not_count(judge):
    judgement = judge.run("print('noise')\ndef solve(xs):\n    return sum(xs)\n", SUM_TESTS[:1], "python")
    assert judgement.status == "passed" and judgement.tests[0].stdout == "6\n"


def test_no_code_and_syntax_error_run_nothing(judge):
    assert judge.run(None, SUM_TESTS, "python").status == "no_code"
    judgement = judge.run("def solve(:\n", SUM_TESTS, "python")
    assert judgement.status == "syntax_error"
    assert all(t.seconds == 0.0 and "SyntaxError" in t.stderr for t in judgement.tests)
    assert judge.run("x = '\0'", SUM_TESTS, "python").status == "syntax_error"


def test_lone_surrogates_are_judged_not_fatal(judge, qjudge):
    judgement = judge.run("def solve(xs):\n    return sum(xs)\n", [Test("print('\ud800')", "?")], "python")
    assert judgement.status == "passed", judgement.tests[0].stderr
    assert judge.run("x = '\ud800'", SUM_TESTS, "python").status == "syntax_error"
    assert qjudge.run('x:"\ud800"', [Test('-1 "6";', "6")], "q").status == "passed"


def test_runtime_error(judge):
    judgement = judge.run("def solve(xs):\n    return xs[10]\n", SUM_TESTS, "python")
    assert judgement.status == "runtime_error"
    assert "IndexError" in judgement.tests[0].stderr


def test_completion_status_order():
    def results(*statuses):
        return [TestResult(s, 0.1, "", "") for s in statuses]

    assert completion_status(results("passed", "passed")) == "passed"
    assert completion_status(results("passed", "failed")) == "failed"
    assert completion_status(results("failed", "runtime_error")) == "runtime_error"
    assert completion_status(results("runtime_error", "output_limit", "memory")) == "memory"
    assert completion_status(results("memory", "timeout")) == "timeout"
    assert completion_status(results("timeout", "sandbox_error")) == "sandbox_error"


def ran(stdout, stderr="", seconds=0.123456, timed_out=False, output_overflow=False):
    return RunResult(0, stdout, stderr, seconds, timed_out, output_overflow)


@pytest.mark.parametrize(
    "result, outcome, out_of_memory, status",
    [
        (ran("noise\nMARK\n6\n"), RAN, False, "passed"),  # only what follows the marker counts
        (ran("MARK\n 6 \n\n"), RAN, False, "passed"),  # stripped
        (ran("6\nMARK\n"), RAN, False, "failed"),  # the answer printed before the marker
        (ran("6\n"), RAN, False, "failed"),  # no marker: the program ended before the test ran
        (ran("MARK\n6\n"), "runtime_error", False, "runtime_error"),  # the executor's reading wins over the output
        (ran("MARK\n6\n", timed_out=True), RAN, False, "timeout"),
        (ran("MARK\n6\n", output_overflow=True, timed_out=True), RAN, False, "output_limit"),
        (ran("MARK\n6\n", output_overflow=True), "memory", True, "memory"),  # an OOM kill in the cgroup comes first
    ],
)
def test_grading_is_a_pure_function_of_the_run(result, outcome, out_of_memory, status):
    graded = grade(result, outcome, out_of_memory, "MARK", 6)
    assert graded.status == status and graded.seconds == 0.1235
    assert graded.stdout == result.stdout.split("MARK\n")[-1], "what follows the marker, else all of stdout"


def test_grading_keeps_the_start_of_stdout_and_the_end_of_stderr():
    graded = grade(ran("MARK\n" + "a" * 5000 + "b", "c" + "d" * 5000), RAN, False, "MARK", "")
    assert graded.stdout == "a" * 4096 and graded.stderr == "d" * 4096 and graded.status == "failed"


def test_without_a_marker_all_of_stdout_is_the_answer():
    """A test giving standard input has no marker: the program is the solution alone."""
    assert grade(ran("6\n"), RAN, False, None, "6").status == "passed"
    assert grade(ran("noise\n6\n"), RAN, False, None, "6").status == "failed"
    # as competitive judges compare: spaces at line ends and the line ends themselves do not count
    assert grade(ran("1 2 \r\n3 4\n"), RAN, False, None, "1 2\n3 4  \n").status == "passed"
    assert grade(ran("1  2\n3 4\n"), RAN, False, None, "1 2\n3 4").status == "failed"


@pytest.mark.parametrize(
    "printed, expected, tolerance, passes",
    [
        ("0.30000000000000004", "0.3", 1e-9, True),
        ("0.30000000000000004", "0.3", None, False),  # no tolerance: text
        ("0.3001", "0.3", 1e-6, False),
        ("6", "6.0", 0.0, True),  # numbers compared as numbers
        ("[1.0, 2.5000001]", "[1, 2.5]", 1e-6, True),
        ("[1.0, 2.5]", "[1, 2.5, 3]", 1.0, False),  # a number short
        ("(1.0, 2.5)", "[1, 2.5]", 1.0, False),  # the text around the numbers differs
        ("x1 -2.5e-3", "x1 -0.0025", 0.0, True),
        ("x1", "x2", 5.0, False),  # a digit inside a word is text
        ("inf -inf", "inf -inf", 0.0, True),
        ("inf", "-inf", 1e300, False),
        ("nan", "0.0", 1e300, False),
        ("True 0.5", "True 0.5000001", 1e-6, True),
    ],
)
def test_a_tolerance_compares_the_numbers_of_the_printed_text(printed, expected, tolerance, passes):
    assert matches(printed, expected, tolerance) is passes
    assert (grade(ran(f"MARK\n{printed}\n"), RAN, False, "MARK", expected, tolerance).status == "passed") is passes


def test_run_many_keeps_order_and_arun_many_matches(judge):
    items = [
        ("def solve(xs):\n    return sum(xs)\n", SUM_TESTS, "python"),
        (None, SUM_TESTS, "python"),
        ("def solve(xs):\n    return 0\n", SUM_TESTS, "python"),
    ] * 3
    statuses = [j.status for j in judge.run_many(items)]
    assert statuses == ["passed", "no_code", "failed"] * 3
    assert [j.status for j in asyncio.run(judge.arun_many(items))] == statuses


def test_run_many_raises_a_fault_as_it_happens(judge):
    """A fault of the caller's (a problem with no tests) raises from run_many as soon as its item runs, not after the
    slow ones: run_many wakes only every PROGRESS_INTERVAL to move its bar, and on the first exception."""
    slow = ("import time\ntime.sleep(2)\n", [Test("", "")], "python")
    started = time.monotonic()
    with pytest.raises(ValueError, match="at least one test"):
        judge.run_many([("x = 1", [], "python"), *[slow] * 4])
    assert time.monotonic() - started < 1.5


def test_bad_arguments(judge):
    with pytest.raises(ValueError, match="at least one test"):
        judge.run("x = 1", [], "python")
    with pytest.raises(ValueError, match="unknown language"):
        judge.run("x = 1", SUM_TESTS, "cobol")
    with pytest.raises(ValueError, match="sandbox"):
        Judge(sandbox="none")
    with pytest.raises(ValueError, match="workers must be at least 1"):
        Judge(workers=0)
    with pytest.raises(ValueError, match="timeout must be positive"):
        Judge(timeout=0)
    with pytest.raises(ValueError, match="completion_budget must be positive"):
        Judge(completion_budget=-1)


def test_a_failing_scratch_folder_is_a_sandbox_error_and_frees_the_slot():
    """A level without a tmpfs of its own writes each program to a host folder (bwrap's paths, warm and cold, take
    it in a memory file)."""
    with Judge(workers=1, sandbox="rlimits") as judge:
        base = Path(judge.setup.slots.base)
        shutil.rmtree(base)
        assert judge.run("x = 1", SUM_TESTS[:1], "python").status == "sandbox_error"
        assert judge.setup.slots.free.qsize() == 1
        base.mkdir(mode=0o711)
        assert judge.run("def solve(xs):\n    return sum(xs)\n", SUM_TESTS[:1], "python").status == "passed"
        assert judge.run("def solve(xs):\n    return sum(xs)\n", SUM_TESTS[:1], "python").status == "passed"


def test_a_judge_never_closed_removes_its_folder_at_exit():
    code = "from judging import Judge\njudge = Judge(workers=1)\nprint(judge.setup.slots.base)\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert not Path(done.stdout.strip()).exists()


def test_python_preflight_passes_here_and_stops_where_python_cannot_run_1_plus_1(judge):
    judge.preflight("python")  # this machine's Python prints 2 in the sandbox
    with Judge(workers=1, sandbox="bwrap-cold") as broken:
        broken.setup.get("python").executor.interpreter = "/bin/false"  # runs nothing and exits 1
        with pytest.raises(JudgeUnavailable, match=r"^python cannot run 1\+1 in the sandbox \(.*\): runtime_error"):
            broken.preflight("python")


# q executor contract, against the stand-in.


@pytest.fixture()
def qjudge(qhome):
    with Judge(timeout=2.0, workers=2, q_binary=FAKE_Q) as judge:
        yield judge


def record(result: TestResult, key: str) -> list[str]:
    prefix = f"FAKEQ-{key} "
    return [line[len(prefix) :] for line in result.stderr.splitlines() if line.startswith(prefix)]


def test_q_program_arguments_environment_and_script(qjudge, qhome, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "leaked")
    judgement = qjudge.run("solve:{sum x}\nexit 0;", [Test('-1 "6";', "6")], "q")
    assert judgement.status == "passed", judgement.tests[0].stderr
    result = judgement.tests[0]
    assert record(result, "ARGS") == ["/scratch/main.q -q"]
    assert record(result, "STDIN") == ["closed"]
    assert record(result, "QHOME") == [str(qhome)]
    assert set(record(result, "ENV")[0].split()) <= {"HOME", "LANG", "PATH", "PWD", "QHOME", "QLIC"}
    script = record(result, "SCRIPT")
    assert script[1:3] == ["::", "solve:{sum x}"], "a no-op line takes an indented first line's continuation"
    assert "exit 0;" not in script[:-1], "the solution's own exit 0 must go, or the tests never run"
    marker = next(line for line in script if line.startswith('-1 "') and line != '-1 "6";')
    assert script[script.index(marker) + 1 :] == ['-1 "6";', "exit 0;"]
    assert script[0] == "-2" + marker[2:], "the first line tells q's start-up apart from the program (stderr)"


def test_q_marker_is_random_per_execution(qjudge):
    tests = [Test("", "")] * 2
    markers = [record(t, "SCRIPT")[-3] for t in qjudge.run("x:1", tests, "q").tests]
    assert markers[0] != markers[1]


def test_q_errors_are_runtime_errors_and_wsfull_is_memory(qjudge, qhome):
    tests = [Test('-1 "6";', "6")]
    assert qjudge.run("solve:{x+`a}\n'type", tests, "q").status == "runtime_error"
    (qhome / "mode").write_text("wsfull")
    assert qjudge.run("solve:{x}", tests, "q").status == "memory"


def test_q_answer_printed_by_the_solution_fails(qjudge):
    judgement = qjudge.run('-1 "6";\nexit 0;', [Test("", "6")], "q")
    assert judgement.status == "failed"


def test_q_licence_failure_is_retried_then_sandbox_error(qjudge, qhome, tmp_path, monkeypatch):
    tries = tmp_path / "acct"  # where the stand-in counts its runs: its working folder dies with each run
    tries.touch(mode=0o666)
    tries.chmod(0o666)
    monkeypatch.setenv("KX_ACCT", str(tries))
    (qhome / "mode").write_text("flaky")
    tests = [Test('-1 "6";', "6")]
    assert qjudge.run("x:1", tests, "q").status == "passed", "two licence failures then success must pass"
    (qhome / "mode").write_text("licence")
    assert qjudge.run("x:1", tests, "q").status == "sandbox_error"
    with pytest.raises(JudgeUnavailable, match="licence"):
        qjudge.preflight("q")


@pytest.mark.parametrize(
    "solution, status",
    [
        ("solve:{5}\n'k4.lic\nexit 1;", "runtime_error"),
        ('-2 "couldn\'t connect to license daemon";\nexit 3;', "runtime_error"),
        ('-2 "couldn\'t connect to license daemon";', "failed"),
    ],
)
def test_a_wrong_q_answer_printing_licence_failure_text_gets_its_verdict_without_retries(qjudge, solution, status):
    """Once q has run the script's first line, licence text is the program's: printing it must not turn a wrong
    answer into a retried sandbox_error, which scores None (no penalty) instead of 0."""
    before = qjudge.counters()["judge/licence_retries"]
    judgement = qjudge.run(solution, [Test('-1 "5";', "6")], "q")
    assert judgement.status == status, judgement.tests[0].stderr
    assert qjudge.counters()["judge/licence_retries"] == before


def test_q_program_printing_licence_words_is_judged_on_its_output(qjudge):
    tests = [Test('-1 "kc.lic";', "kc.lic")]
    assert qjudge.run('-1 "k4.lic licence error";', tests, "q").status == "passed"


def test_q_preflight_passes_with_the_stand_in_and_stops_when_q_fails(qjudge, qhome):
    qjudge.preflight("q")  # the stand-in prints 2 for `-1 string 1+1;`
    (qhome / "mode").write_text("wsfull")  # the stand-in now reports 'wsfull for every script
    with pytest.raises(JudgeUnavailable, match=r"^q cannot run 1\+1 in the sandbox \(.*\): memory: 'wsfull"):
        qjudge.preflight("q")


def test_q_missing_is_a_clear_preflight_error(qhome, tmp_path, monkeypatch):
    monkeypatch.delenv("Q_INTERPRETER_PATH", raising=False)
    monkeypatch.delenv("Q_EXECUTABLE_PATH", raising=False)
    with Judge(workers=1, q_binary=str(tmp_path / "no-such-q")) as judge:
        with pytest.raises(JudgeUnavailable, match="q executable not found.*Q_INTERPRETER_PATH"):
            judge.preflight("q")
        assert judge.run("x:1", [Test("", "")], "q").status == "sandbox_error"


def test_q_binary_found_through_environment(qhome, monkeypatch):
    from judging.executors import find_q

    monkeypatch.setenv("Q_INTERPRETER_PATH", FAKE_Q)
    assert find_q() == FAKE_Q
    monkeypatch.delenv("Q_INTERPRETER_PATH")
    monkeypatch.setenv("Q_EXECUTABLE_PATH", FAKE_Q)
    assert find_q() == FAKE_Q


def test_qhome_is_inferred_only_from_a_kdb_platform_folder(tmp_path, monkeypatch):
    from judging.executors import QExecutor

    monkeypatch.delenv("QHOME", raising=False)
    monkeypatch.delenv("QLIC", raising=False)
    loose = QExecutor(FAKE_Q)
    assert loose.read_only == [FAKE_Q] and "QHOME" not in loose.env
    platform = tmp_path / "kdb" / "l64"
    platform.mkdir(parents=True)
    shutil.copy(FAKE_Q, platform / "q")
    installed = QExecutor(str(platform / "q"))
    assert installed.env["QHOME"] == str(tmp_path / "kdb")


JUDGE_ONE = """
import json, sys
from judging import Judge, Test
with Judge(timeout=2.0, workers=1, sandbox=sys.argv[1]) as judge:
    judgement = judge.run("def solve(x):\\n    return 1 if x is 1 else 0\\n",
                          [Test("print(solve(1))", "1")] * 2, "python")
print(json.dumps([judgement.status, [test.stderr for test in judgement.tests]]))
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.parametrize("sandbox", ["bwrap", "bwrap-cold"])
def test_compiler_warnings_about_judged_code_stay_in_its_test(sandbox):
    """The syntax check compiles judged code in the judge's own process: what the compiler warns about it is the
    test's (its sandboxed run prints it), not a line in the trainer's log for every completion that has it. In a
    process of its own: pytest records warnings itself."""
    done = subprocess.run(
        [sys.executable, "-c", JUDGE_ONE, sandbox],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    status, stderrs = json.loads(done.stdout)
    assert status == "passed"
    assert all('SyntaxWarning: "is" with a literal' in stderr for stderr in stderrs), stderrs
    assert "SyntaxWarning" not in done.stderr


def test_the_judge_and_its_flags_take_their_defaults_from_the_policy():
    """The judge's defaults are declared once (judging/policy.py): the Python API and the command-line flags agree."""
    judge, flags, limits = inspect.signature(Judge).parameters, JudgeArguments(), policy.Limits()
    assert judge["timeout"].default == flags.judge_timeout == policy.DEFAULT_TIMEOUT
    assert judge["memory_mb"].default == flags.judge_memory_mb == limits.memory_mb == policy.DEFAULT_MEMORY_MB
    assert judge["disk_mb"].default == flags.judge_disk_mb == limits.disk_mb == policy.DEFAULT_DISK_MB
    assert judge["sandbox"].default == flags.sandbox == policy.DEFAULT_SANDBOX
    assert judge["q_licence_hosts"].default == flags.q_licence_hosts == policy.DEFAULT_LICENCE_HOSTS
    assert judge["workers"].default is flags.judge_workers is None  # then policy.default_workers()


def test_the_interpreter_s_configuration_is_read_before_any_judge_s_thread_asks():
    """sysconfig binds its configuration dictionary, then fills it: two judges set up at once in one process (ranks
    as threads, as the cgroup v2 guest runs them) raised "dictionary changed size during iteration" when the second
    read it half filled. Importing the judge fills it (``sysconfig._CONFIG_VARS``, the standard library's private
    cache, read here only), in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", "import sysconfig, judging.executors\nprint(sysconfig._CONFIG_VARS is not None)"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.strip() == "True", done.stdout + done.stderr
