"""`--partial_credit fraction|above_trivial|none`: the same reward in training, `python -m rewards score` and
pass@k's mean reward, judged for real; a program no better than a constant earns no partial credit."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from data import measure_trivial_shares
from judging import Judge, Problem, Test
from rewards import ScoringArguments, make_reward_funcs, score
from trainer_runs import run_trainer

ROOT = Path(__file__).resolve().parents[2]
IS_PALINDROME = "def solve(s):\n    return s == s[::-1]\n"
# The bundled is-palindrome before its tests were balanced: returning True passes 3 of its 4 tests.
PALINDROME = Problem(
    "is-palindrome",
    "python",
    "Write solve(s) that returns True if s reads the same both ways, else False.",
    tuple(Test(f"print(solve({word!r}))", str(word == word[::-1])) for word in ("racecar", "hello", "abba", "a")),
    IS_PALINDROME,
    "train",
)
DOUBLE = Problem(
    "double",
    "python",
    "Write solve(n) that returns 2 * n.",
    tuple(Test(f"print(solve({n}))", str(2 * n)) for n in (0, 3, 5)),
    "def solve(n):\n    return 2 * n\n",
    "test",
)
CONSTANT = "```python\ndef solve(s):\n    return True\n```"
CANONICAL = f"```python\n{IS_PALINDROME}```"
# Right on racecar, hello and abba, wrong on 'a': no better than the constant.
LONG_PALINDROMES = "```python\ndef solve(s):\n    return len(s) > 1 and s == s[::-1]\n```"


@pytest.mark.parametrize(
    "mode, passed, total, trivial, expected",
    [
        ("fraction", 3, 4, 0.75, 0.75),
        ("fraction", 4, 4, 0.75, 2.0),
        ("above_trivial", 3, 4, 0.75, 0.0),
        ("above_trivial", 1, 4, 0.5, 0.0),
        ("above_trivial", 4, 6, 1 / 3, 0.5),
        ("above_trivial", 4, 4, 0.75, 2.0),
        ("above_trivial", 2, 3, 1.0, 0.0),
        ("above_trivial", 3, 3, 1.0, 2.0),
        ("none", 3, 4, 0.0, 0.0),
        ("none", 4, 4, 0.75, 1.0),
    ],
)
def test_partial_credit_arithmetic(mode, passed, total, trivial, expected):
    assert ScoringArguments(partial_credit=mode).of(passed, total, trivial) == pytest.approx(expected)


def test_best_reward_follows_the_mode():
    assert [ScoringArguments(partial_credit=m).best for m in ("fraction", "above_trivial", "none")] == [2.0, 2.0, 1.0]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


@pytest.fixture(scope="module")
def shares(judge):
    """The palindrome's trivial shares, keyed by the problem as the reward reads them."""
    (share,) = measure_trivial_shares([PALINDROME], judge)
    return {PALINDROME: share.by_tests}


@pytest.mark.parametrize(
    "mode, rewards",
    [
        ("fraction", [0.75, 2.0, 0.75]),
        ("above_trivial", [0.0, 2.0, 0.0]),
        ("none", [0.0, 1.0, 0.0]),
    ],
)
def test_score_through_the_judge(judge, shares, mode, rewards):
    scores = score(
        judge,
        [PALINDROME] * 3,
        [CONSTANT, CANONICAL, LONG_PALINDROMES],
        ScoringArguments(partial_credit=mode),
        trivial_shares=shares,
        all_tests=True,
    )
    assert [s.reward for s in scores] == pytest.approx(rewards)
    assert [(s.judgement.passed, s.judgement.total) for s in scores] == [(3, 4), (4, 4), (3, 4)]


def test_above_trivial_reads_the_share_of_the_tests_judged(judge, shares):
    """Over the first two tests (True, False) a constant passes one in two: the share there is 0.5, not 0.75."""
    assert shares[PALINDROME][:2] == [1.0, 0.5]
    scoring = ScoringArguments(partial_credit="above_trivial", max_tests_per_problem=2)
    always_false = "```python\ndef solve(s):\n    return False\n```"
    scores = score(judge, [PALINDROME] * 2, [always_false, CANONICAL], scoring, trivial_shares=shares)
    assert [(s.judgement.total, s.reward) for s in scores] == [(2, 0.0), (2, 2.0)]


def test_above_trivial_without_measured_shares_is_an_error(judge, shares):
    with pytest.raises(ValueError, match="has no trivial_shares"):
        score(judge, [PALINDROME], [CONSTANT], ScoringArguments(partial_credit="above_trivial"))
    with pytest.raises(ValueError, match="'double' has no trivial_shares"):  # measured for another problem
        score(judge, [DOUBLE], [CONSTANT], ScoringArguments(partial_credit="above_trivial"), trivial_shares=shares)


