"""TRL reward functions, chosen by name (``--reward_funcs test_cases format``).

Each is ``async def f(prompts, completions, **kwargs) -> list[float | None]`` so TRL runs them
concurrently; their weights come from ``GRPOConfig.reward_weights``. Dataset columns arrive as kwargs
lists: ``tests``, ``language``, ``id``, and ``trivial_shares`` under ``--partial_credit above_trivial``. Every
factory takes ``(judge, scoring, use_reasoning_format, verdicts)``; ``verdicts`` (`TestVerdicts`) is how
``test_cases`` tells the trainer which completions passed every test.

A completion judged ``sandbox_error`` gets ``None`` from ``test_cases``: TRL turns it into NaN and
leaves it out of the advantage, so a broken sandbox or a lapsed q licence never teaches the model that
the code was wrong. The ``status/sandbox_error`` metric shows how often that happens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from rewards.arguments import ScoringArguments
from rewards.extract import extract_code, parse_completion
from judging.judge import STATUSES, Judge
from rewards.scoring import ascore


def completion_text(completion) -> str:
    """A completion's text: the string itself, or the last message's content for chat completions."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else ""
    return ""


@dataclass
class TestVerdicts:
    """Which completions of the latest batch the ``test_cases`` reward scored passed every test (None until it has
    scored one): the judge's fact, for the trainer's per-problem records, since a reward alone cannot say it under
    every weighting. Give the same object to `make_reward_funcs` and to the trainer."""

    __test__ = False  # a name pytest would otherwise collect as a test class
    passed_all: list[bool] | None = None


def make_test_cases(judge: Judge, scoring: ScoringArguments, use_reasoning_format: bool,
                    verdicts: TestVerdicts) -> Callable:
    """The test-case reward; after each call, ``verdicts.passed_all`` holds that call's completions' verdicts."""
    judge_counts = judge.counters()

    async def test_cases(prompts, completions, tests, language, log_metric=None, log_extra=None,
                         trivial_shares=None, **kwargs) -> list[float | None]:
        problems = [{"tests": list(t), "language": lang} for t, lang in zip(tests, language)]
        if trivial_shares is not None:
            for problem, shares in zip(problems, trivial_shares):
                problem["trivial_shares"] = shares
        scores = await ascore(judge, problems, [completion_text(c) for c in completions], scoring)
        counts = Counter(s.status for s in scores)
        if log_metric is not None:
            for status in STATUSES:
                log_metric(f"status/{status}", counts[status] / max(len(scores), 1))
            # q licence retries and licence-proxy refusals since the last batch (a licence server refusing
            # starts under load shows here before it shows as sandbox_error).
            for name, total in judge.counters().items():
                log_metric(name, total - judge_counts[name])
                judge_counts[name] = total
        if log_extra is not None:
            log_extra("status", [s.status for s in scores])
            log_extra("tests_passed", [f"{s.judgement.passed}/{s.judgement.total}" for s in scores])
        verdicts.passed_all = [s.status == "passed" for s in scores]
        return [None if s.status == "sandbox_error" else s.reward for s in scores]

    return test_cases


def format_score(text: str, language: str, use_reasoning_format: bool) -> float:
    """1.0 when the code that will be judged came from a fenced block, as the prompt asks, and with the reasoning
    format, the completion is exactly one reasoning then one answer (rewards/extract.py: the same parse)."""
    completion = parse_completion(text, language)
    return float(completion.fenced and (completion.laid_out or not use_reasoning_format))


def make_format(judge: Judge, scoring: ScoringArguments, use_reasoning_format: bool,
                verdicts: TestVerdicts) -> Callable:
    async def format(prompts, completions, language, **kwargs) -> list[float]:
        return [format_score(completion_text(c), lang, use_reasoning_format) for c, lang in zip(completions, language)]

    return format


def make_dummy(judge: Judge, scoring: ScoringArguments, use_reasoning_format: bool,
               verdicts: TestVerdicts) -> Callable:
    """`--dummy_reward`: a pipeline check that runs no code. 1.0 when code can be extracted, else 0.0.

    Its metrics are logged as `rewards/dummy/...`, never as test results, so no chart can mistake it for one.
    """

    async def dummy(prompts, completions, language, **kwargs) -> list[float]:
        return [float(extract_code(completion_text(c), lang) is not None) for c, lang in zip(completions, language)]

    return dummy


REWARD_FUNCS: dict[str, Callable[[Judge, ScoringArguments, bool, TestVerdicts], Callable]] = {
    "test_cases": make_test_cases,
    "format": make_format,
    "dummy": make_dummy,
}


def make_reward_funcs(names: list[str], judge: Judge, scoring: ScoringArguments, use_reasoning_format: bool = False,
                      verdicts: TestVerdicts | None = None) -> list[Callable]:
    unknown = [name for name in names if name not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"unknown reward function {', '.join(unknown)}; choose from {', '.join(REWARD_FUNCS)}")
    verdicts = TestVerdicts() if verdicts is None else verdicts
    return [REWARD_FUNCS[name](judge, scoring, use_reasoning_format, verdicts) for name in names]
