"""Strengthening a problem set's tests: tests that reject the wrong programs data/quality/adequacy.py finds, and that no
cheap program passes more than a third of.

For each Python problem with a solution, candidate tests are the problem's own tests (a test printing several calls
also in the reverse order) and tests of the inputs near them (``wrong_programs.nearby_calls``: perturbed literals,
empty, one element, zero, negatives), one call per test; when the answers are few (yes/no problems), also tests
printing two or three calls, so that no constant and no call-order answer ("True, then False") passes many. Every
expected output is what the solution prints there, judged.

Each wrong program (the mutants, the constants, the battery) is run on every candidate test in one judged program
per wrong program (``outputs_on``: each test executed afresh, as the judge would, its output's digest printed), and
the tests are chosen greedily: the first ``max_tests`` (the ones the training reward judges) so that every wrong
program fails one of them while no cheap program passes more than ``max_share`` of them; then the problem's other
tests, then more candidates until no cheap program passes more than ``max_share`` of all of them. The problem's old
tests are all kept, once each (their order may change); a problem that is already adequate is left as it is.

A problem's hidden tests (docs/data.md) are never chosen: they stay last, as they are. With ``hidden``, each problem
with a solution gets new hidden tests after them, up to that many hidden tests in all: spare candidates that no
cheap program passes and the most wrong programs fail first. The reward never judges them; the trainer's hidden-test
watch does, for each completion that passes every judged test (training/hidden_tests.py).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field, replace

from data.quality.adequacy import UNMATCHABLE, check_adequacy, skip_reason
from data.quality.domain import answered, reference_program
from data.quality.given_programs import as_solve_programs
from data.quality.solve_view import as_solve, named_back
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE, PROBES, constant_passes, described_example
from data.quality.wrong_programs import battery, mutants, nearby_calls, printing_test, solve_calls
from judging import JudgeUnavailable
from judging.records import Problem, Test
from rewards import MAX_TESTS_PER_PROBLEM, ScoringArguments, score

NEARBY_CALLS = 64
ROUNDS = 3
COMBINED_PER_PATTERN = 2
FEW_ANSWERS = 3  # at most this many different answers: tests print several calls
MAX_OUTPUT_CHARS = 200
PER_TEST_SECONDS = 0.5
# Outputs that may print differently elsewhere (docs/data.md, "Python tests"): floats, sets, dictionaries, objects.
UNSTABLE_OUTPUT = re.compile(r"\d\.\d|\binf\b|\bnan\b|[{}]|object at 0x")

# Runs each test's code after the wrong program, each in a fresh namespace as the judge runs each test in a fresh
# program, and prints a digest of what it printed (stripped, as the judge compares), or "-" where it failed.
HARNESS = """import contextlib, hashlib, io, signal, sys
def _expired(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, _expired)
for _code in {tests!r}:
    _out = io.StringIO()
    _text = None
    try:
        signal.setitimer(signal.ITIMER_REAL, {seconds})
        with contextlib.redirect_stdout(_out):
            try:
                exec(compile({program!r} + "\\n" + _code, "<test>", "exec"), {{"__name__": "__main__"}})
            except SystemExit as _exit:
                if _exit.code not in (None, 0):
                    raise
        _text = _out.getvalue().strip()
    except BaseException:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    sys.__stdout__.write(("-" if _text is None else hashlib.sha256(_text.encode()).hexdigest()[:16]) + "\\n")
    sys.__stdout__.flush()
