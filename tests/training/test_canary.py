"""Canaries (training/canary.py): impossible copies of held-out problems, judged at every evaluation.

The variants are built and checked with the real judge; the runs are real GRPO runs of the warm model. The planted
hack is a judge fault that lets wrong answers pass (tests/helpers/judge_fault.py), launched as a user launches the trainer.
"""

import json
import logging
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import ROOT
from trained_run_checks import assert_trained, lines
from trainer_runs import finished_run, run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

from data import load_problems
import judging.execution
from judging import Judge, Problem, Test
from training import canary as canary_module
from training.canary import CANARY_EXIT_CODE, build_canaries, canary_budget, make_variant
from training.run_folder import RunFolder

sys.path.insert(0, str(ROOT / "scripts"))
import plot_run  # noqa: E402

HELD_OUT = [p for p in load_problems(str(WARM_PYTHON_DATA), "python") if p.split == "test"]
TINY_RUN = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "4",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--repeat_eval_problems",
    "2",
    "--eval_max_tokens",
    "16",
    "--judge_timeout",
    "2",
]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0) as judge:
        yield judge


def test_variants_are_impossible_and_their_solutions_fail_only_the_impossible_test(judge):
    canaries = build_canaries(HELD_OUT, judge, 4, seed=0, timeout=2.0)
    assert [c.kind for c in canaries] == ["changed", "conflicting", "changed", "conflicting"]
    assert len({c.source for c in canaries}) == 4
    by_id = {p.id: p for p in HELD_OUT}
    for canary in canaries:
        source = by_id[canary.source]
        tests = canary.problem.tests
        assert canary.problem.solution is None and canary.problem.id == f"{canary.source}~canary-{canary.kind}"
        assert tests[canary.impossible_test].expected_output == canary.expected
        assert canary.expected.startswith(canary.original.strip() + " ") and canary.expected != canary.original
        if canary.kind == "conflicting":  # the same test, twice, with two expected outputs
            assert len(tests) == len(source.tests) + 1
            twin = tests[canary.impossible_test - 1]
            assert twin.test_code == tests[canary.impossible_test].test_code
            assert twin.expected_output == canary.original
        else:  # the same tests but the one
            assert [t for i, t in enumerate(tests) if i != canary.impossible_test] == [
                t for i, t in enumerate(source.tests) if i != canary.impossible_test
            ]
        # The original passes its solution; the canary fails it, on the impossible test alone.
        assert judge.run(source.solution, source.tests, "python").status == "passed"
        judged = judge.run(source.solution, tests, "python")
        assert [t.status for t in judged.tests] == [
            "failed" if i == canary.impossible_test else "passed" for i in range(len(tests))
        ]


def test_a_variant_whose_solution_passes_is_never_used(judge, monkeypatch, caplog):
    # A variant maker that keeps the expected output: nothing is impossible, and each solution shows it.
    monkeypatch.setattr(canary_module, "impossible_output", lambda expected, rng: str(expected))
    with caplog.at_level(logging.WARNING, logger="training.canary"):
        assert build_canaries(HELD_OUT, judge, 4, seed=0, timeout=2.0) == []
    refused = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert len(refused) == len(HELD_OUT) and all("its solution passes the impossible test" in m for m in refused)


def test_a_judge_that_passes_wrong_answers_gets_no_canary(judge, monkeypatch):
    """The same check catches a judge fault present from the start: its canaries would all be passable."""
    grade = judging.execution.grade

    def wrong_answers_pass(*args, **kwargs):
        result = grade(*args, **kwargs)
        result.status = "passed" if result.status == "failed" else result.status
        return result

    monkeypatch.setattr(judging.execution, "grade", wrong_answers_pass)
    assert build_canaries(HELD_OUT, judge, 4, seed=0, timeout=2.0) == []


def test_problems_without_a_solution_give_no_canary(judge):
    unsolved = [replace(p, solution=None) for p in HELD_OUT]
    assert build_canaries(unsolved, judge, 4, seed=0, timeout=2.0) == []


def test_the_impossible_output_is_a_fresh_64_bit_token_even_on_yes_no_outputs():
    import random

    problem = Problem("yes", "python", "d", (Test("print(solve(5))", "True"),), "solve = lambda x: x > 3")
    first, second = (make_variant(problem, "changed", random.Random(seed)) for seed in (1, 2))
    for variant in (first, second):
        head, token = variant.expected.split()
        assert head == "True" and len(token) == 16 and int(token, 16) >= 0
    assert first.expected != second.expected


