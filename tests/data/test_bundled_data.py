"""The bundled problem sets: the Python set verifies clean through the real judge, no trivial program passes more
than a third of any problem's tests; the q set agrees with its Python twins and, by reading, is as balanced."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from data import (
    DEFAULT_MAX_TRIVIAL_SHARE,
    bundled_path,
    load_problems,
    measure_trivial_shares,
    split_problems,
    verify_problems,
)
from data.quality.given_programs import read_given_programs
from data.quality.q_twins import cross_check, load_twins
from data.quality.trivial import read_trivial_shares
from judging import Judge
from judging.executors import find_q
from rewards import MAX_TESTS_PER_PROBLEM
from trainer_runs import run_trainer

TRAINING_TESTS = MAX_TESTS_PER_PROBLEM
FIRST_WRONG = str(Path(__file__).parents[1] / "fixtures" / "data" / "first_wrong_programs.jsonl")


@pytest.mark.slow
def test_bundled_python_set_verifies_clean():
    problems = load_problems(bundled_path("python"), "python")
    judge = Judge(timeout=2.0)
    try:
        report = verify_problems(problems, judge, show_progress=False, given=read_given_programs(FIRST_WRONG))
    finally:
        judge.close()
    assert report.clean, (
        report.broken[:3],
        report.guessable[:3],
        [(w["id"], w["adequacy"].survivors[:1]) for w in report.weak[:3]],
        report.paid,
    )
    # The natural wrong programs a model writes first earn no more than a constant on the judged tests.
    assert len(report.given) == 6 and all(p.differs_on for found in report.given.values() for p in found)
    # The first five tests reject every wrong program tried: mutants of the solution, the cheap battery.
    assert all(a.score == 1 and a.wrong > 0 for a in report.adequacy.values())
    assert report.checked == len(problems) >= 80 and not report.unverifiable
    # Over all tests (evaluation, `data verify`) and over the first five (the training reward's), no constant, echo,
    # silence or cheap battery program (first element, length, True then False ...) passes more than a third.
    shares = report.trivial.values()
    assert max(s.share for s in shares) <= 1 / 3 < DEFAULT_MAX_TRIVIAL_SHARE
    assert max(s.by_tests[min(TRAINING_TESTS, s.total) - 1] for s in shares) <= 1 / 3
    assert sum(s.share > 0 for s in shares) > len(problems) / 2  # the probes do pass tests: the bound is not vacuous


def test_bundled_q_set_is_balanced_by_reading():
    """No q licence here: the q set's trivial shares are read off its tests (the most frequent expected output, the
    identity, the description's examples), not run (see the next test)."""
    problems = load_problems(bundled_path("q"), "q")
    shares = read_trivial_shares(problems)
    assert max(s.share for s in shares) <= 1 / 3
    assert max(s.by_tests[TRAINING_TESTS - 1] for s in shares) <= 1 / 3
    is_even = next(p for p in problems if p.id == "is-even")
    (doubled,) = read_trivial_shares([replace(is_even, tests=is_even.tests[:2] * 2)])
    assert doubled.share == 0.5  # the reading does count


def test_bundled_q_set_agrees_with_its_python_twins():
    """Every q test of every bundled q problem, against its Python twin (data/python_problems.jsonl, or
    data/q_twins.jsonl for the q problems the Python set has no problem for), with no q."""
    problems = load_problems(bundled_path("q"), "q")
    twins = load_twins([str(bundled_path("python")), str(bundled_path("python").with_name("q_twins.jsonl"))], problems)
    assert set(twins) == {p.id for p in problems}
    with Judge(timeout=2.0) as judge:
        report = cross_check(problems, twins, judge)
    assert report.disagreements == [] and report.tests == sum(len(p.tests) for p in problems)


@pytest.mark.real_q
@pytest.mark.skipif(find_q() is None, reason="no q binary found: the q set's trivial programs cannot run here")
def test_bundled_q_set_trivial_shares_through_real_q():
    problems = load_problems(bundled_path("q"), "q")
    with Judge(timeout=5.0) as judge:
        judge.preflight("q")
        shares = measure_trivial_shares(problems, judge)
    above = [(p.id, s.probe, s.passed, s.total) for p, s in zip(problems, shares) if s.share > 1 / 3]
    assert not above


