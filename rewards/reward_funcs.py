"""TRL reward functions, chosen by name (``--reward_funcs test_cases format``).

Each is ``async def f(prompts, completions, **kwargs) -> list[float | None]`` so TRL runs them
concurrently; their weights come from ``GRPOConfig.reward_weights``. Dataset columns arrive as kwargs
lists (training/prompts.py): ``id``, ``language``, ``description`` and a problem record's other fields. Every
factory takes a `RewardSetup`: ``test_cases`` looks each row's problem up by its ``id`` among the problems trained
on, and returns `JudgedRewards`, which also say which completions passed every test (the trainer hands them to the
step's observers: the per-problem records, the difficulty filter, the hidden-test watch).

A completion judged ``sandbox_error`` gets ``None`` from ``test_cases``: TRL turns it into NaN and
leaves it out of the advantage, so a broken sandbox or a lapsed q licence never teaches the model that
the code was wrong. The ``status/sandbox_error`` metric shows how often that happens.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Callable

from rewards.arguments import ScoringArguments
from rewards.extract import extract_code, parse_completion
from rewards.feedback import completion_texts
from judging.judge import STATUSES, Judge
from judging.records import Problem
from rewards.scoring import TrivialShares, ascore


def completion_text(completion) -> str:
    """A completion's text: the string itself, or the last message's content for chat completions."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else ""
    return ""


@dataclass(frozen=True)
class JudgedRewards:
    """A judge-backed reward function's result: one reward per completion (``rewards``: what TRL reads; the record
    iterates and measures as them, so plain TRL reads it too) and the judge's verdicts beside them, which a reward
    alone cannot say under every weighting: which completions passed every judged test (``passed_all``) and, for
    each that did, whether it passed its problem's hidden tests too (``passed_hidden``; an item None where it was not
    judged on them: not perfect, a problem without hidden tests, a judge fault; None when the watch is off).
    training/trainer.py keeps it from the function, synchronous or not, for the step's observers."""

    rewards: list[float | None]
    passed_all: list[bool]
    passed_hidden: list[bool | None] | None = None

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.rewards)

    def __len__(self) -> int:
        return len(self.rewards)


@dataclass(frozen=True)
class RewardSetup:
    """What every reward function is made with: the judge, how a judgement becomes a reward, the problems trained
    on by id (a dataset row's ``id`` names its problem), whether prompts ask for the reasoning format, the
    problems' trivial shares under ``--partial_credit above_trivial``, and whether completions that pass every
    judged test are judged on their problem's hidden tests too (``watch_hidden_tests``)."""

    judge: Judge
    scoring: ScoringArguments
    problems: Mapping[str, Problem] = field(default_factory=dict)
    use_reasoning_format: bool = False
    trivial_shares: TrivialShares | None = None
    watch_hidden_tests: bool = False
    pool_seed: int = 0  # the pool samples of a run follow from it (rewards/scoring.py, pool_sample)

    def problem(self, problem_id: str) -> Problem:
        try:
            return self.problems[problem_id]
        except KeyError:
            raise KeyError(
                f"a dataset row names problem {problem_id!r}, which is not among the "
                f"{len(self.problems)} problems the reward functions were made with"
            ) from None


def make_test_cases(setup: RewardSetup) -> Callable:
    """The test-case reward: judges each completion on its problem's judged tests (and, watching hidden tests, each
    that passed them all on the hidden ones); returns `JudgedRewards`."""
    judge, scoring = setup.judge, setup.scoring
    judge_counts = judge.counters()
    # Every rank calls the reward once a generation batch, in step: the n-th call draws the same pool sample on each.
    draws = itertools.count()

    async def test_cases(prompts, completions, log_metric=None, log_extra=None, **columns) -> JudgedRewards:
        problems = [setup.problem(problem_id) for problem_id in columns["id"]]
        scores = await ascore(
            judge,
            problems,
            completion_texts(completions, columns),
            scoring,
            trivial_shares=setup.trivial_shares,
            hidden_tests=setup.watch_hidden_tests,
            draw=f"{setup.pool_seed}:{next(draws)}",
        )
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
            if setup.watch_hidden_tests:
                log_extra(
                    "hidden_tests_passed", [f"{s.hidden.passed}/{s.hidden.total}" if s.hidden else "" for s in scores]
                )
        return JudgedRewards(
            [None if s.status == "sandbox_error" else s.reward for s in scores],
            passed_all=[s.status == "passed" for s in scores],
            passed_hidden=[s.passed_hidden for s in scores] if setup.watch_hidden_tests else None,
        )

    return test_cases


def format_score(text: str, language: str, use_reasoning_format: bool) -> float:
    """1.0 when the code that will be judged came from a fenced block, as the prompt asks, and with the reasoning
    format, the completion is exactly one reasoning then one answer (rewards/extract.py: the same parse)."""
    completion = parse_completion(text, language)
    return float(completion.fenced and (completion.laid_out or not use_reasoning_format))


def make_format(setup: RewardSetup) -> Callable:
    async def format(prompts, completions, language, **kwargs) -> list[float]:
        return [
            format_score(text, lang, setup.use_reasoning_format)
            for text, lang in zip(completion_texts(completions, kwargs), language)
        ]

    return format


def make_dummy(setup: RewardSetup) -> Callable:
    """`--dummy_reward`: a pipeline check that runs no code. 1.0 when code can be extracted, else 0.0.

    Its metrics are logged as `rewards/dummy/...`, never as test results, so no chart can mistake it for one.
    """

    async def dummy(prompts, completions, language, **kwargs) -> list[float]:
        return [
            float(extract_code(text, lang) is not None)
            for text, lang in zip(completion_texts(completions, kwargs), language)
        ]

    return dummy


REWARD_FUNCS: dict[str, Callable[[RewardSetup], Callable]] = {
    "test_cases": make_test_cases,
    "format": make_format,
    "dummy": make_dummy,
}


def make_reward_funcs(
    names: list[str],
    judge: Judge,
    scoring: ScoringArguments,
    problems: Iterable[Problem] = (),
    use_reasoning_format: bool = False,
    trivial_shares: TrivialShares | None = None,
    watch_hidden_tests: bool = False,
    pool_seed: int = 0,
) -> list[Callable]:
    """The reward functions named, made for training on ``problems`` (their ids unique)."""
    unknown = [name for name in names if name not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"unknown reward function {', '.join(unknown)}; choose from {', '.join(REWARD_FUNCS)}")
    by_id: dict[str, Problem] = {}
    for problem in problems:
        if by_id.setdefault(problem.id, problem) != problem:
            raise ValueError(f"two problems trained on share the id {problem.id!r}; a row's id must name one")
    setup = RewardSetup(judge, scoring, by_id, use_reasoning_format, trivial_shares, watch_hidden_tests, pool_seed)
    return [REWARD_FUNCS[name](setup) for name in names]
