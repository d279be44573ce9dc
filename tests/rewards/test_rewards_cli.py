"""`python -m rewards score|passk` run as a user runs them."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = [
    {
        "id": "double",
        "language": "python",
        "description": "Return 2*n.",
        "tests": [
            {"test_code": "print(solve(2))", "expected_output": "4"},
            {"test_code": "print(solve(5))", "expected_output": "10"},
        ],
    },
    {
        "id": "neg",
        "language": "python",
        "description": "Return -n.",
        "tests": [{"test_code": "print(solve(3))", "expected_output": "-3"}],
    },
]
COMPLETIONS = [
    {"id": "double", "completion": "```python\ndef solve(n):\n    return 2 * n\n```"},
    {"id": "double", "completion": "```python\ndef solve(n):\n    return 4\n```"},
    {"id": "neg", "completion": "```python\ndef solve(n):\n    return -n\n```"},
    {"id": "neg", "completion": "I cannot answer."},
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rewards_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "rewards", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.fixture()
def files(tmp_path):
    return (
        write_jsonl(tmp_path / "p.jsonl", PROBLEMS),
        write_jsonl(tmp_path / "c.jsonl", COMPLETIONS),
        tmp_path / "s.jsonl",
    )


def test_score_then_passk(files):
    problems, completions, scores = files
    result = rewards_cli(
        "score",
        "--problems",
        problems,
        "--completions",
        completions,
        "--out",
        scores,
        "--language",
        "python",
        "--workers",
        "2",
        "--timeout",
        "2",
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [(r["id"], r["sample"], r["status"], r["passed"], r["total"]) for r in rows] == [
        ("double", 0, "passed", 2, 2),
        ("double", 1, "failed", 1, 2),
        ("neg", 0, "passed", 1, 1),
        ("neg", 1, "syntax_error", 0, 1),
    ]
    assert rows[0]["reward"] == 2.0 and rows[1]["reward"] == 0.5
    assert set(rows[0]["tests"][0]) == {"status", "seconds"}
    result = rewards_cli("passk", "--scores", scores, "--k", "1", "2")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"pass@1": 0.5, "pass@2": 1.0, "problems": 2}


def test_passk_with_k_above_samples_is_an_error(files, tmp_path):
    scores = write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "status": "passed"}, {"id": "a", "status": "failed"}])
    result = rewards_cli("passk", "--scores", scores, "--k", "1", "3")
    assert result.returncode == 2
    assert "fewer than k=3" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("{not json", ":2: invalid JSON"),
        ('{"id": "double"}', ":2: 'completion' must be a str"),
        ('{"id": "nope", "completion": "x"}', ":2: unknown problem id 'nope'"),
    ],
)
def test_bad_completions_name_file_and_line(files, bad_line, message):
    problems, completions, scores = files
    completions.write_text(json.dumps(COMPLETIONS[0]) + "\n" + bad_line + "\n")
    result = rewards_cli(
        "score", "--problems", problems, "--completions", completions, "--out", scores, "--language", "python"
    )
    assert result.returncode == 2
    assert f"{completions}{message}" in result.stderr
    assert not scores.exists()


def test_bad_input_is_the_error_reported_when_the_judge_cannot_start_either(files, tmp_path):
    """The judge starts while the input is read: when both fail, the input's line is what the user sees."""
    problems, completions, scores = files
    completions.write_text(json.dumps(COMPLETIONS[0]) + "\n" + '{"id": "nope", "completion": "x"}' + "\n")
    tools = tmp_path / "bin"  # a PATH with Python but without bubblewrap: an explicit bwrap sandbox cannot start
    tools.mkdir()
    (tools / "python3").symlink_to(sys.executable)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            problems,
            "--completions",
            completions,
            "--out",
            scores,
            "--language",
            "python",
            "--sandbox",
            "bwrap",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": str(tools)},
    )
    assert result.returncode == 2
    assert f"{completions}:2: unknown problem id 'nope'" in result.stderr, result.stderr
    assert "bubblewrap" not in result.stderr
    write_jsonl(completions, COMPLETIONS)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            problems,
            "--completions",
            completions,
            "--out",
            scores,
            "--language",
            "python",
            "--sandbox",
            "bwrap",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": str(tools)},
    )
    assert result.returncode == 2 and "bubblewrap" in result.stderr, result.stderr  # good input: the judge's error
    assert not scores.exists()


