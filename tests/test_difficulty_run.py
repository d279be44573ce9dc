"""A real --difficulty_filter run of the random tiny model, where every group is zero-signal: it trains all its
steps, records every step's problems, draws the pass-rate plot, and a resume restores the filter's state."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run_trainer

# 7 problems, 4 a step: the first step settles 4 (window 1, every group fails alike), and the next steps hand
# most of their slots to the 3 problems not yet seen (re-check chance 0.01).
FILTERED = [
    "--language", "python", "--max_train_problems", "7", "--max_steps", "4", "--num_generations", "2",
    "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1", "--max_completion_length", "16",
    "--eval_pass_at_k", "false", "--save_steps", "2", "--difficulty_filter", "--difficulty_window", "1",
    "--difficulty_recheck", "0.01",
]


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def filtered_run(tiny_model, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "filtered"
    result = run_trainer("--model", tiny_model, "--output_dir", run, *FILTERED)
    assert result.returncode == 0, result.stderr[-3000:]
    return run


def test_an_all_zero_signal_run_trains_every_step(filtered_run):
    train = [m for m in lines(filtered_run / "logs/metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in train] == [1, 2, 3, 4]
    assert all(m["frac_reward_zero_std"] == 1.0 for m in train)  # the premise: no group teaches anything
    assert [m["difficulty/settled"] for m in train] == sorted(m["difficulty/settled"] for m in train)
    assert train[0]["difficulty/settled"] == 4 and train[-1]["difficulty/settled"] == 7
    assert sum(m["difficulty/swapped"] for m in train) > 0  # settled problems gave their slots away
    assert (filtered_run / "final_model/config.json").exists()


def test_problem_records_cover_every_step(filtered_run):
    records = lines(filtered_run / "logs/problem_stats.jsonl")
    assert sorted({r["step"] for r in records}) == [1, 2, 3, 4]
    for step in (1, 2, 3, 4):
        at_step = [r for r in records if r["step"] == step]
        assert len(at_step) == 4 and len({r["id"] for r in at_step}) == 4
    assert all(r["samples"] == 2 and r["reward_std"] == 0.0 and r["passed"] == 0 for r in records)
    assert len({r["id"] for r in records}) == 7  # the swaps reached the problems the normal order left out


def test_the_pass_rate_plot_is_drawn(filtered_run, tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts/plot_run.py"), str(filtered_run), "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    plot = tmp_path / "problem_pass_rates.png"
    assert str(plot) in result.stdout.split()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 25_000


def test_resume_restores_the_filter_state(filtered_run, tmp_path, tiny_model):
    run = shutil.copytree(filtered_run, tmp_path / "run")
    saved = json.loads((run / "checkpoints/checkpoint-2/difficulty_filter.json").read_text())
    assert saved["generations"] == 2
    settled_at_2 = sum(all(flags) for flags in saved["recent"].values())
    assert settled_at_2 > 4  # more than one step could settle: a fresh filter at step 3 could not show this many

    resumed = run_trainer("--model", tiny_model, "--output_dir", run, *FILTERED, "--resume_from_checkpoint",
                          run / "checkpoints/checkpoint-2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"({settled_at_2} problems settled)" in resumed.stderr
    train = [m for m in lines(run / "logs/metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in train] == [1, 2, 3, 4]
    assert train[2]["difficulty/settled"] >= settled_at_2
    records = lines(run / "logs/problem_stats.jsonl")
    assert [sum(r["step"] == step for r in records) for step in (1, 2, 3, 4)] == [4, 4, 4, 4]  # none twice
    assert json.loads((run / "checkpoints/checkpoint-4/difficulty_filter.json").read_text())["generations"] == 4
