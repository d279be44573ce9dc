"""What a run prints and logs, on real runs of the tiny model: a short console line per step, INFO lines once
under two processes, a training_log.txt without an empty last line and trimmed on resume, a resume that refuses
another step count, and a checkpoint model card that names the base model."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from trained_run_checks import assert_trained
from trainer_runs import finished_run, run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

pytestmark = pytest.mark.slow

RUN_SETTINGS = [
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
    "--simple_eval_problems",
    "2",
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
def run(warm_model, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "warm"
    result = finished_run(warm_model, run, *RUN_SETTINGS)
    assert_trained(run, warm_model)
    return run, result


def log_lines(run) -> list[str]:
    return (run / "logs/training_log.txt").read_text().split("\n")


def test_the_console_shows_one_short_line_per_step(run):
    _, result = run
    steps = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert [line.split(" |")[0] for line in steps] == ["step 1/3", "step 2/3", "step 3/3"]
    assert all(len(line) < 100 and "reward=" in line and "learning_rate=" in line for line in steps)
    assert "'loss'" not in result.stdout and "{'" not in result.stdout  # no dict of every metric
    assert "Setting accelerator to CPU" not in result.stdout + result.stderr  # DeepSpeed's warning on every CPU run
    assert [line.split(" |")[0] for line in result.stdout.splitlines() if line.startswith("eval step ")] == [
        "eval step 2/3",
        "eval step 3/3",
    ]


def test_training_log_ends_with_the_runs_end_not_an_empty_line(run):
    run, _ = run
    lines = log_lines(run)
    assert lines[-1] == ""  # the file ends with a newline ...
    assert lines[-2].startswith("finished at step 3/3 | train_runtime=")  # ... after the run's end
    assert all(not line.endswith("| ") for line in lines)


def test_checkpoint_model_card_names_the_base_model(run, warm_model):
    run, _ = run
    card = (run / "checkpoints/README.md").read_text()
    assert f"base model: `{warm_model}`" in card and "[None]" not in card
    assert f"`{run / 'config.yaml'}`" in card and "learning rate 5e-06 (linear schedule)" in card


def test_resume_with_another_step_count_is_refused_with_the_fix(run):
    run, _ = run
    result = run_trainer("--config", run / "config.yaml", "--resume_from_checkpoint", "latest", "--max_steps", "5")
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.strip()][-1:]
    assert line == (
        f"rl_trainer.py: error: --max_steps 5: {run}/checkpoints/checkpoint-3 is from a run of 3 steps, "
        "and its linear learning-rate schedule ends there; resume with --max_steps 3, or train on from it "
        f"as a new run (--model {run}/checkpoints/checkpoint-3 --output_dir NEW_FOLDER)"
    )


def test_resume_drops_the_training_log_lines_after_the_checkpoint(run):
    run, _ = run
    result = run_trainer("--config", run / "config.yaml", "--resume_from_checkpoint", run / "checkpoints/checkpoint-2")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = log_lines(run)
    for head in (
        "step 1/3 |",
        "step 2/3 |",
        "eval step 2/3 |",
        "step 3/3 |",
        "eval step 3/3 |",
        "finished at step 3/3",
    ):
        assert sum(line.startswith(head) for line in lines) == 1, (head, lines)
    resumed = next(i for i, line in enumerate(lines) if line.startswith("--- resumed from checkpoint-2 at "))
    assert lines[resumed - 1].startswith("eval step 2/3 |") and lines[resumed + 1].startswith("step 3/3 |")
    steps = [
        json.loads(line)["step"]
        for line in (run / "logs/metrics.jsonl").read_text().splitlines()
        if "reward" in json.loads(line)
    ]
    assert steps == [1, 2, 3]


@pytest.mark.parametrize("config_file", ["config/cpu/ddp.yaml", "config/cpu/zero3.yaml"])
def test_info_lines_come_from_the_main_process_only(tiny_model, tmp_path, config_file):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / config_file),
            "--num_processes",
            "2",
            str(ROOT / "rl_trainer.py"),
            "--model",
            str(tiny_model),
            "--output_dir",
            str(tmp_path / "run"),
            *RUN_SETTINGS[:-6],
            "--max_steps",
            "1",
            "--eval_pass_at_k",
            "false",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count(" INFO rl_trainer: data: ") == 1
    assert result.stderr.count(" INFO rl_trainer: judging: ") == 1
    assert [line.split(" |")[0] for line in result.stdout.splitlines() if line.startswith("step ")] == ["step 1/1"]
    assert "FutureWarning" not in result.stderr  # ZeRO-3's deprecated collectives, once per call
