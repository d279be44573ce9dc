"""`assert_trained`: what every training test checks about its run folder, so that none passes on zero signal.

A GRPO run whose groups all earn the same reward computes zero advantages, a zero loss and a zero gradient, and
still writes every file a run writes. These checks read the run folder and fail unless the run learned from
something: rewards that differ within a group, a gradient, weights that moved, and an evaluation that passed
some problem, with pass@k recomputed here from the per-problem (n, c) the run recorded.
"""

import json
import math
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train_steps(run: Path) -> list[dict]:
    return [m for m in lines(run / "logs" / "metrics.jsonl") if "reward" in m]


def estimator(n: int, c: int, k: int) -> float:
    """pass@k of one problem, unbiased (Chen et al. 2021), written out here apart from rewards/passk.py."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def weights(folder: Path) -> dict:
    return {name: tensor for path in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(path).items()}


def assert_moved(start_model: Path, trained: Path) -> None:
    """Every weight of `start_model` is in `trained` with its shape, and some differ; a LoRA adapter instead has
    a non-zero B matrix (PEFT starts every B at zero, so an untrained adapter is the base model exactly)."""
    after = weights(trained)
    assert after, f"no weights saved in {trained}"
    if (trained / "adapter_config.json").exists():
        lora_b = [tensor for name, tensor in after.items() if "lora_B" in name]
        assert lora_b and any(tensor.abs().max() > 0 for tensor in lora_b), f"LoRA adapter in {trained} never trained"
        return
    before = weights(start_model)
    missing = sorted(set(before) - set(after))
    assert not missing, f"{trained} lacks {missing[:5]}"
    assert all(after[name].shape == before[name].shape for name in before)
    assert any(not after[name].equal(before[name]) for name in before), f"weights in {trained} equal the start's"


def assert_reward_is_the_weighted_sum(run: Path, steps: list[dict]) -> None:
    """The trainer's reward override: a step's reward is the weighted sum of its reward functions' means."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    for step in steps:
        total = sum(
            w * step[f"rewards/{name}/mean"] for name, w in zip(config["reward_funcs"], config["reward_weights"])
        )
        assert step["reward"] == pytest.approx(total, abs=1e-5), step


def assert_records_match_the_step(run: Path, steps: list[dict]) -> None:
    """The per-problem records the trainer's reward override writes agree with TRL's step: their weighted total
    rewards average to the step's reward, and their passed counts to the judge's share of passed samples."""
    records = lines(run / "logs" / "problem_stats.jsonl")
    for step in steps:
        at_step = [r for r in records if r["step"] == step["step"]]
        samples = sum(r["samples"] for r in at_step)
        reward = sum(r["mean_reward"] * r["samples"] for r in at_step) / samples
        assert reward == pytest.approx(step["reward"], abs=1e-4), (step["step"], at_step)
        passed = sum(r["passed"] for r in at_step) / samples
        assert passed == pytest.approx(step["status/passed"], abs=1e-5), (step["step"], at_step)


def assert_evaluations_add_up(run: Path) -> list[dict]:
    """Every evaluation's pass@k equals the estimator over its recorded (n, c); some pass@1 is above 0."""
    results = json.loads((run / "logs" / "eval_results.json").read_text())
    for entry in results:
        for k in entry["settings"]["k"]:
            expected = sum(estimator(p["n"], p["c"], k) for p in entry["problems"]) / len(entry["problems"])
            assert entry["metrics"][f"pass@{k}"] == pytest.approx(expected, abs=1e-9), (entry["step"], k)
        for problem in entry["problems"]:
            assert problem["c"] == problem["statuses"].count("passed") and problem["n"] == len(problem["statuses"])
    assert any(entry["metrics"]["pass@1"] > 0 for entry in results), "no evaluation passed any problem"
    return results


def assert_trained(run: Path, start_model: Path, trained: Path | None = None, evaluated: bool = True) -> None:
    """The run in `run` learned from a signal: some step's group rewards differ, some step has a gradient, the
    saved weights (`trained`, default final_model/) moved away from `start_model`'s, the reward is the weighted
    sum of its parts, and (when `evaluated`) some evaluation has pass@1 > 0 that the estimator reproduces."""
    run = Path(run)
    steps = train_steps(run)
    assert steps, f"no training steps logged in {run}"
    assert any(step["reward_std"] > 0 for step in steps), "every group's rewards were equal: no signal"
    assert any(step["grad_norm"] > 0 for step in steps), "no step had a gradient"
    assert_reward_is_the_weighted_sum(run, steps)
    assert_records_match_the_step(run, steps)
    assert_moved(Path(start_model), Path(trained) if trained else run / "final_model")
    if evaluated:
        assert_evaluations_add_up(run)
