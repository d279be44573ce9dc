"""Validation of problem records (docs/data.md, "Record format").

Every loader hands raw records here together with a location string (``file:line`` for text files,
``path/to/file`` for folders, ``file:row N`` for datasets), so a bad source fails before any model
is loaded with one line that says where and what to fix.
"""

from dataclasses import replace

from cli import LocatedError
from data.comparisons import printing_form, sandbox_comparison
from judging.languages import LANGUAGES
from judging.records import Problem, Test

SPLITS = ("train", "test")
PROBLEM_FIELDS = ("id", "language", "description", "tests", "solution", "split")
TEST_FIELDS = ("test_code", "expected_output")
ALLOW_COMPARISONS_HELP = ("Keep tests that compare inside the sandbox (==, assert, ...) instead of refusing them. "
                          "Unsafe for RL: the judged code decides such a comparison (a result whose == is always "
                          "true passes). Simple `assert f(x) == literal` tests become printing tests either way.")
PRINTING_TEST = {"python": "print(solve(...))", "q": "show solve[...]"}


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


def _check_test(test, index, location):
    name = f"tests[{index}]"
    if not isinstance(test, dict):
        raise DataError(location, f"{name} must be an object with test_code and expected_output")
    if "test_code" not in test or test["test_code"] is None:
        raise DataError(location, f"{name} has no 'test_code'")
    if not isinstance(test["test_code"], str):
        raise DataError(location, f"{name}.test_code must be a string, got {type(test['test_code']).__name__}")
    if not test["test_code"].strip():
        raise DataError(location, f"{name}.test_code is empty")
    if "expected_output" not in test or test["expected_output"] is None:
        raise DataError(location, f"{name} has no 'expected_output' (use \"\" for a test that prints nothing)")
    expected = test["expected_output"]
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        raise DataError(location, f"{name}.expected_output is the number {expected!r}; "
                                  f"quote it (\"{expected}\") since output is compared as text")
    if not isinstance(expected, str):
        raise DataError(location, f"{name}.expected_output must be a string, got {type(expected).__name__}")
    return Test(test["test_code"], expected, {k: v for k, v in test.items() if k not in TEST_FIELDS})


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

    solution = record.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise DataError(location, f"'solution' must be a string, got {type(solution).__name__}")

    split = record.get("split")
    if split is not None and split not in SPLITS:
        raise DataError(location, f"split {split!r} is not one of {', '.join(SPLITS)} (or leave it out)")
    extra = {key: value for key, value in record.items() if key not in PROBLEM_FIELDS}
    return Problem(problem_id, problem_language, description, tests, solution, split, extra, location)


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


def compare_on_the_host(problems: list[Problem], allow_in_sandbox_comparisons=False) -> tuple[list[Problem], int]:
    """The problems with simple assert tests rewritten as printing tests, and how many tests were rewritten; any
    other test that compares inside the sandbox (data/comparisons.py) is refused unless allowed."""
    converted, out = 0, []
    for problem in problems:
        tests = []
        for index, test in enumerate(problem.tests):
            printing = printing_form(test.test_code, test.expected_output) if problem.language == "python" else None
            if printing:
                test = replace(test, test_code=printing[0], expected_output=printing[1])
                converted += 1
            found = sandbox_comparison(test.test_code, test.expected_output, problem.language)
            if found and not allow_in_sandbox_comparisons:
                raise DataError(problem.location, f"tests[{index}] compares inside the sandbox ({found}), where "
                                                  "the judged code can decide it; make the test print the result "
                                                  f"({PRINTING_TEST[problem.language]}) and expect its text, "
                                                  "or pass --allow_in_sandbox_comparisons (unsafe for RL: a "
                                                  "result whose == is always true passes)")
            tests.append(test)
        out.append(replace(problem, tests=tuple(tests)) if tests != list(problem.tests) else problem)
    return out, converted
