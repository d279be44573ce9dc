"""The trainer on Q problems: stops before any weights load without q, and drives the q executor when it has one.

No licensed q exists on the machines this suite runs on. The second test uses tests/helpers/fake_q/q, a STAND-IN that
is not q (it only echoes `-1 "text";` lines), on the stand-in problems of tests/fixtures/warm/: it checks the
wiring from rl_trainer.py to the q executor (preflight, QHOME passed through, completions' ```q blocks run as
scripts, a q error judged a failure), not q semantics.
"""

import os
import shutil

import pytest

from conftest import ROOT
from trained_run_checks import assert_trained, train_steps
from trainer_runs import run_trainer
from warm_model import Q_STAND_IN_PROBLEMS as WARM_Q_STAND_IN_DATA

FAKE_Q = ROOT / "tests" / "helpers" / "fake_q" / "q"
RUN = [
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
    "1",
    "--repeat_eval_problems",
    "4",
    "--eval_k",
    "1",
    "--eval_max_tokens",
    "16",
]


@pytest.mark.slow
def test_missing_q_stops_before_any_weights_load(tiny_model, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("Q_INTERPRETER_PATH", "Q_EXECUTABLE_PATH", "QHOME")}
    env["PATH"] = "/usr/bin:/bin"
    result = run_trainer("--model", tiny_model, "--output_dir", tmp_path / "run", *RUN, env=env)
    assert result.returncode == 2
    assert "q" in result.stderr.splitlines()[-1] and "--q_binary" in result.stderr.splitlines()[-1]
    assert "Loading weights" not in result.stderr and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_q_through_the_stand_in_executor(warm_model, tmp_path):
    qhome = tmp_path / "qhome"
    qhome.mkdir()
    q_binary = tmp_path / "q"
    shutil.copy(FAKE_Q, q_binary)
    env = {**os.environ, "QHOME": str(qhome)}
    # the stand-in problems' tests print by themselves, not q's show solve[...]: only the flag loads them
    common = [
        "--model",
        warm_model,
        "--data",
        WARM_Q_STAND_IN_DATA,
        "--q_binary",
        q_binary,
        "--allow_in_sandbox_comparisons",
    ]

    checked = run_trainer(*common, "--test_reward_function", env=env)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "stand-in-six: reward 2.000 (1/1 tests, passed)" in checked.stdout

    run = tmp_path / "run"
    # Eight samples a step: the warm model writes `'type` about 4 times in 10 on these prompts, so four could all pass.
    trained = run_trainer(
        *common, "--output_dir", run, *RUN, "--num_generations", "8", "--per_device_train_batch_size", "8", env=env
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    steps = train_steps(run)
    assert [step["step"] for step in steps] == [1, 2]
    for step in steps:
        assert step["status/sandbox_error"] == 0 and step["status/syntax_error"] == 0  # q has no compile step
        assert sum(v for k, v in step.items() if k.startswith("status/")) == pytest.approx(1.0)
    assert any(step["status/runtime_error"] > 0 for step in steps)  # the stand-in's reported 'type failed
    assert_trained(run, warm_model)
