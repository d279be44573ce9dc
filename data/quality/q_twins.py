"""q problems checked against their Python twins, without q.

A q problem's twin is a Python solution of the same problem: a problem with the same id in a Python file given with
``--python_twins`` (the bundled q set's twins are in data/python_problems.jsonl and data/q_twins.jsonl), or, in the
published dataset's schema, the row's own ``python_solution``, whose tests carry ``python_test_code`` and
``python_expected_output`` beside their q code and output. Python runs here, through the judge, where q may not:
``cross_check`` calls the twin's solution on each q test's arguments (read by data/q/values.py), maps its results to
what q's ``show`` prints, and lists every q test whose ``expected_output`` says otherwise; for a published row it
also compares each test's ``q_expected_output`` with its mapped ``python_expected_output``.

What a twin cannot see: a q solution that is wrong the same way on every test, and results outside the printing
convention (refused by the map, listed as disagreements). Running the q solutions themselves still needs q
(``python -m data verify`` does where one is found).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from data.q.values import QForms, Refused, parse_test, q_shown_calls
from data.loading.validate import DataError
from data.quality.verify import VerifyReport
from judging import JudgeUnavailable
from judging.records import Problem, Test
from rewards import ScoringArguments, score

# What no program prints (as data/quality/adequacy.py's): a test with it as expected output shows what the program printed.
UNMATCHABLE = "\0unmatchable expected output\0"
SHOWN_CHARS = 60
TWINS_HELP = (
    "Python files whose problems are the q problems' twins (the same id, a solution): each q test's "
    "arguments are given to the twin's solution, its result mapped to what q's show prints and compared "
    "with the test's expected output, with no q needed. Rows in the published dataset's schema use their "
    "own python_solution."
)


@dataclass(frozen=True)
class Twin:
    """A q problem's Python twin: a Python ``Problem`` (its ``solution``, its tests' calls as inputs, its
    ``entry_point``, default ``solve``), and, for a published row, each q test's ``python_expected_output`` by
    index."""

    problem: Problem
    expected: tuple | None = None

    @property
    def entry_point(self) -> str:
        return self.problem.extra.get("entry_point") or "solve"


def entry_point(problem: Problem) -> str:
    return problem.extra.get("entry_point") or "solve"


def twins_of(problems: list[Problem], twin_problems: list[Problem] = ()) -> dict[str, Twin]:
    """The twin of each q problem in ``problems`` that has one: its own ``python_solution`` (the published schema),
    else a problem with its id and a solution in ``twin_problems``. Raises ValueError when two twin problems share
    an id."""
    by_id: dict[str, Problem] = {}
    for twin in twin_problems:
        if twin.solution is None:
            continue
        if twin.id in by_id:
            raise ValueError(
                f"{twin.location or twin.id}: the twin {twin.id!r} is given twice (first at "
                f"{by_id[twin.id].location or 'an earlier file'}); give each q problem one twin"
            )
        by_id[twin.id] = twin
    twins = {}
    for problem in problems:
        if problem.language != "q":
            continue
        if problem.extra.get("python_solution"):
            tests = problem.extra.get("python_tests") or []
            usable = tuple(
                Test(t["test_code"], str(t["expected_output"]))
                for t in tests
                if t.get("test_code") and t.get("expected_output") is not None
            )
            twin = Problem(
                problem.id,
                "python",
                problem.description,
                usable,
                problem.extra["python_solution"],
                location=problem.location,
            )
            expected = tuple(t.get("expected_output") for t in tests) if len(tests) == len(problem.tests) else None
            twins[problem.id] = Twin(twin, expected)
        elif problem.id in by_id:
            twins[problem.id] = Twin(by_id[problem.id])
    return twins


@dataclass
class CrossCheck:
    """What ``cross_check`` found: ``problems`` with a twin, ``tests`` cross-checked, ``disagreements`` (one line
    each, ``file:line: id: tests[N]: ...``), ``decided`` (tests where the q tests decided a char, string or symbol)
    and the q problems ``without_twin``."""

    problems: int = 0
    tests: int = 0
    disagreements: list[str] = field(default_factory=list)
    decided: int = 0
    without_twin: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.disagreements

    def summary(self) -> str:
        return (
            f"cross-checked {self.tests} q tests of {self.problems} problems against their Python twins: "
            f"{self.tests - len(self.disagreements)} agree, {len(self.disagreements)} disagree (the q tests "
            f"decided a char, string or symbol in {self.decided}); {len(self.without_twin)} q problems have no "
            "twin"
        )


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def call_code(entry_point: str, calls: list[tuple]) -> str:
    """A Python test printing the repr of the tuple of every call's result."""
    texts = [f"{entry_point}({', '.join(repr(argument) for argument in arguments)})" for arguments in calls]
    return f"print(repr(({', '.join(texts)},)))"


