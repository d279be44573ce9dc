"""--feedback_turns through the real vLLM: colocated in one process, and the real `vllm serve` with two ranks under
ZeRO-3 whose completions need different numbers of rounds (tests/training/test_vllm.py says how vLLM runs here).

vLLM samples every reply after the first in the context of the prompt, the earlier replies and the messages, and
the trainer scores those tokens in that same context: the sampler's and the trainer's log-probabilities of the
replies agree as closely as in one turn (`sampling/*`), where the wrong prompt would put them nats apart."""

import json

import pytest

from test_feedback_runs import SETTINGS, with_examples
from test_vllm import VLLM_MISSING, harness, vllm_server  # noqa: F401 - vllm_server is a fixture

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(VLLM_MISSING, reason="vLLM is not installed here (tests/training/test_vllm.py says how)"),
]
VLLM = ["--use_vllm", "--max_model_len", "512", "--eval_pass_at_k", "false"]


def logged_steps(run) -> list[dict]:
    lines = (run / "logs" / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if "feedback/turns" in row]


def assert_sampled_in_context(steps: list[dict]) -> None:
    """Some step continued completions, and in every step the sampler's log-probability of each reply token is
    the trainer's within a fraction of a nat."""
    assert any(step["feedback/continued_after_turn_1"] > 0 for step in steps), steps
    for step in steps:
        assert step["sampling/sampling_logp_difference/max"] < 0.5, step
        assert 0.5 < step["sampling/importance_sampling_ratio/mean"] < 2.0, step


def test_colocated_vllm_samples_each_reply_in_its_context(warm_model, tmp_path):
    run = tmp_path / "run"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        "--data",
        with_examples(tmp_path),
        *SETTINGS,
        *VLLM,
        "--vllm_mode",
        "colocate",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--num_generations",
        "4",
        "--feedback_turns",
        "2",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    steps = logged_steps(run)
    assert len(steps) == 3
    assert_sampled_in_context(steps)


def test_the_server_with_two_ranks_under_zero3_and_different_rounds(vllm_server, warm_model, tmp_path):  # noqa: F811
    _, url = vllm_server
    data = with_examples(tmp_path, lambda problem: problem["id"].startswith("add_one"))
    run = tmp_path / "run"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        "--data",
        data,
        *SETTINGS,
        *VLLM,
        "--vllm_mode",
        "server",
        "--vllm_server_base_url",
        url,
        "--max_steps",
        "4",
        "--feedback_turns",
        "2",
        processes=2,
        RUN_WITH_VLLM_NO_WEIGHT_TRANSFER="1",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    steps = logged_steps(run)
    assert len(steps) == 4
    assert any(step["feedback/fill_generations"] > 0 for step in steps), steps
    assert_sampled_in_context(steps)
