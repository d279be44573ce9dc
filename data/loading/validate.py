"""Validation of problem records (docs/data.md, "Record format").

Every loader hands raw records here together with a location string (``file:line`` for text files,
``path/to/file`` for folders, ``file:row N`` for datasets), so a bad source fails before any model
is loaded with one line that says where and what to fix.
"""

import ast
import keyword
import math
from collections import Counter
from dataclasses import replace

from cli import LocatedError
from data.loading.comparisons import printing_form, refusal, with_literal_values
from data.loading.q_tests import refusal as q_refusal
from judging.languages import LANGUAGES
from judging.records import COMPARE, Problem, Test

SPLITS = ("train", "test")
PROBLEM_FIELDS = ("id", "language", "description", "tests", "solution", "split", "entry_point", "domain", "pool")
TEST_FIELDS = ("test_code", "expected_output", "input", "tolerance", "hidden", "compare")
ALLOW_COMPARISONS_HELP = (
    "Keep tests that are not printed calls on literals (print(solve(...)), show solve[...]) as "
    "they are, instead of refusing them. Unsafe for RL: the judged code decides a comparison "
    "made in the sandbox (a result whose == is always true passes, a q solution reads the "
    "compared value in its script). Simple `assert f(x) == literal` tests become printing "
    "tests either way."
)


class DataError(LocatedError):
    """A problem source that cannot be used; ``str(error)`` is ``location: reason`` on one line."""