def twin_results(judge, runs: list[tuple[Twin, list[tuple]]]) -> list[tuple | str]:
    """For each ``(twin, calls)``: the tuple of the twin's results on the calls, or why there is none (it failed,
    printed something else, or its result is no Python literal). One judged program per run, in parallel."""
    if not runs:
        return []
    problems = [
        Problem(twin.problem.id, "python", "", (Test(call_code(twin.entry_point, calls), UNMATCHABLE),))
        for twin, calls in runs
    ]
    scores = score(
        judge, problems, [twin.problem.solution for twin, _ in runs], ScoringArguments(), all_tests=True, extract=False
    )
    found = []
    for (twin, calls), result in zip(runs, scores):
        test = result.judgement.tests[0]
        if result.status == "sandbox_error":
            raise JudgeUnavailable(
                f"{twin.problem.id}: the judge could not run the Python twin "
                f"({test.stderr.strip()[-200:] or 'sandbox error'}); fix the judge and retry"
            )
        if test.status != "failed":
            last = test.stderr.strip().splitlines()[-1] if test.stderr.strip() else ""
            found.append(f"the Python solution fails on these arguments ({test.status}{': ' + last if last else ''})")
            continue
        try:
            values = ast.literal_eval(test.stdout.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            found.append(f"the Python solution printed {_shown(test.stdout.strip())}, not its results as literals")
            continue
        found.append(
            values
            if isinstance(values, tuple) and len(values) == len(calls)
            else f"the Python solution printed {_shown(test.stdout.strip())}, not its results as literals"
        )
    return found


def _gives(values: tuple) -> str:
    return _shown(values[0] if len(values) == 1 else values)


def cross_check(problems: list[Problem], twins: dict[str, Twin], judge) -> CrossCheck:
    """Each q problem's tests against its twin (``twins_of``): the twin's solution on each test's arguments, its
    results mapped to what ``show`` prints, compared with the test's expected output; and, for published rows, the
    test's ``python_expected_output`` mapped the same way."""
    report = CrossCheck()
    runs, checks, found = [], [], []  # found: (problem's place, test index, line)
    for problem in problems:
        if problem.language != "q":
            continue
        twin = twins.get(problem.id)
        if twin is None:
            report.without_twin.append(problem.id)
            continue
        report.problems += 1
        forms = QForms.of_tests(problem.tests, entry_point(problem))
        where = f"{problem.location or problem.id}: {problem.id}"
        for index, test in enumerate(problem.tests):
            report.tests += 1
            expected = test.expected_output.strip()
            head = f"{where}: tests[{index}]: q expects {expected}"
            try:
                calls = parse_test(test.test_code, entry_point(problem))
            except Refused as refused:
                found.append((report.problems, index, f"{head}; the test is outside the map from Python: {refused}"))
                continue
            runs.append((twin, [tuple(argument.python for argument in call) for call in calls]))
            checks.append((report.problems, head, expected, calls, forms, twin, index))
    for (place, head, expected, calls, forms, twin, index), values in zip(checks, twin_results(judge, runs)):
        decided = False
        if isinstance(values, str):
            found.append((place, index, f"{head}; {values}"))
        else:
            mapped = _mapped(values, calls, forms)
            if isinstance(mapped, Refused):
                found.append(
                    (place, index, f"{head}; the Python solution gives {_gives(values)}, which q cannot show: {mapped}")
                )
            else:
                decided = bool(mapped.decided)
                if mapped.text != expected:
                    found.append(
                        (
                            place,
                            index,
                            f"{head}; the Python solution gives {_gives(values)}, shown by q as {mapped.text}",
                        )
                    )
        if twin.expected is not None and twin.expected[index] is not None:
            disagreement = _published(twin.expected[index], expected, calls, forms)
            if disagreement:
                found.append((place, index, f"{head}; {disagreement}"))
        report.decided += decided
    report.disagreements = [line for _, _, line in sorted(found, key=lambda item: item[:2])]
    return report


def _mapped(values, calls, forms: QForms):
    """What ``show`` prints for one test's results, the result forms its calls' argument forms have in the q tests
    deciding; the ``Refused`` where it cannot."""
    try:
        if len(values) == 1:
            return q_shown_calls(list(values), forms.result_of(tuple(a.form for a in calls[0])))
        return q_shown_calls(list(values), forms.result)
    except Refused as refused:
        return refused


def _published(python_expected: str, q_expected: str, calls, forms: QForms) -> str | None:
    """A published test's ``python_expected_output`` read as the value(s) it prints, mapped, against its
    ``q_expected_output``: the disagreement, or None."""
    text = str(python_expected).strip()
    candidates = []
    for reading in _readings(text, len(calls)):
        mapped = _mapped(reading, calls, forms)
        if not isinstance(mapped, Refused) and mapped.text == q_expected:
            return None
        candidates.append(mapped)
    shown = next((m for m in candidates if not isinstance(m, Refused)), None)
    if shown is not None:
        return f"python_expected_output is {_shown(text)}, shown by q as {shown.text}"
    return f"python_expected_output is {_shown(text)}, which q cannot show: {candidates[0]}"


def _readings(text: str, calls: int) -> list[tuple]:
    """The values a Python test's printed text may be: printed strings carry no quotes, so ``9`` may be 9 or '9'."""
    if calls == 1:
        readings = []
        try:
            readings.append((ast.literal_eval(text),))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        return readings + [(text,)]
    words = text.split()
    if len(words) != calls:
        return [(text,)]
    values = []
    for word in words:
        try:
            values.append(ast.literal_eval(word))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            values.append(word)
    return [tuple(values), tuple(words)]


def load_twins(
    paths: list[str], problems: list[Problem], allow_in_sandbox_comparisons: bool = False
) -> dict[str, Twin]:
    """The twins of ``problems``'s q problems: their own ``python_solution`` where they carry one, else a problem of
    their id in the Python files ``paths``. Raises ``DataError`` for a bad file or an id given twice."""
    from data.loading.loaders import load_problems

    twin_problems = []
    for path in paths:
        twin_problems += load_problems(path, "python", allow_in_sandbox_comparisons)
    try:
        return twins_of(problems, twin_problems)
    except ValueError as error:
        raise DataError(*str(error).split(": ", 1)) from None


class ReadReport(VerifyReport):
    """A ``VerifyReport`` of q problems read, not run: its summary says so."""

    def summary(self):
        listed = {p["id"] for p in self.guessable}
        return (
            f"read {self.checked} q problems without q (their solutions not run): {len(listed)} guessable by "
            f"reading (trivial share above {self.max_trivial_share:g}), {self.checked - len(listed)} clean by "
            "reading"
        )


def read_without_q(problems: list[Problem], max_trivial_share: float, reason: str):
    """A ``VerifyReport`` of what can be checked of q problems where no q runs: their trivial shares read off the
    tests (data/quality/trivial.py's ``read_trivial_shares``: the best constant, the identity, the description's examples),
    every problem above ``max_trivial_share`` listed; the solutions, the no-op and the wrong programs not run,
    ``reason`` saying why."""
    from data.quality.adequacy import Adequacy
    from data.quality.trivial import read_trivial_shares

    report = ReadReport(checked=len(problems), max_trivial_share=max_trivial_share)
    for problem, share in zip(problems, read_trivial_shares(problems)):
        report.trivial[problem.id] = share
        report.adequacy[problem.id] = Adequacy(skipped=f"the q solutions cannot run here ({reason})")
        if share.share > max_trivial_share:
            report.guessable.append(
                {
                    "id": problem.id,
                    "location": problem.location,
                    "probe": share.probe,
                    "passed": share.passed,
                    "total": share.total,
                }
            )
    return report
