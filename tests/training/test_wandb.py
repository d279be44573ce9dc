"""wandb: an offline run records metrics, evaluations and the completions table; a missing login stops early."""

import os

import pytest

from trained_run_checks import assert_trained
from trainer_runs import run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

TINY_RUN = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--max_steps",
    "2",
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
    "4",
    "--eval_k",
    "1",
    "--eval_max_tokens",
    "16",
]


@pytest.mark.slow
@pytest.mark.slow
def test_offline_run_writes_metrics_and_completions(warm_model, tmp_path):
    """Also the chat-template, reasoning-format path of a real run."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)}
    result = run_trainer(
        "--model",
        warm_model,
        "--output_dir",
        tmp_path / "run",
        *TINY_RUN,
        "--use_wandb",
        "--wandb_name",
        "tiny-offline",
        "--wandb_project",
        "q-tests",
        "--wandb_tags",
        "cpu",
        "--prompt_style",
        "chat",
        "--use_reasoning_format",
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    record = next(run_dir.glob("run-*.wandb")).read_bytes()
    for key in (
        b"train/reward",
        b"train/rewards/test_cases/mean",
        b"train/status/syntax_error",
        b"eval/pass@1",
        b"eval/canary/pass_rate",
        b"eval/canary/status/passed",
        b"tiny-offline",
        b"q-tests",
    ):
        assert key in record, key
    tables = list((run_dir / "files/media/table").glob("completions_*.table.json"))
    table = tables[0].read_text()
    assert '"status"' in table and '"tests_passed"' in table
    assert '"role":"system"' in table.replace(" ", "") and "<reasoning>" in table  # chat messages, reasoning format
    assert_trained(tmp_path / "run", warm_model)


@pytest.mark.slow
def test_not_logged_in_stops_before_training(tiny_model, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env["HOME"] = str(tmp_path)  # no ~/.netrc from `wandb login`
    result = run_trainer("--model", tiny_model, "--output_dir", tmp_path / "run", *TINY_RUN, "--use_wandb", env=env)
    assert result.returncode == 2
    assert "wandb is not logged in" in result.stderr and "WANDB_MODE=offline" in result.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()