@pytest.mark.real_q
@pytest.mark.skipif(find_q() is None, reason="no q binary found: the q solutions cannot run here")
def test_bundled_q_solutions_pass_every_test_through_real_q():
    """Each q solution on all its tests (made from the Python twins) and a no-op failing one, through a real q."""
    problems = load_problems(bundled_path("q"), "q")
    with Judge(timeout=5.0) as judge:
        report = verify_problems(problems, judge, show_progress=False)
    assert report.broken == [] and report.checked == len(problems)


def test_bundled_sets_have_splits_solutions_and_enough_tests():
    """At least the five tests the training reward judges, Python and q."""
    for language, at_least, tests in (("python", 80, TRAINING_TESTS), ("q", 70, TRAINING_TESTS)):
        problems = load_problems(bundled_path(language), language)
        train, test = split_problems(problems)
        assert len(problems) >= at_least and train and test
        assert all(p.solution and len(p.tests) >= tests and p.language == language for p in problems)
    q = load_problems(bundled_path("q"), "q")
    assert all("solve:" in p.solution for p in q)


@pytest.mark.slow
def test_verify_data_stops_training_on_a_broken_problem(tiny_model, tmp_path):
    good = {
        "id": "double",
        "description": "Return 2*x.",
        "solution": "def solve(x):\n    return 2 * x",
        "tests": [{"test_code": "print(solve(2))", "expected_output": "4"}],
        "split": "train",
    }
    broken = {
        "id": "triple",
        "description": "Return 3*x.",
        "solution": "def solve(x):\n    return 3 * x",
        "tests": [{"test_code": "print(solve(2))", "expected_output": "5"}],
        "split": "test",
    }
    data = tmp_path / "problems.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    result = run_trainer(
        "--model", tiny_model, "--language", "python", "--data", data, "--verify_data", "--output_dir", tmp_path / "run"
    )
    assert result.returncode == 2
    assert "--verify_data: verified 2 problems: 1 broken" in result.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.slow
def test_verify_data_stops_training_on_a_guessable_problem(tiny_model, tmp_path):
    guessable = {
        "id": "is-even",
        "description": "Return whether x is even.",
        "split": "train",
        "solution": "def solve(x):\n    return x % 2 == 0",
        "tests": [{"test_code": f"print(solve({x}))", "expected_output": str(x % 2 == 0)} for x in (2, 4, 5)],
    }
    data = tmp_path / "problems.jsonl"
    data.write_text(json.dumps(guessable) + "\n")
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--data",
        data,
        "--test_fraction",
        "0",
        "--verify_data",
        "--eval_pass_at_k",
        "false",
        "--output_dir",
        tmp_path / "run",
    )
    assert result.returncode == 2
    assert "--verify_data: verified 1 problems: 0 broken, 1 guessable (trivial share above 0.34)" in result.stderr
    assert (
        f"python -m data verify {data} --language python --max_trivial_share 0.34 --max_tests_per_problem 5` "
        "lists each problem" in result.stderr
    )
    assert not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.slow
def test_test_reward_function_prints_each_canonical_reward_and_fails_on_a_short_one(tiny_model, tmp_path):
    problems = [
        {
            "id": "double",
            "description": "Return 2*x.",
            "solution": "def solve(x):\n    return 2 * x",
            "tests": [
                {"test_code": "print(solve(2))", "expected_output": "4"},
                {"test_code": "print(solve(5))", "expected_output": "10"},
            ],
            "split": "train",
        },
        {
            "id": "half-right",
            "description": "Return x+1.",
            "solution": "def solve(x):\n    return x + 1",
            "tests": [
                {"test_code": "print(solve(1))", "expected_output": "2"},
                {"test_code": "print(solve(2))", "expected_output": "4"},
            ],
            "split": "train",
        },
        {
            "id": "held-out",
            "description": "Return x.",
            "solution": "def solve(x):\n    return x",
            "tests": [{"test_code": "print(solve(1))", "expected_output": "1"}],
            "split": "test",
        },
    ]
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in problems))
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--data",
        data,
        "--test_reward_function",
        "--output_dir",
        tmp_path / "run",
    )
    assert result.returncode == 1
    assert "double: reward 2.000 (2/2 tests, passed)" in result.stdout
    assert "half-right: reward 0.500 (1/2 tests, failed)" in result.stdout
    assert "1/2 canonical solutions earn the full reward 2" in result.stdout
    assert not (tmp_path / "run").exists()
