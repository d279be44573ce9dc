"""A problem's pool: tests generated from its solution, on inputs inside its domain, of every class its argument types
allow, so that the almost-right programs a model writes (off by one, a forgotten empty or negative input, ties,
case, non-ASCII letters) fail some of them.

The inputs start from the problem's own tests (their printed calls' literal arguments; those of tests past the ones
the reward judges are inputs of the pool too, or the reward would never judge them): each argument is put into the
classes of its type (`class_edges`: for strings empty, one character, repeated, mixed and non-ASCII case, digits,
spaces, punctuation; for integers 0, 1, -1, negatives, large, powers of two and their neighbours; for lists empty,
one item, duplicates, ties, sorted, reversed, long; nested values by the same rules), then mutated at random by type
(`mutated`, as EvalPlus does), and several arguments are made to meet (a zero divisor, equal arguments, a key absent
from its container). What may be an input: with a ``domain`` (data/quality/domain.py), every value of the seeds'
types that the domain allows; without one, only the types and classes the problem's own tests show (`Shape`), since
nothing else says what the problem allows.

The expected outputs are what the solution prints, run by the judge in its sandbox, many calls a run. An input on
which it raises (its own ``assert`` or the domain), runs longer than `PER_CALL_SECONDS`, or prints more than
`LONGEST_OUTPUT` characters never becomes a test; a second run, the calls in the other order in a fresh program, must
print the same: a solution that prints otherwise on any input is reported and gets no pool. A problem whose record gives a
``second_solution`` has it run on the whole pool: an input where the two disagree is reported and left out.
"""

from __future__ import annotations

import ast
import builtins
import math
import random
import re
from dataclasses import dataclass, field, replace

from data.quality.input_classes import value_classes
from data.quality.solve_view import as_solve
from data.quality.wrong_programs import kept_values, keeps_invariants, printed_calls
from judging import JudgeUnavailable
from judging.records import MAX_CALLS, Calls, Problem, Test, joined_runs
from judging.policy import DEFAULT_TIMEOUT
from rewards import MAX_TESTS_PER_PROBLEM

POOL_SIZE = 120  # the inputs a pool aims at
FEW_ANSWERS = 3  # a problem with at most this many answers gets tests of GROUP calls each
GROUP = 3
CHEAP_SHARE = (1, 3)  # the most of a pool's tests one cheap program may pass, as a fraction (exact, not a float)
MAX_CANDIDATES = 700  # the inputs tried for one problem
# A pool input is one the solution answers in at most this long: a training step judges a run of MAX_CALLS pool
# calls in one test's time limit, so a run of them takes the solution a quarter of it at most.
PER_CALL_SECONDS = 0.25 * DEFAULT_TIMEOUT / MAX_CALLS
LONGEST_OUTPUT = 1000  # characters a pool test may expect
FEW_CHARACTERS = 6  # a string argument whose tests use at most this many characters between them keeps to them
NON_ASCII = "éßÄñØ"
# Lower-case letters whose case maps are not one letter to one letter: upper ß is SS, title ǆ is ǅ (upper Ǆ),
# case-folded ß is ss and ﬁ is fi; where str.capitalize, str.title, casefold and lower part ways.
SPECIAL_CASE = "ßǆﬁ"
PUNCTUATION = ",.!?-'"
# Halves, and the floats just below them, where rounding half one way or another and int(x + 0.5) part ways.
HALVES = (0.49999999999999994, 1.4999999999999998, 2.4999999999999996, -0.49999999999999994, 1.5, -1.5)
NUMBERS_IN_TEXT = (0, 1, 2, 3, 7, 10, 49, 99, 1000)  # what a number written in a string becomes (`_renumbered`)
# Run before the calls: each call's own time limit, so one input that loops costs its own call, not the run.
PRELUDE = """
import signal as _signal, sys as _sys, time as _time
def _expired(*_):
    raise TimeoutError
_signal.signal(_signal.SIGALRM, _expired)
"""
CALL_HARNESS = """_signal.setitimer(_signal.ITIMER_REAL, {limit})
_start = _time.perf_counter()
try:
{statement}
    _ok = True
except BaseException:
    _ok = False
finally:
    _signal.setitimer(_signal.ITIMER_REAL, 0)
print("\\n{token}", _ok, _time.perf_counter() - _start)"""
TOKEN = "\0pool-call-end\0"