"""


def digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


@dataclass
class Strengthened:
    """What ``strengthen`` did to one problem: tests ``added``, whether it ``reordered`` them, and what it could not
    reach (``left``: a line per cheap program above the share, naming it, and per given wrong program that passes
    more judged tests than a cheap program). The wrong programs still passing the judged tests are those of the
    ``Adequacy`` after."""

    added: int = 0
    hidden: int = 0
    reordered: bool = False
    skipped: str | None = None
    left: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Candidate:
    """A test that may be chosen: one of the problem's own (``old``, its index), a variant of one that prints the
    same calls in another order (``old`` too), or a new one (``old`` None)."""

    test: Test
    old: int | None = None


def outputs_on(judge, programs: list[str], tests: list[str], timeout: float) -> list[list[str | None]]:
    """For each program, the digest of what each test's code prints after it, None where it fails; one judged
    program per program."""
    problems = [
        Problem(
            "outputs",
            "python",
            "",
            (Test(HARNESS.format(tests=tests, program=program, seconds=PER_TEST_SECONDS), UNMATCHABLE),),
        )
        for program in programs
    ]
    scores = score(
        judge, problems, [""] * len(programs), ScoringArguments(), all_tests=True, extract=False, timeout=timeout
    )
    found = []
    for s in scores:
        result = s.judgement.tests[0]
        if s.status == "sandbox_error":
            raise JudgeUnavailable(f"the judge could not run a wrong program ({result.stderr.strip()[-200:]})")
        lines = result.stdout.split()
        lines += ["-"] * (len(tests) - len(lines))  # cut short (its time ran out): it failed the rest
        found.append([None if line == "-" else line for line in lines[: len(tests)]])
    return found


def _solution_outputs(judge, problem: Problem, codes: list[str]) -> list[str | None]:
    """What the solution prints on each test code, through the judge; None outside the problem's domain (the
    solution raises, fails an assert or the ``domain``, or runs long: data/quality/domain.py) or where it prints what a test
    should not expect."""
    if not codes:
        return []
    # One judged item per test, so that they run in parallel.
    problems = [replace(problem, tests=(Test(code, UNMATCHABLE),), pool=()) for code in codes]
    results = []
    for s in score(
        judge, problems, [reference_program(problem)] * len(codes), ScoringArguments(), all_tests=True, extract=False
    ):
        if s.status == "sandbox_error":
            raise JudgeUnavailable(f"{problem.id}: the judge could not run the solution")
        results.append(s.judgement.tests[0])
    return [
        result.stdout.strip()
        if answered(result, judge.timeout)
        and len(result.stdout) < MAX_OUTPUT_CHARS
        and not UNSTABLE_OUTPUT.search(result.stdout)
        else None
        for result in results
    ]


def _candidates(judge, problem: Problem, given: list[str] = ()) -> tuple[list[Candidate], list[int]]:
    """Candidate tests and, for each own test, the indexes of its variants. ``given``: programs a model wrote
    (data/quality/given_programs.py), whose counter-examples the tests printing several calls hold too."""
    rng = random.Random(problem.id)
    candidates, variants = [], []
    own = list({(t.test_code, t.expected_output): t for t in problem.tests}.values())  # once each
    for index, test in enumerate(own):
        variants.append([len(candidates)])
        candidates.append(Candidate(test, index))
    reversed_codes = []
    for index, test in enumerate(own):
        calls = solve_calls(test.test_code)
        if calls and len(calls) > 1 and calls != calls[::-1]:
            reversed_codes.append((index, printing_test(calls[::-1])))
    calls = _own_calls(own) + nearby_calls(problem, NEARBY_CALLS)
    singles = [printing_test([arguments]) for arguments in calls]
    outputs = _solution_outputs(judge, problem, [code for _, code in reversed_codes] + singles)
    for (index, code), output in zip(reversed_codes, outputs):
        if output is not None:
            variants[index].append(len(candidates))
            candidates.append(Candidate(replace(own[index], test_code=code, expected_output=output), index))
    single_outputs = outputs[len(reversed_codes) :]
    answered = [(arguments, output) for arguments, output in zip(calls, single_outputs) if output is not None]
    candidates += [Candidate(Test(printing_test([arguments]), output)) for arguments, output in answered]
    answers = sorted(
        {output for _, output in answered}
        | {t.expected_output.strip() for t in problem.tests if len(solve_calls(t.test_code) or []) == 1}
    )
    if len(answers) <= FEW_ANSWERS:
        by_answer = {answer: [arguments for arguments, output in answered if output == answer] for answer in answers}
        combined = []
        for size in (2, 3):
            for pattern in answer_patterns(answers, size):
                if all(by_answer.get(answer) for answer in pattern):
                    for _ in range(COMBINED_PER_PATTERN):
                        combined.append(printing_test([rng.choice(by_answer[answer]) for answer in pattern]))
        combined += _with_counter_examples(judge, given, answered, by_answer, answers, rng)
        combined = list(dict.fromkeys(combined))
        candidates += [
            Candidate(Test(code, output))
            for code, output in zip(combined, _solution_outputs(judge, problem, combined))
            if output is not None
        ]
    return candidates, variants


def _own_calls(own: list[Test]) -> list[tuple]:
    """The calls of the tests printing several, each to be printed alone (``solve(0)`` of ``print(solve(16),
    solve(0))``), less those a test prints alone already."""
    alone = {repr(calls[0]) for calls in map(solve_calls, (t.test_code for t in own)) if calls and len(calls) == 1}
    found = {}
    for test in own:
        for arguments in solve_calls(test.test_code) or []:
            if repr(arguments) not in alone:
                found.setdefault(repr(arguments), arguments)
    return list(found.values())


def _with_counter_examples(
    judge, given: list[str], answered: list[tuple], by_answer: dict, answers: list[str], rng: random.Random
) -> list[str]:
    """Tests printing two or three calls, one of them an input where a given program is wrong: so that most tests
    reject a wrong program a model writes first, not one test of five (which pays it 0.8)."""
    if not given or not answered:
        return []
    codes = [printing_test([arguments]) for arguments, _ in answered]
    rows = outputs_on(judge, given, codes, timeout=PER_TEST_SECONDS * len(codes) + judge.timeout)
    wrong_on = [
        (arguments, output)
        for i, (arguments, output) in enumerate(answered)
        if any(row[i] != digest(output) for row in rows)
    ]
    tests = []
    for size in (2, 3):
        for pattern in answer_patterns(answers, size):
            for position, answer in enumerate(pattern):
                found = [arguments for arguments, output in wrong_on if output == answer]
                if found and all(by_answer.get(a) for a in pattern):
                    calls = [rng.choice(by_answer[a]) for a in pattern]
                    calls[position] = rng.choice(found)
                    tests.append(printing_test(calls))
    return tests


def answer_patterns(answers: list[str], size: int) -> list[tuple]:
    """Every sequence of ``size`` answers, each from ``answers`` (repeats allowed), in order."""
    if size == 0:
        return [()]
    return [(answer, *rest) for answer in answers for rest in answer_patterns(answers, size - 1)]


def strengthen(
    problems: list[Problem],
    judge,
    max_tests: int = MAX_TESTS_PER_PROBLEM,
    max_share: float = DEFAULT_MAX_TRIVIAL_SHARE,
    show_progress: bool = False,
    rounds: int = ROUNDS,
    given: dict | None = None,
    hidden: int = 0,
):
    """The problems with strengthened tests (new records; the others as they are), a ``Strengthened`` per problem, and
    each problem's ``Adequacy`` before and after.

    ``given`` maps problem ids to programs a model wrote (data/quality/given_programs.py, ``GivenProgram``): the first
    ``max_tests`` tests are chosen so that each that is wrong passes as few as can be, no more than a cheap program.

    New tests bring new nearby inputs, where a wrong program may show it is wrong again: a problem that is still weak
    after a round is strengthened again, up to ``rounds`` rounds."""
    originals, problems = problems, [as_solve(problem) for problem in problems]  # the wrong programs define solve
    before = check_adequacy(problems, judge, max_tests, show_progress)
    out, after = list(problems), list(before)
    done = [Strengthened(skipped=skip_reason(problem)) for problem in problems]
    todo = [index for index, record in enumerate(done) if record.skipped is None]
    from tqdm import tqdm  # here, not at the top: its import costs every command that loads data ~25 ms

    for round_ in range(rounds):
        for index in tqdm(todo, desc=f"strengthening (round {round_ + 1})", unit="problem", disable=not show_progress):
            tests, record = _strengthen_one(
                judge,
                out[index],
                max_tests,
                max_share,
                as_solve_programs(originals[index], (given or {}).get(out[index].id, [])),
                hidden,
            )
            if record.skipped is None:
                out[index] = replace(out[index], tests=tests)
                record.added += done[index].added
                record.hidden += done[index].hidden
                done[index] = record
            elif round_ == 0:
                out[index] = replace(out[index], tests=tests) if record.hidden else out[index]
                done[index] = record
        for index, adequacy in zip(
            todo, check_adequacy([out[index] for index in todo], judge, max_tests, show_progress)
        ):
            after[index] = adequacy
        todo = [index for index in todo if after[index].survivors]
        if not todo:
            break
    return [named_back(original, view) for original, view in zip(originals, out)], done, before, after


def _strengthen_one(
    judge, problem: Problem, max_tests: int, max_share: float, given: list = (), hidden: int = 0
) -> tuple[tuple[Test, ...], Strengthened]:
    own_hidden = tuple(test for test in problem.tests if test.hidden)
    problem = replace(problem, tests=tuple(test for test in problem.tests if not test.hidden))
    candidates, variants = _candidates(judge, problem, [program.program for program in given])
    codes = [c.test.test_code for c in candidates]
    cheap = [*PROBES["python"], *battery(problem)]
    wrong = [*mutants(problem.solution), *cheap]
    outputs = outputs_on(
        judge,
        [program.program for program in [*wrong, *given]],
        codes,
        timeout=PER_TEST_SECONDS * len(codes) + judge.timeout,
    )
    expected = [digest(c.test.expected_output) for c in candidates]
    passes = [[o == e for o, e in zip(row, expected)] for row in outputs]
    given_rows = [(program.name, row) for program, row in zip(given, passes[len(wrong) :]) if not all(row)]
    passes = passes[: len(wrong)]
    described = [described_example(problem, c.test) for c in candidates]
    # Cheap programs: the constants, the battery (less any that is right everywhere), copying the description.
    cheap_named = [
        (program.name, row) for program, row in zip(cheap, passes[len(wrong) - len(cheap) :]) if not all(row)
    ] + [("copying the description's examples", described)]
    # A program printing an expected output whatever its input passes every test expecting it: the constants.
    cheap_named += [(probe.name, row) for probe, row in constant_passes([c.test.expected_output for c in candidates])]
    cheap_passes = [row for _, row in cheap_named]
    wrong_passes = [row for row in passes if not all(row)]  # a program right on every candidate: equivalent here
    judged = max_tests
    limit = math.floor(max_share * judged)
    rng = random.Random(problem.id)
    order = list(range(len(candidates)))
    rng.shuffle(order)
    used_old = set()
    chosen: list[int] = []

    def allowed(index):
        return candidates[index].old not in used_old and index not in chosen

    def counts(tests):
        return [sum(row[i] for i in tests) for row in cheap_passes]

    def constant_allows(i, tests, bound):
        """Whether adding candidate ``i`` keeps the constant printing its expected output within ``bound`` tests."""
        return sum(expected[j] == expected[i] for j in tests) + 1 <= bound

    def excess(tests):
        return sum(max(0.0, count - max_share * len(tests)) for count in counts(tests))

    def given_counts(tests):
        return [sum(row[i] for i in tests) for _, row in given_rows]

    def adequate(tests):
        return (
            len(tests) >= judged
            and not any(all(row[i] for i in tests[:judged]) for row in wrong_passes)
            and all(count <= max_share * len(tests) for count in counts(tests))
            and all(count <= max_share * judged for count in counts(tests[:judged]))
            and all(count <= max(counts(tests[:judged])) for count in given_counts(tests[:judged]))
        )

    def with_hidden(tests: tuple[Test, ...], record: Strengthened) -> tuple[tuple[Test, ...], Strengthened]:
        """``tests``, the problem's own hidden tests, then new ones up to ``hidden`` hidden tests in all."""
        taken = {(t.test_code, t.expected_output) for t in (*tests, *own_hidden)}
        spare = [
            i
            for i in order
            if candidates[i].old is None
            and (candidates[i].test.test_code, candidates[i].test.expected_output) not in taken
        ]
        spare.sort(key=lambda i: (sum(row[i] for row in cheap_passes), -sum(not row[i] for row in wrong_passes)))
        new = tuple(replace(candidates[i].test, hidden=True) for i in spare[: max(0, hidden - len(own_hidden))])
        record.hidden = len(new)
        return (*tests, *own_hidden, *new), record

    if adequate([options[0] for options in variants]):
        return with_hidden(problem.tests, Strengthened(skipped="already adequate"))

    while len(chosen) < judged:
        current = counts(chosen)
        options = [i for i in order if allowed(i) and constant_allows(i, chosen, limit)]
        if not options:
            break
        alive = [row for row in wrong_passes if all(row[i] for i in chosen)]

        def value(i):
            over = sum(max(0, current[k] + row[i] - limit) for k, row in enumerate(cheap_passes))
            killed = sum(not row[i] for row in alive)
            paid = sum(row[i] for _, row in given_rows)  # a given wrong program's passes: each one pays it
            return (over, paid, -killed, candidates[i].old is None, sum(row[i] for row in cheap_passes))

        best = min(options, key=value)
        chosen.append(best)
        if candidates[best].old is not None:
            used_old.add(candidates[best].old)
    # The problem's other tests, each in one of its orders (a call-order answer must not find them all alike).
    rest = []
    for index, options in enumerate(variants):
        if index not in used_old:
            rest.append(rng.choice(options))
    tests = chosen + rest
    while True:
        over = [k for k, count in enumerate(counts(tests)) if count > max_share * len(tests)]
        options = [
            i
            for i in order
            if candidates[i].old is None and i not in tests and constant_allows(i, tests, max_share * (len(tests) + 1))
        ]
        if not over or not options:
            break
        best = min(options, key=lambda i: (sum(cheap_passes[k][i] for k in over), sum(row[i] for row in cheap_passes)))
        if all(cheap_passes[k][best] for k in over):
            break  # no candidate left helps
        tests.append(best)
    # Tests added to lower one cheap program's share may raise another's: drop added ones it passes, while that helps.
    while True:
        over = [k for k, count in enumerate(counts(tests)) if count > max_share * len(tests)]
        added = [i for i in tests[judged:] if candidates[i].old is None and any(cheap_passes[k][i] for k in over)]
        if not over or not added:
            break
        drop = max(added, key=lambda i: sum(cheap_passes[k][i] for k in over))
        fewer = [i for i in tests if i != drop]
        if excess(fewer) >= excess(tests):
            break
        tests = fewer
    record = Strengthened()
    shares = counts(tests)
    first = counts(tests[:judged])
    for k, (name, _) in enumerate(cheap_named):
        if shares[k] > max_share * len(tests) or first[k] > max_share * judged:
            record.left.append(f"{name} passes {first[k]}/{judged} judged tests, {shares[k]}/{len(tests)} in all")
    for (name, _), count in zip(given_rows, given_counts(tests[:judged])):
        if count > max(first, default=0):
            record.left.append(f"{name} passes {count}/{judged} judged tests, more than a cheap program")
    new_tests = tuple(candidates[i].test for i in tests)
    record.added = sum(candidates[i].old is None for i in tests)
    record.reordered = True
    return with_hidden(new_tests, record)
