"""The CPU demo's parts: the generated problem families and their held-out split, the supervised warm start (real
SFTTrainer steps on the tiny model) and its skill-based stop, and the learning check's verdict."""

import io
import json
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "sft_warm_start.py"
GENERATOR = ROOT / "scripts" / "make_demo_problems.py"
CHECK = ROOT / "benchmarks" / "learning_check.py"
sys.path.insert(0, str(ROOT / "scripts"))

from make_demo_problems import FAMILIES, generate  # noqa: E402
from sft_warm_start import example, select  # noqa: E402


def run_script(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def bundled() -> list:
    from data import load_problems

    return load_problems(str(ROOT / "data" / "python_problems.jsonl"), "python")


def test_examples_are_the_trainer_prompt_and_a_fenced_solution():
    problem = next(p for p in bundled() if p.id == "add-two-numbers")
    pair = example(problem)
    assert pair["prompt"].endswith("Human: Problem:\n" + problem.description + "\n\nAssistant:")
    assert pair["completion"] == "```python\ndef solve(a, b):\n    return a + b\n```"


def test_selection_keeps_held_out_problems_unseen():
    problems = bundled()
    for which in ("warmup", "easy", "train"):
        chosen = select(problems, which, None)
        assert chosen and all(p.split == "train" and p.solution for p in chosen)
    warmup = select(problems, "warmup", None)
    assert all("warmup" in p.extra["tags"] for p in warmup)
    assert len(warmup) < len(select(problems, "easy", None)) < len(select(problems, "train", None))
    assert select(problems, "train", 3) == select(problems, "train", None)[:3]


@pytest.mark.slow
def test_warm_start_trains_and_saves_a_loadable_model(tiny_model, tmp_path):
    out = tmp_path / "warm"
    result = run_script(
        tiny_model, out, "--problems", "warmup", "--max_problems", "4", "--max_steps", "3", "--batch_size", "2"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warm start: 4 problems, 3 steps" in result.stdout
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    before = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert tokenizer.eos_token == "<|im_end|>"
    changed = [
        name
        for name, p in model.named_parameters()
        if not p.detach().equal(dict(before.named_parameters())[name].detach())
    ]
    assert changed, "three optimizer steps left every weight as it was"


@pytest.mark.slow
def test_bad_data_file_is_one_line_with_exit_2(tiny_model, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "description": "d"}) + "\n")
    result = run_script(tiny_model, tmp_path / "out", "--data", bad)
    assert result.returncode == 2
    assert f"{bad}:1:" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_no_matching_problems_is_exit_2(tiny_model, tmp_path):
    data = tmp_path / "no_solutions.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "x",
                "description": "d",
                "split": "train",
                "tags": ["warmup"],
                "tests": [{"test_code": "print(solve())", "expected_output": "1"}],
            }
        )
        + "\n"
    )
    result = run_script(tiny_model, tmp_path / "out", "--data", data, "--problems", "warmup")
    assert result.returncode == 2 and "no training problems with a solution" in result.stderr