def _require_text(record, key, location, allow_empty=False):
    if key not in record or record[key] is None:
        raise DataError(location, f"missing '{key}'")
    value = record[key]
    if not isinstance(value, str):
        raise DataError(location, f"'{key}' must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise DataError(location, f"'{key}' is empty")
    return value


def _check_id(record, location):
    if "id" not in record or record["id"] is None:
        raise DataError(location, "missing 'id'")
    value = record["id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise DataError(location, f"'id' must be a string, got {type(value).__name__}")
    if not value.strip():
        raise DataError(location, "'id' is empty")
    return value


def _check_test(test, index, location, field="tests"):
    name = f"{field}[{index}]"
    if not isinstance(test, dict):
        raise DataError(location, f"{name} must be an object with test_code (or input) and expected_output")
    if test.get("input") is not None:
        if test.get("test_code") not in (None, ""):
            raise DataError(
                location,
                f"{name} has both 'test_code' and 'input'; a test either calls the function "
                "(test_code) or gives the program its standard input (input)",
            )
        if not isinstance(test["input"], str):
            raise DataError(location, f"{name}.input must be a string, got {type(test['input']).__name__}")
    elif "test_code" not in test or test["test_code"] is None:
        raise DataError(location, f"{name} has no 'test_code' (or 'input', for a program reading standard input)")
    elif not isinstance(test["test_code"], str):
        raise DataError(location, f"{name}.test_code must be a string, got {type(test['test_code']).__name__}")
    elif not test["test_code"].strip():
        raise DataError(location, f"{name}.test_code is empty")
    if "expected_output" not in test or test["expected_output"] is None:
        raise DataError(location, f"{name} has no 'expected_output' (use \"\" for a test that prints nothing)")
    expected = test["expected_output"]
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        raise DataError(
            location,
            f"{name}.expected_output is the number {expected!r}; "
            f'quote it ("{expected}") since output is compared as text',
        )
    if not isinstance(expected, str):
        raise DataError(location, f"{name}.expected_output must be a string, got {type(expected).__name__}")
    tolerance = test.get("tolerance")
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < math.inf
    ):
        raise DataError(
            location,
            f"{name}.tolerance must be a number 0 or above (the largest absolute difference "
            f"accepted between printed and expected numbers), got {tolerance!r}",
        )
    hidden = test.get("hidden", False)
    if not isinstance(hidden, bool):
        raise DataError(location, f"{name}.hidden must be true or false, got {type(hidden).__name__}")
    compare = test.get("compare", "text")
    if compare not in COMPARE:
        raise DataError(
            location,
            f'{name}.compare must be one of {", ".join(map(repr, COMPARE))} ("value" reads '
            f"printed and expected output as Python literals and compares them with ==), "
            f"got {compare!r}",
        )
    extra = {k: v for k, v in test.items() if k not in TEST_FIELDS}
    return Test(
        test.get("test_code") or "",
        expected,
        extra,
        test.get("input"),
        None if tolerance is None else float(tolerance),
        hidden,
        compare,
    )


def _check_hidden_last(tests, location):
    """Hidden tests come after every judged one, so the reward's tests are the first ones (their trivial shares
    and adequacy are measured over the first tests), and at least one test is judged."""
    if all(test.hidden for test in tests):
        raise DataError(
            location, 'every test is hidden; the reward needs at least one test it judges (leave "hidden" out of one)'
        )
    hidden = [index for index, test in enumerate(tests) if test.hidden]
    judged_after = [index for index in range(hidden[0] + 1, len(tests)) if not tests[index].hidden] if hidden else []
    if judged_after:
        raise DataError(
            location,
            f"tests[{judged_after[0]}] is judged but comes after hidden tests[{hidden[0]}]; put the hidden tests last",
        )


def _check_entry_point(record, location):
    entry_point = record.get("entry_point")
    if entry_point is None:
        return "solve"
    if not isinstance(entry_point, str) or not entry_point.isidentifier() or keyword.iskeyword(entry_point):
        raise DataError(location, f"'entry_point' must name a function (an identifier), got {entry_point!r}")
    return entry_point


def validate_record(record, location, language) -> Problem:
    """Check one raw record and return it as a `Problem` read at ``location``: id as str, the language filled in;
    fields the record format does not name are kept in ``extra``."""
    if not isinstance(record, dict):
        raise DataError(location, f"expected a problem object, got {type(record).__name__}")
    problem_id = _check_id(record, location)
    description = _require_text(record, "description", location)

    problem_language = record.get("language") or language
    if problem_language not in LANGUAGES:
        raise DataError(location, f"language {problem_language!r} is not one of {', '.join(LANGUAGES)}")

    tests = record.get("tests")
    if tests is None:
        raise DataError(location, "missing 'tests'")
    if not isinstance(tests, list):
        raise DataError(location, f"'tests' must be a list, got {type(tests).__name__}")
    if not tests:
        raise DataError(location, "'tests' is empty; a problem needs at least one test")
    tests = tuple(_check_test(test, index, location) for index, test in enumerate(tests))
    _check_hidden_last(tests, location)
    kinds = [test.input is not None for test in tests]
    if len(set(kinds)) > 1:
        other = kinds.index(not kinds[0])
        raise DataError(
            location,
            f"tests[{other}] {'gives' if kinds[other] else 'does not give'} standard input "
            f"and tests[0] {'does' if kinds[0] else 'does not'}; a problem's tests either all "
            "call its function or all give its program standard input",
        )
    if kinds[0] and problem_language != "python":
        raise DataError(
            location, f"tests give standard input, which is judged for Python programs only, not {problem_language}"
        )
    entry_point = _check_entry_point(record, location)

    solution = record.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise DataError(location, f"'solution' must be a string, got {type(solution).__name__}")

    split = record.get("split")
    if split is not None and split not in SPLITS:
        raise DataError(location, f"split {split!r} is not one of {', '.join(SPLITS)} (or leave it out)")
    domain = _check_domain(record.get("domain"), location, entry_point, kinds[0])
    pool = _check_pool(record.get("pool"), location)
    twin_of = record.get("twin_of")  # kept in extra; python -m data verify reads it (data/quality/verify.py)
    if twin_of is not None and (twin_of not in LANGUAGES or twin_of == problem_language):
        others = ", ".join(name for name in LANGUAGES if name != problem_language)
        raise DataError(
            location,
            f"'twin_of' names the language of the problem this one is a twin of ({others}), "
            f"or is left out; got {twin_of!r}",
        )
    extra = {key: value for key, value in record.items() if key not in PROBLEM_FIELDS}
    return Problem(
        problem_id, problem_language, description, tests, solution, split, extra, location, entry_point, domain, pool
    )


def _check_pool(pool, location) -> tuple:
    """A ``pool`` is a list of printed-call tests (no standard input, none hidden), or absent."""
    if pool is None:
        return ()
    if not isinstance(pool, list):
        raise DataError(location, f"'pool' must be a list of tests, got {type(pool).__name__}")
    tests = tuple(_check_test(test, index, location, "pool") for index, test in enumerate(pool))
    for index, test in enumerate(tests):
        if test.input is not None or test.hidden:
            raise DataError(
                location,
                f"pool[{index}] {'is hidden' if test.hidden else 'gives standard input'}"
                "; a pool holds printed calls only, every one judged in runs (leave "
                "'input' and 'hidden' out)",
            )
    return tests


def _check_domain(domain, location, entry_point, reads_input):
    """A ``domain`` is a Python expression over the judged function's arguments (data/quality/domain.py), or absent."""
    if domain is None:
        return None
    if reads_input:
        raise DataError(
            location, "'domain' names the arguments of a function, and these tests give standard input; leave it out"
        )
    if not isinstance(domain, str) or not domain.strip():
        raise DataError(
            location, f"'domain' must be a Python expression over {entry_point}'s arguments, such as \"n >= 0\""
        )
    try:
        ast.parse(domain.strip(), mode="eval")
    except SyntaxError as error:
        raise DataError(location, f"'domain' is not a Python expression ({error.msg}): {domain!r}") from None
    return domain.strip()


def validate_records(located_records, language):
    """Validate ``(location, record)`` pairs from one source unit; ids must be unique within it."""
    problems = []
    first_seen = {}
    for location, record in located_records:
        problem = validate_record(record, location, language)
        if problem.id in first_seen:
            raise DataError(location, f"duplicate id {problem.id!r} (first at {first_seen[problem.id]})")
        first_seen[problem.id] = location
        problems.append(problem)
    return problems


def compare_on_the_host(problems: list[Problem], allow_in_sandbox_comparisons=False) -> tuple[list[Problem], Counter]:
    """The problems with their assert tests rewritten as printing tests and literal arithmetic in their arguments
    worked out (data/loading/comparisons.py), and how many tests each changed (``converted``, ``worked out``); a
    test not in the printing form (Python: comparisons.py; q: q_tests.py) is refused unless allowed. Tests giving
    standard input carry no code and pass."""
    changed, out = Counter(), []
    for problem in problems:
        tests = []
        for index, test in enumerate(problem.tests):
            found = None
            if test.input is None and problem.language == "python":
                printing = printing_form(test.test_code, test.expected_output, problem.entry_point)
                if printing:
                    test = replace(
                        test,
                        test_code=printing.test_code,
                        expected_output=printing.expected_output,
                        tolerance=printing.tolerance if test.tolerance is None else test.tolerance,
                        compare=printing.compare,
                    )
                    changed["converted"] += 1
                found = refusal(test.test_code, problem.entry_point)
                if found and not allow_in_sandbox_comparisons:
                    raise DataError(
                        problem.location,
                        f"tests[{index}] is not a printing test ({found}); a Python "
                        "test is set-up lines `name = literal`, then lines "
                        f"print({problem.entry_point}(...), ...) whose arguments are "
                        "literals or set-up names, expecting what they print "
                        "(docs/data.md), or pass --allow_in_sandbox_comparisons "
                        "(unsafe for RL: the judged code can decide a test that "
                        "compares in the sandbox)",
                    )
                if not found:
                    worked_out = with_literal_values(test.test_code)
                    if worked_out != test.test_code:
                        test = replace(test, test_code=worked_out)
                        changed["worked out"] += 1
            elif test.input is None:
                found = q_refusal(test.test_code, problem.entry_point)
                if found and not allow_in_sandbox_comparisons:
                    raise DataError(
                        problem.location,
                        f"tests[{index}] is not a printing test ({found}); a q test is "
                        "set-up lines `name:literal`, then lines "
                        f"show {problem.entry_point}[...] or show "
                        f"({problem.entry_point}[...];...) whose arguments are "
                        "literals or set-up names, expecting what they print "
                        "(docs/data.md), or pass --allow_in_sandbox_comparisons "
                        "(unsafe for RL: the judged code can read a compared value "
                        "in the script)",
                    )
            tests.append(test)
        for index, test in enumerate(() if allow_in_sandbox_comparisons else problem.pool):  # nothing to refuse
            found = (refusal if problem.language == "python" else q_refusal)(test.test_code, problem.entry_point)
            if found:
                raise DataError(
                    problem.location,
                    f"pool[{index}] is not a printing test ({found}); a pool holds "
                    "printed calls of literals, as `python -m data pool` writes them, "
                    "or pass --allow_in_sandbox_comparisons (unsafe for RL)",
                )
        out.append(replace(problem, tests=tuple(tests)) if tests != list(problem.tests) else problem)
    return out, changed
