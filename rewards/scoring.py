"""The one scoring path: problems and completion texts in, judgements and test-case rewards out.

Training rewards, pass@k evaluation, `--test_reward_function`, `python -m rewards score` and
`python -m data verify` all call `score` (or `ascore` inside TRL's async reward functions), so a completion
earns the same reward wherever it is judged. Under `--partial_credit above_trivial` the caller gives each problem's
trivial shares (data/trivial.py) in a mapping keyed by the problem, and the share read is the one over exactly the
tests judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rewards.arguments import ScoringArguments
from rewards.extract import extract_code
from judging.judge import Judge, Judgement
from judging.records import Problem

# Each problem's trivial shares: [n - 1] is the share of its first n tests that a trivial program passes.
TrivialShares = Mapping[Problem, Sequence[float]]


@dataclass
class Score:
    judgement: Judgement
    reward: float  # the test-case reward; 0.0 without extractable code

    @property
    def status(self) -> str:
        return self.judgement.status


def _items(problems: Sequence[Problem], texts: Sequence[str | None], max_tests: int | None,
           extract: bool) -> list[tuple]:
    if len(problems) != len(texts):
        raise ValueError(f"{len(texts)} completions for {len(problems)} problems")
    return [(extract_code(text, problem.language) if extract else text, problem.tests[:max_tests], problem.language)
            for problem, text in zip(problems, texts)]


def trivial_share(problem: Problem, tests: int, trivial_shares: TrivialShares | None) -> float:
    """The share of ``problem``'s first ``tests`` tests that a trivial program passes (data/trivial.py)."""
    shares = None if trivial_shares is None else trivial_shares.get(problem)
    if shares is None:
        raise ValueError(f"problem {problem.id!r} has no trivial_shares, which --partial_credit above_trivial "
                         "needs; measure them with data.trivial first")
    return shares[tests - 1]


def _scores(judgements: list[Judgement], problems: Sequence[Problem], scoring: ScoringArguments,
            trivial_shares: TrivialShares | None) -> list[Score]:
    def reward(judgement: Judgement, problem: Problem) -> float:
        if judgement.status == "no_code":
            return 0.0
        trivial = trivial_share(problem, judgement.total, trivial_shares) if scoring.needs_trivial_shares else 0.0
        return scoring.of(judgement.passed, judgement.total, trivial)

    return [Score(j, reward(j, problem)) for j, problem in zip(judgements, problems)]


def score(judge: Judge, problems: Sequence[Problem], texts: Sequence[str | None], scoring: ScoringArguments, *,
          trivial_shares: TrivialShares | None = None, all_tests: bool = False, timeout: float | None = None,
          extract: bool = True, progress: bool = False) -> list[Score]:
    """Judge ``texts[i]`` against ``problems[i]``'s tests (its first ``scoring.max_tests_per_problem`` unless
    ``all_tests``). ``extract=False`` runs each text as it is (canonical solutions, verification's no-op).
    ``trivial_shares`` is read under ``--partial_credit above_trivial`` only."""
    max_tests = None if all_tests else scoring.max_tests_per_problem
    items = _items(problems, texts, max_tests, extract)
    return _scores(judge.run_many(items, progress=progress, timeout=timeout), problems, scoring, trivial_shares)


async def ascore(judge: Judge, problems: Sequence[Problem], texts: Sequence[str | None], scoring: ScoringArguments,
                 *, trivial_shares: TrivialShares | None = None, timeout: float | None = None) -> list[Score]:
    """`score` for TRL's async reward functions: the first ``scoring.max_tests_per_problem`` tests, extracted code."""
    items = _items(problems, texts, scoring.max_tests_per_problem, extract=True)
    return _scores(await judge.arun_many(items, timeout=timeout), problems, scoring, trivial_shares)