@pytest.mark.slow
def test_stop_at_exact_ends_the_warm_start_at_the_first_check_that_reaches_it(tiny_model, tmp_path):
    """A target of 0 is reached by any model: training stops at the first check, long before --max_steps."""
    result = run_script(
        tiny_model,
        tmp_path / "warm",
        "--problems",
        "warmup",
        "--max_problems",
        "4",
        "--max_steps",
        "50",
        "--batch_size",
        "2",
        "--stop_at_exact",
        "0",
        "--check_every",
        "3",
        "--check_problems",
        "2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "greedy exact match on 2 training problems every 3 steps: 0.00 (target 0.0)" in result.stdout
    assert "warm start: 4 problems, 3 steps" in result.stdout


# --- the generated problem families -------------------------------------------------------------------------------


def outputs(solution: str, test_code: str) -> str | None:
    """What `test_code` prints after `solution` (None when it raises), run in-process: our own generated
    one-liners only, so thousands of pairs take a second instead of a sandbox run each."""
    printed = io.StringIO()
    try:
        with redirect_stdout(printed):
            exec(f"{solution}\n{test_code}", {})
    except TypeError:  # a two-argument solution called with one argument, or the reverse
        return None
    return printed.getvalue().strip()


def renamed(solution: str, names: list[str]) -> str:
    """`solution` with its arguments renamed, in order, to `names`."""
    old = re.search(r"solve\((.*?)\)", solution).group(1).split(", ")
    return re.sub(r"\b(" + "|".join(old) + r")\b", lambda m: names[old.index(m.group(1))], solution)


def arguments(solution: str) -> list[str]:
    return re.search(r"solve\((.*?)\)", solution).group(1).split(", ")


def test_held_out_text_is_unseen_and_training_solutions_solve_a_held_out_problem_only_by_renaming():
    """What docs/demo.md claims: held-out descriptions and solutions never occur in training; a training solution
    that passes a held-out test is the held-out solution with other argument names, never another program."""
    problems = generate(seed=3, held_out=0.2)
    train = [p for p in problems if p["split"] == "train"]
    test = [p for p in problems if p["split"] == "test"]
    assert len({p["id"] for p in problems}) == len(problems)
    for field in ("id", "description", "solution"):
        assert not {p[field] for p in train} & {p[field] for p in test}, field
    for family in FAMILIES:
        in_family = [p for p in problems if p["tags"] == ["demo", family]]
        held = sum(p["split"] == "test" for p in in_family)
        assert 0 < held < len(in_family) and held == round(len(in_family) * 0.2), family
    for problem in test:
        test_case = problem["tests"][0]
        solving = [p for p in train if outputs(p["solution"], test_case["test_code"]) == test_case["expected_output"]]
        names = arguments(problem["solution"])
        assert solving and all(renamed(p["solution"], names) == problem["solution"] for p in solving), problem["id"]


@pytest.mark.slow
def test_no_other_generated_computation_passes_a_problem_test():
    """Each test tells its computation apart from every other one generated, whatever the argument names."""
    problems = generate(seed=0, held_out=0.2)
    for problem in problems:
        test_case = problem["tests"][0]
        names = arguments(problem["solution"])
        passing = {
            renamed(p["solution"], names)
            for p in problems
            if len(arguments(p["solution"])) == len(names)
            and outputs(p["solution"], test_case["test_code"]) == test_case["expected_output"]
        }
        assert passing == {problem["solution"]}, problem["id"]


def test_seed_picks_the_held_out_instances_and_nothing_else():
    held = {seed: {p["id"] for p in generate(seed, 0.2) if p["split"] == "test"} for seed in (0, 1)}
    assert generate(0, 0.2) == generate(0, 0.2)
    assert held[0] != held[1] and len(held[0]) == len(held[1])
    assert {p["id"] for p in generate(0, 0.2)} == {p["id"] for p in generate(1, 0.2)}


@pytest.mark.slow
def test_generated_file_loads_with_its_splits_and_every_solution_passes_the_real_judge(tmp_path):
    from data import load_problems, split_problems
    from judging import Judge

    out = tmp_path / "problems.jsonl"
    result = subprocess.run(
        [sys.executable, str(GENERATOR), str(out), "--seed", "5", "--tokenizer_corpus", str(tmp_path / "corpus")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    problems = load_problems(str(out), "python")
    train, test = split_problems(problems, max_test=1000, max_train=1000)
    assert [p.id for p in train] == [p.id for p in problems if p.split == "train"]
    assert [p.id for p in test] == [p.id for p in problems if p.split == "test"]
    assert f"{len(problems)} problems ({len(train)} train, {len(test)} held out" in result.stdout
    corpus = [json.loads(line) for line in (tmp_path / "corpus" / "train.jsonl").read_text().splitlines()]
    # The tokenizer reads what a prompt or a completion may show: every field but the hidden tests.
    assert corpus == [{**p.record(), "tests": [t.record() for t in p.tests if not t.hidden]} for p in train]
    assert all([t.hidden for t in p.tests] == [False, True] for p in problems)

    judge = Judge(timeout=5.0)
    try:
        judgements = judge.run_many([(p.solution, p.tests, "python") for p in problems])
        wrong = judge.run_many([(p.solution.replace("return", "return 1 +"), p.tests, "python") for p in problems[:5]])
    finally:
        judge.close()
    assert [p.id for p, j in zip(problems, judgements) if j.status != "passed"] == []
    assert {j.status for j in wrong} == {"failed"}, "the tests accept a wrong solution"


def test_bad_held_out_share_is_exit_2(tmp_path):
    result = subprocess.run(
        [sys.executable, str(GENERATOR), str(tmp_path / "p.jsonl"), "--held_out", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--held_out 1.0: give a share between 0 and 1" in result.stderr


# --- the learning check's verdict -----------------------------------------------------------------------------------


def evaluation(step: int, passing: list[int], n: int = 8, split: str = "test") -> dict:
    problems = [{"id": f"p{i:02d}", "n": n, "c": c, "statuses": [], "rewards": []} for i, c in enumerate(passing)]
    pass_at_1 = sum(passing) / (n * len(passing))
    return {
        "step": step,
        "settings": {"problems": len(passing), "split": split, "n": n, "temperature": 0.8},
        "metrics": {"pass@1": pass_at_1, "mean_reward": 2 * pass_at_1},
        "problems": problems,
    }


def check(tmp_path, *evaluations) -> subprocess.CompletedProcess:
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "logs" / "eval_results.json").write_text(json.dumps(list(evaluations)))
    return subprocess.run([sys.executable, str(CHECK), str(tmp_path)], capture_output=True, text=True, timeout=60)


BEFORE = [1, 2, 3, 4, 5, 2, 3, 4, 1, 1, 3, 4, 5, 6, 2, 3, 4, 1, 2, 3] * 3  # 60 problems, pass@1 0.369


def per_problem_change(before: list[int], after: list[int], n: int = 8) -> str:
    """What the check must say about the per-problem (n, c) it read, worked out here from the counts: its
    "pass@1: x -> y" line only repeats the metrics this test wrote."""
    mean = sum(a - b for a, b in zip(after, before)) / (n * len(before))
    up, down = sum(a > b for a, b in zip(after, before)), sum(a < b for a, b in zip(after, before))
    return f"per problem: mean {mean:+.3f} ({up} up, {down} down, {len(before) - up - down} equal)"


def test_a_clear_improvement_on_held_out_problems_passes(tmp_path):
    after = [min(8, c + 2) if i % 4 else max(0, c - 1) for i, c in enumerate(BEFORE)]
    result = check(tmp_path, evaluation(0, BEFORE), evaluation(80, after))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "held-out problems: 60 (split test), n=8 samples each" in result.stdout
    assert "pass@1: 0.369 -> 0.525" in result.stdout
    assert per_problem_change(BEFORE, after) in result.stdout
    assert "paired bootstrap over 60 problems, 10000 resamples: 95% interval [+" in result.stdout
    assert result.stdout.rstrip().endswith("learned on held-out problems: yes (the interval's lower bound is above 0)")


# Noise: 32 problems one sample up, 28 one sample down. pass@1 is higher after, but the interval straddles 0.
NOISE = [c + 1 if i % 2 == 0 or i in (1, 3) else c - 1 for i, c in enumerate(BEFORE)]


@pytest.mark.parametrize("after", [pytest.param(BEFORE, id="tie"), pytest.param(NOISE, id="noise")])
def test_ties_and_noise_fail(tmp_path, after):
    result = check(tmp_path, evaluation(0, BEFORE), evaluation(80, after))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "learned on held-out problems: NO" in result.stdout


def test_noise_has_a_higher_pass_at_1_after(tmp_path):
    """So a verdict of `after > before` would have passed it: the interval is what fails it."""
    result = check(tmp_path, evaluation(0, BEFORE), evaluation(80, NOISE))
    assert per_problem_change(BEFORE, NOISE) == "per problem: mean +0.008 (32 up, 28 down, 0 equal)"
    assert per_problem_change(BEFORE, NOISE) in result.stdout


def test_missing_evaluations_exit_2(tmp_path):
    result = subprocess.run([sys.executable, str(CHECK), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "logs/eval_results.json: missing" in result.stderr


def test_evaluations_on_the_training_split_exit_2(tmp_path):
    after = [min(8, c + 3) for c in BEFORE]
    result = check(tmp_path, evaluation(0, BEFORE, split="train"), evaluation(80, after, split="train"))
    assert result.returncode == 2 and "needs held-out problems: train with --eval_split test" in result.stderr


def test_evaluations_on_different_problems_exit_2(tmp_path):
    after = evaluation(80, [min(8, c + 3) for c in BEFORE])
    after["problems"][0]["id"] = "another"
    result = check(tmp_path, evaluation(0, BEFORE), after)
    assert result.returncode == 2 and "are on different problems" in result.stderr


def test_the_demo_page_quotes_the_demos_grpo_steps_and_evaluation_samples():
    """The demo's page and its example output state the step and sample counts cpu_demo.sh passes."""
    script = (ROOT / "scripts" / "cpu_demo.sh").read_text()
    steps = re.search(r"--max_steps (\d+)", script).group(1)
    samples = re.search(r"--repeat_eval_problems (\d+)", script).group(1)
    section = " ".join((ROOT / "docs" / "demo.md").read_text().split())
    assert f"runs GRPO on the 249 training problems for {steps} steps" in section
    assert f"(`--eval_split test`, {samples} samples each" in section
    assert f"n={samples} samples each, temperature 0.8: step 0 -> step {steps}" in section
    assert f"verdict uses 63 problems with {samples} samples each" in section
