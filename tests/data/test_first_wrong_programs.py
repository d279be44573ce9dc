"""The wrong programs a model writes first: inputs of another class than the tests', mutants that are wrong on a
whole class, and `python -m data verify --wrong_programs` finding each natural wrong program, judged for real, on
the problems as they were before their tests were strengthened against them
(tests/fixtures/data/first_wrong_programs_problems.jsonl, with a user's "vowels in either case" problem whose tests
are all lower case)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from data.quality.input_classes import class_values
from data.quality.wrong_programs import mutants

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "data"
PROBLEMS = FIXTURES / "first_wrong_programs_problems.jsonl"
PROGRAMS = FIXTURES / "first_wrong_programs.jsonl"  # the seven, as a completions file
VOWELS_WRONG = "def solve(s):\n    return sum(1 for c in s if c in 'aeiou')\n"


def code_of(completion):
    return completion.removeprefix("```python\n").removesuffix("```")


def answer(program, call):
    """What ``print(call)`` prints after ``program``: fixture code of this file, run here."""
    namespace = {}
    exec(program, namespace)
    return str(eval(call, namespace))


def test_class_values_change_case_digits_zero_powers_primes_and_list_shapes():
    strings = class_values("xyz")
    assert {"XYZ", "Xyz"} <= set(strings) and any(c.isdigit() for s in strings for c in s)
    assert any(" " in s for s in strings) and any("!" in s or "," in s for s in strings)
    assert "01.2.3.4" in class_values("1.2.3.4", "no leading zeros") and "01.2.3.4" not in class_values("1.2.3.4")
    numbers = class_values(13)
    assert {0, 1, -1, 2, 16, 15, 17, 25} <= set(numbers) and 13 not in numbers
    lists = class_values([3, 1, 2])
    assert all(shape in lists for shape in ([], [3], [1, 2, 3], [3, 2, 1], [3, 3, 3], [3, 3, 1, 2]))
    assert [[1, 3], [3, 7], [8, 10]] in class_values([[1, 3], [2, 6], [8, 10]])  # touching intervals
    assert class_values(True) == []


def test_mutants_delete_branches_drop_guards_and_swap_string_methods():
    def names(solution):
        return {m.name: m.program for m in mutants(solution)}

    power = names("def solve(n):\n    return n > 0 and n & (n - 1) == 0\n")
    assert (
        power["mutant line 2: `n > 0 and n & n - 1 == 0` -> `n & n - 1 == 0`"]
        == "def solve(n):\n    return n & n - 1 == 0\n"
    )  # the natural wrong program, exactly
    vowels = names("def solve(s):\n    return sum(1 for c in s.lower() if c in 'aeiou')\n")
    assert {
        "mutant line 2: `s.lower()` -> `s`",
        "mutant line 2: `s.lower()` -> `s.upper()`",
        "mutant line 2: `'aeiou'` -> `'AEIOU'`",
    } <= set(vowels)
    branch = names("def solve(c):\n    if 'a' <= c <= 'z':\n        return c.isalpha()\n    assert c\n    return c\n")
    assert {
        "mutant line 2: `if 'a' <= c <= 'z':` -> `if True:`",
        "mutant line 2: `if 'a' <= c <= 'z':` -> `if False:`",
        "mutant line 2: `'a' <= c <= 'z'` -> `'a' <= c`",
        "mutant line 2: `'a'` -> `'A'`",
        "mutant line 3: `c.isalpha()` -> `c.islower()`",
    } <= set(branch)
    assert not any("assert" in name for name in branch)  # the domain is left as it is


def run_verify(*args):
    return subprocess.run(
        [sys.executable, "-m", "data", "verify", *map(str, args), "--language", "python"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ},
    )


@pytest.mark.slow
def test_verify_finds_the_wrong_programs_a_model_writes_first(tmp_path):
    programs = tmp_path / "wrong.jsonl"
    programs.write_text(
        PROGRAMS.read_text()
        + json.dumps({"id": "count-vowels-either-case", "completion": f"```python\n{VOWELS_WRONG}```"})
        + "\n"
    )
    given = [json.loads(line) for line in programs.read_text().splitlines()]
    solutions = {p["id"]: p["solution"] for p in map(json.loads, PROBLEMS.read_text().splitlines())}
    result = run_verify(PROBLEMS, "--wrong_programs", programs)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    for number, record in enumerate(given, 1):
        line = next(
            line
            for line in lines
            if f": {record['id']}: a wrong program earns more than a constant: {programs}:{number} " in line
        )
        found = re.search(
            r" passes (\d)/5 judged tests \(the best cheap program (\d)\); differs on (solve\(.*\))$", line
        )
        assert found and int(found.group(1)) > int(found.group(2)), line
        counter_example = found.group(3)
        # A real counter-example: the natural program and the solution print different things there.
        assert answer(code_of(record["completion"]), counter_example) != answer(
            solutions[record["id"]], counter_example
        ), line
    # The generated checks find the weakness of the problems the natural programs pass in full by themselves: a
    # mutant wrong on upper case, shown on the simplest input with an upper-case letter.
    for problem_id in ("caesar-cipher", "count-vowels-either-case"):
        weak = next(line for line in lines if f": {problem_id}: weak tests: " in line)
        assert re.search(r"differs on solve\('[^']*[A-Z][^']*'", weak), weak
    assert "8 wrong, of which 8 earn more than a constant" in result.stdout


def test_a_named_function_is_checked_as_its_problem_names_it():
    """A problem whose tests call `count_vowels` (HumanEval's entry_point): a given program defines that name too."""
    from data import verify_problems
    from data.quality.given_programs import GivenProgram
    from judging import Judge, Problem, Test

    solution = "def count_vowels(s):\n    return sum(1 for c in s.lower() if c in 'aeiou')\n"
    words = ("education", "hello", "sky", "rhythm and blues", "queue")
    problem = Problem(
        "named",
        "python",
        "Write count_vowels(s): the vowels of s, in either case.",
        tuple(Test(f"print(count_vowels({w!r}))", answer(solution, f"count_vowels({w!r})")) for w in words),
        solution,
        entry_point="count_vowels",
        domain="isinstance(s, str)",
    )
    wrong = GivenProgram("lower case only", "def count_vowels(s):\n    return sum(1 for c in s if c in 'aeiou')\n")
    with Judge(timeout=2.0) as judge:
        report = verify_problems([problem], judge, show_progress=False, given={"named": [wrong]})
    assert wrong.paid and re.fullmatch(r"count_vowels\('[^']*[A-Z][^']*'\)", wrong.differs_on), wrong
    assert report.weak[0]["adequacy"].survivors[0].differs_on.startswith("count_vowels(") and not report.broken
