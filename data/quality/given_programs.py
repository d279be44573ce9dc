"""Programs a model wrote, checked against a problem's tests: wrong ones must earn no more than a constant.

The wrong programs a model samples first (a Caesar shift that also shifts upper case, a prime test that only rules
out 2 and 3) are where GRPO starts climbing: partial credit for them is a gradient toward them. ``python -m data
verify --wrong_programs FILE`` reads such programs (a completions file, ``{"id", "completion"}`` per line, as
``python -m rewards score`` reads) and judges each on its problem's judged tests and, with the solution, on the
inputs of every test (hidden ones and the pool's included) and near them (data/quality/wrong_programs.py,
``nearby_calls``, in the problem's domain: data/quality/domain.py). A program is wrong where it prints something else than the solution; a wrong one that passes more
of the judged tests than the problem's best cheap program (its trivial share, data/quality/trivial.py) earns reward under
every ``--partial_credit`` mode and is listed, with the simplest input where it is wrong. One that agrees with the
solution everywhere tried is counted as right.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cli import read_json_objects
from data.quality.adequacy import call_tests, called_as, in_domain, judge_runs, simplest, skip_reason
from data.quality.domain import reference_program
from data.quality.solve_view import CHECKED_NAME, as_solve
from data.quality.wrong_programs import nearby_calls, printed_calls
from judging.records import Problem
from rewards.extract import extract_code

PROBLEMS_PER_BATCH = 16


@dataclass
class GivenProgram:
    """One given program on its problem: ``passed`` of the ``total`` judged tests, where the best cheap program
    passes ``cheap``; ``differs_on`` is the simplest input where it prints something else than the solution (None:
    it agrees everywhere tried)."""

    name: str  # where it was read: "completions.jsonl:3"
    program: str
    passed: int = 0
    total: int = 0
    cheap: int = 0
    differs_on: str | None = None

    @property
    def paid(self) -> bool:
        """Wrong, and paid more than a constant by the judged tests."""
        return self.differs_on is not None and self.passed > self.cheap

    def __str__(self):
        return (
            f"{self.name} passes {self.passed}/{self.total} judged tests (the best cheap program {self.cheap}); "
            f"differs on {self.differs_on}"
        )


def read_given_programs(path: str, language: str = "python") -> dict[str, list[GivenProgram]]:
    """The programs of a completions file by problem id, each named ``path:line``; a completion without code is
    left out."""
    given: dict[str, list[GivenProgram]] = {}
    for record in read_json_objects(
        path, {"id": (str, int), "completion": str}, hint='each line is {"id": ..., "completion": ...}'
    ):
        code = extract_code(record["completion"], language)
        if code is not None:
            given.setdefault(str(record["id"]), []).append(GivenProgram(f"{path}:{record['_line']}", code))
    return given


def check_given_programs(
    problems: list[Problem], given: dict[str, list[GivenProgram]], judge, max_tests: int | None, cheap: dict[str, int]
) -> dict[str, list[GivenProgram]]:
    """Judge the given programs of each problem whose wrong programs can be checked (data/quality/adequacy.py,
    ``skip_reason``; ``cheap``: the judged tests its best cheap program passes, by id); the programs by problem id,
    their fields filled in."""
    checked = [problem for problem in problems if skip_reason(problem) is None and given.get(problem.id)]
    views = {problem.id: as_solve_programs(problem, given[problem.id]) for problem in checked}
    originals, checked = checked, [as_solve(problem) for problem in checked]  # the checks call solve
    for start in range(0, len(checked), PROBLEMS_PER_BATCH):
        _check_batch(checked[start : start + PROBLEMS_PER_BATCH], views, judge, max_tests, cheap)
    for problem in originals:
        for program, view in zip(given[problem.id], views[problem.id]):
            program.passed, program.total, program.cheap = view.passed, view.total, view.cheap
            program.differs_on = view.differs_on and called_as(problem, view.differs_on)
    return {problem.id: given[problem.id] for problem in originals}


def as_solve_programs(problem: Problem, programs: list[GivenProgram]) -> list[GivenProgram]:
    """The programs as the checks of ``problem``'s view (data/quality/solve_view.py) call them: defining ``solve``."""
    if problem.entry_point == CHECKED_NAME:
        return programs
    return [
        replace(program, program=f"{program.program}\n{CHECKED_NAME} = {problem.entry_point}\n") for program in programs
    ]


def _check_batch(batch: list[Problem], given, judge, max_tests, cheap) -> None:
    runs = [(problem, program) for problem in batch for program in given[problem.id]]
    judged = {problem.id: problem.tests[:max_tests] for problem in batch}
    verdicts = judge_runs(judge, [(problem, program.program, judged[problem.id]) for problem, program in runs])
    for (problem, program), judgement in zip(runs, verdicts):
        program.passed, program.total, program.cheap = judgement.passed, judgement.total, cheap.get(problem.id, 0)
    # The calls of every test (judged, hidden and the pool's), one at a time, and the inputs near them: where a wrong
    # program shows it is.
    inputs = {}
    for problem in batch:
        own = [
            arguments for test in (*problem.tests, *problem.pool) for arguments in printed_calls(test.test_code) or []
        ]
        inputs[problem.id] = list({repr(arguments): arguments for arguments in own + nearby_calls(problem)}.values())
    tried = [problem for problem in batch if inputs[problem.id]]  # tests that are not printed calls: no input
    solved = judge_runs(
        judge, [(problem, reference_program(problem), call_tests(inputs[problem.id])) for problem in tried]
    )
    answers = {problem.id: [] for problem in batch}
    answers.update(
        {
            problem.id: in_domain(inputs[problem.id], judgement, judge.timeout)[0]
            for problem, judgement in zip(tried, solved)
        }
    )
    runs = [(problem, program) for problem, program in runs if answers[problem.id]]
    judgements = judge_runs(
        judge, [(problem, program.program, call_tests(*zip(*answers[problem.id]))) for problem, program in runs]
    )
    for (problem, program), judgement in zip(runs, judgements):
        failing = [answers[problem.id][i][0] for i, t in enumerate(judgement.tests) if t.status != "passed"]
        program.differs_on = simplest(failing) if failing else None