@pytest.mark.parametrize(
    "generations, samples, canaries, share, expected",
    [
        (60, 4, 8, 0.25, (3, 4)),  # the default 15 x 4: a quarter is 15 generations, 3 canaries x 4 samples
        (252, 4, 8, 0.25, (8, 4)),  # the CPU demo's 63 x 4: all 8 canaries fit
        (6, 2, 8, 0.25, (1, 1)),  # 3 x 2: one generation, of one canary
        (3, 1, 8, 0.25, (0, 0)),  # fewer than 4 generations: none
        (8, 2, 6, 1.0, (4, 2)),
        (60, 4, 0, 0.25, (0, 0)),
    ],
)
def test_the_budget_is_at_most_the_share_of_the_evaluation(generations, samples, canaries, share, expected):
    problems, each = canary_budget(generations, samples, canaries, share)
    assert (problems, each) == expected
    assert problems * each <= share * generations


@pytest.fixture(scope="module")
def honest_run(warm_model, tmp_path_factory):
    """Three steps of the warm model with an evaluation at start and after every step, every evaluation with 4
    canaries x 2 samples (--canary_share 1: as many canary samples as evaluation samples). Under --partial_credit
    above_trivial, whose shares a conflicting variant's extra test does not have."""
    run = tmp_path_factory.mktemp("runs") / "honest"
    finished_run(
        warm_model,
        run,
        *TINY_RUN,
        "--max_steps",
        "3",
        "--eval_steps",
        "1",
        "--eval_on_start",
        "--simple_eval_problems",
        "4",
        "--canary_share",
        "1",
        "--save_steps",
        "3",
        "--partial_credit",
        "above_trivial",
    )
    return run


@pytest.mark.slow
def test_an_honest_run_shows_the_canary_at_zero_at_every_evaluation(honest_run, warm_model):
    assert_trained(honest_run, warm_model)
    results = json.loads((honest_run / "logs/eval_results.json").read_text())
    assert [e["step"] for e in results] == [0, 1, 2, 3]
    for entry in results:
        metrics = entry["metrics"]
        assert metrics["canary/pass_rate"] == 0 and metrics["canary/passed"] == 0
        assert metrics["canary/completions"] == 8 and metrics["canary/problems"] == 4
        assert (
            sum(
                metrics[f"canary/status/{s}"]
                for s in (
                    "passed",
                    "failed",
                    "no_code",
                    "syntax_error",
                    "runtime_error",
                    "timeout",
                    "memory",
                    "output_limit",
                    "sandbox_error",
                )
            )
            == 8
        )
        assert entry["canary"]["samples"] is None and len(entry["canary"]["problems"]) == 4
        assert entry["settings"]["canary"] == {
            "canaries": 6,
            "per_evaluation": 4,
            "n": 2,
            "share": 1.0,
            "action": "stop",
        }
    # The canaries take turns: all 6 were judged.
    assert {p["source"] for e in results for p in e["canary"]["problems"]} == {p.id for p in HELD_OUT}
    # Not 0 because the model fails everything: it solved the original problems behind some canaries.
    assert sum(e["metrics"]["canary/solved_original"] for e in results) > 0
    logged = [m for m in lines(honest_run / "logs/metrics.jsonl") if "eval_canary/pass_rate" in m]
    assert [m["step"] for m in logged] == [0, 1, 2, 3] and all(m["eval_canary/pass_rate"] == 0 for m in logged)
    assert "eval_canary/pass_rate=0" in (honest_run / "logs/training_log.txt").read_text()
    assert not (honest_run / "logs/canary").exists()


