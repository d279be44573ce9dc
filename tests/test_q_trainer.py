"""The trainer on Q problems: stops before any weights load without q, and drives the q executor when it has one.

No licensed q exists on the machines this suite runs on. The second test uses tests/fake_q/q, a STAND-IN that
is not q (it only echoes `-1 "text";` lines): it checks the wiring from rl_trainer.py to the q executor
(preflight, QHOME passed through, completions' ```q blocks run as scripts), not q semantics.
"""

import json
import os
import shutil

from conftest import ROOT, run_trainer

FAKE_Q = ROOT / "tests" / "fake_q" / "q"
RUN = ["--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size", "2",
       "--gradient_accumulation_steps", "1", "--max_completion_length", "16", "--eval_pass_at_k", "false"]


def test_missing_q_stops_before_any_weights_load(tiny_model, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("Q_INTERPRETER_PATH", "Q_EXECUTABLE_PATH", "QHOME")}
    env["PATH"] = "/usr/bin:/bin"
    result = run_trainer("--model", tiny_model, "--output_dir", tmp_path / "run", *RUN, env=env)
    assert result.returncode == 2
    assert "q" in result.stderr.splitlines()[-1] and "--q_binary" in result.stderr.splitlines()[-1]
    assert "Loading weights" not in result.stderr and not (tmp_path / "run").exists()


def test_q_through_the_stand_in_executor(tiny_model, tmp_path):
    qhome = tmp_path / "qhome"
    qhome.mkdir()
    q_binary = tmp_path / "q"
    shutil.copy(FAKE_Q, q_binary)
    problem = {"id": "six", "description": "Print 6.", "solution": "solve:{6}", "split": "train",
               "tests": [{"test_code": '-1 "6";', "expected_output": "6"}]}
    held_out = {**problem, "id": "seven", "split": "test"}
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps(problem) + "\n" + json.dumps(held_out) + "\n")
    env = {**os.environ, "QHOME": str(qhome)}
    common = ["--model", tiny_model, "--data", data, "--q_binary", q_binary]

    checked = run_trainer(*common, "--test_reward_function", env=env)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "six: reward 2.000 (1/1 tests, passed)" in checked.stdout

    trained = run_trainer(*common, "--output_dir", tmp_path / "run", *RUN, env=env)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (step,) = [json.loads(line) for line in (tmp_path / "run/logs/metrics.jsonl").read_text().splitlines()
               if "reward" in json.loads(line)]
    assert step["status/sandbox_error"] == 0 and step["status/syntax_error"] == 0  # q has no Python compile step
    assert sum(v for k, v in step.items() if k.startswith("status/")) == 1.0
