"""Verification of problem sets through the real judge, on planted broken Python problems."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data import verify_problems
from judging import Judge
from judging.executors import find_q

FIXTURES = Path(__file__).parent / "fixtures" / "data"
REPO = Path(__file__).resolve().parent.parent
DOUBLE = "def double(x):\n    return 2 * x"


def problem(problem_id, tests, solution=DOUBLE):
    return {"id": problem_id, "language": "python", "description": "Write double(x) that returns 2 * x.",
            "tests": [{"test_code": code, "expected_output": expected} for code, expected in tests],
            "solution": solution, "split": None}


PLANTED = [
    problem("clean", [("print(double(2))", "4"), ("print(double(-1))", "-2")]),
    problem("wrong-expected", [("print(double(2))", "4"), ("print(double(3))", "7")]),
    problem("no-op-passes", [("print(6)", "6")]),
    problem("crashing-solution", [("print(double(2))", "4")], solution="def double(x):\n    return x / 0"),
    problem("no-solution", [("print(double(5))", "10")], solution=None),
    problem("no-solution-no-op-passes", [("print('ok')", "ok")], solution=None),
]


@pytest.fixture(scope="module")
def report():
    return verify_problems(PLANTED, Judge(timeout=5.0), show_progress=False)


def broken_by_id(report):
    return {broken["id"]: broken for broken in report.broken}


def test_every_problem_is_checked_and_only_planted_faults_are_broken(report):
    assert report.checked == len(PLANTED)
    assert sorted(broken_by_id(report)) == ["crashing-solution", "no-op-passes", "no-solution-no-op-passes",
                                            "wrong-expected"]
    assert not report.clean


def test_a_wrong_expected_output_is_reported_with_the_failing_test_and_output(report):
    broken = broken_by_id(report)["wrong-expected"]
    assert (broken["test"], broken["expected"], broken["got"].strip()) == (1, "7", "6")
    assert broken["reason"] == "solution fails test 1 (failed)"


def test_a_solution_that_raises_is_reported_with_its_stderr(report):
    broken = broken_by_id(report)["crashing-solution"]
    assert broken["test"] == 0 and broken["reason"].startswith("solution fails test 0 (")
    assert "ZeroDivisionError" in broken["stderr"]


def test_a_test_that_a_no_op_passes_is_broken_even_without_a_solution(report):
    broken = broken_by_id(report)
    assert broken["no-op-passes"]["reason"] == "a no-op solution passes every test"
    assert broken["no-solution-no-op-passes"]["reason"] == "a no-op solution passes every test"


def test_problems_without_solution_are_unverifiable_not_broken(report):
    assert report.unverifiable == ["no-solution"]
    assert report.summary() == "verified 6 problems: 4 broken, 1 unverifiable (no solution), 1 clean"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "data", "verify", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ})


def test_cli_exits_0_on_a_clean_file_and_counts_unverifiable():
    result = run_cli(str(FIXTURES / "problems.jsonl"), "--language", "python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2:] == [
        "unverifiable (no solution): greet",
        "verified 3 problems: 0 broken, 1 unverifiable (no solution), 2 clean",
    ]


def test_cli_exits_1_and_prints_each_broken_problem(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in PLANTED[:2]))
    result = run_cli(str(path), "--language", "python", "--timeout", "5")
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "BROKEN wrong-expected: solution fails test 1 (failed)",
        "  test 1 expected: '7'",
        "  test 1 got:      '6'",
        "verified 2 problems: 1 broken, 0 unverifiable (no solution), 1 clean",
    ]


def test_cli_exits_2_on_bad_input(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps({"id": "x", "description": "d", "tests": [{"test_code": "print(1)"}]}) + "\n")
    result = run_cli(str(path), "--language", "python")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{path}:1: tests[0] has no 'expected_output' "
                                     "(use \"\" for a test that prints nothing)")
    result = run_cli(str(path), "--timeout", "0")
    assert result.returncode == 2 and "must be a positive number of seconds" in result.stderr


@pytest.mark.skipif(find_q() is not None, reason="a q binary is installed here; this checks the missing-q path")
def test_cli_exits_2_with_the_preflight_message_when_q_is_missing(tmp_path):
    path = tmp_path / "q_problems.jsonl"
    path.write_text(json.dumps({"id": "sum", "description": "Sum a list.", "solution": "solve:{sum x}",
                                "tests": [{"test_code": "show solve 1 2", "expected_output": "3"}]}) + "\n")
    result = run_cli(str(path), "--language", "q")
    assert (result.returncode, result.stdout) == (2, "")
    message = result.stderr.strip()
    assert message.startswith(f"{path}: ") and "\n" not in message
