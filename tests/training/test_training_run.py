"""A real GRPO run of the warm tiny model through the command line, and `--eval_only` on its checkpoint."""

import json

import pytest
import yaml

from trained_run_checks import assert_trained, train_steps
from trainer_runs import finished_run, run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

pytestmark = pytest.mark.slow  # every test here runs the trainer

# One group of 4 samples a step: with the warm model passing about half its samples, a step's rewards differ.
FAST = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--max_steps",
    "3",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "4",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--eval_steps",
    "2",
    "--eval_on_start",
    "--simple_eval_problems",
    "3",
    "--repeat_eval_problems",
    "2",
    "--eval_max_tokens",
    "16",
    "--save_steps",
    "2",
    "--judge_timeout",
    "2",
]


@pytest.fixture(scope="module")
def trained_run(warm_model, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "tiny"
    return run, finished_run(warm_model, run, *FAST)


def test_the_run_learned_from_a_signal(trained_run, warm_model):
    run, _ = trained_run
    assert_trained(run, warm_model)


def test_run_writes_the_whole_layout(trained_run):
    run, result = trained_run
    for path in (
        "config.yaml",
        "logs/training_log.txt",
        "logs/metrics.jsonl",
        "logs/eval_results.json",
        "checkpoints/checkpoint-2/trainer_state.json",
        "checkpoints/checkpoint-3/optimizer.pt",
        "final_model/config.json",
        "final_model/tokenizer.json",
    ):
        assert (run / path).exists(), path
    assert f"Outputs in {run}/" in result.stdout


def test_metrics_cover_every_step_with_rewards_and_statuses(trained_run):
    run, _ = trained_run
    lines = [json.loads(line) for line in (run / "logs/metrics.jsonl").read_text().splitlines()]
    train_steps = [line["step"] for line in lines if "reward" in line]
    assert train_steps == [1, 2, 3]
    first = next(line for line in lines if "reward" in line)
    assert {
        "rewards/test_cases/mean",
        "rewards/format/mean",
        "status/passed",
        "status/syntax_error",
        "completions/mean_length",
        "learning_rate",
        "step_time",
    } <= set(first)
    statuses = sum(v for k, v in first.items() if k.startswith("status/"))
    assert statuses == pytest.approx(1.0)
    assert (run / "logs/training_log.txt").read_text().count("\nstep ") + 1 >= 3


def test_evaluations_at_start_every_eval_steps_and_end(trained_run):
    run, result = trained_run
    # No --eval_k given: the default 1 4 fits n = 2 as pass@1 and pass@2, said once in the log.
    assert result.stderr.count("default k above --repeat_eval_problems 2 dropped; reporting pass@1, pass@2") == 1
    results = json.loads((run / "logs/eval_results.json").read_text())
    assert [entry["step"] for entry in results] == [0, 2, 3]
    entry = results[-1]
    assert entry["settings"]["n"] == 2 and entry["settings"]["k"] == [1, 2]
    assert {"pass@1", "pass@2", "mean_reward", "status/passed"} <= set(entry["metrics"])
    assert len(entry["problems"]) == 3 and all(p["n"] == 2 for p in entry["problems"])
    samples = (run / "logs/eval_samples/step-2.jsonl").read_text().splitlines()
    assert len(samples) == 6 and "status" in json.loads(samples[0])
    evals_in_metrics = [json.loads(line) for line in (run / "logs/metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in evals_in_metrics if "eval_pass@1" in line] == [0, 2, 3]


def test_config_yaml_repeats_the_run_settings(trained_run, tmp_path):
    run, _ = trained_run
    settings = yaml.safe_load((run / "config.yaml").read_text())
    assert settings["output_dir"] == str(run) and settings["max_steps"] == 3 and settings["language"] == "python"
    again = run_trainer("--config", run / "config.yaml")
    assert again.returncode == 2 and "already holds a run's outputs" in again.stderr

    repeat = tmp_path / "repeat"
    repeated = run_trainer("--config", run / "config.yaml", "--output_dir", repeat)
    assert repeated.returncode == 0, repeated.stderr[-3000:]
    repeated_settings = yaml.safe_load((repeat / "config.yaml").read_text())
    assert {
        key for key in settings.keys() | repeated_settings.keys() if settings.get(key) != repeated_settings.get(key)
    } == {"output_dir"}
    # Same settings, same seed: the repeat samples, judges and trains as the first run did.
    steps = [[m[key] for key in ("step", "reward", "status/passed")] for m in train_steps(run)]
    assert [[m[key] for key in ("step", "reward", "status/passed")] for m in train_steps(repeat)] == steps


def test_eval_only_on_a_checkpoint_writes_its_own_results(trained_run, tmp_path):
    run, _ = trained_run
    out = tmp_path / "eval"
    result = run_trainer(
        "--model",
        run / "checkpoints/checkpoint-2",
        "--eval_only",
        "--output_dir",
        out,
        "--language",
        "python",
        "--simple_eval_problems",
        "3",
        "--repeat_eval_problems",
        "2",
        "--eval_k",
        "1",
        "2",
        "--eval_max_tokens",
        "16",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "logs/eval_results.json").read_text())
    assert len(results) == 1 and results[0]["step"] == 2
    assert results[0]["settings"]["model"] == str(run / "checkpoints/checkpoint-2")
    assert (out / "logs/eval_samples/step-2-eval_only.jsonl").exists()
    assert not (out / "checkpoints").exists()
