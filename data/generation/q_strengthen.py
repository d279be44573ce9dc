"""q tests made from a problem's Python twin (data/quality/q_twins.py), without q: ``python -m data strengthen`` for q.

For each q problem with a twin, candidate inputs are the twin's own tests' calls, the inputs near them and near the
q problem's own tests (``wrong_programs.nearby_calls``, where the twin's mutants show themselves), each mapped to q
(data/q/values.py) and kept only where it stays inside what the q problem takes: the forms its q tests show at that
argument, the character classes of their strings (lower case, upper case, digits, spaces, others), the signs of
their numbers, lists of no or one item only where a q test has one, and what the q description names (positive,
non-empty, sorted ... as for Python). A Python twin often takes more than its q problem (0 where q says positive,
any case where q says lower case), and there the two may answer differently. The expected output of each is what
the twin's solution returns, mapped to what q's ``show`` prints; an input whose result is outside the printing
convention is dropped. Where the answers are few (yes/no problems), tests show two or three calls,
``show (solve[a];solve[b])``, in mixed orders.

The q programs a policy writes first cannot run here; the twin's stand in for them: its mutants, constants, battery
and call-order answers (data/quality/wrong_programs.py) are run on every candidate in Python. The tests are then chosen as
for Python (data/generation/strengthen.py): the first ``max_tests`` so that every such wrong program fails one, no expected
output appears more than ``max_share`` of them (the best constant) and no cheap program (a twin constant, the
battery, the identity, the description's examples) passes more; then the q problem's own tests, each once; then more
candidates while a cheap program or a constant passes more than ``max_share`` of all. A test whose input and output
are both in the description is never added, and a test is added only where its expected output keeps every constant
at or below ``max_share``.
"""

from __future__ import annotations

import ast
import math
import random
from dataclasses import dataclass, replace

from data.quality.q_twins import UNMATCHABLE, Twin, call_code
from data.quality.q_twins import entry_point as q_entry_point
from data.q.values import QForms, Refused, parse_test, q_literal, q_shown_calls, q_shown_values
from data.generation.pool import rectangular
from data.generation.strengthen import Strengthened, answer_patterns, outputs_on
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE, PROBES, described_example
from data.quality.wrong_programs import (
    kept_values,
    keeps_invariants,
    battery,
    mutants,
    nearby_calls,
    printing_test,
    solve_calls,
)
from judging import JudgeUnavailable
from judging.records import Problem, Test
from rewards import MAX_TESTS_PER_PROBLEM, ScoringArguments, score

NEARBY_CALLS = 160
MAX_CANDIDATES = 200  # the wrong programs' digests of them all fit the judge's kept output
CALLS_PER_RUN = 30  # the twin's results on this many calls fit the judge's kept output (a line each, cut at 120)
PER_CALL_SECONDS = 0.5
LONGEST_RESULT = 120
FEW_ANSWERS = 3
COMBINED_PER_PATTERN = 2

# Each call on a fresh copy of the twin's solution (as the judge runs each test afresh), its result's repr printed on a
# line of its own, or "-" where it failed, ran out of time or its repr is long (q would not show it on one line).
VALUES_HARNESS = """import contextlib, io, signal, sys
def _expired(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, _expired)
for _call in {calls!r}:
    _text = "-"
    try:
        signal.setitimer(signal.ITIMER_REAL, {seconds})
        _namespace = {{"__name__": "__main__"}}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile({program!r}, "<solution>", "exec"), _namespace)
            _text = repr(eval(compile(_call, "<call>", "eval"), _namespace))
    except BaseException:
        _text = "-"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if len(_text) > {longest} or "\\n" in _text:
        _text = "-"
    sys.__stdout__.write(_text + "\\n")
    sys.__stdout__.flush()
"""


@dataclass
class Candidate:
    test_code: str  # the q test
    expected: str  # what q's show prints for the twin's results
    python_code: str  # the same calls, their results' repr printed in Python, for the twin's wrong programs
    calls: list  # the calls' QValue arguments
    old: int | None = None  # the index of the q problem's own test it is
    described: bool = False


# What a q problem takes, as its q tests show it.


