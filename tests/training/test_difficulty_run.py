"""A real --difficulty_filter run of the warm tiny model, where about half the groups are zero-signal: it settles
exactly the problems whose last group was zero-signal, hands their slots on, records every step's problems, draws
the pass-rate plot, and a resume restores the filter's state."""

import json
import shutil
import statistics
import subprocess
import sys

import pytest

from conftest import ROOT
from training.arguments import DEFAULT_REWARD_WEIGHTS
from trained_run_checks import assert_trained
from trainer_runs import finished_run, run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

pytestmark = pytest.mark.slow  # every test here runs the trainer

# 7 problems, 4 a step, groups of 2: with window 1 a problem settles when its last group was zero-signal (both
# samples passed or both failed), and settled problems hand almost all their slots on (re-check chance 0.01).
FILTERED = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--max_train_problems",
    "7",
    "--max_steps",
    "4",
    "--num_generations",
    "2",
    "--per_device_train_batch_size",
    "8",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--eval_pass_at_k",
    "false",
    "--save_steps",
    "2",
    "--difficulty_filter",
    "--difficulty_window",
    "1",
    "--difficulty_recheck",
    "0.01",
]


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def settled_after_each_step(records, steps):
    """Window 1: after a step, the problems whose latest group so far had equal rewards."""
    latest, settled = {}, []
    for step in steps:
        latest.update({r["id"]: r["reward_std"] == 0 for r in records if r["step"] == step})
        settled.append(sum(latest.values()))
    return settled


@pytest.fixture(scope="module")
def filtered_run(warm_model, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "filtered"
    finished_run(warm_model, run, *FILTERED)
    return run


def test_the_filter_settles_the_zero_signal_problems_and_hands_their_slots_on(filtered_run, warm_model):
    train = [m for m in lines(filtered_run / "logs/metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in train] == [1, 2, 3, 4]
    records = lines(filtered_run / "logs/problem_stats.jsonl")
    assert [m["difficulty/settled"] for m in train] == settled_after_each_step(records, [1, 2, 3, 4])
    assert sum(m["difficulty/swapped"] for m in train) > 0  # settled problems gave their slots away
    assert_trained(filtered_run, warm_model, evaluated=False)


def test_problem_records_cover_every_step(filtered_run):
    records = lines(filtered_run / "logs/problem_stats.jsonl")
    assert sorted({r["step"] for r in records}) == [1, 2, 3, 4]
    for step in (1, 2, 3, 4):
        at_step = [r for r in records if r["step"] == step]
        assert len(at_step) == 4 and len({r["id"] for r in at_step}) == 4
    assert all(r["samples"] == 2 and r["passed"] in (0, 1, 2) for r in records)
    # one of two passed: a spread of at least the tests' reward; both alike: at most the format reward's spread
    spread = statistics.stdev([0.0, DEFAULT_REWARD_WEIGHTS["format"]])
    assert all(r["reward_std"] > spread for r in records if r["passed"] == 1)
    assert all(r["reward_std"] <= spread + 1e-6 for r in records if r["passed"] != 1)
    assert {r["passed"] for r in records} == {0, 1, 2}
    assert len({r["id"] for r in records}) == 7  # the swaps reached the problems the normal order left out


def test_the_pass_rate_plot_is_drawn(filtered_run, tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts/plot_run.py"), str(filtered_run), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    plot = tmp_path / "problem_pass_rates.png"
    assert str(plot) in result.stdout.split()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 25_000


def test_resume_restores_the_filter_state(filtered_run, tmp_path, warm_model):
    run = shutil.copytree(filtered_run, tmp_path / "run")
    saved = json.loads((run / "checkpoints/checkpoint-2/difficulty_filter.json").read_text())
    assert saved["generations"] == 2
    settled_at_2 = sum(all(flags) for flags in saved["recent"].values())
    assert settled_at_2 == settled_after_each_step(lines(run / "logs/problem_stats.jsonl"), [1, 2])[-1] > 0

    resumed = run_trainer(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *FILTERED,
        "--resume_from_checkpoint",
        run / "checkpoints/checkpoint-2",
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"({settled_at_2} problems settled)" in resumed.stderr
    train = [m for m in lines(run / "logs/metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in train] == [1, 2, 3, 4]
    records = lines(run / "logs/problem_stats.jsonl")
    # Steps 3 and 4 count the problems settled at steps 1-2 too; a fresh filter would know only 3 and 4.
    assert [m["difficulty/settled"] for m in train] == settled_after_each_step(records, [1, 2, 3, 4])
    assert [sum(r["step"] == step for r in records) for step in (1, 2, 3, 4)] == [4, 4, 4, 4]  # none twice
    assert json.loads((run / "checkpoints/checkpoint-4/difficulty_filter.json").read_text())["generations"] == 4