@dataclass
class Pool:
    """What building one problem's pool found: the tests, and what was left out and why."""

    problem: Problem
    tests: list[Test] = field(default_factory=list)
    tried: int = 0
    outside: int = 0  # the solution raised, ran too long or printed too much there
    unstable: list[str] = field(default_factory=list)  # calls printing differently in two runs
    disagreements: list[str] = field(default_factory=list)  # calls where the second solution printed otherwise
    classes: set = field(default_factory=set)  # the input classes the pool covers
    skipped: str | None = None  # why no pool was built


# What the problem's own tests call.


def own_calls(problem: Problem) -> list[tuple]:
    """The literal argument tuples of every printed call of the entry point in the problem's tests (hidden ones
    included), through the ``solve`` view."""
    view = as_solve(problem)
    calls = []
    for test in view.tests:
        for found in printed_calls(test.test_code) or ():
            if found not in calls:
                calls.append(found)
    return calls


def printing_form(problem: Problem) -> tuple[str, str, float | None]:
    """How the problem's tests print a call, as a format with ``{call}``, their comparison and tolerance."""
    first = problem.tests[0]
    by_value = first.compare == "value" or "print(repr(" in first.test_code
    tolerance = max((test.tolerance for test in problem.tests if test.tolerance is not None), default=None)
    return ("print(repr({call}))" if by_value else "print({call})"), first.compare, tolerance


# The classes of a value, and the shape a problem's own tests give its arguments.


def type_signature(value):
    """A value's type, nested: ``list[int]``-like tuples, so a candidate keeps the types of the seeds."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return (type(value).__name__, frozenset(type_signature(item) for item in value))
    if isinstance(value, dict):
        return ("dict", frozenset(type_signature(item) for item in value.items()))
    return type(value).__name__


def _fits_types(signature, seeds: set) -> bool:
    """Whether a candidate's nested types are among those of the seeds (an empty container fits any)."""
    if signature in seeds:
        return True
    if isinstance(signature, tuple):
        kind, items = signature
        same = [seed for seed in seeds if isinstance(seed, tuple) and seed[0] == kind]
        if not same:
            return False
        allowed = set().union(*(seed[1] for seed in same))
        return all(_fits_types(item, allowed) for item in items)
    return False


def rectangular(value) -> bool:
    """Whether ``value`` is a non-empty list of lists of one length (a matrix)."""
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(row, list) for row in value)
        and len({len(row) for row in value}) == 1
    )


@dataclass
class Shape:
    """Per argument position: the nested types of the problem's own arguments there, and, where the problem has no
    ``domain``, the classes they show between them and the invariants the description names that all of them
    have (sorted, positive, distinct ...): what a generated input must keep."""

    types: dict
    features: dict | None
    invariants: dict
    rectangular: dict
    largest: dict | None = None  # without a domain: the largest integer magnitude at each position, ten times over

    @classmethod
    def of(cls, problem: Problem, calls: list[tuple], with_classes: bool) -> Shape:
        values: dict[int, list] = {}
        for arguments in calls:
            for position, argument in enumerate(arguments):
                values.setdefault(position, []).append(argument)
        return cls(
            {p: {type_signature(value) for value in v} for p, v in values.items()},
            {p: set().union(*map(value_classes, v)) for p, v in values.items()} if with_classes else None,
            {p: kept_values(v, problem.description) for p, v in values.items()},
            {
                p: all(map(rectangular, v)) and any(isinstance(x, list) and x and isinstance(x[0], list) for x in v)
                for p, v in values.items()
            },
            {p: 10 * max(map(_largest, v)) + 10 for p, v in values.items()} if with_classes else None,
        )

    def fits(self, arguments: tuple) -> bool:
        if len(arguments) != len(self.types):
            return False
        for position, value in enumerate(arguments):
            if not _fits_types(type_signature(value), self.types[position]):
                return False
            if self.features is not None and not value_classes(value) <= self.features[position]:
                return False
            if not keeps_invariants(value, self.invariants[position]):
                return False
            if self.rectangular[position] and not rectangular(value):
                return False
            if self.largest is not None and _largest(value) > self.largest[position]:
                return False
        return True