def _classes(value, depth: int = 0) -> set:
    """The features of a value the shape rule compares: character classes, signs, short lists by depth."""
    if isinstance(value, bool):
        return {("bool",)}
    if isinstance(value, int):
        return {("sign", (value > 0) - (value < 0))}
    if isinstance(value, str):
        found = {
            (
                "chars",
                "lower"
                if c.islower()
                else "upper"
                if c.isupper()
                else "digit"
                if c.isdigit()
                else "space"
                if c == " "
                else "other",
            )
            for c in value
        }
        return found | ({("length", depth, len(value))} if len(value) < 2 else set())
    found = {("length", depth, len(value))} if len(value) < 2 else set()
    for item in value:
        found |= _classes(item, depth + 1)
    return found


@dataclass
class _Shape:
    """Per argument position: the features every q test's value there has between them, and the invariants the q
    description names that all of them have."""

    features: dict
    invariants: dict
    rectangular: dict

    @classmethod
    def of(cls, problem: Problem, calls: list[tuple]) -> "_Shape":
        values: dict[int, list] = {}
        for arguments in calls:
            for position, argument in enumerate(arguments):
                values.setdefault(position, []).append(argument)
        return cls(
            {p: set().union(*map(_classes, v)) for p, v in values.items()},
            {p: kept_values(v, problem.description) for p, v in values.items()},
            {
                p: all(map(rectangular, v)) and any(isinstance(x, list) and x and isinstance(x[0], list) for x in v)
                for p, v in values.items()
            },
        )

    def fits(self, arguments: tuple) -> bool:
        if len(arguments) != len(self.features):
            return False
        return all(
            _classes(value) <= self.features[position]
            and keeps_invariants(value, self.invariants[position])
            and (not self.rectangular[position] or rectangular(value))
            for position, value in enumerate(arguments)
        )


# The twin, run.


def _call_text(entry_point: str, arguments: tuple) -> str:
    return f"{entry_point}({', '.join(repr(argument) for argument in arguments)})"


def twin_values(judge, twin: Twin, calls: list[tuple]) -> list:
    """The twin's result on each call, ``UNMATCHABLE`` where it fails (a run of ``CALLS_PER_RUN`` calls per judged
    program, in parallel)."""
    chunks = [calls[start : start + CALLS_PER_RUN] for start in range(0, len(calls), CALLS_PER_RUN)]
    if not chunks:
        return []
    problems = [
        Problem(
            twin.problem.id,
            "python",
            "",
            (
                Test(
                    VALUES_HARNESS.format(
                        calls=[_call_text(twin.entry_point, arguments) for arguments in chunk],
                        program=twin.problem.solution,
                        seconds=PER_CALL_SECONDS,
                        longest=LONGEST_RESULT,
                    ),
                    UNMATCHABLE,
                ),
            ),
        )
        for chunk in chunks
    ]
    scores = score(
        judge,
        problems,
        [""] * len(chunks),
        ScoringArguments(),
        all_tests=True,
        extract=False,
        timeout=PER_CALL_SECONDS * CALLS_PER_RUN + judge.timeout,
    )
    values = []
    for chunk, result in zip(chunks, scores):
        if result.status == "sandbox_error":
            raise JudgeUnavailable(f"{twin.problem.id}: the judge could not run the Python twin")
        lines = result.judgement.tests[0].stdout.splitlines()
        lines += ["-"] * (len(chunk) - len(lines))
        for line in lines[: len(chunk)]:
            try:
                values.append(UNMATCHABLE if line == "-" else ast.literal_eval(line))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                values.append(UNMATCHABLE)
    return values


# Candidates.


def _q_call(entry_point: str, literals: list[str]) -> str:
    return f"{entry_point}[{';'.join(literals)}]"


def q_candidate(
    problem: Problem, forms: QForms, entry_point: str, calls: list[tuple], values: list
) -> Candidate | None:
    """A q test of these calls, its expected output the twin's ``values`` mapped; None where the map refuses or the
    q test does not read back as the calls."""
    try:
        literals = [
            [q_literal(value, forms.arguments.get(position)) for position, value in enumerate(arguments)]
            for arguments in calls
        ]
        texts = [_q_call(entry_point, [mapped.text for mapped in call]) for call in literals]
        code = f"show {texts[0]}" if len(texts) == 1 else f"show ({';'.join(texts)})"
        parsed = parse_test(code, entry_point)
        if [tuple(value.python for value in call) for call in parsed] != [tuple(call) for call in calls]:
            return None
        if len(values) == 1:
            expected = q_shown_calls(values, forms.result_of(tuple(m.form for m in literals[0]))).text
        else:
            expected = q_shown_calls(values, forms.result).text
    except Refused:
        return None
    return Candidate(
        code, expected, call_code("solve", calls), parsed, described=described_example(problem, Test(code, expected))
    )


