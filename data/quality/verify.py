"""Verification of a problem set against the judge.

Wrong tests teach wrong code: a problem whose canonical solution fails its own tests punishes
correct completions forever, and a test that an empty program passes rewards doing nothing. Each
problem's ``solution`` must pass every test and a no-op solution must fail at least one. Tests that
share an answer pay for guessing: a problem whose trivial share (data/quality/trivial.py) is above
``max_trivial_share`` is listed too, with the trivial program that scores. Tests that a wrong program passes pay
it in full: a problem whose judged tests let one through (data/quality/adequacy.py) is listed as weak, with the program
and an input where it is wrong. Programs a model wrote (``given``, data/quality/given_programs.py) that are wrong and earn more
from the judged tests than a constant are listed too.

A record marked ``"twin_of": "q"`` is the Python twin of the q problem of its id (data/q_twins.jsonl): its solution
checks that problem's tests (data/quality/q_twins.py) and it is not trained on, so ``python -m data verify``
(``exempt_twins``) measures its trivial share but does not hold it to ``max_trivial_share``; the rest is verified as
for any problem. A run that trains on such records (``--verify_data``) holds them to it.
"""

from dataclasses import dataclass, field

from data.quality.adequacy import check_adequacy
from data.quality.domain import reference_program
from data.quality.given_programs import check_given_programs
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE, TrivialShare, measure_trivial_shares
from judging import JudgeUnavailable
from judging.records import Problem
from rewards import MAX_TESTS_PER_PROBLEM, ScoringArguments, score

NO_OP_SOLUTION = ""
TWIN_FIELD = "twin_of"
PROBLEMS_PER_BATCH = 16


@dataclass
class VerifyReport:
    """Outcome of ``verify_problems``.

    ``broken`` holds one dict per broken problem: ``id``, ``reason``, ``test`` (index of the failing
    test; 0 when a no-op passes them all), ``expected``, ``got`` and ``stderr`` (that test's expected
    output and what the program printed after the judge's marker, and on stderr). ``guessable`` holds one
    dict per problem above ``max_trivial_share``: ``id``, ``location`` (``file:line``, None when the problem
    was not loaded from a source), and the best trivial program: ``probe``, ``passed`` of ``total`` tests.
    ``adequacy`` holds every checked problem's ``Adequacy`` (its mutation score, the wrong programs that survive its
    judged tests); ``weak`` one dict per problem with a survivor: ``id``, ``location``, ``adequacy``. Under
    ``exempt_twins``, ``twins`` holds the ids of the twins checked (`is_twin`) and ``twins_above`` one dict per twin
    above ``max_trivial_share``, as ``guessable`` would, not counted against the set.
    """

    checked: int = 0
    broken: list = field(default_factory=list)
    unverifiable: list = field(default_factory=list)
    max_trivial_share: float = DEFAULT_MAX_TRIVIAL_SHARE
    trivial: dict = field(default_factory=dict)  # id -> TrivialShare of every problem checked
    guessable: list = field(default_factory=list)
    adequacy: dict = field(default_factory=dict)  # id -> Adequacy of every problem checked
    weak: list = field(default_factory=list)
    given: dict = field(default_factory=dict)  # id -> the GivenPrograms judged on it
    locations: dict = field(default_factory=dict)  # id -> where the problem was read
    twins: list = field(default_factory=list)
    twins_above: list = field(default_factory=list)

    @property
    def paid(self) -> dict:
        """id -> the given programs that are wrong and earn more than a constant on its judged tests."""
        return {i: [p for p in found if p.paid] for i, found in self.given.items() if any(p.paid for p in found)}

    @property
    def clean(self):
        return not self.broken and not self.guessable and not self.weak and not self.paid

    def summary(self):
        listed = (
            {p["id"] for p in self.broken}
            | {p["id"] for p in self.guessable}
            | {p["id"] for p in self.weak}
            | set(self.unverifiable)
            | set(self.paid)
        )
        paid = f"{len(self.paid)} paying a given wrong program, " if self.given else ""
        return (
            f"verified {self.checked} problems: {len(self.broken)} broken, "
            f"{len(self.guessable)} guessable (trivial share above {self.max_trivial_share:g}), "
            f"{len(self.weak)} weak (a wrong program passes the judged tests), {paid}"
            f"{len(self.unverifiable)} unverifiable (no solution), {self.checked - len(listed)} clean"
        )


def is_twin(problem: Problem) -> bool:
    """Whether the record is the twin of a problem in another language (``"twin_of": "q"``), not a training problem."""
    return problem.extra.get(TWIN_FIELD) is not None


