"""Multi-process training on CPU with real DeepSpeed ZeRO-3 and DDP, and resume after kill -9."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from transformers import AutoModelForCausalLM

from conftest import ROOT
from trained_run_checks import assert_trained, weights
from trainer_runs import run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

pytestmark = pytest.mark.slow

# Two samples a rank, one group of 4 a step across the ranks, on the problems the warm model half solves.
SMALL = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--max_steps",
    "2",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "2",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--eval_steps",
    "2",
    "--simple_eval_problems",
    "5",
    "--repeat_eval_problems",
    "2",
    "--eval_k",
    "1",
    "2",
    "--eval_max_tokens",
    "16",
    "--save_steps",
    "2",
]


def readable_json(path):
    try:
        json.loads(path.read_text())
        return True
    except (OSError, ValueError):
        return False


def launch(config_file, *args):
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ROOT / config_file),
        "--num_processes",
        "2",
        str(ROOT / "rl_trainer.py"),
        *map(str, args),
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def held_out_ids(n):
    from data import load_problems, split_problems

    _, test = split_problems(load_problems(str(WARM_PYTHON_DATA), "python"), 0.2, 42, 540, 40)
    return sorted(p.id for p in test[:n])


# Canaries of the evaluation's 10 generations: at --canary_share 0.4, 2 canaries x 2 samples, one on each rank; at 0.2
# one, so under ZeRO-3 (where sampling is collective) the other rank samples it too and drops what it got.
@pytest.mark.parametrize(
    "config_file, share, canaries", [("config/cpu/zero3.yaml", "0.2", 1), ("config/cpu/ddp.yaml", "0.4", 2)]
)
def test_two_process_run_trains_saves_and_evaluates_each_problem_once(
    config_file, share, canaries, warm_model, tmp_path
):
    run = tmp_path / "run"
    result = launch(config_file, "--model", warm_model, "--output_dir", run, *SMALL, "--canary_share", share)
    assert result.returncode == 0, result.stderr[-4000:]
    assert_trained(run, warm_model)
    saved = weights(run / "final_model")
    if "zero3" in config_file:
        # The weights ZeRO-3 held sharded over the two ranks at the last step, gathered from its own checkpoint
        # shards, are the ones final_model/ holds: every key, every value.
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        sharded = get_fp32_state_dict_from_zero_checkpoint(str(run / "checkpoints/checkpoint-2"))
        assert set(sharded) == set(saved)
        assert all(torch.equal(sharded[name], saved[name]) for name in saved)
    model, loading = AutoModelForCausalLM.from_pretrained(run / "final_model", output_loading_info=True)
    assert not any(loading.values()), loading  # no missing, unexpected or mismatched keys filled in at random
    results = json.loads((run / "logs/eval_results.json").read_text())
    assert [entry["step"] for entry in results] == [2]
    evaluated = [p["id"] for p in results[0]["problems"]]
    assert sorted(evaluated) == held_out_ids(5)  # every held-out problem, each exactly once across both ranks
    judged = results[0]["canary"]["problems"]
    assert len({c["id"] for c in judged}) == canaries and results[0]["metrics"]["canary/completions"] == 2 * canaries
    assert results[0]["metrics"]["canary/pass_rate"] == 0
    steps = [
        json.loads(line)["step"]
        for line in (run / "logs/metrics.jsonl").read_text().splitlines()
        if "reward" in json.loads(line)
    ]
    assert steps == [1, 2]


def test_kill_9_then_resume_continues_to_the_final_step(warm_model, tmp_path):
    run = tmp_path / "run"
    args = [
        "--model",
        warm_model,
        "--output_dir",
        run,
        "--data",
        WARM_PYTHON_DATA,
        "--language",
        "python",
        "--max_steps",
        "6",
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
        "--eval_k",
        "1",
        "--eval_max_tokens",
        "16",
        "--save_steps",
        "2",
    ]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "rl_trainer.py"), *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = run / "checkpoints/checkpoint-2/trainer_state.json"
    deadline = time.monotonic() + 300
    while not readable_json(state) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # four steps before the run could end: killed mid-way
    proc.wait()
    assert state.exists() and not (run / "final_model").exists(), "the run must be killed mid-way"
    assert adam_steps(run / "checkpoints/checkpoint-2") == {2}

    again = run_trainer(*args)
    assert again.returncode == 2 and "--resume_from_checkpoint latest" in again.stderr

    resumed = run_trainer(*args, "--resume_from_checkpoint", "latest")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert json.loads((run / "checkpoints/checkpoint-6/trainer_state.json").read_text())["global_step"] == 6
    lines = [json.loads(line) for line in (run / "logs/metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines if "reward" in line] == [1, 2, 3, 4, 5, 6]
    records = [json.loads(line) for line in (run / "logs/problem_stats.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]  # one problem a step; the killed run's extra dropped
    assert [entry["step"] for entry in json.loads((run / "logs/eval_results.json").read_text())] == [2, 4, 6]
    assert "resumed from checkpoint-2" in (run / "logs/training_log.txt").read_text()
    # The resumed optimizer went on from the saved state's two steps; a fresh one would count 2 here, not 4.
    assert adam_steps(run / "checkpoints/checkpoint-4") == {4}
    assert_trained(run, warm_model)


def adam_steps(checkpoint):
    """The step counts AdamW keeps per parameter in a checkpoint's saved optimizer state."""
    state = torch.load(checkpoint / "optimizer.pt", weights_only=False)["state"]
    return {int(entry["step"]) for entry in state.values()}


@pytest.mark.parametrize("config_file", ["config/cpu/zero3.yaml", "config/cpu/ddp.yaml"])
def test_two_process_difficulty_filter_rewrites_batches_alike_on_both_ranks(config_file, warm_model, tmp_path):
    """3 problems a step over 2 ranks, so one group spans both. A rank whose rewritten batch differed from the
    batch the ranks generated for would stop the run (training/problem_records.py), so a finished run with swaps shows
    that both ranks chose alike."""
    run = tmp_path / "run"
    result = launch(
        config_file,
        "--model",
        warm_model,
        "--output_dir",
        run,
        "--data",
        WARM_PYTHON_DATA,
        "--language",
        "python",
        "--max_train_problems",
        "5",
        "--max_steps",
        "4",
        "--num_generations",
        "2",
        "--per_device_train_batch_size",
        "3",
        "--gradient_accumulation_steps",
        "1",
        "--max_completion_length",
        "16",
        "--eval_pass_at_k",
        "false",
        "--save_steps",
        "4",
        "--difficulty_filter",
        "--difficulty_window",
        "1",
        "--difficulty_recheck",
        "0.01",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    train = [m for m in map(json.loads, (run / "logs/metrics.jsonl").read_text().splitlines()) if "reward" in m]
    assert [m["step"] for m in train] == [1, 2, 3, 4]
    assert sum(m["difficulty/swapped"] for m in train) > 0
    records = [json.loads(line) for line in (run / "logs/problem_stats.jsonl").read_text().splitlines()]
    assert [sum(r["step"] == step for r in records) for step in (1, 2, 3, 4)] == [3, 3, 3, 3]
    assert all(r["samples"] == 2 for r in records)
    assert (run / "checkpoints/checkpoint-4/difficulty_filter.json").exists()
    assert_trained(run, warm_model, evaluated=False)
