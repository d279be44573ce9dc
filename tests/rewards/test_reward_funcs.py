import asyncio
import math
from dataclasses import replace
from pathlib import Path

import pytest

import judging.execution
from judging import STATUSES, Judge, Problem, Test
from rewards import REWARD_FUNCS, JudgedRewards, ScoringArguments, make_reward_funcs, score

FAKE_Q = str(Path(__file__).resolve().parents[1] / "helpers" / "fake_q" / "q")
TESTS = tuple(Test(f"print(solve({n}))", str(2 * n)) for n in range(1, 7))
DOUBLE = Problem("double", "python", "Return 2 * n.", TESTS)
RIGHT = "```python\ndef solve(n):\n    return 2 * n\n```"
HALF = "```python\ndef solve(n):\n    return 2 * n if n % 2 else 0\n```"


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


@pytest.mark.parametrize(
    "passed, total, weights, expected",
    [
        (5, 5, (1.0, 1.0, 1.0), 2.0),
        (3, 5, (1.0, 1.0, 1.0), 0.6),
        (0, 5, (1.0, 1.0, 1.0), 0.0),
        (4, 4, (0.5, 2.0, 1.5), 0.5 + 3.0),
        (1, 4, (2.0, 3.0, 1.0), 0.5),
    ],
)
def test_reward_arithmetic(passed, total, weights, expected):
    base, perfect_weight, bonus = weights
    reward = ScoringArguments(base_reward_weight=base, perfect_reward_weight=perfect_weight, perfect_bonus=bonus)
    assert reward.of(passed, total) == pytest.approx(expected)


def test_no_code_rewards_nothing(judge):
    (scored,) = score(judge, [DOUBLE], ["no code here, only words"], ScoringArguments(perfect_bonus=5.0))
    (empty,) = score(judge, [DOUBLE], ["```python\n\n```"], ScoringArguments(perfect_bonus=5.0))
    assert (scored.status, scored.reward) == ("syntax_error", 0.0)
    assert (empty.status, empty.reward) == ("no_code", 0.0)


def test_names_and_unknown_name(judge):
    assert set(REWARD_FUNCS) == {"test_cases", "format", "dummy"}
    funcs = make_reward_funcs(["test_cases", "format"], judge, ScoringArguments())
    assert [f.__name__ for f in funcs] == ["test_cases", "format"]
    assert all(asyncio.iscoroutinefunction(f) for f in funcs)
    with pytest.raises(ValueError, match="unknown reward function nope"):
        make_reward_funcs(["nope"], judge, ScoringArguments())


def test_test_cases_reward_logs_status_shares_and_extras(judge):
    (test_cases,) = make_reward_funcs(["test_cases"], judge, ScoringArguments(max_tests_per_problem=4), [DOUBLE])
    metrics, extras = {}, {}
    completions = [RIGHT, [{"role": "assistant", "content": HALF}], "  \n", "```python\ndef solve(:\n```"]
    scores = asyncio.run(
        test_cases(
            prompts=["p"] * 4,
            completions=completions,
            id=["double"] * 4,
            language=["python"] * 4,
            log_metric=lambda name, value: metrics.__setitem__(name, value),
            log_extra=lambda column, values: extras.__setitem__(column, values),
        )
    )
    assert isinstance(scores, JudgedRewards)
    assert scores.rewards[0] == pytest.approx(2.0)
    assert scores.rewards[1] == pytest.approx(0.5)
    assert scores.rewards[3] == 0.0
    assert set(metrics) == {f"status/{s}" for s in STATUSES} | {"judge/licence_retries", "judge/proxy_refusals"}
    assert metrics["judge/licence_retries"] == metrics["judge/proxy_refusals"] == 0
    assert math.isclose(sum(v for k, v in metrics.items() if k.startswith("status/")), 1.0)
    assert metrics["status/passed"] == metrics["status/no_code"] == metrics["status/syntax_error"] == 0.25
    assert extras["status"][0] == "passed" and extras["status"][3] == "syntax_error"
    assert extras["tests_passed"][:2] == ["4/4", "2/4"], "only the first max_tests_per_problem tests count"
    assert list(scores) == scores.rewards and len(scores) == 4, "TRL reads the record as its rewards"
    assert scores.passed_all == [True, False, False, False], "the judge's fact, not a reward threshold"


def test_test_cases_reward_looks_each_row_up_by_its_id(judge):
    """The row's problem is the one with its id, whatever other columns the row carries."""
    neg = Problem("neg", "python", "Return -n.", (Test("print(solve(3))", "-3"),))
    (test_cases,) = make_reward_funcs(["test_cases"], judge, ScoringArguments(), [DOUBLE, neg])
    negate = "```python\ndef solve(n):\n    return -n\n```"
    rewards = asyncio.run(
        test_cases(
            prompts=["p"] * 3,
            completions=[RIGHT, negate, RIGHT],
            id=["double", "neg", "neg"],
            language=["python"] * 3,
            description=["d"] * 3,
        )
    )
    assert rewards.rewards == [pytest.approx(2.0), pytest.approx(2.0), 0.0]
    assert rewards.passed_all == [True, True, False]
    with pytest.raises(KeyError, match="names problem 'other', which is not among the 2 problems"):
        asyncio.run(test_cases(prompts=["p"], completions=[RIGHT], id=["other"], language=["python"]))
    with pytest.raises(ValueError, match="share the id 'double'"):
        make_reward_funcs(["test_cases"], judge, ScoringArguments(), [DOUBLE, replace(DOUBLE, tests=TESTS[:1])])


