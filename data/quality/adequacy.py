"""Test adequacy: whether a problem's judged tests reject the wrong programs a policy can reach cheaply.

A test set that a wrong program passes pays it the full reward, and GRPO climbs toward whatever pays. For each
Python problem with a ``solution``, the wrong programs of data/quality/wrong_programs.py (mutants of the solution, the
battery of cheap input-reading and call-order programs, the constants) are judged on the tests the training reward
judges (the first ``--max_tests_per_problem``), one test at a time so that most stop at their first failure. A
program that passes them all is then judged with the solution on inputs near the tests'
(``wrong_programs.nearby_calls``, of the tests' classes and of others, the expected output being what the solution
printed there): if it prints something else on one of them it is wrong and survives, and the tests are weak, the
simplest such input shown; if it agrees everywhere it is counted as equivalent. Inputs the solution does not answer
well inside the time limit (data/quality/domain.py: it raises, fails an assert or the problem's ``domain``, runs long) are
outside the problem's domain and left out, and counted. A problem's mutation score is the share of the wrong
programs (equivalent ones left out) that its judged tests reject.

Everything runs through the judge's parallel path, every problem's programs in one batch per round.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from data.quality.domain import answered, reference_program
from data.quality.input_classes import value_classes
from data.quality.solve_view import as_solve
from data.quality.trivial import cheap_programs
from data.quality.wrong_programs import call_text, mutants, nearby_calls, printed_calls, printing_test
from judging import JudgeUnavailable
from judging.records import Problem, Test, in_runs
from rewards import MAX_TESTS_PER_PROBLEM, ScoringArguments, score

# What no program prints: a test with it as expected output shows what the program printed, and how it ended.
UNMATCHABLE = "\0unmatchable expected output\0"
PROBLEMS_PER_BATCH = 32


@dataclass
class Survivor:
    program: str  # its name: "returning x[0]", "mutant line 3: `a + b` -> `a - b`"
    passed: int
    total: int
    differs_on: str  # the simplest nearby call where it prints something else than the solution: "solve([0, 1])"
    source: str = ""

    def __str__(self):
        return f"{self.program} passes {self.passed}/{self.total}; differs on {self.differs_on}"


@dataclass
class Adequacy:
    """One problem's wrong programs: ``killed`` fail a judged test, ``equivalent`` pass them and agree with the
    solution on every nearby input, ``survivors`` pass them and differ somewhere. ``skipped`` says why a problem was
    not checked (then every count is 0)."""

    killed: int = 0
    equivalent: int = 0
    survivors: list[Survivor] = field(default_factory=list)
    skipped: str | None = None
    outside_domain: int = 0  # nearby inputs left out: the solution does not answer them (data/quality/domain.py)
    pool: int = 0  # the problem's pool tests, which the reward samples beside the judged tests
    killed_by_pool: int = 0  # of ``killed``: passed every judged test, failed a pool test
    pool_classes: int = 0  # the input classes its pool's calls cover (data/quality/input_classes.py, `value_classes`)

    @property
    def wrong(self) -> int:
        return self.killed + len(self.survivors)

    @property
    def score(self) -> float:
        """The mutation score: the share of the wrong programs the judged tests reject (1 when there are none)."""
        return self.killed / self.wrong if self.wrong else 1.0


def pool_classes(problem: Problem) -> set:
    """The input classes (`value_classes`) of the calls of ``problem``'s pool."""
    calls = [call for test in as_solve(problem).pool for call in printed_calls(test.test_code) or ()]
    return set().union(set(), *map(value_classes, calls))


def skip_reason(problem: Problem) -> str | None:
    if problem.solution is None:
        return "no solution"
    if problem.language != "python":
        return f"wrong programs are made for Python only, not {problem.language}"
    if problem.reads_input:
        return "its tests give standard input, where no nearby input is made"
    return None


def wrong_programs(problem: Problem) -> list:
    """The wrong programs tried on ``problem``: the mutants of its solution, then the constants and the battery that
    can pass one of its tests (data/quality/trivial.py's ``cheap_programs``), less any with the solution's own text."""
    found, seen = [], {problem.solution.strip()}
    for program in (*mutants(problem.solution), *cheap_programs(problem)):
        if program.program.strip() not in seen:
            seen.add(program.program.strip())
            found.append(program)
    return found


def check_adequacy(
    problems: list[Problem], judge, max_tests: int | None = MAX_TESTS_PER_PROBLEM, show_progress: bool = False
) -> list[Adequacy]:
    """The adequacy of each problem's judged tests (its first ``max_tests`` not marked hidden; None: all of them),
    one result per problem, in order."""
    results = []
    originals, problems = problems, [as_solve(problem) for problem in problems]  # the wrong programs define solve
    from tqdm import tqdm  # here, not at the top: its import costs every command that loads data ~25 ms

    with tqdm(total=len(problems), desc="wrong programs", unit="problem", disable=not show_progress) as progress:
        for start in range(0, len(problems), PROBLEMS_PER_BATCH):
            batch = problems[start : start + PROBLEMS_PER_BATCH]
            results += _check_batch(batch, judge, max_tests)
            progress.update(len(batch))
    for original, result in zip(originals, results):
        for survivor in result.survivors:
            survivor.differs_on = called_as(original, survivor.differs_on)
    return results