def _own_calls(problem: Problem, entry_point: str) -> list[list[tuple]]:
    calls = []
    for test in problem.tests:
        try:
            calls.append([tuple(a.python for a in call) for call in parse_test(test.test_code, entry_point)])
        except Refused:
            calls.append(None)
    return calls


def _candidates(judge, problem: Problem, twin: Twin) -> tuple[list[Candidate], str | None]:
    entry_point = q_entry_point(problem)
    forms = QForms.of_tests(problem.tests, entry_point)
    own = _own_calls(problem, entry_point)
    if any(calls is None for calls in own):
        index = own.index(None)
        return [], f"tests[{index}] is outside the map from Python ({problem.tests[index].test_code[:40]!r})"
    candidates = []
    for index, (test, calls) in enumerate(zip(problem.tests, own)):
        parsed = parse_test(test.test_code, entry_point)
        candidates.append(
            Candidate(
                test.test_code,
                test.expected_output.strip(),
                call_code("solve", calls),
                parsed,
                old=index,
                described=described_example(problem, test),
            )
        )
    flat = [arguments for calls in own for arguments in calls]
    shape = _Shape.of(problem, flat)
    near_q = Problem(problem.id, "python", problem.description, tuple(Test(printing_test(calls), "") for calls in own))
    pool = [arguments for test in twin.problem.tests for arguments in (solve_calls(test.test_code) or [])]
    pool += nearby_calls(twin.problem, NEARBY_CALLS) + nearby_calls(near_q, NEARBY_CALLS)
    seen, known = set(), []
    for arguments in flat:
        if repr(arguments) not in seen:
            seen.add(repr(arguments))
            known.append(arguments)
    for arguments in pool:
        arguments = tuple(list(a) if isinstance(a, tuple) else a for a in arguments)
        if repr(arguments) not in seen and shape.fits(arguments):
            seen.add(repr(arguments))
            known.append(arguments)
    answered = []  # (arguments, the twin's result, what q shows) of every call with an answer, the old ones too
    codes = {c.test_code for c in candidates}
    for arguments, value in zip(known, twin_values(judge, twin, known)):
        candidate = None if value is UNMATCHABLE else q_candidate(problem, forms, entry_point, [arguments], [value])
        if candidate is None:
            continue
        answered.append((arguments, value, candidate.expected))
        if candidate.test_code not in codes:
            codes.add(candidate.test_code)
            candidates.append(candidate)
    answers = sorted({expected for _, _, expected in answered})
    if len(answers) <= FEW_ANSWERS:
        candidates += [c for c in _combined(problem, forms, entry_point, answered, answers) if c.test_code not in codes]
    new = [c for c in candidates if c.old is None]
    random.Random(problem.id).shuffle(new)
    old = [c for c in candidates if c.old is not None]
    return old + new[: MAX_CANDIDATES - len(old)], None


def _combined(problem, forms, entry_point, answered, answers) -> list[Candidate]:
    """Tests showing two or three calls, one per answer of a pattern, every pattern (``1b 0b``, ``0b 1b``,
    ``1b 1b 0b`` ...) twice with randomly chosen inputs."""
    rng = random.Random(problem.id)
    by_answer = {answer: [(a, v) for a, v, expected in answered if expected == answer] for answer in answers}
    combined, seen = [], set()
    for size in (2, 3):
        for pattern in answer_patterns(answers, size):
            if not all(by_answer.get(answer) for answer in pattern):
                continue
            for _ in range(COMBINED_PER_PATTERN):
                picked = [rng.choice(by_answer[answer]) for answer in pattern]
                candidate = q_candidate(problem, forms, entry_point, [a for a, _ in picked], [v for _, v in picked])
                if candidate is not None and candidate.test_code not in seen:
                    seen.add(candidate.test_code)
                    combined.append(candidate)
    return combined


def _echo(candidate: Candidate) -> bool:
    try:
        return q_shown_values([arguments[0] for arguments in candidate.calls]) == candidate.expected
    except (Refused, IndexError):
        return False


# Choosing.