def _largest(value) -> float:
    """The largest magnitude of a number in ``value`` (0 without one), and the longest of its sequences."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return abs(value)
    if isinstance(value, (str, list, tuple, set, frozenset, dict)):
        items = value.items() if isinstance(value, dict) else value if not isinstance(value, str) else ()
        return max([len(value), *(_largest(item) for item in items)])
    return 0


def suggested_domain(problem: Problem) -> str | None:
    """A ``domain`` read off the problem's own tests, for a person to check: each argument's type, not negative
    where no test gives a negative number, a number within ten times the largest the tests give (a solution looping
    up to it answers in time), not empty where no test gives an empty value, and a string kept to its
    characters where the tests' strings there use at most `FEW_CHARACTERS` between them, one letter at most (brackets,
    bits, notes: what such a problem parses, its solution answering anything else by accident; words are not
    kept to their letters)."""
    calls = own_calls(problem)
    try:
        names = _parameter_names(problem.solution or "", problem.entry_point)
    except SyntaxError:
        return None
    if not calls or names is None or len(names) != len(calls[0]):
        return None
    parts = []
    for position, name in enumerate(names):
        values = [call[position] for call in calls if len(call) > position]
        kinds = {type(value) for value in values}
        if len(kinds) != 1:
            continue
        kind = kinds.pop()
        if hasattr(builtins, name):  # a parameter named ``dict`` hides the type: isinstance(dict, dict) would raise
            parts.append(f"{name}.__class__.__name__ == {kind.__name__!r}")
        else:
            parts.append(
                f"isinstance({name}, {kind.__name__})"
                + (" and not isinstance({0}, bool)".format(name) if kind is int else "")
            )
        if kind in (int, float):
            bound = f"{10 * max(abs(value) for value in values) + 10:g}"
            parts.append(
                f"0 <= {name} <= {bound}" if all(value >= 0 for value in values) else f"abs({name}) <= {bound}"
            )
        if kind in (str, list, tuple, dict, set) and all(len(value) > 0 for value in values):
            parts.append(f"len({name}) > 0")
        characters = "".join(sorted(set().union(*values))) if kind is str else ""
        if characters and len(characters) <= FEW_CHARACTERS and sum(map(str.isalpha, characters)) <= 1:
            parts.append(f"set({name}) <= set({characters!r})")
    return " and ".join(filter(None, parts)) or None


def _parameter_names(solution: str, name: str) -> list[str] | None:
    for node in ast.parse(solution).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return [argument.arg for argument in node.args.args]
    return None


# Inputs of every class, and random mutations by type.


def class_edges(value, rng: random.Random) -> list:
    """Values of ``value``'s type in the classes its type allows (the edges a forgetful program misses)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        size = max(abs(value), 2)
        power = 1 << size.bit_length()
        return [
            0,
            1,
            -1,
            2,
            -2,
            -value,
            value + 1,
            value - 1,
            10,
            100,
            10**6,
            -(10**6),
            10**12,
            power,
            power - 1,
            power + 1,
            power // 2,
            7,
            9,
            12,
            25,
            49,
            97,
            1024,
            2**31,
            2**31 - 1,
            2**63 - 1,
            # where floats lose the low digits: 2^53 + 1, nines that log10 rounds up, 2^59 + 1
            2**53 + 1,
            10**15 - 1,
            10**18 - 1,
            2**59 + 1,
            10**9 - 1,
        ]
    if isinstance(value, float):
        return [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, -value, value + 0.5, value * 2, 1e-9, 1e9, 2.5, 3.5, 0.1, *HALVES]
    if isinstance(value, str):
        first = value[:1] or "a"
        middle = len(value) // 2
        numeric = (
            [repr(each) for each in HALVES] + ["-0.5", "2.5", "-2.5", "15.5", "-15.5"] if _is_number(value) else []
        )
        return numeric + [
            "",
            first,
            first * 5,
            value + value,
            value[::-1],
            value.swapcase(),
            value.upper(),
            value.lower(),
            value.title(),
            value[:middle] + NON_ASCII + value[middle:],
            NON_ASCII[:2] + value,
            value[:middle] + "7" + value[middle:],
            "42",
            "0",
            value + " ",
            " " + value,
            value.replace("", " ")[1:-1],
            value[:middle] + "  " + value[middle:],
            value + "!",
            value[:middle] + "," + value[middle:],
            "aAbB",
            "aaaa",
            "abba",
            "Abba",
            "a b",
            "A",
            "Z",
            "z",
            "é",
            "ÉCOLE école",
            "x" * 40,
            value * 12,
            first * 60,
            value.replace(" ", "\t"),
            value.replace(" ", "\n"),
            value[:middle] + "\t" + value[middle:],
            value + "\n",
            "Ñandú",
            "Éé",
            value.title().swapcase(),
            SPECIAL_CASE[:1] + value.lower(),
            SPECIAL_CASE[1:2] + value.lower(),
            value.lower() + SPECIAL_CASE,
        ]
    if isinstance(value, (list, tuple)):
        kind = type(value)
        items = list(value)
        found = [
            [],
            items[:1],
            items[-1:],
            items + items[:1],
            items[:1] + items,
            items[:1] * max(len(items), 3),
            items[::-1],
            items * 3,
            items[1:],
            items[:-1],
        ]
        try:
            found += [sorted(items), sorted(items, reverse=True)]
        except TypeError:
            pass
        if items:
            biggest = _try(lambda: max(items))
            if biggest is not None:
                found.append(items + [biggest])  # a tie for the largest
            if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
                found.append(sorted(set(items)) + [biggest + 1, biggest + 2])  # longer, still sorted and distinct
            found += [[edge] for edge in class_edges(items[0], rng)[:6]]
            found += [
                items[:position] + [edge] + items[position + 1 :]
                for position in range(min(len(items), 3))
                for edge in class_edges(items[position], rng)[:4]
            ]
            found.append([mutated(items[rng.randrange(len(items))], rng) for _ in range(rng.randint(20, 40))])
        return [kind(each) for each in found]
    if isinstance(value, (set, frozenset)):
        return [type(value)(each) for each in class_edges(sorted(value, key=repr), rng)]
    if isinstance(value, dict):
        keys = list(value)
        found = [{}, dict(list(value.items())[:1])]
        if keys:
            found.append({key: value[key] for key in keys[1:]})
            found.append({**value, mutated(keys[0], rng): value[keys[0]]})
            found.append({key: mutated(item, rng) for key, item in value.items()})
            found.append({key: value[keys[0]] for key in keys})  # every value the same: ties
        return found
    return []