def verify_problems(
    problems: list[Problem],
    judge,
    show_progress=True,
    max_trivial_share=DEFAULT_MAX_TRIVIAL_SHARE,
    trivial: list[TrivialShare] | None = None,
    max_tests: int | None = MAX_TESTS_PER_PROBLEM,
    given: dict | None = None,
    exempt_twins: bool = False,
):
    """Judge every problem's solution and a no-op solution on all its tests, then the trivial programs, then the
    wrong programs on the first ``max_tests`` tests (the training reward's; None: all) of every problem whose
    solution passes.

    Problems without a ``solution`` are listed as unverifiable; their tests are still run against the
    no-op, which marks them broken if it passes. ``trivial`` gives the problems' trivial shares when they are
    already measured. ``given`` maps problem ids to programs a model wrote (data/quality/given_programs.py), judged last.
    ``exempt_twins``: a twin's trivial share is not held to ``max_trivial_share`` (see the module's docstring).
    Raises the judge's ``JudgeUnavailable`` from its preflight when a language's interpreter
    is missing, and when the judge cannot run a problem (``sandbox_error``, e.g. a q licence lapsing mid-way):
    that says nothing about the data.
    """
    judge.preflight(*{problem.language for problem in problems})
    report = VerifyReport(
        max_trivial_share=max_trivial_share, locations={problem.id: problem.location for problem in problems}
    )
    from tqdm import tqdm  # here, not at the top: its import costs every command that loads data ~25 ms

    with tqdm(total=len(problems), desc="verifying", unit="problem", disable=not show_progress) as progress:
        for start in range(0, len(problems), PROBLEMS_PER_BATCH):
            batch = problems[start : start + PROBLEMS_PER_BATCH]
            _verify_batch(batch, judge, report)
            progress.update(len(batch))
    if trivial is None:
        trivial = measure_trivial_shares(problems, judge, show_progress)
    for problem, share in zip(problems, trivial):
        report.trivial[problem.id] = share
        twin = exempt_twins and is_twin(problem)
        if twin:
            report.twins.append(problem.id)
        if share.share > max_trivial_share:
            (report.twins_above if twin else report.guessable).append(
                {
                    "id": problem.id,
                    "location": problem.location,
                    "probe": share.probe,
                    "passed": share.passed,
                    "total": share.total,
                }
            )
    broken = {p["id"] for p in report.broken}
    sound = [problem for problem in problems if problem.id not in broken]
    for problem, adequacy in zip(sound, check_adequacy(sound, judge, max_tests, show_progress)):
        report.adequacy[problem.id] = adequacy
        if adequacy.survivors:
            report.weak.append({"id": problem.id, "location": problem.location, "adequacy": adequacy})
    if given:
        report.given = check_given_programs(sound, given, judge, max_tests, cheap_counts(report.trivial, max_tests))
    return report


def cheap_counts(trivial: dict, max_tests: int | None) -> dict[str, int]:
    """The judged tests each problem's best cheap program passes, by id."""
    counts = {}
    for problem_id, share in trivial.items():
        judged = share.total if max_tests is None else min(max_tests, share.total)
        counts[problem_id] = round(share.by_tests[judged - 1] * judged)
    return counts


def _verify_batch(batch, judge, report):
    judged, programs = [], []
    for problem in batch:
        if problem.solution is not None:
            judged.append(problem)
            programs.append(reference_program(problem))  # a test outside the problem's domain breaks it
        judged.append(problem)
        programs.append(NO_OP_SOLUTION)
    scores = score(judge, judged, programs, ScoringArguments(), all_tests=True, extract=False)
    judgements = iter(s.judgement for s in scores)
    for problem in batch:
        report.checked += 1
        canonical = next(judgements) if problem.solution is not None else None
        no_op = next(judgements)
        for judgement in (canonical, no_op):
            if judgement is not None and judgement.status == "sandbox_error":
                # Says nothing about the data: the verification itself cannot be trusted.
                detail = next((t.stderr.strip().splitlines()[-1] for t in judgement.tests if t.stderr.strip()), "")
                raise JudgeUnavailable(
                    f"{problem.id}: the judge could not run it ({detail or 'sandbox error'}); "
                    "fix the judge (q licence, sandbox) and verify again"
                )
        if canonical is not None and canonical.passed < canonical.total:
            report.broken.append(_canonical_failure(problem, canonical))
        elif no_op.passed == no_op.total:
            report.broken.append(_broken(problem, "a no-op solution passes every test", no_op, 0))
        elif canonical is None:
            report.unverifiable.append(problem.id)


def _canonical_failure(problem, judgement):
    index = next(index for index, result in enumerate(judgement.tests) if result.status != "passed")
    which = (
        f"test {index}"
        if index < len(problem.tests)
        else (f"pool test {index - len(problem.tests)} ({problem.pool[index - len(problem.tests)].test_code})")
    )
    return _broken(problem, f"solution fails {which} ({judgement.tests[index].status})", judgement, index)


def _broken(problem, reason, judgement, index):
    result = judgement.tests[index]
    every = (*problem.tests, *problem.pool)  # the order `score` judged them in, with all_tests
    return {
        "id": problem.id,
        "reason": reason,
        "test": index,
        "expected": every[index].expected_output,
        "got": result.stdout,
        "stderr": result.stderr,
    }