def test_training_reward_reads_the_trivial_shares_it_was_made_with(judge, shares):
    (test_cases,) = make_reward_funcs(
        ["test_cases"],
        judge,
        ScoringArguments(partial_credit="above_trivial"),
        [PALINDROME, DOUBLE],
        trivial_shares=shares,
    )
    rewards = asyncio.run(
        test_cases(
            prompts=["p"] * 3,
            completions=[CONSTANT, CANONICAL, LONG_PALINDROMES],
            language=["python"] * 3,
            id=["is-palindrome"] * 3,
        )
    )
    assert rewards.rewards == pytest.approx([0.0, 2.0, 0.0])


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r.record() if isinstance(r, Problem) else r) + "\n" for r in records))
    return path


def test_rewards_score_command_measures_the_shares_itself(tmp_path):
    problems = write_jsonl(tmp_path / "p.jsonl", [PALINDROME])
    completions = write_jsonl(
        tmp_path / "c.jsonl", [{"id": "is-palindrome", "completion": c} for c in (CONSTANT, CANONICAL)]
    )
    rewards = {}
    for mode in ("fraction", "above_trivial", "none"):
        out = tmp_path / f"{mode}.jsonl"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rewards",
                "score",
                "--problems",
                problems,
                "--completions",
                completions,
                "--out",
                out,
                "--language",
                "python",
                "--partial_credit",
                mode,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        rewards[mode] = [json.loads(line)["reward"] for line in out.read_text().splitlines()]
    assert rewards == {"fraction": [0.75, 2.0], "above_trivial": [0.0, 2.0], "none": [0.0, 1.0]}


@pytest.mark.slow
def test_test_reward_function_gives_a_canonical_solution_the_full_reward(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "problems.jsonl", [PALINDROME, DOUBLE])
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--data",
        data,
        "--test_reward_function",
        "--partial_credit",
        "above_trivial",
        "--output_dir",
        tmp_path / "run",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "is-palindrome: reward 2.000 (4/4 tests, passed)" in result.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_training_and_evaluation_under_above_trivial(warm_model, tmp_path):
    # The warm model answers x * 2 about half the time, so `double`'s samples earn above-trivial credit.
    data = write_jsonl(tmp_path / "problems.jsonl", [PALINDROME, DOUBLE])
    run = tmp_path / "run"
    args = [
        "--model",
        warm_model,
        "--language",
        "python",
        "--data",
        data,
        "--partial_credit",
        "above_trivial",
        "--verify_data",
        "--max_trivial_share",
        "0.8",
        "--max_steps",
        "1",
        "--num_generations",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--gradient_accumulation_steps",
        "1",
        "--max_completion_length",
        "16",
        "--eval_on_start",
        "--simple_eval_problems",
        "1",
        "--repeat_eval_problems",
        "2",
        "--eval_max_tokens",
        "16",
        "--judge_timeout",
        "2",
        "--output_dir",
        run,
    ]
    result = run_trainer(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    cached = json.loads((run / "trivial_shares.json").read_text())
    assert sorted((e["id"], e["share"], e["by_tests"]) for e in cached.values()) == [
        ("double", 1 / 3, [1.0, 0.5, 1 / 3]),
        ("is-palindrome", 0.75, [1.0, 0.5, 2 / 3, 0.75]),
    ]
    assert yaml.safe_load((run / "config.yaml").read_text())["partial_credit"] == "above_trivial"
    metrics = [json.loads(line) for line in (run / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/test_cases/mean" in m for m in metrics)
    scoring = ScoringArguments(partial_credit="above_trivial")
    for sample in map(json.loads, (run / "logs" / "eval_samples" / "step-0.jsonl").read_text().splitlines()):
        assert sample["id"] == "double"
        expected = 0.0 if sample["status"] == "no_code" else scoring.of(sample["passed"], sample["total"], 1 / 3)
        assert sample["reward"] == pytest.approx(expected)
    # The run folder's cache answers a second session: nothing is measured again.
    stamp = (run / "trivial_shares.json").stat().st_mtime_ns
    result = run_trainer(*args, "--eval_only")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "trivial_shares.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--partial_credit", "half"], "--partial_credit"),
        (["--max_trivial_share", "1.5"], "--max_trivial_share 1.5: must be a fraction between 0 and 1"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, flags, message):
    result = run_trainer("--model", tmp_path / "no-model", "--language", "python", *flags)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