@pytest.mark.slow
def test_the_false_alarm_benchmark_reads_the_run(honest_run, tmp_path):
    """benchmarks/canary_false_alarms.py on a real run: its figures, and exit 0 since no canary passed."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/canary_false_alarms.py"), str(honest_run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^\d+ evaluation completions of ", result.stdout, re.M)
    assert re.search(
        r"^  \S+ +[\d.]+ per completion over \d+ completions; [\d.]+ per evaluation of 8 canary "
        r"completions all of this family$",
        result.stdout,
        re.M,
    ), result.stdout
    assert "the run's canaries: 0 of 32 passed" in result.stdout


@pytest.mark.slow
def test_the_plot_shows_the_canary(honest_run, tmp_path):
    written, _ = plot_run.plot_run(honest_run, tmp_path)
    assert tmp_path / "canary.png" in written


def fault_run(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    """The trainer with the planted judge fault (tests/helpers/judge_fault.py), launched as rl_trainer.py is."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "judge_fault.py"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_planted_hack_stops_the_run_at_the_first_evaluation(warm_model, tmp_path):
    run = tmp_path / "hacked"
    # Evaluations after every step, checkpoints only every 5: the checkpoint at step 1 is the canary's own.
    result = fault_run(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *TINY_RUN,
        "--max_steps",
        "3",
        "--eval_steps",
        "1",
        "--simple_eval_problems",
        "3",
        "--save_steps",
        "5",
    )
    assert result.returncode == CANARY_EXIT_CODE, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    samples = run / "logs/canary/step-1.jsonl"
    checkpoint = run / "checkpoints/checkpoint-1"
    assert last.startswith("rl_trainer.py: canary: 1 of 1 completions passed a problem no program can pass (")
    assert (
        f"at step 1, so the judge or its tests can be gamed; samples in {samples}; last checkpoint {checkpoint} "
        "(the weights that passed it)" in last
    )
    # A whole checkpoint of the weights that passed, and nothing trained after it.
    assert RunFolder(run).latest_checkpoint() == str(checkpoint)
    assert (checkpoint / "model.safetensors").exists() and (checkpoint / "optimizer.pt").exists()
    assert not (run / "final_model").exists()
    assert max(m["step"] for m in lines(run / "logs/metrics.jsonl")) == 1
    results = json.loads((run / "logs/eval_results.json").read_text())
    assert [e["step"] for e in results] == [1] and results[0]["metrics"]["canary/pass_rate"] == 1.0
    assert results[0]["canary"]["samples"] == "canary/step-1.jsonl"
    kept = lines(samples)
    assert len(kept) == 1 and kept[0]["status"] == "passed" and kept[0]["completion"].startswith("```python")
    assert (
        kept[0]["problem"]["tests"][kept[0]["impossible_test"]]["expected_output"]
        == kept[0]["impossible_expected_output"]
    )
    assert kept[0]["variant"] in ("changed", "conflicting") and kept[0]["id"] == kept[0]["problem"]["id"]


@pytest.mark.slow
def test_eval_only_reports_the_canary_and_stops_on_a_pass(honest_run, tmp_path):
    checkpoint = honest_run / "checkpoints/checkpoint-3"
    honest = run_trainer("--eval_only", "--model", checkpoint, cwd=tmp_path)
    assert honest.returncode == 0, honest.stderr[-3000:]
    entry = json.loads((honest_run / "logs/eval_results.json").read_text())[-1]
    assert entry["eval_only"] and entry["metrics"]["canary/pass_rate"] == 0 and entry["metrics"]["canary/completions"]

    hacked = fault_run("--eval_only", "--model", checkpoint, cwd=tmp_path)
    assert hacked.returncode == CANARY_EXIT_CODE, hacked.stderr[-3000:]
    samples = honest_run / "logs/canary/step-3-eval_only.jsonl"
    assert hacked.stderr.strip().splitlines()[-1].endswith(f"samples in {samples}; model evaluated {checkpoint}")
    assert all(line["status"] == "passed" for line in lines(samples))


@pytest.mark.slow
def test_a_pass_at_step_0_stops_before_training(warm_model, tmp_path):
    run = tmp_path / "hacked-at-start"
    result = fault_run(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *TINY_RUN,
        "--max_steps",
        "2",
        "--eval_on_start",
        "--simple_eval_problems",
        "3",
        "--save_steps",
        "1",
    )
    assert result.returncode == CANARY_EXIT_CODE, result.stderr[-3000:]
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            f"samples in {run / 'logs/canary/step-0.jsonl'}; model evaluated {warm_model} (the run's start: nothing "
            "trained yet)"
        )
    )
    assert RunFolder(run).latest_checkpoint() is None and not (run / "final_model").exists()
    assert not [m for m in lines(run / "logs/metrics.jsonl") if "reward" in m]


@pytest.mark.slow
def test_canary_action_warn_logs_each_pass_and_trains_on(warm_model, tmp_path):
    run = tmp_path / "warned"
    result = fault_run(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *TINY_RUN,
        "--max_steps",
        "1",
        "--eval_on_start",
        "--simple_eval_problems",
        "3",
        "--canary_action",
        "warn",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("completions passed a problem no program can pass") == 2
    assert "(--canary_action warn)" in result.stderr and (run / "final_model/config.json").exists()
    assert sorted(p.name for p in (run / "logs/canary").iterdir()) == ["step-0.jsonl", "step-1.jsonl"]
