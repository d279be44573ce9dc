"""TRL reward functions, chosen by name (``--reward_funcs test_cases format``).

Each is ``async def f(prompts, completions, **kwargs) -> list[float | None]`` so TRL runs them
concurrently; their weights come from ``GRPOConfig.reward_weights``. Dataset columns arrive as kwargs
lists: ``tests``, ``language`` (else ``RewardSettings.language``), ``id``.

A completion judged ``sandbox_error`` gets ``None`` from ``test_cases``: TRL turns it into NaN and
leaves it out of the advantage, so a broken sandbox or a lapsed q licence never teaches the model that
the code was wrong. The ``status/sandbox_error`` metric shows how often that happens.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from rewards.extract import extract_code, has_fenced_block
from rewards.judge import STATUSES, Judge, Judgement

_REASONING_THEN_ANSWER = re.compile(
    r"\A\s*<reasoning>(?P<reasoning>.*?)</reasoning>\s*<answer>(?P<answer>.*?)</answer>\s*\Z", re.DOTALL)


@dataclass
class RewardSettings:
    judge: Judge
    language: str = "q"
    max_tests_per_problem: int = 5
    base_reward_weight: float = 1.0
    perfect_reward_weight: float = 1.0
    perfect_bonus: float = 1.0
    use_reasoning_format: bool = False


def test_reward(j: Judgement, base_reward_weight: float = 1.0, perfect_reward_weight: float = 1.0,
                perfect_bonus: float = 1.0) -> float:
    """base * passed/total + perfect_weight * bonus when every test passed; 0 without code."""
    if j.total == 0 or j.status == "no_code":
        return 0.0
    reward = base_reward_weight * j.passed / j.total
    if j.passed == j.total:
        reward += perfect_reward_weight * perfect_bonus
    return reward


test_reward.__test__ = False  # a reward, not a pytest test


def completion_text(completion) -> str:
    """A completion's text: the string itself, or the last message's content for chat completions."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else ""
    return ""


def make_test_cases(settings: RewardSettings) -> Callable:
    async def test_cases(prompts, completions, tests=None, language=None, log_metric=None, log_extra=None,
                         **kwargs) -> list[float | None]:
        if tests is None:
            raise ValueError("the test_cases reward needs a 'tests' column in the dataset")
        languages = language or [settings.language] * len(completions)
        items = []
        for completion, problem_tests, lang in zip(completions, tests, languages):
            lang = lang or settings.language
            code = extract_code(completion_text(completion), lang)
            items.append((code, list(problem_tests)[: settings.max_tests_per_problem], lang))
        judgements = await settings.judge.arun_many(items)
        counts = Counter(j.status for j in judgements)
        if log_metric is not None:
            for status in STATUSES:
                log_metric(f"status/{status}", counts[status] / max(len(judgements), 1))
        if log_extra is not None:
            log_extra("status", [j.status for j in judgements])
            log_extra("tests_passed", [f"{j.passed}/{j.total}" for j in judgements])
        return [None if j.status == "sandbox_error" else
                test_reward(j, settings.base_reward_weight, settings.perfect_reward_weight, settings.perfect_bonus)
                for j in judgements]

    return test_cases


def format_score(text: str, language: str, use_reasoning_format: bool) -> float:
    if not use_reasoning_format:
        return 1.0 if has_fenced_block(text) else 0.0
    match = _REASONING_THEN_ANSWER.match(text)
    if not match or any(text.count(tag) != 1 for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>")):
        return 0.0
    if not match["reasoning"].strip() or extract_code(match["answer"], language) is None:
        return 0.0
    return 1.0


def make_format(settings: RewardSettings) -> Callable:
    async def format(prompts, completions, language=None, **kwargs) -> list[float]:
        languages = language or [settings.language] * len(completions)
        return [format_score(completion_text(c), lang or settings.language, settings.use_reasoning_format)
                for c, lang in zip(completions, languages)]

    return format


def make_dummy(settings: RewardSettings) -> Callable:
    """`--dummy_reward`: a pipeline check that runs no code. 1.0 when code can be extracted, else 0.0.

    Its metrics are logged as `rewards/dummy/...`, never as test results, so no chart can mistake it for one.
    """

    async def dummy(prompts, completions, language=None, **kwargs) -> list[float]:
        languages = language or [settings.language] * len(completions)
        return [float(extract_code(completion_text(c), lang or settings.language) is not None)
                for c, lang in zip(completions, languages)]

    return dummy


REWARD_FUNCS: dict[str, Callable[[RewardSettings], Callable]] = {
    "test_cases": make_test_cases,
    "format": make_format,
    "dummy": make_dummy,
}


def make_reward_funcs(names: list[str], settings: RewardSettings) -> list[Callable]:
    unknown = [name for name in names if name not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"unknown reward function {', '.join(unknown)}; choose from {', '.join(REWARD_FUNCS)}")
    return [REWARD_FUNCS[name](settings) for name in names]