def called_as(problem: Problem, call: str) -> str:
    """A call of the checks' ``solve`` as the problem's tests write it (``has_close_elements(...)``)."""
    return problem.entry_point + call[len("solve") :] if call.startswith("solve(") else call


def judge_runs(judge, runs: list[tuple[Problem, str, list[Test]]]) -> list:
    """Judge each ``(problem, program, tests)``; the judgements, in order."""
    problems = [replace(problem, tests=tuple(tests), pool=()) for problem, _, tests in runs]
    judgements = [
        s.judgement
        for s in score(
            judge, problems, [program for _, program, _ in runs], ScoringArguments(), all_tests=True, extract=False
        )
    ]
    for (problem, _, _), judgement in zip(runs, judgements):
        if judgement.status == "sandbox_error":
            detail = next((t.stderr.strip().splitlines()[-1] for t in judgement.tests if t.stderr.strip()), "")
            raise JudgeUnavailable(
                f"{problem.id}: the judge could not run a wrong program "
                f"({detail or 'sandbox error'}); fix the judge (q licence, sandbox) and retry"
            )
    return judgements


def _check_batch(batch: list[Problem], judge, max_tests: int | None) -> list[Adequacy]:
    results = [Adequacy(skipped=skip_reason(problem)) for problem in batch]
    checked = [(index, problem) for index, problem in enumerate(batch) if results[index].skipped is None]
    # Round n: the programs still alive on the n-th judged test.
    alive = {index: wrong_programs(problem) for index, problem in checked}
    judged = {index: problem.judged_tests(max_tests) for index, problem in checked}
    for round_ in range(max((len(tests) for tests in judged.values()), default=0)):
        runs = [
            (index, program) for index, programs in alive.items() for program in programs if round_ < len(judged[index])
        ]
        judgements = judge_runs(
            judge, [(batch[index], program.program, [judged[index][round_]]) for index, program in runs]
        )
        for (index, program), judgement in zip(runs, judgements):
            if judgement.status != "passed":
                alive[index].remove(program)
                results[index].killed += 1
    # What passed every judged test and fails a pool test is rejected by the reward's pool sample.
    pooled = [(index, program) for index, programs in alive.items() for program in programs if batch[index].pool]
    for index, _ in checked:
        results[index].pool = len(batch[index].pool)
        results[index].pool_classes = len(pool_classes(batch[index]))
    judgements = judge_runs(
        judge, [(batch[index], program.program, list(in_runs(batch[index].pool))) for index, program in pooled]
    )
    for (index, program), judgement in zip(pooled, judgements):
        if judgement.status != "passed":
            alive[index].remove(program)
            results[index].killed += 1
            results[index].killed_by_pool += 1
    # What passed every judged test: wrong where it prints something else than the solution near the tests.
    suspects = [index for index, programs in alive.items() if programs]
    inputs = {index: nearby_calls(batch[index]) for index in suspects}
    tried = [index for index in suspects if inputs[index]]  # none near float arguments: nowhere to differ
    solved = judge_runs(
        judge, [(batch[index], reference_program(batch[index]), call_tests(inputs[index])) for index in tried]
    )
    for index, judgement in zip(tried, solved):
        inputs[index], results[index].outside_domain = in_domain(inputs[index], judgement, judge.timeout)
    runs = [(index, program) for index in suspects for program in alive[index]]
    judgements = judge_runs(
        judge,
        [(batch[index], program.program, call_tests(*zip(*inputs[index]))) for index, program in runs if inputs[index]],
    )
    judgements = iter(judgements)
    for index, program in runs:
        judgement = next(judgements) if inputs[index] else None
        failing = [] if judgement is None else [i for i, t in enumerate(judgement.tests) if t.status != "passed"]
        if not failing:
            results[index].equivalent += 1
            continue
        total = len(judged[index])
        results[index].survivors.append(
            Survivor(program.name, total, total, simplest([inputs[index][i][0] for i in failing]), program.program)
        )
    return results


def in_domain(calls: list[tuple], judgement, timeout: float) -> tuple[list[tuple], int]:
    """The calls the solution answered well inside the time limit, each with what it printed, and how many it did
    not answer (data/quality/domain.py: it raised, failed its own assert or the problem's ``domain``, or took too long)."""
    answers = [
        (arguments, result.stdout) for arguments, result in zip(calls, judgement.tests) if answered(result, timeout)
    ]
    return answers, len(calls) - len(answers)


def simplest(calls: list[tuple]) -> str:
    """The simplest of the calls, as source: the shortest, then the first in text order."""
    return min((call_text(arguments) for arguments in calls), key=lambda text: (len(text), text))


def call_tests(calls: list[tuple], expected: list[str] | None = None) -> list[Test]:
    return [
        Test(printing_test([arguments]), UNMATCHABLE if expected is None else expected[i])
        for i, arguments in enumerate(calls)
    ]
