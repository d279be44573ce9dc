"""The trivial share of a problem: the largest fraction of its tests a cheap program that does not solve it passes.

The test-case reward pays the fraction of tests passed. When a problem's tests share an answer, a `solve` that
always returns it (``True``, ``0``, ``[]``, ...) earns part of the reward with no algorithm at all, and under GRPO
such a constant is a cheap local optimum; so does a program that reads its input cheaply (the first element, the
length) or answers by call order ("True, then False"). The cheap programs, run through the real judge exactly as
completions are, are the probes, which ignore the input:

- a constant of each type the tests print: booleans, 0, 1, -1, the empty string, the empty list, None (q: ``1b``,
  ``0b``, ``0``, ``1``, ``-1``, ``""``, ``()``);
- echoing its first argument (q: the identity ``{x}``);
- printing nothing: ``solve`` ends the program, so nothing at all is printed after the judge's marker. (Returning
  ``None`` prints ``None``, and returning ``""`` prints an empty line; both are probes of their own.)

then, for Python, the battery of data/quality/wrong_programs.py (element picks, min/max/len/sum, parity, sortedness, the
call-order answers), less any battery program that passes every test (``max(x)`` is the answer to the maximum of a
list); and a test whose input and output the description shows counts as passed by copying them.

Each probe's ``solve`` takes any arguments (Python ``*args, **kwargs``; q a function composed with ``enlist``,
which accepts one to eight arguments), so a single probe fits every problem.

A problem's trivial share depends on which of its tests are judged: the training reward uses the first
``--max_tests_per_problem``, evaluation all of them. ``TrivialShare.by_tests[n - 1]`` is the share over the first
n tests, so every consumer reads the share of exactly the tests it judges.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from data.q.values import Refused, parse_test, q_literal, q_shown_values
from data.quality.solve_view import as_solve
from data.quality.wrong_programs import BATTERY, Probe, battery, call_text, solve_calls
from judging import JudgeUnavailable
from judging.records import Problem, Test
from rewards import ScoringArguments, score

PROBLEMS_PER_BATCH = 16
ECHO_Q = "echoing its first argument ({x})"
# Above it a problem is listed by `python -m data verify` (and stops `--verify_data`): just above 1/3, so one test
# in three sharing a constant answer passes, two in four do not.
DEFAULT_MAX_TRIVIAL_SHARE = 0.34


def _python_probe(name: str, body: str, prints: str | None = None) -> Probe:
    return Probe(name, f"def solve(*args, **kwargs):\n    {body}\n", prints)


def _q_probe(name: str, function: str) -> Probe:
    # A function composed with enlist takes one to eight arguments as one list: solve[a], solve[a;b], solve a.
    return Probe(name, f"solve:('[{function};enlist])\n")


PROBES: dict[str, tuple[Probe, ...]] = {
    "python": (
        *(
            _python_probe(f"returning {value}", f"return {value}", str(ast.literal_eval(value)))
            for value in ("True", "False", "0", "1", "-1", "''", "[]", "None")
        ),
        _python_probe("echoing its first argument", "return args[0]"),
        _python_probe("printing nothing", "raise SystemExit(0)", ""),
    ),
    "q": (
        *(_q_probe(f"returning {value}", "{" + value + "}") for value in ("1b", "0b", "0", "1", "-1", '""', "()")),
        _q_probe(ECHO_Q, "first"),
        _q_probe("printing nothing", "{exit 0}"),
    ),
}
# A problem whose tests give standard input is judged as a whole program: these echo the input or print nothing,
# whatever the input (a constant is counted as for every problem: ``constant_passes``).
STDIN_PROBES: tuple[Probe, ...] = (
    Probe("echoing its input", "import sys\nsys.stdout.write(sys.stdin.read())\n"),
    Probe("printing the first line of its input", "print(input())\n"),
    Probe("printing nothing", "", ""),
)


@dataclass
class TrivialShare:
    """What the best probe achieves on one problem: ``passed`` of its ``total`` tests, ``share`` = passed/total.

    ``by_tests[n - 1]`` is the largest share any probe achieves over the first n tests (the best probe there may
    differ from ``probe``)."""

    share: float
    probe: str
    passed: int
    total: int
    by_tests: list[float]


def probes(problem: Problem) -> tuple[Probe, ...]:
    """The probes worth running on ``problem``: all of its language's, less those that certainly fail every test.

    When every test is ``print(solve(<literals>))``, a constant's output is known without running it (``True``
    prints ``True``), so a probe whose output no test expects passes none and is left out. What is run is
    judged; the shares are those that running every probe gives, in a fifth of the executions on the bundled
    Python set."""
    if problem.reads_input:
        return tuple(
            probe
            for probe in STDIN_PROBES
            if probe.prints is None or probe.prints in {t.expected_output.strip() for t in problem.tests}
        )
    family = PROBES[problem.language]
    if problem.language != "python" or not all(_prints_solve_of_literals(t.test_code) for t in problem.tests):
        return family
    expected = {t.expected_output.strip() for t in problem.tests}
    return tuple(probe for probe in family if probe.prints is None or probe.prints in expected)


def _prints_solve_of_literals(test_code: str) -> bool:
    """Whether the test is exactly ``print(solve(...))`` with literal arguments (nothing else can print)."""
    try:
        body = ast.parse(test_code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not _call_of(body[0].value, "print", 1):
        return False
    solve = body[0].value.args[0]
    if not _call_of(solve, "solve") or any(k.arg is None for k in solve.keywords):
        return False
    for node in [*solve.args, *(k.value for k in solve.keywords)]:
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return False
    return True


def _call_of(node: ast.AST, name: str, arguments: int | None = None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and (arguments is None or (len(node.args) == arguments and not node.keywords))
    )


def cheap_programs(problem: Problem) -> tuple[Probe, ...]:
    """The programs whose best share is the problem's trivial share: the probes worth running, then the battery
    of cheap input-reading and call-order programs (data/quality/wrong_programs.py) worth running.

    A battery program is left out, like a constant, when it certainly fails every test: every test prints
    ``solve`` of literals, and what the program would print, worked out here (it is this module's own code, run on
    the tests' literals), is no test's expected output. What is run is judged."""
    family = () if problem.reads_input else battery(problem)
    every = (*problem.tests, *problem.pool)  # what the share is measured over
    calls = [solve_calls(test.test_code) for test in every]
    if not family or not all(calls):
        return probes(problem) + family
    expected = [test.expected_output.strip() for test in every]
    return probes(problem) + tuple(
        probe
        for probe in family
        if any(_would_print(probe, test_calls) == wanted for test_calls, wanted in zip(calls, expected))
    )


def _would_print(probe: Probe, calls: list[tuple]) -> str | None:
    """What ``print(solve(a), solve(b), ...)`` prints, stripped, with ``probe``'s solve; None when it raises."""
    namespace: dict = {}
    exec(probe.program, namespace)  # a battery program: this module's own code
    try:
        return " ".join(str(namespace["solve"](*arguments)) for arguments in calls).strip()
    except Exception:  # the program fails on these arguments (x[0] of an empty list): it prints nothing there
        return None


_DESCRIBED = "copying the description's examples"


def described_example(problem: Problem, test: Test) -> bool:
    """Whether a test's input and output both appear in the description, so a program can hard-code it: every
    argument of each ``solve`` call it prints, and its expected output, each as a whole word of the text."""
    if problem.language == "q":
        return _q_described_example(problem, test)
    calls = solve_calls(test.test_code)
    if not calls:
        return False
    texts = [repr(argument) for arguments in calls for argument in arguments]
    texts += [call_text(arguments)[len("solve(") : -1] for arguments in calls if len(arguments) > 1]
    return _in_description(problem.description, texts + [test.expected_output.strip()])


def _in_description(description: str, words: list[str]) -> bool:
    return all(re.search(rf"(?<![\w.]){re.escape(word)}(?![\w.])", description) for word in words)


def _entry_point(problem: Problem) -> str:
    return problem.extra.get("entry_point") or "solve"


def _q_described_example(problem: Problem, test: Test) -> bool:
    """A q test's arguments (as the map writes them, and as the test has them) and expected output, each a whole
    word of the description."""
    try:
        calls = parse_test(test.test_code, _entry_point(problem))
    except Refused:
        return False
    written = []
    for arguments in calls:
        for argument in arguments:
            try:
                written.append(q_literal(argument.python, {argument.form: "the test"}).text)
            except Refused:
                return False
    return _in_description(problem.description, written + [test.expected_output.strip()])


def constant_passes(expected: list[str]) -> list[tuple[Probe, list[bool]]]:
    """For each output the tests expect, which of them a program printing it passes whatever its input (it prints the
    text and ends: nothing else follows the judge's marker), so a test list's best constant is its most frequent
    expected output, known from the expected outputs alone."""
    texts = [str(text).strip() for text in expected]
    return [
        (Probe(f"printing {text!r} whatever the input", "", text), [t == text for t in texts])
        for text in dict.fromkeys(texts)
    ]


def _q_echo_passes(problem: Problem) -> list[bool]:
    """Which q tests the identity passes (``{x}``: it shows its first argument, or the vector of the first
    arguments of a test's calls), read off the tests where the map reads them."""
    passes = []
    for test in problem.tests:
        try:
            calls = parse_test(test.test_code, _entry_point(problem))
            shown = q_shown_values([arguments[0] for arguments in calls])
        except Refused:
            shown = None
        passes.append(shown == test.expected_output.strip())
    return passes


def read_trivial_shares(problems: list[Problem]) -> list[TrivialShare]:
    """The trivial share of the cheap programs whose passes are read off a problem's tests, with nothing run: a
    constant (the most frequent expected output), copying the description's examples, and on q problems the
    identity where the map reads a test's arguments. Where no q runs, this is a q problem's share."""
    shares = []
    for problem in problems:
        passes = constant_passes([test.expected_output for test in problem.tests])
        examples = [described_example(problem, test) for test in problem.tests]
        if any(examples):
            passes.append((Probe(_DESCRIBED, ""), examples))
        if problem.language == "q":
            passes.append((Probe(ECHO_Q, ""), _q_echo_passes(problem)))
        shares.append(_share(passes))
    return shares


def measure_trivial_shares(problems: list[Problem], judge, show_progress: bool = False) -> list[TrivialShare]:
    """Run every cheap program of each problem (``cheap_programs``) on all its tests through ``judge``; one result
    per problem.

    Raises ``JudgeUnavailable`` when the judge cannot run a probe (``sandbox_error``): that says nothing about
    the data, and a share measured through a broken sandbox would be wrong."""
    shares: list[TrivialShare] = []
    problems = [as_solve(problem) for problem in problems]  # the probes define solve
    from tqdm import tqdm  # here, not at the top: its import costs every command that loads data ~25 ms

    with tqdm(total=len(problems), desc="trivial programs", unit="problem", disable=not show_progress) as progress:
        for start in range(0, len(problems), PROBLEMS_PER_BATCH):
            batch = problems[start : start + PROBLEMS_PER_BATCH]
            shares += _measure_batch(batch, judge)
            progress.update(len(batch))
    return shares


def _measure_batch(batch: list[Problem], judge) -> list[TrivialShare]:
    judged, programs = [], []
    family = [cheap_programs(problem) for problem in batch]
    for problem, run in zip(batch, family):
        for probe in run:
            judged.append(problem)
            programs.append(probe.program)
    judgements = iter(
        s.judgement for s in score(judge, judged, programs, ScoringArguments(), all_tests=True, extract=False)
    )
    results = []
    for problem, run in zip(batch, family):
        passes = []  # per probe, whether each test passed
        for probe in run:
            judgement = next(judgements)
            if judgement.status == "sandbox_error":
                detail = next((t.stderr.strip().splitlines()[-1] for t in judgement.tests if t.stderr.strip()), "")
                raise JudgeUnavailable(
                    f"{problem.id}: the judge could not run the probe {probe.name!r} "
                    f"({detail or 'sandbox error'}); fix the judge (q licence, sandbox) and retry"
                )
            tests = [t.status == "passed" for t in judgement.tests]
            # A battery program that passes every test is the problem's answer (`max(x)` for the maximum), not a
            # guess; one that is wrong all the same is for data/quality/adequacy.py to find.
            if probe not in BATTERY or not all(tests):
                passes.append((probe, tests))
        # Judged with all_tests: the given tests, then the pool's, in order.
        every = (*problem.tests, *problem.pool)
        examples = [described_example(problem, test) for test in every]
        if any(examples):
            passes.append((Probe(_DESCRIBED, ""), examples))
        passes += constant_passes([test.expected_output for test in every])
        results.append(_share(passes))
    return results


def _share(passes: list[tuple[Probe, list[bool]]]) -> TrivialShare:
    total = len(passes[0][1])  # the echo always runs
    best, best_passed = max(((probe, sum(tests)) for probe, tests in passes), key=lambda pair: pair[1])
    by_tests = [max(sum(tests[:n]) for _, tests in passes) / n for n in range(1, total + 1)]
    return TrivialShare(best_passed / total, best.name, best_passed, total, by_tests)


def _key(problem: Problem) -> str:
    """What a cached share depends on: the language, the description, the tests and the programs run on them."""
    programs = STDIN_PROBES if problem.reads_input else PROBES[problem.language] + BATTERY
    text = json.dumps(
        [
            problem.language,
            problem.description,
            [test.record() for test in problem.tests],
            [test.record() for test in problem.pool],
            [p.program for p in programs],
            constant_passes.__name__,
        ],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def cached_trivial_shares(
    problems: list[Problem], judge, cache: str | Path | None, show_progress: bool = False
) -> list[TrivialShare]:
    """``measure_trivial_shares``, reading and extending the JSON file ``cache`` (a run folder's
    ``trivial_shares.json``; None: no cache).

    Entries are keyed by each problem's language, tests and the probes, so a changed problem is measured again and
    a resumed run measures nothing. An unreadable cache is measured afresh and replaced."""
    cache = Path(cache) if cache is not None else None
    stored = {}
    if cache is not None and cache.exists():
        try:
            stored = json.loads(cache.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            stored = {}
    keys = [_key(problem) for problem in problems]
    missing = list({key: problem for problem, key in zip(problems, keys) if key not in stored}.values())
    if missing:
        measured = measure_trivial_shares(missing, judge, show_progress)
        stored.update({_key(p): {"id": p.id, **asdict(s)} for p, s in zip(missing, measured)})
        if cache is not None:
            tmp = cache.with_suffix(f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps(stored, indent=1))
            os.replace(tmp, cache)
    return [TrivialShare(**{k: v for k, v in stored[key].items() if k != "id"}) for key in keys]