def strengthen_q(
    problems: list[Problem],
    twins: dict[str, Twin],
    judge,
    max_tests: int = MAX_TESTS_PER_PROBLEM,
    max_share: float = DEFAULT_MAX_TRIVIAL_SHARE,
    show_progress: bool = False,
):
    """The q problems with tests from their twins (new records; problems without a twin as they are), and a
    ``QStrengthened`` per problem (``skipped`` says why one was left as it is)."""
    out, records = list(problems), []
    from tqdm import tqdm  # here, not at the top: its import costs every command that loads data ~25 ms

    for index, problem in enumerate(
        tqdm(problems, desc="q tests from Python twins", unit="problem", disable=not show_progress)
    ):
        twin = twins.get(problem.id) if problem.language == "q" else None
        if twin is None:
            records.append(QStrengthened(skipped="no Python twin" if problem.language == "q" else "not q"))
            continue
        # Its hidden tests are never chosen: they stay last, as they are (data/generation/strengthen.py).
        hidden = tuple(test for test in problem.tests if test.hidden)
        judged = replace(problem, tests=tuple(test for test in problem.tests if not test.hidden))
        tests, record = _strengthen_one(judge, judged, twin, max_tests, max_share)
        if record.skipped is None:
            # A published row's per-test Python outputs no longer line up with its tests; its twin stays.
            out[index] = replace(
                problem, tests=(*tests, *hidden), extra={k: v for k, v in problem.extra.items() if k != "python_tests"}
            )
        records.append(record)
    return out, records


@dataclass
class QStrengthened(Strengthened):
    """``Strengthened`` for a q problem: also the twin's wrong programs its first tests reject, before and after,
    and the most of its first tests and of all its tests one expected output takes, after."""

    wrong: int = 0
    killed_before: int = 0
    killed_after: int = 0
    constant_first: int = 0
    constant_all: int = 0
    tests: int = 0


def _strengthen_one(judge, problem: Problem, twin: Twin, max_tests: int, max_share: float):
    candidates, unusable = _candidates(judge, problem, twin)
    if unusable:
        return problem.tests, QStrengthened(skipped=unusable)
    alias = "" if twin.entry_point == "solve" else f"\nsolve = {twin.entry_point}\n"  # the candidates call solve
    proxies = [*PROBES["python"], *battery(twin.problem)]
    wrong = [*mutants(twin.problem.solution), *proxies]
    programs = [twin.problem.solution + alias] + [w.program + (alias if w not in proxies else "") for w in wrong]
    rows = outputs_on(
        judge, programs, [c.python_code for c in candidates], timeout=PER_CALL_SECONDS * len(candidates) + judge.timeout
    )
    solution, rows = rows[0], rows[1:]
    passes = [[o is not None and o == s for o, s in zip(row, solution)] for row in rows]
    wrong_rows = [row for row in passes if not all(row)]
    cheap = [(w.name, row) for w, row in zip(proxies, passes[len(wrong) - len(proxies) :]) if not all(row)]
    cheap += [
        ("echoing its first argument", [_echo(c) for c in candidates]),
        ("copying the description's examples", [c.described for c in candidates]),
    ]
    cheap_rows = [row for _, row in cheap]
    expected = [c.expected for c in candidates]
    judged = max_tests
    limit = math.floor(max_share * judged)
    old = [i for i, c in enumerate(candidates) if c.old is not None]
    rng = random.Random(problem.id)
    order = list(range(len(candidates)))
    rng.shuffle(order)

    def counts(tests):
        return [sum(row[i] for i in tests) for row in cheap_rows]

    def constant(tests):
        return max((sum(expected[i] == expected[j] for j in tests) for i in tests), default=0)

    def constant_allows(i, tests, bound):
        return sum(expected[j] == expected[i] for j in tests) + 1 <= bound

    def over(tests, bound_first, bound_all):
        first, every = tests[:judged], tests
        return (
            any(count > bound_first for count in counts(first))
            or constant(first) > bound_first
            or any(count > bound_all * len(every) for count in counts(every))
            or constant(every) > bound_all * len(every)
        )

    killed_before = sum(not all(row[i] for i in old[:judged]) for row in wrong_rows)
    if len(old) >= judged and killed_before == len(wrong_rows) and not over(old, limit, max_share):
        return problem.tests, QStrengthened(skipped="already adequate")

    chosen: list[int] = []
    while len(chosen) < judged:
        current = counts(chosen)
        alive = [row for row in wrong_rows if all(row[i] for i in chosen)]
        options = [
            i
            for i in order
            if i not in chosen
            and constant_allows(i, chosen, limit)
            and not (candidates[i].old is None and candidates[i].described)
        ]
        if not options:
            break

        def value(i):
            excess = sum(max(0, current[k] + row[i] - limit) for k, row in enumerate(cheap_rows))
            return (
                excess,
                -sum(not row[i] for row in alive),
                candidates[i].old is None,
                sum(row[i] for row in cheap_rows),
            )

        chosen.append(min(options, key=value))
    chosen = _improved(chosen, candidates, cheap_rows, wrong_rows, limit)
    tests = chosen + [i for i in old if i not in chosen]
    while True:
        over_rows = [k for k, count in enumerate(counts(tests)) if count > max_share * len(tests)]
        too_common = constant(tests) > max_share * len(tests)
        if not over_rows and not too_common:
            break
        options = [
            i
            for i in order
            if candidates[i].old is None
            and i not in tests
            and not candidates[i].described
            and constant_allows(i, tests, max_share * (len(tests) + 1))
        ]
        if not options:
            break
        best = min(options, key=lambda i: (sum(cheap_rows[k][i] for k in over_rows), sum(row[i] for row in cheap_rows)))
        if over_rows and all(cheap_rows[k][best] for k in over_rows):
            break  # no candidate left helps
        tests.append(best)
    record = QStrengthened(wrong=len(wrong_rows), killed_before=killed_before, tests=len(tests))
    record.killed_after = sum(not all(row[i] for i in tests[:judged]) for row in wrong_rows)
    record.constant_first = constant(tests[:judged])
    record.constant_all = constant(tests)
    record.added = sum(candidates[i].old is None for i in tests)
    record.reordered = True
    if record.killed_after < record.wrong:
        record.left.append(f"{record.wrong - record.killed_after} of the twin's wrong programs pass the first {judged}")
    if len(tests) < judged:
        record.left.append(f"only {len(tests)} tests (too few inputs the map and the q problem's shape allow)")
    first, every = counts(tests[:judged]), counts(tests)
    for (name, _), count_first, count_all in zip(cheap, first, every):
        if count_first > limit or count_all > max_share * len(tests):
            record.left.append(
                f"{name} passes {count_first}/{min(judged, len(tests))} of the first, {count_all}/{len(tests)} of all"
            )
    if record.constant_first > limit or record.constant_all > max_share * len(tests):
        record.left.append(
            f"one expected output takes {record.constant_first} of the first {judged}, "
            f"{record.constant_all}/{len(tests)} of all"
        )
    # The problem's own tests as they were read (their other fields kept), the new ones as the twin answers them.
    new_tests = tuple(
        problem.tests[candidates[i].old]
        if candidates[i].old is not None
        else Test(candidates[i].test_code, candidates[i].expected)
        for i in tests
    )
    return new_tests, record


