"""The CPU demo's supervised warm start: a few real SFTTrainer steps on the tiny model, and its bad-input errors."""

import json
import os
import subprocess
import sys

from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "sft_warm_start.py"
sys.path.insert(0, str(ROOT / "scripts"))

from sft_warm_start import example, select  # noqa: E402


def run_script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def bundled() -> list[dict]:
    from data import load_problems

    return load_problems(str(ROOT / "data" / "python_problems.jsonl"), "python")


def test_examples_are_the_trainer_prompt_and_a_fenced_solution():
    problem = next(p for p in bundled() if p["id"] == "add-two-numbers")
    pair = example(problem)
    assert pair["prompt"].endswith("Human: Problem:\n" + problem["description"] + "\n\nAssistant:")
    assert pair["completion"] == "```python\ndef solve(a, b):\n    return a + b\n```"


def test_selection_keeps_held_out_problems_unseen():
    problems = bundled()
    for which in ("warmup", "easy", "train"):
        chosen = select(problems, which, None)
        assert chosen and all(p["split"] == "train" and p["solution"] for p in chosen)
    warmup = select(problems, "warmup", None)
    assert all("warmup" in p["tags"] for p in warmup)
    assert len(warmup) < len(select(problems, "easy", None)) < len(select(problems, "train", None))
    assert select(problems, "train", 3) == select(problems, "train", None)[:3]


def test_warm_start_trains_and_saves_a_loadable_model(tiny_model, tmp_path):
    out = tmp_path / "warm"
    result = run_script(tiny_model, out, "--problems", "warmup", "--max_problems", "4", "--max_steps", "3",
                        "--batch_size", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warm start: 4 problems, 3 steps" in result.stdout
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    before = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert tokenizer.eos_token == "<|im_end|>"
    changed = [name for name, p in model.named_parameters()
               if not p.detach().equal(dict(before.named_parameters())[name].detach())]
    assert changed, "three optimizer steps left every weight as it was"


def test_bad_data_file_is_one_line_with_exit_2(tiny_model, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "description": "d"}) + "\n")
    result = run_script(tiny_model, tmp_path / "out", "--data", bad)
    assert result.returncode == 2
    assert f"{bad}:1:" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_no_matching_problems_is_exit_2(tiny_model, tmp_path):
    data = tmp_path / "no_solutions.jsonl"
    data.write_text(json.dumps({"id": "x", "description": "d", "split": "train", "tags": ["warmup"],
                                "tests": [{"test_code": "print(solve())", "expected_output": "1"}]}) + "\n")
    result = run_script(tiny_model, tmp_path / "out", "--data", data, "--problems", "warmup")
    assert result.returncode == 2 and "no training problems with a solution" in result.stderr
