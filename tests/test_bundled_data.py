"""The bundled problem sets: the Python set verifies clean through the real judge; the Q set is well formed."""

import json

from conftest import run_trainer
from data import bundled_path, load_problems, split_problems, verify_problems
from judging import Judge


def test_bundled_python_set_verifies_clean():
    problems = load_problems(bundled_path("python"), "python")
    judge = Judge(timeout=2.0)
    try:
        report = verify_problems(problems, judge, show_progress=False)
    finally:
        judge.close()
    assert report.clean, report.broken[:3]
    assert report.checked == len(problems) >= 80 and not report.unverifiable


def test_bundled_sets_have_splits_solutions_and_three_tests():
    for language, at_least in (("python", 80), ("q", 30)):
        problems = load_problems(bundled_path(language), language)
        train, test = split_problems(problems)
        assert len(problems) >= at_least and train and test
        assert all(p["solution"] and len(p["tests"]) >= 3 and p["language"] == language for p in problems)
    q = load_problems(bundled_path("q"), "q")
    assert all("solve:" in p["solution"] for p in q)


def test_verify_data_stops_training_on_a_broken_problem(tiny_model, tmp_path):
    good = {"id": "double", "description": "Return 2*x.", "solution": "def solve(x):\n    return 2 * x",
            "tests": [{"test_code": "print(solve(2))", "expected_output": "4"}], "split": "train"}
    broken = {"id": "triple", "description": "Return 3*x.", "solution": "def solve(x):\n    return 3 * x",
              "tests": [{"test_code": "print(solve(2))", "expected_output": "5"}], "split": "test"}
    data = tmp_path / "problems.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    result = run_trainer("--model", tiny_model, "--language", "python", "--data", data, "--verify_data",
                         "--output_dir", tmp_path / "run")
    assert result.returncode == 2
    assert "--verify_data: verified 2 problems: 1 broken" in result.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_test_reward_function_prints_each_canonical_reward_and_fails_on_a_short_one(tiny_model, tmp_path):
    problems = [
        {"id": "double", "description": "Return 2*x.", "solution": "def solve(x):\n    return 2 * x",
         "tests": [{"test_code": "print(solve(2))", "expected_output": "4"},
                   {"test_code": "print(solve(5))", "expected_output": "10"}], "split": "train"},
        {"id": "half-right", "description": "Return x+1.", "solution": "def solve(x):\n    return x + 1",
         "tests": [{"test_code": "print(solve(1))", "expected_output": "2"},
                   {"test_code": "print(solve(2))", "expected_output": "4"}], "split": "train"},
        {"id": "held-out", "description": "Return x.", "solution": "def solve(x):\n    return x",
         "tests": [{"test_code": "print(solve(1))", "expected_output": "1"}], "split": "test"},
    ]
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in problems))
    result = run_trainer("--model", tiny_model, "--language", "python", "--data", data, "--test_reward_function",
                         "--output_dir", tmp_path / "run")
    assert result.returncode == 1
    assert "double: reward 2.000 (2/2 tests, passed)" in result.stdout
    assert "half-right: reward 0.500 (1/2 tests, failed)" in result.stdout
    assert "1/2 canonical solutions earn the full reward 2" in result.stdout
    assert not (tmp_path / "run").exists()