def _improved(chosen: list[int], candidates: list[Candidate], cheap_rows: list, wrong_rows: list, limit: int):
    """``chosen`` with one test at a time swapped for another candidate while that lowers, in order: how far the best
    constant passes more than ``limit`` of them, how far the cheap programs do, the wrong programs that pass them
    all, the new tests among them."""
    expected = [c.expected for c in candidates]

    def cost(tests):
        common = max(sum(expected[i] == expected[j] for j in tests) for i in tests)
        excess = sum(max(0, sum(row[i] for i in tests) - limit) for row in cheap_rows)
        return (
            max(0, common - limit),
            excess,
            sum(all(row[i] for i in tests) for row in wrong_rows),
            sum(candidates[i].old is None for i in tests),
        )

    allowed = [i for i, c in enumerate(candidates) if c.old is not None or not c.described]
    best = cost(chosen)
    improved = True
    while improved and chosen:
        improved = False
        for position in range(len(chosen)):
            for i in allowed:
                if i in chosen:
                    continue
                trial = chosen[:position] + [i] + chosen[position + 1 :]
                trial_cost = cost(trial)
                if trial_cost < best:
                    chosen, best, improved = trial, trial_cost, True
    return chosen


def describe(problem: Problem, record: QStrengthened, max_tests: int) -> str:
    """One line for a q problem strengthened from its twin."""
    if record.skipped:
        return f"{problem.id}: left as it is ({record.skipped})"
    return (
        f"{problem.id}: {record.added} tests added from its Python twin, {record.tests} in all; the twin's "
        f"wrong programs the first {max_tests} reject {record.killed_before}/{record.wrong} -> "
        f"{record.killed_after}/{record.wrong}; the most frequent expected output takes "
        f"{record.constant_first}/{min(max_tests, record.tests)} of the first {max_tests}, "
        f"{record.constant_all}/{record.tests} of all" + "".join(f"; {left}" for left in record.left)
    )
