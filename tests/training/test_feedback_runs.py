"""Training with --feedback_turns: one process, and two under ZeRO-3 whose ranks continue different numbers of
completions each round.

The warm model (tests/helpers/warm_model.py) writes "add one" or "double" at random, so on the fixture problems with their
test marked as an example, about half its first turns fail the example and get a feedback round. It learned only
first turns: what it writes after a message is whatever it writes (mostly no code), which these tests do not
read; they check that the rounds run, on every rank alike, and are logged."""

import json
import sys

import pytest

from cli import UsageError
from conftest import ROOT
from test_distributed import launch
from trainer_runs import finished_run
from training.arguments import parse_args
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

sys.path.insert(0, str(ROOT / "scripts"))
from plot_run import plot_run  # noqa: E402


def with_examples(folder, which=lambda problem: True):
    """The warm fixture problems, each one ``which`` picks with its test marked as an example."""
    rows = [json.loads(line) for line in WARM_PYTHON_DATA.read_text().splitlines() if line.strip()]
    for row in rows:
        if which(row):
            row["tests"][0]["example"] = True
    path = folder / "problems.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


SETTINGS = [
    "--language",
    "python",
    "--num_generations",
    "2",
    "--per_device_train_batch_size",
    "2",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "160",
    "--eval_steps",
    "0",
    "--simple_eval_problems",
    "3",
    "--repeat_eval_problems",
    "1",
    "--eval_max_tokens",
    "16",
    "--save_steps",
    "10",
    "--judge_timeout",
    "2",
]


def steps(run):
    lines = (run / "logs" / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if "feedback/turns" in row]


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--feedback_turns", "-1"], "give 0 .one reply. or a positive number"),
        (["--feedback_turns", "1", "--async_generation", "--use_vllm"], "cannot run with --async_generation"),
    ],
)
def test_feedback_turns_outside_its_setting_is_a_usage_error(flags, problem):
    with pytest.raises(UsageError, match=problem):
        parse_args(flags)
    assert parse_args([]).grpo.feedback_turns == 0


@pytest.mark.slow  # a training run
def test_a_run_with_feedback_rounds_trains_and_logs_them(warm_model, tmp_path):
    run = tmp_path / "run"
    finished_run(
        warm_model, run, "--data", with_examples(tmp_path), *SETTINGS, "--max_steps", "3", "--feedback_turns", "2"
    )
    logged = steps(run)
    assert len(logged) == 3
    assert any(row["feedback/continued_after_turn_1"] > 0 for row in logged), "some first turn failed its example"
    for row in logged:
        assert 1.0 <= row["feedback/turns"] <= 3.0
        assert row["feedback/examples_passed_by_turn_1"] <= row["feedback/examples_passed_by_turn_2"]
        assert row["feedback/continued_after_turn_2"] <= row["feedback/continued_after_turn_1"]
    # The evaluation reports pass@k of the first reply and of the last reply holding code, after the rounds.
    (evaluation,) = json.loads((run / "logs" / "eval_results.json").read_text())
    metrics = evaluation["metrics"]
    assert 0.0 <= metrics["pass@1"] <= 1.0 and 0.0 <= metrics["feedback/pass@1"] <= 1.0
    assert 1.0 <= metrics["feedback/turns"] <= 3.0
    records = [json.loads(line) for line in (run / "logs" / "problem_stats.jsonl").read_text().splitlines()]
    assert records and all(record["samples"] <= record["replies"] <= 3 * record["samples"] for record in records)
    written, _ = plot_run(run)
    assert run / "logs" / "plots" / "feedback.png" in written


@pytest.mark.slow
def test_two_ranks_under_zero3_with_different_rounds_finish(warm_model, tmp_path):
    # Only the "add one" problems have an example: the other rank's completions, on a "double" problem, load
    # and end after one turn, while this one's continue, in the steps that deal the two kinds to the two ranks.
    data = with_examples(tmp_path, lambda problem: problem["id"].startswith("add_one"))
    run = tmp_path / "run"
    result = launch(
        "config/cpu/zero3.yaml",
        "--model",
        warm_model,
        "--output_dir",
        run,
        "--data",
        data,
        *SETTINGS,
        "--max_steps",
        "4",
        "--feedback_turns",
        "2",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    logged = steps(run)
    assert len(logged) == 4
    # Steps where one rank continued and the other did not, and sent a fill to stay in step.
    assert any(row["feedback/fill_generations"] > 0 for row in logged), logged