def test_language_column_overrides_and_sandbox_error_gives_none(tmp_path, monkeypatch):
    qhome = tmp_path / "qhome"
    qhome.mkdir()
    (qhome / "mode").write_text("licence")
    monkeypatch.setenv("QHOME", str(qhome))
    monkeypatch.setattr(judging.execution, "LICENCE_RETRY_DELAYS", (0.01,))
    with Judge(timeout=2.0, workers=2, q_binary=FAKE_Q) as judge:
        six = Problem("six", "q", "Print 6.", (Test('-1 "6";', "6"),))
        (test_cases,) = make_reward_funcs(
            ["test_cases"], judge, ScoringArguments(), [six, Problem("double", "python", "Return 2 * n.", TESTS[:2])]
        )
        metrics = {}
        scores = asyncio.run(
            test_cases(
                prompts=["p", "p"],
                completions=["```q\nx:1\n```", RIGHT],
                id=["six", "double"],
                language=["q", "python"],
                log_metric=lambda name, value: metrics.__setitem__(name, value),
            )
        )
    assert scores.rewards == [None, pytest.approx(2.0)]
    assert metrics["judge/licence_retries"] >= 1, "the lapsed licence was retried, and the step logs it"


@pytest.mark.parametrize(
    "text, reasoning, expected",
    [
        ("<reasoning>sum it</reasoning>\n<answer>\n```python\ndef solve(n):\n    return n\n```\n</answer>", True, 1.0),
        ("  <reasoning>r</reasoning><answer>\n```python\nx = 1\n```\n</answer>\n", True, 1.0),
        ("<reasoning>r</reasoning><answer>x = 1</answer>", True, 0.0),  # the prompt asks for a fenced block
        ("<reasoning>the code is above</reasoning><answer>see above</answer>", True, 0.0),
        ("<reasoning>r <answer>```python\nx = 1\n```</answer></reasoning><answer>see above</answer>", True, 0.0),
        ("<reasoning>r</reasoning><Answer>```python\nx = 1\n```</Answer>", True, 0.0),
        ("<reasoning>r</reasoning><answer>```python\nx = 1\n```</answer><answer>y</answer>", True, 0.0),
        ("<reasoning>" + "</reasoning><answer></answer>x" * 2000, True, 0.0),
        ("<answer>x = 1</answer><reasoning>r</reasoning>", True, 0.0),
        ("<reasoning></reasoning><answer>x = 1</answer>", True, 0.0),
        ("<reasoning>r</reasoning><answer>  </answer>", True, 0.0),
        ("<reasoning>r</reasoning><answer>x = 1</answer> trailing", True, 0.0),
        ("<reasoning>r</reasoning><reasoning>r</reasoning><answer>x = 1</answer>", True, 0.0),
        ("```python\nx = 1\n```", True, 0.0),
        ("```python\nx = 1\n```", False, 1.0),
        ("x = 1", False, 0.0),
        ("```python\n\n```", False, 0.0),
        ("<reasoning>```python\nx = 1\n```</reasoning>x = 1", False, 0.0),  # the fence that would be judged is none
    ],
)
def test_format_reward(judge, text, reasoning, expected):
    (fmt,) = make_reward_funcs(["format"], judge, ScoringArguments(), use_reasoning_format=reasoning)
    assert asyncio.run(fmt(prompts=["p"], completions=[text], language=["python"])) == [expected]
    chat = [{"role": "assistant", "content": text}]
    assert asyncio.run(fmt(prompts=["p"], completions=[chat], language=["python"])) == [expected]


def test_dummy_reward_runs_nothing_and_only_sees_code(judge, tmp_path):
    (dummy,) = make_reward_funcs(["dummy"], judge, ScoringArguments())
    marker = tmp_path / "ran"
    code = f"```python\nopen({str(marker)!r}, 'w').write('x')\n```"
    rewards = asyncio.run(dummy(prompts=["p", "p"], completions=[code, ""], tests=[[], []], language=["python"] * 2))
    assert dummy.__name__ == "dummy" and rewards == [1.0, 0.0]
    assert not marker.exists()


SMUGGLED = "<reasoning>plan <Answer>" + RIGHT + "</Answer></reasoning>\n<answer>\n```python\njunk = ''\n```\n</answer>"


@pytest.mark.parametrize("reasoning", [True, False])
def test_code_smuggled_in_the_reasoning_earns_nothing(judge, reasoning):
    """Real code in `<Answer>` inside the reasoning, junk in the visible answer: neither reward may pay for the
    hidden code (before: tests 2.0 and format 1.0)."""
    test_cases, fmt = make_reward_funcs(
        ["test_cases", "format"], judge, ScoringArguments(), [DOUBLE], use_reasoning_format=reasoning
    )
    kwargs = dict(prompts=["p"], completions=[SMUGGLED], id=["double"], language=["python"])
    assert asyncio.run(test_cases(**kwargs)).rewards == [0.0]
    assert asyncio.run(fmt(**kwargs)) == [1.0], "the visible answer is well formed; it is what gets judged"
