"""The one scoring path: problems and completion texts in, judgements and test-case rewards out.

Training rewards, pass@k evaluation, `--test_reward_function`, `python -m rewards score` and
`python -m data verify` all call `score` (or `ascore` inside TRL's async reward functions), so a completion
earns the same reward wherever it is judged: on a problem's `judged_tests` (the first ``--max_tests_per_problem``
of those not marked hidden), or on all its tests where a caller asks (evaluation, verification). Its hidden tests
never enter the reward; ``ascore`` judges them, when asked, for the completions that passed every judged test
(`Score.hidden`), where they tell a program that learned the tests from one that solves the problem. Under
`--partial_credit above_trivial` the caller gives each problem's trivial shares (data/quality/trivial.py) in a mapping keyed
by the problem, and the share read is the one over exactly the tests judged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import random
from dataclasses import dataclass

from rewards.arguments import ScoringArguments
from rewards.extract import extract_code
from judging.judge import Judge, Judgement
from judging.records import Problem, Test, joined_runs

# Each problem's trivial shares: [n - 1] is the share of its first n tests that a trivial program passes.
TrivialShares = Mapping[Problem, Sequence[float]]


@dataclass
class Score:
    judgement: Judgement
    reward: float  # the test-case reward; 0.0 without extractable code
    # The judgement on the problem's hidden tests of a completion that passed every judged test, when asked for
    # (ascore's ``hidden_tests``) and the problem has any; never part of the reward.
    hidden: Judgement | None = None

    @property
    def status(self) -> str:
        return self.judgement.status

    @property
    def passed_hidden(self) -> bool | None:
        """Whether a completion that passed every judged test passed every hidden test too; None when it was not
        judged on them, or the judge itself failed there (``sandbox_error``)."""
        if self.hidden is None or self.hidden.status == "sandbox_error":
            return None
        return self.hidden.status == "passed"


def _items(
    problems: Sequence[Problem], texts: Sequence[str | None], tests: Callable[[Problem], Sequence], extract: bool
) -> list[tuple]:
    if len(problems) != len(texts):
        raise ValueError(f"{len(texts)} completions for {len(problems)} problems")
    return [
        (extract_code(text, problem.language) if extract else text, tests(problem), problem.language)
        for problem, text in zip(problems, texts)
    ]


def trivial_share(problem: Problem, tests: int, trivial_shares: TrivialShares | None) -> float:
    """The share of ``problem``'s first ``tests`` tests that a trivial program passes (data/quality/trivial.py)."""
    shares = None if trivial_shares is None else trivial_shares.get(problem)
    if shares is None:
        raise ValueError(
            f"problem {problem.id!r} has no trivial_shares, which --partial_credit above_trivial "
            "needs; measure them with data.quality.trivial first"
        )
    # A judgement over a problem's pool too (evaluation) counts more tests than its shares cover: the share of all
    # its given tests stands for it, the pool's own share being unmeasured.
    return shares[min(tests, len(shares)) - 1]


def _scores(
    judgements: list[Judgement],
    problems: Sequence[Problem],
    scoring: ScoringArguments,
    trivial_shares: TrivialShares | None,
) -> list[Score]:
    def reward(judgement: Judgement, problem: Problem) -> float:
        if judgement.status == "no_code":
            return 0.0
        trivial = trivial_share(problem, judgement.total, trivial_shares) if scoring.needs_trivial_shares else 0.0
        return scoring.of(judgement.passed, judgement.total, trivial)

    return [Score(j, reward(j, problem)) for j, problem in zip(judgements, problems)]


def score(
    judge: Judge,
    problems: Sequence[Problem],
    texts: Sequence[str | None],
    scoring: ScoringArguments,
    *,
    trivial_shares: TrivialShares | None = None,
    all_tests: bool = False,
    timeout: float | None = None,
    extract: bool = True,
    progress: bool = False,
    draw: str = "0",
) -> list[Score]:
    """Judge ``texts[i]`` against ``problems[i]``'s judged tests and the sample of its pool drawn for ``draw`` (all
    its tests, hidden ones and its whole pool included, with ``all_tests``). ``extract=False`` runs each text as it
    is (canonical solutions, verification's no-op). ``trivial_shares`` is read under ``--partial_credit
    above_trivial`` only."""
    items = _items(problems, texts, _tests(scoring, all_tests, draw), extract)
    return _scores(judge.run_many(items, progress=progress, timeout=timeout), problems, scoring, trivial_shares)


def _tests(scoring: ScoringArguments, all_tests: bool = False, draw: str = "0") -> Callable[[Problem], Sequence]:
    """What a problem's completions are judged on: its given tests but the last a run each, then the last and the
    pool's calls in runs of calls (`joined_runs`: one run, for the reward's pool sample), each test's verdict that of
    a run of its own (judging/judge.py, `Judge.run`); tests giving standard input each in a run of their own."""
    if all_tests:
        return lambda problem: joined_runs(problem.tests, problem.pool)
    return lambda problem: joined_runs(
        problem.judged_tests(scoring.max_tests_per_problem),
        pool_sample(problem, scoring.pool_sample_size, draw)[0],
    )


def pool_sample(problem: Problem, size: int, draw: str) -> tuple[tuple[Test, ...], tuple[Test, ...]]:
    """``size`` tests of the problem's pool drawn for ``draw`` (a step's: the same draw gives the same tests, on
    every rank, to every completion of the problem), in pool order, and the rest of its pool."""
    if not problem.pool or size <= 0:
        return (), problem.pool
    chosen = set(random.Random(f"{draw}:{problem.id}").sample(range(len(problem.pool)), min(size, len(problem.pool))))
    return (
        tuple(test for index, test in enumerate(problem.pool) if index in chosen),
        tuple(test for index, test in enumerate(problem.pool) if index not in chosen),
    )


async def ascore(
    judge: Judge,
    problems: Sequence[Problem],
    texts: Sequence[str | None],
    scoring: ScoringArguments,
    *,
    trivial_shares: TrivialShares | None = None,
    timeout: float | None = None,
    hidden_tests: bool = False,
    draw: str = "0",
) -> list[Score]:
    """`score` for TRL's async reward functions: the judged tests and the pool's sample for ``draw``, extracted
    code. With ``hidden_tests``, each completion that passes every judged test is then judged on its problem's
    hidden tests too (`Score.hidden`: the tests beyond the judged ones and the rest of its pool), as soon as it has
    passed, while the others are still being judged."""
    items = _items(problems, texts, _tests(scoring, draw=draw), extract=True)
    if not hidden_tests:
        return _scores(await judge.arun_many(items, timeout=timeout), problems, scoring, trivial_shares)
    import asyncio  # here, not at the top, as in Judge.arun_many

    async def judged(item: tuple, problem: Problem) -> tuple[Judgement, Judgement | None]:
        judgement = (await judge.arun_many([item], timeout=timeout))[0]
        hidden = joined_runs(
            problem.hidden_tests(scoring.max_tests_per_problem),
            pool_sample(problem, scoring.pool_sample_size, draw)[1],
        )
        if judgement.status != "passed" or not hidden:
            return judgement, None
        code, _, language = item
        return judgement, (await judge.arun_many([(code, hidden, language)], timeout=timeout))[0]

    both = await asyncio.gather(*(judged(item, problem) for item, problem in zip(items, problems)))
    scores = _scores([judgement for judgement, _ in both], problems, scoring, trivial_shares)
    for scored, (_, hidden) in zip(scores, both):
        scored.hidden = hidden
    return scores
