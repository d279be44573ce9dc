"""The bundled problem sets: the Python set verifies clean through the real judge; the Q set is well formed."""

import json

from conftest import run_trainer
from data import bundled_path, load_problems, split_problems, verify_problems
from rewards import Judge


def test_bundled_python_set_verifies_clean():
    problems = load_problems(bundled_path("python"), "python")
    judge = Judge(timeout=2.0)
    try:
        report = verify_problems(problems, judge, "python", show_progress=False)
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