def test_bad_problems_file_is_reported_by_the_loader(files):
    problems, completions, scores = files
    problems.write_text(json.dumps(PROBLEMS[0]) + "\n" + json.dumps({"id": "x", "description": "d"}) + "\n")
    result = rewards_cli(
        "score", "--problems", problems, "--completions", completions, "--out", scores, "--language", "python"
    )
    assert result.returncode == 2
    assert f"{problems}:2" in result.stderr


def test_bad_scores_line(tmp_path):
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"id": "a", "status": "passed"}\n{"id": "a", "status": "great"}\n')
    result = rewards_cli("passk", "--scores", scores, "--k", "1")
    assert result.returncode == 2 and f"{scores}:2: unknown status 'great'" in result.stderr


def test_lone_surrogates_in_inputs_are_scored(files):
    problems, completions, scores = files
    surrogate_test = {"test_code": "print(solve('\ud800'))", "expected_output": "??"}  # the judge runs "?"
    problems.write_text(json.dumps({**PROBLEMS[0], "tests": [surrogate_test]}) + "\n")
    completions.write_text(
        json.dumps({"id": "double", "completion": "```python\ndef solve(n):\n    return 2 * n\n```"})
        + "\n"
        + json.dumps({"id": "double", "completion": "```python\nx = '\ud800'\n```"})
        + "\n"
    )
    result = rewards_cli(
        "score",
        "--problems",
        problems,
        "--completions",
        completions,
        "--out",
        scores,
        "--language",
        "python",
        "--workers",
        "2",
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["status"] for line in scores.read_text().splitlines()] == ["passed", "syntax_error"]


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--timeout", "0"),
        ("--max_tests_per_problem", "0"),
        ("--workers", "-1"),
        ("--timeout", "soon"),
        ("--judge_disk_mb", "0"),
    ],
)
def test_bad_numbers_are_one_line_exit_2(files, flag, value):
    problems, completions, scores = files
    result = rewards_cli(
        "score",
        "--problems",
        problems,
        "--completions",
        completions,
        "--out",
        scores,
        "--language",
        "python",
        flag,
        value,
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and flag in result.stderr, result.stderr
    assert not scores.exists()


def test_duplicate_problem_ids_are_refused(files, tmp_path):
    problems, completions, scores = files
    problems.write_text(json.dumps(PROBLEMS[0]) + "\n" + json.dumps(PROBLEMS[0]) + "\n")
    result = rewards_cli(
        "score", "--problems", problems, "--completions", completions, "--out", scores, "--language", "python"
    )
    assert result.returncode == 2 and f"{problems}:2: duplicate id 'double'" in result.stderr
    folder = tmp_path / "SFT_Data"
    shutil.copytree(ROOT / "tests" / "fixtures" / "data" / "SFT_Data", folder)
    shutil.copytree(folder / "train" / "sum_list", folder / "test" / "sum_list")
    result = rewards_cli("score", "--problems", folder, "--completions", completions, "--out", scores)
    assert result.returncode == 2 and "repeated: 'sum_list'" in result.stderr, result.stderr
    assert not scores.exists()


@pytest.mark.parametrize("sandbox", ["bwrap", "bwrap-cold"])
def test_a_completion_that_breaks_cleanup_is_scored_and_the_command_exits_0(files, sandbox):
    """1,500 nested folders in the scratch folder once made `score` exit 1 with no scores."""
    problems, completions, scores = files
    nested = (
        "```python\nimport os\ndef solve(n):\n    for _ in range(1500):\n        os.mkdir('d')\n"
        "        os.chdir('d')\n    return 2 * n\n```"
    )
    write_jsonl(completions, [{"id": "double", "completion": nested}, COMPLETIONS[0]])
    result = rewards_cli(
        "score",
        "--problems",
        problems,
        "--completions",
        completions,
        "--out",
        scores,
        "--language",
        "python",
        "--workers",
        "2",
        "--timeout",
        "10",
        "--sandbox",
        sandbox,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [(r["status"], r["passed"]) for r in rows] == [("passed", 2), ("passed", 2)]


def test_score_help_gives_the_timeout_and_tests_that_hold_there():
    result = rewards_cli("score", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert (
        "Seconds per test, as the trainer's evaluation (its --eval_timeout, 2.0); the trainer's training reward "
        "uses its --judge_timeout (1.0). (default: 2.0)"
    ) in text
    assert "during training" not in text and "(default: None)" not in text
    assert '{"id", "completion"}' in text