def _is_number(text: str) -> bool:
    """Whether ``text`` is a finite number as ``float`` reads it (a problem that takes numbers written out)."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _try(function):
    try:
        return function()
    except (TypeError, ValueError):
        return None


def mutated(value, rng: random.Random):
    """``value`` changed a little at random, its type kept (EvalPlus's type-aware mutation)."""
    if isinstance(value, bool):
        return rng.random() < 0.5
    if isinstance(value, int):
        return rng.choice(
            [
                value + 1,
                value - 1,
                -value,
                value * 2,
                value // 2,
                value + rng.randint(-10, 10),
                rng.randint(-100, 100),
                rng.randint(0, 20),
                rng.randint(-5, 5) * 10 ** rng.randint(1, 6),
            ]
        )
    if isinstance(value, float):
        return rng.choice(
            [value + 0.5, -value, value * 1.5, round(rng.uniform(-100, 100), 2), value / 3, float(rng.randint(-20, 20))]
        )
    if isinstance(value, str):
        alphabet = sorted(set(value)) or ["a"]
        pool = alphabet + [
            rng.choice("abcxyz"),
            rng.choice("ABCXYZ"),
            rng.choice("0123456789"),
            " ",
            rng.choice(PUNCTUATION),
            rng.choice(NON_ASCII),
        ]
        chars = list(value)
        choice = rng.randrange(6)
        if choice == 0 or not chars:
            chars.insert(rng.randint(0, len(chars)), rng.choice(pool))
        elif choice == 1:
            del chars[rng.randrange(len(chars))]
        elif choice == 2:
            chars[rng.randrange(len(chars))] = rng.choice(pool)
        elif choice == 3:
            position = rng.randrange(len(chars))
            chars.insert(position, chars[position])
        elif choice == 4:
            rng.shuffle(chars)
        else:
            chars = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        return "".join(chars)
    if isinstance(value, (list, tuple)):
        items = list(value)
        choice = rng.randrange(6)
        if choice == 0 and items:
            position = rng.randrange(len(items))
            items[position] = mutated(items[position], rng)
        elif choice == 1 and items:
            del items[rng.randrange(len(items))]
        elif choice == 2 and items:
            items.insert(rng.randint(0, len(items)), mutated(rng.choice(items), rng))
        elif choice == 3 and items:
            items.insert(rng.randint(0, len(items)), rng.choice(items))  # a duplicate
        elif choice == 4:
            rng.shuffle(items)
        elif items:
            items = [mutated(item, rng) for item in items]
        return type(value)(items)
    if isinstance(value, (set, frozenset)):
        return type(value)(mutated(sorted(value, key=repr), rng))
    if isinstance(value, dict):
        items = list(value.items())
        if items and rng.random() < 0.5:
            key, item = rng.choice(items)
            return {**value, key: mutated(item, rng)}
        if items and rng.random() < 0.5:
            key, item = rng.choice(items)
            return {**value, mutated(key, rng): item}
        return dict(items[1:])
    return value


def _meetings(arguments: tuple) -> list[tuple]:
    """The arguments made to meet: a zero where a number is (a divisor), two of one type equal or swapped, two
    strings equal but for case, a key absent from its container and one present, an integer a power of another
    (and one past it), and a number written in the strings changed everywhere it is written (`_renumbered`)."""
    found = _renumbered(arguments)
    for position, value in enumerate(arguments):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found.append(arguments[:position] + (type(value)(0),) + arguments[position + 1 :])
        for other in range(len(arguments)):
            base = arguments[other]
            if other != position and type(value) is int is type(base) and 2 <= abs(base) <= 36:
                for power in (base**3, base**5, base**5 + 1):  # a power of the other (where float logarithms miss)
                    found.append(arguments[:position] + (power,) + arguments[position + 1 :])
        for other in range(position + 1, len(arguments)):
            if type(arguments[other]) is type(value):
                found.append(arguments[:other] + (value,) + arguments[other + 1 :])
                if isinstance(value, str):  # equal but for case, one with a letter whose maps part ways
                    special = value + SPECIAL_CASE[:1]
                    for folded in (special.casefold(), special.upper(), special.swapcase()):
                        found.append(
                            arguments[:position]
                            + (special,)
                            + arguments[position + 1 : other]
                            + (folded,)
                            + arguments[other + 1 :]
                        )
                swapped = list(arguments)
                swapped[position], swapped[other] = arguments[other], value
                found.append(tuple(swapped))
        if isinstance(value, (list, tuple, dict, set, str)) and value:
            for other, key in enumerate(arguments):
                if other != position and not isinstance(key, (list, dict, set)):
                    present = next(iter(value)) if not isinstance(value, str) else value[0]
                    if type(present) is type(key):
                        found.append(arguments[:other] + (present,) + arguments[other + 1 :])
    return found


def _renumbered(arguments: tuple) -> list[tuple]:
    """``arguments`` with a number written in its strings replaced, in every string at once, by each of
    `NUMBERS_IN_TEXT`: what ties the strings together stays ("1/5" and "5/1" stay each other's inverse as "1/49" and
    "49/1"), and the numbers reach those a float cannot hold exactly (1/3, 1/7, 1/49) and zero."""
    written = sorted({number for value in arguments if isinstance(value, str) for number in re.findall(r"\d+", value)})
    found = []
    for number in written[:4]:
        for other in NUMBERS_IN_TEXT:
            if str(other) != number:
                found.append(
                    tuple(
                        re.sub(rf"(?<!\d){number}(?!\d)", str(other), value) if isinstance(value, str) else value
                        for value in arguments
                    )
                )
    return found


def candidate_calls(
    problem: Problem, seeds: list[tuple], shape: Shape, judged: set[str], limit: int = MAX_CANDIDATES
) -> list[tuple]:
    """Inputs to try, in a fixed order for a problem: the seeds no judged test calls (``judged``: their reprs), the
    class edges of each argument of each seed, the arguments made to meet, then random mutations of seeds and of
    earlier candidates; each fitting ``shape``. A seed of a later test is a candidate: the reward judges the first
    tests and the pool, so an input only a later test holds (often an edge: ``solve(0)`` as a sixth test) would
    otherwise never be judged."""
    rng = random.Random(f"pool:{problem.id}")
    seen = set(judged)
    found: list[tuple] = []

    def add(arguments: tuple) -> None:
        key = repr(arguments)
        if key not in seen and len(key) <= LONGEST_OUTPUT * 4 and shape.fits(arguments):
            seen.add(key)
            found.append(arguments)

    for seed in seeds:
        add(seed)
    later, found = found, []
    for seed in seeds:
        for position, value in enumerate(seed):
            for edge in class_edges(value, rng):
                add(seed[:position] + (edge,) + seed[position + 1 :])
        for meeting in _meetings(seed):
            add(meeting)
    rng.shuffle(found)  # the edges of every seed and argument, not only the first seed's, when cut below
    found = later + found[: limit // 2]
    seen = set(judged) | {repr(each) for each in found}
    attempts = 0
    while len(found) < limit and attempts < limit * 20:
        attempts += 1
        base = list(rng.choice(seeds if not found or rng.random() < 0.5 else found))
        for position in rng.sample(range(len(base)), rng.randint(1, len(base))) if base else ():
            base[position] = mutated(base[position], rng)
        add(tuple(base))
    return found


# Running the solution.


def _harness_tests(calls: list[tuple], form: str) -> list[Test]:
    tests = []
    for arguments in calls:
        statement = form.format(call=_call_text(arguments))
        tests.append(
            Test(
                CALL_HARNESS.format(
                    limit=PER_CALL_SECONDS * 4,
                    statement="    " + statement,
                    token=TOKEN.encode("unicode_escape").decode(),
                ),
                "\0",
            )
        )
    return tests


def _call_text(arguments: tuple) -> str:
    return f"solve({', '.join(repr(argument) for argument in arguments)})"


def printed_on(judge, program: str, calls: list[tuple], form: str) -> list[tuple[str, float] | None]:
    """What ``program`` (defining ``solve``) prints for each call, in runs of `MAX_CALLS` calls, with the seconds it
    took; None where it raised, ran out of time or the run ended before it (the run is then resumed after it)."""
    results: list[tuple[str, float] | None] = [None] * len(calls)
    start = 0
    while start < len(calls):
        chunk = calls[start : start + MAX_CALLS]
        judgement = judge.run(
            program + PRELUDE,
            [Calls(tuple(_harness_tests(chunk, form)))],
            "python",
            timeout=max(judge.timeout, PER_CALL_SECONDS * 8 * len(chunk)),
        )
        if judgement.status == "sandbox_error":
            raise JudgeUnavailable(
                "the judge could not run a solution to build a pool: " + judgement.tests[0].stderr[-300:]
            )
        reached = 0
        for index, result in enumerate(judgement.tests):
            text = result.stdout
            if TOKEN not in text:
                break
            reached = index + 1
            printed, _, tail = text.rpartition("\n" + TOKEN)
            parts = tail.split()
            if len(parts) == 2 and parts[0] == "True":
                results[start + index] = (printed.strip("\n"), float(parts[1]))
        start += max(reached, 1)  # a call that ended the run (it killed its process) is skipped
    return results


def build_pool(problem: Problem, judge, size: int = POOL_SIZE) -> Pool:
    """The pool of one Python problem (see the module's docstring); a problem without a solution or without printed
    calls of literal arguments gets none, and says why."""
    pool = Pool(problem)
    pool.skipped = _unusable(problem)
    if pool.skipped:
        return pool
    view = as_solve(problem)
    form, compare, tolerance = printing_form(view)
    judged = {
        repr(call) for test in view.judged_tests(MAX_TESTS_PER_PROBLEM) for call in printed_calls(test.test_code) or ()
    }
    pairs = answered_calls(pool, view, own_calls(problem), judged, judge, size, form)
    groups = _cheap_share_kept(view, test_groups(pairs, problem.id), judge, form)
    if 2 * sum(map(len, groups)) < len(pairs):
        # Most answers are what one cheap program or another prints (one of two arguments, as the shorter of two
        # lists): several calls a test, which each passes only where it answers every call.
        grouped = _cheap_share_kept(view, test_groups(pairs, problem.id, grouped=True), judge, form)
        groups = max(groups, grouped, key=lambda kept: sum(map(len, kept)))
    pool.classes = set().union(*(value_classes(call) for group in groups for call, _ in group))
    for code, expected in (python_test(group, form) for group in groups):
        if problem.entry_point != "solve":
            code = code.replace("solve(", f"{problem.entry_point}(")
        pool.tests.append(Test(code, expected, tolerance=tolerance, compare=compare))
    return pool


def _unusable(problem: Problem) -> str | None:
    if problem.solution is None:
        return "no solution"
    if problem.reads_input:
        return "its tests give standard input (a pool holds printed calls)"
    if not own_calls(problem):
        return "no test prints a call of literal arguments"
    return None


def answered_calls(
    pool: Pool, view: Problem, seeds: list[tuple], judged: set[str], judge, size: int, form: str
) -> list[tuple]:
    """Up to ``size`` (call, what the solution printed) pairs for the problem ``view`` (calling ``solve``), its
    inputs grown from ``seeds``, none a call of the judged tests (``judged``, their reprs); what was tried and left
    out is noted in ``pool``."""
    from data.quality.domain import reference_program

    program = reference_program(view)
    shape = Shape.of(view, seeds, with_classes=not view.domain)
    calls = candidate_calls(view, seeds, shape, judged)
    pool.tried = len(calls)
    first = printed_on(judge, program, calls, form)
    answered = [
        (call, result[0])
        for call, result in zip(calls, first)
        if result is not None and result[1] <= PER_CALL_SECONDS and len(result[0]) <= LONGEST_OUTPUT
    ]
    pool.outside = len(calls) - len(answered)
    answered = _spread_by_class(answered, size * 2)
    again = printed_on(judge, program, [call for call, _ in answered][::-1], form)[::-1]
    stable = []
    for (call, printed), other in zip(answered, again):
        if other is None or other[0] != printed:
            pool.unstable.append(_call_text(call))
        else:
            stable.append((call, printed))
    if pool.unstable:  # a solution that prints differently once may anywhere: none of its answers is trusted
        pool.skipped = (
            f"the solution printed differently in two runs on {len(pool.unstable)} inputs (say "
            f"{pool.unstable[0]}): not trusted"
        )
        return []
    second = view.extra.get("second_solution")
    if second and stable:
        second_view = as_solve(replace(pool.problem, solution=second))
        theirs = printed_on(judge, second_view.solution, [call for call, _ in stable], form)
        agreed = []
        for (call, printed), other in zip(stable, theirs):
            if other is None or other[0] != printed:
                pool.disagreements.append(
                    f"{_call_text(call)}: solution {printed!r}, second solution {None if other is None else other[0]!r}"
                )
            else:
                agreed.append((call, printed))
        stable = agreed
    return _spread_by_class(stable, size)


def _cheap_share_kept(view: Problem, groups: list[list[tuple]], judge, form: str) -> list[list[tuple]]:
    """``groups`` (each the calls of one test) less the fewest of those a cheap program (a constant, an echo, the
    first element, the length ...: data/quality/trivial.py) passes, so that none passes more than a third
    (`CHEAP_SHARE`) of the problem's tests and its pool together (as `data verify` counts it): a pool where most
    answers are the input itself would pay the echo. A cheap program that passes the whole pool answers as the
    solution does here, and is no cheap program of this problem."""
    from data.quality.trivial import cheap_programs

    tests = [Test(*python_test(group, form)) for group in groups]
    if not tests:
        return groups
    given = [test for test in view.tests if test.input is None]
    cheap = cheap_programs(replace(view, tests=view.tests + tuple(tests[:32])))
    # In the runs `data verify` and the reward judge them in (a program keeping state sees the same calls).
    judgements = judge.run_many([(probe.program, joined_runs(given, tests), "python") for probe in cheap])
    rows = [[result.status == "passed" for result in judgement.tests] for judgement in judgements]
    passes = [(sum(row[: len(given)]), row[len(given) :]) for row in rows if not all(row[len(given) :])]
    # A program printing one answer whatever it is given.
    expected = [test.expected_output.strip() for test in tests]
    for wanted in dict.fromkeys(expected):
        passes.append(
            (sum(test.expected_output.strip() == wanted for test in given), [text == wanted for text in expected])
        )
    # The first test of each input class is kept where it can be: an edge (0, the empty list) is where a
    # forgetful program fails, and where a cheap one often passes.
    covered, first_of_class = set(), set()
    for index, group in enumerate(groups):
        new = set().union(*(value_classes(call) for call, _ in group)) - covered
        if new:
            first_of_class.add(index)
            covered |= new
    kept = list(range(len(groups)))
    # A cheap program over the share on the given tests alone (a problem its own tests leave guessable) is held to
    # the share on the pool alone: no pool could bring it under on both, and dropping every test it passes would
    # drop the inputs where it is nearly right but not quite, those that catch the wrong programs near it.
    passes = [
        (0, 0, row) if passed * CHEAP_SHARE[1] > CHEAP_SHARE[0] * len(given) else (passed, len(given), row)
        for passed, row in passes
    ]
    while kept and passes:
        over = [
            k
            for k, (passed, out_of, row) in enumerate(passes)
            if (passed + sum(row[i] for i in kept)) * CHEAP_SHARE[1] > CHEAP_SHARE[0] * (out_of + len(kept))
        ]
        if not over:
            break
        # Drop the test the most over-share cheap programs pass, a class's first test last, the last one first;
        # none when they pass no test of the pool (their share is the given tests': dropping would only raise it).
        dropped = max(
            (i for i in reversed(kept) if any(passes[k][2][i] for k in over)),
            key=lambda i: (i not in first_of_class, sum(passes[k][2][i] for k in over)),
            default=None,
        )
        if dropped is None:
            break
        kept.remove(dropped)
    return [groups[i] for i in kept]


def python_test(group: list[tuple], form: str) -> tuple[str, str]:
    """The test code and expected output of a test printing the calls of ``group`` ((call, printed) pairs)."""
    calls = [_call_text(call) for call, _ in group]
    if len(group) == 1:
        return form.format(call=calls[0]), group[0][1]
    if form.startswith("print(repr("):  # a value test: one tuple, compared with ==
        return f"print(repr(({', '.join(calls)},)))", repr(tuple(_literal(printed) for _, printed in group))
    return f"print({', '.join(calls)})", " ".join(printed for _, printed in group)


def test_groups(pairs: list[tuple], key: str, grouped: bool = False) -> list[list[tuple]]:
    """The calls of each test: one a test, or, for a problem of at most `FEW_ANSWERS` answers (or ``grouped``),
    `GROUP` a test in a seeded order, so that a constant passes a test only where every call in it has its answer.
    A handful of calls (a domain of ten inputs, most of them the problem's own tests) stays one a test."""
    few = len({printed for _, printed in pairs}) <= FEW_ANSWERS and len(pairs) > 2 * FEW_ANSWERS
    if not grouped and not few:
        return [[pair] for pair in pairs]
    pairs = list(pairs)
    random.Random(f"pool groups:{key}").shuffle(pairs)
    return [pairs[start : start + GROUP] for start in range(0, len(pairs) - GROUP + 1, GROUP)]


def build_q_pool(problem: Problem, twin, judge, size: int = POOL_SIZE) -> Pool:
    """The pool of a q problem, from its Python twin (data/quality/q_twins.py): the twin's results on inputs grown
    from both problems' calls, inside the q problem's ``domain``, written as q tests in the forms of the problem's
    own (data/q/values.py); an input or result q's forms cannot show is left out."""
    from data.generation.q_strengthen import q_candidate
    from data.q.values import QForms, Refused, parse_test
    from data.quality.q_twins import entry_point as q_entry_point

    pool = Pool(problem)
    if twin is None or twin.problem.solution is None:
        pool.skipped = "no Python twin with a solution"
        return pool
    entry_point = q_entry_point(problem)
    seeds, judged, judged_tests = [], set(), problem.judged_tests(MAX_TESTS_PER_PROBLEM)
    try:
        for test in problem.tests:
            calls = [tuple(value.python for value in call) for call in parse_test(test.test_code, entry_point)]
            seeds += calls
            judged |= {repr(call) for call in calls} if test in judged_tests else set()
    except Refused as refused:
        pool.skipped = f"a test is outside the map from Python ({refused})"
        return pool
    seeds += [call for call in own_calls(twin.problem) if call not in seeds]
    forms = QForms.of_tests(problem.tests, entry_point)
    view = as_solve(
        replace(
            twin.problem,
            domain=problem.domain or twin.problem.domain,
            extra={
                **twin.problem.extra,
                **({"second_solution": problem.extra["second_solution"]} if "second_solution" in problem.extra else {}),
            },
        )
    )
    form = "print(repr({call}))"
    pairs = answered_calls(pool, view, seeds, judged, judge, size * 2, form)
    for group in _cheap_share_kept(view, test_groups(pairs, problem.id), judge, form):
        calls = [tuple(list(a) if isinstance(a, tuple) else a for a in call) for call, _ in group]
        values = [_literal(printed) for _, printed in group]
        candidate = q_candidate(problem, forms, entry_point, calls, values)
        if candidate is not None and len(pool.tests) < size:
            pool.tests.append(Test(candidate.test_code, candidate.expected))
            pool.classes |= set().union(*(value_classes(call) for call in calls))
    return pool


def _spread_by_class(answered: list[tuple], size: int) -> list[tuple]:
    """At most ``size`` of ``answered``: every input class first, then the answers in turn (the one chosen least so
    far next), so no answer fills the pool and a constant passes little of it."""
    if len(answered) <= size and len({printed for _, printed in answered}) <= 1:
        return answered
    chosen, covered, rest = [], set(), []
    for call, printed in answered:
        new = value_classes(call) - covered
        if new and len(chosen) < size // 2:
            chosen.append((call, printed))
            covered |= new
        else:
            rest.append((call, printed))
    counts: dict[str, int] = {}
    for _, printed in chosen:
        counts[printed] = counts.get(printed, 0) + 1
    taken = [False] * len(rest)
    for round_ in range(len(rest)):  # the answers in turn, each in the order its inputs were found
        for index, (call, printed) in enumerate(rest):
            if len(chosen) >= size:
                return chosen
            if not taken[index] and counts.get(printed, 0) <= round_:
                taken[index] = True
                chosen.append((call, printed))
                counts[printed] = counts.get(printed, 0) + 1
        if all(taken):
            break
    return chosen


def _literal(printed: str):
    try:
        return ast.literal_eval(printed)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return printed


def with_pool(problem: Problem, pool: Pool) -> Problem:
    """``problem`` with its pool (its own kept when none was built)."""
    return replace(problem, pool=tuple(pool.tests)) if pool.tests else problem
