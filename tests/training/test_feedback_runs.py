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
from trainer_runs import finished_run, run_trainer
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
    assert_recorded_per_problem(evaluation, run, turns=2)
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


def assert_recorded_per_problem(evaluation: dict, run, turns: int) -> None:
    """Each problem's record holds its samples' passes after the rounds beside the first reply's, and the metrics
    are their means; each sample in the samples file holds the messages it got and the replies after them (none
    and the first reply's verdict, for a sample that got no round)."""
    problems = evaluation["problems"]
    rounds = [p["feedback"] for p in problems]
    assert all(r["n"] == p["n"] == len(r["statuses"]) == len(r["turns"]) for r, p in zip(rounds, problems))
    assert all(r["c"] == r["statuses"].count("passed") for r in rounds)
    metrics = evaluation["metrics"]
    assert metrics["feedback/pass@1"] == pytest.approx(sum(r["c"] / r["n"] for r in rounds) / len(rounds))
    all_turns = [t for r in rounds for t in r["turns"]]
    assert metrics["feedback/turns"] == pytest.approx(sum(all_turns) / len(all_turns))
    samples = [json.loads(line) for line in (run / "logs" / evaluation["samples"]).read_text().splitlines()]
    assert len(samples) == len(all_turns)
    for sample in samples:
        later = sample["feedback"]
        assert len(later["messages"]) == len(later["replies"]) <= turns
        if not later["messages"]:  # no round: the first reply is what was judged
            assert later["status"] == sample["status"]
    told = [s for s in samples if s["feedback"]["messages"]]
    openings = ("I ran your code on the problem's examples.", "Your code does not parse:")
    assert all(m.startswith(openings) for s in told for m in s["feedback"]["messages"]), told
    for problem in problems:
        mine = sorted((s for s in samples if s["id"] == problem["id"]), key=lambda s: s["sample"])
        assert [s["feedback"]["status"] for s in mine] == problem["feedback"]["statuses"]
        assert [1 + len(s["feedback"]["replies"]) for s in mine] == problem["feedback"]["turns"]


@pytest.mark.slow  # an evaluation of the warm model
def test_eval_only_runs_the_feedback_rounds_and_records_them_per_problem(warm_model, tmp_path):
    out = tmp_path / "evaluation"
    flags = ["--language", "python", "--simple_eval_problems", "3", "--repeat_eval_problems", "4"]
    flags += ["--eval_max_tokens", "16", "--judge_timeout", "2", "--canary_problems", "0"]
    result = run_trainer(
        "--eval_only", "--model", warm_model, "--data", with_examples(tmp_path), "--output_dir", out, *flags,
        "--feedback_turns", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (evaluation,) = json.loads((out / "logs" / "eval_results.json").read_text())
    assert evaluation["eval_only"] is True
    assert_recorded_per_problem(evaluation, out, turns=1)
    samples = (out / "logs" / evaluation["samples"]).read_text().splitlines()
    assert any(json.loads(line)["feedback"]["messages"] for line in samples), "some first reply failed its example"
