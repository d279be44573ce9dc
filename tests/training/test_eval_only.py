"""`--eval_only` on real runs of the tiny model: a run's checkpoint or final model is evaluated with the run's
settings and recorded in the run at its step, beside training's evaluations and never over them; a model outside
any run gets a folder that says so; the plot and the learning check keep training's before/after pair."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from trained_run_checks import assert_trained
from trainer_runs import finished_run, run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import learning_check  # noqa: E402
import plot_run  # noqa: E402

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
def run(warm_model, tmp_path_factory):
    """A finished 3-step run of the warm model: evaluations at steps 0, 2 and 3, checkpoints 2 and 3, a final
    model."""
    run = tmp_path_factory.mktemp("runs") / "warm"
    finished_run(warm_model, run, *RUN_SETTINGS)
    assert_trained(run, warm_model)
    return run


def evaluate_only(model, *flags, cwd):
    """`--eval_only` as a user types it, from a folder of their own (where a misplaced output would land)."""
    result = run_trainer("--eval_only", "--model", model, *flags, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def results(run):
    return json.loads((run / "logs/eval_results.json").read_text())


def test_a_checkpoint_is_evaluated_with_its_runs_settings_into_the_run(run, tmp_path):
    training_samples = (run / "logs/eval_samples/step-2.jsonl").read_bytes()
    before = results(run)
    # No --language: without the run's settings this would look for q and stop.
    result = evaluate_only(run / "checkpoints/checkpoint-2", cwd=tmp_path)
    after = results(run)
    assert after[:-1] == before
    entry = after[-1]
    assert entry["step"] == 2 and entry["eval_only"] is True
    assert entry["samples"] == "eval_samples/step-2-eval_only.jsonl"
    settings = entry["settings"]
    assert (settings["language"], settings["split"], settings["problems"], settings["n"]) == ("python", "test", 3, 2)
    assert settings["model"] == str(run / "checkpoints/checkpoint-2")
    assert len((run / "logs" / entry["samples"]).read_text().splitlines()) == 3 * 2
    assert (run / "logs/eval_samples/step-2.jsonl").read_bytes() == training_samples  # training's file untouched
    assert not (tmp_path / "final_outputs").exists()
    assert f"appended to {run}/logs/eval_results.json at step 2" in result.stdout
    # Training's entries are marked as such.
    assert [(e["step"], e["eval_only"]) for e in before[:3]] == [(0, False), (2, False), (3, False)]

    # Again, with a flag over the run's setting: a new entry and a new samples file, nothing overwritten.
    first_samples = (run / "logs/eval_samples/step-2-eval_only.jsonl").read_bytes()
    evaluate_only(run / "checkpoints/checkpoint-2", "--repeat_eval_problems", "3", cwd=tmp_path)
    entry = results(run)[-1]
    assert entry["samples"] == "eval_samples/step-2-eval_only-2.jsonl" and entry["settings"]["n"] == 3
    assert (run / "logs/eval_samples/step-2-eval_only.jsonl").read_bytes() == first_samples


def test_the_final_model_is_recorded_at_the_runs_last_step_and_not_as_the_after(run, tmp_path):
    evaluate_only(run / "final_model", cwd=tmp_path)
    evaluations = results(run)
    assert evaluations[-1]["step"] == 3 and evaluations[-1]["eval_only"] is True
    assert evaluations[-1]["samples"] == "eval_samples/step-3-eval_only.jsonl"

    before, after = plot_run.first_and_last(evaluations)
    assert (before["step"], after["step"]) == (0, 3) and not after["eval_only"]
    before, after = learning_check.evaluations(run)
    assert (before["step"], after["step"]) == (0, 3) and not after["eval_only"]
    check = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/learning_check.py"), str(run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode in (0, 1), check.stderr  # a verdict, whichever it is: not "cannot read the run" (2)
    assert "step 0 -> step 3" in check.stdout

    plots = subprocess.run(
        [sys.executable, str(ROOT / "scripts/plot_run.py"), str(run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plots.returncode == 0, plots.stderr
    assert (run / "logs/plots/eval_pass_at_k.png").exists()


def test_a_model_outside_any_run_gets_an_eval_only_folder(tiny_model, tmp_path):
    result = evaluate_only(
        tiny_model,
        "--language",
        "python",
        "--simple_eval_problems",
        "2",
        "--repeat_eval_problems",
        "1",
        "--eval_max_tokens",
        "8",
        cwd=tmp_path,
    )
    [entry] = results(tmp_path / "final_outputs/eval_only/other/non_reasoning")
    assert entry["step"] == 0 and entry["eval_only"] is True and entry["settings"]["n"] == 1
    assert "evaluation: generating: 100%|" in result.stderr and "2/2" in result.stderr  # progress while generating


def test_the_same_seed_samples_the_same_completions(tiny_model, tmp_path):
    """--seed seeds an evaluation's sampling, so a demo's evaluation is the same draw twice."""
    samples = {}
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        out = tmp_path / name
        flags = ["--language", "python", "--simple_eval_problems", "2", "--repeat_eval_problems", "3"]
        evaluate_only(tiny_model, *flags, "--eval_max_tokens", "8", "--output_dir", out, "--seed", seed, cwd=tmp_path)
        [entry] = results(out)
        lines = (out / "logs" / entry["samples"]).read_text().splitlines()
        samples[name] = [json.loads(line)["completion"] for line in lines]
    assert samples["a"] == samples["b"]
    assert samples["a"] != samples["c"]
