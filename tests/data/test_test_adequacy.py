"""Tests that reject wrong programs (data/quality/adequacy.py, data/generation/strengthen.py, the battery in data/quality/trivial.py), judged
for real: the cheap wrong programs a policy finds first earn nothing on the bundled set, verify lists a planted weak
problem with an input where its wrong program is wrong, and strengthen adds the test that rejects it."""

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from data import bundled_path, load_problems, measure_trivial_shares
from data.quality.adequacy import check_adequacy
from data.generation.strengthen import strengthen
from data.quality.trivial import described_example
from data.quality.wrong_programs import mutants, nearby_calls
from judging import Judge, Problem, Test
from rewards import ScoringArguments, score

REPO = Path(__file__).resolve().parents[2]
ALTERNATING = "def solve(*args):\n    solve.calls = getattr(solve, 'calls', 0) + 1\n    return solve.calls % 2 == 1\n"
# Each once passed every judged test of its bundled problem and earned 2.0 in every --partial_credit mode.
WRONG_ONE_LINERS = [
    ("missing-number", "def solve(nums):\n    return len(nums) - 1\n"),
    ("majority-element", "def solve(nums):\n    return nums[0]\n"),
    ("max-of-list", "def solve(xs):\n    return xs[len(xs) // 2]\n"),
    ("min-of-list", "def solve(xs):\n    return xs[-1]\n"),
    ("first-element", "def solve(items):\n    return min(items)\n"),
    ("last-element", "def solve(items):\n    return max(items)\n"),
    ("is-palindrome", ALTERNATING),  # True, then False: the order of the paired yes/no tests
    ("is-even", ALTERNATING),
]
# The natural wrong programs a model writes first (the textbook Caesar that shifts upper case too, the prime test that
# rules out 2 and 3 only, `n & (n - 1) == 0` ...), each of which once passed 4 or 5 of its problem's judged tests.
FIRST_WRONG = [
    (record["id"], record["completion"].removeprefix("```python\n").removesuffix("```"))
    for record in map(json.loads, (REPO / "tests/fixtures/data/first_wrong_programs.jsonl").open())
]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0) as judge:
        yield judge


def python_problem(problem_id, description, tests, solution=None, split=None):
    return Problem(
        problem_id, "python", description, tuple(Test(code, expected) for code, expected in tests), solution, split
    )


@pytest.mark.slow
def test_the_cheap_and_the_first_wrong_programs_earn_nothing_on_the_bundled_set(judge):
    wrong = WRONG_ONE_LINERS + FIRST_WRONG
    by_id = {p.id: p for p in load_problems(bundled_path("python"), "python")}
    problems = [by_id[problem_id] for problem_id, _ in wrong]
    shares = {p: s.by_tests for p, s in zip(problems, measure_trivial_shares(problems, judge))}
    programs = [program for _, program in wrong]
    for mode in ("above_trivial", "none"):
        scores = score(
            judge, problems, programs, ScoringArguments(partial_credit=mode), trivial_shares=shares, extract=False
        )
        assert [(problem_id, s.reward) for (problem_id, _), s in zip(wrong, scores)] == [
            (problem_id, 0.0) for problem_id, _ in wrong
        ], mode
        sample = ScoringArguments(partial_credit=mode).pool_sample_size  # none under above_trivial
        assert all(
            s.judgement.total == 5 + min(sample, len(p.pool)) and s.judgement.passed < s.judgement.total
            for p, s in zip(problems, scores)
        )


def test_the_battery_counts_in_the_trivial_share_and_a_right_one_does_not(judge):
    lists = ([1, 2, 3], [4, 5], [-1, 2, 0])
    problem = python_problem(
        "count",
        "Return how many items are positive.",
        [(f"print(solve({xs}))", str(sum(x > 0 for x in xs))) for xs in lists],
        solution="def solve(xs):\n    return sum(x > 0 for x in xs)\n",
    )
    longest = replace(
        problem,
        id="length",
        description="Return the length of a list.",
        tests=tuple(Test(f"print(solve({xs}))", str(len(xs))) for xs in lists),
    )
    shares = measure_trivial_shares([problem, longest], judge)
    assert (shares[0].probe, shares[0].passed, shares[0].total) == ("returning len(x)", 2, 3)
    assert shares[1].share < 1  # len(x) is the answer to the length: not a guess


def test_call_order_answers_count_in_the_trivial_share(judge):
    """The paired yes/no tests all in the order "yes no": True, then False passes every one."""
    problem = python_problem(
        "even",
        "Return whether n is even.",
        [
            ("print(solve(4))", "True"),
            ("print(solve(3))", "False"),
            ("print(solve(2), solve(1))", "True False"),
            ("print(solve(8), solve(7))", "True False"),
        ],
    )
    (share,) = measure_trivial_shares([problem], judge)
    assert (share.probe, share.passed) == ("returning True, then False, alternating", 3)


def test_a_test_shown_in_the_description_counts_as_trivial(judge):
    problem = python_problem(
        "roman",
        "Return n in Roman numerals: solve(4) is 'IV'.",
        [("print(solve(4))", "IV"), ("print(solve(9))", "IX"), ("print(solve(14))", "XIV")],
    )
    assert [described_example(problem, test) for test in problem.tests] == [True, False, False]
    (share,) = measure_trivial_shares([problem], judge)
    assert (share.probe, share.passed) == ("copying the description's examples", 1)


def test_mutants_change_one_thing_and_compile():
    names = [m.name for m in mutants("def solve(a, b):\n    if a < b:\n        return max(a, b) + 1\n    return a\n")]
    assert "mutant line 2: `a < b` -> `a <= b`" in names
    assert "mutant line 3: `max(a, b)` -> `min(a, b)`" in names
    assert "mutant line 3: `1` -> `2`" in names
    assert "mutant line 4: `return a` -> `return b`" in names
    assert len(names) == len(set(names))


def test_nearby_inputs_keep_what_the_description_says():
    problem = python_problem(
        "search",
        "Return the index of t in the sorted list xs of distinct integers.",
        [("print(solve([1, 3, 5], 3))", "1")],
    )
    calls = nearby_calls(problem)
    assert calls and all(list(xs) == sorted(set(xs)) for xs, _ in calls)
    unsorted = replace(problem, description="Return the index of t in xs.")
    assert any(list(xs) != sorted(xs) for xs, _ in nearby_calls(unsorted))


LAST = python_problem(
    "last",
    "Write solve(items): the last item of a non-empty list.",
    [(f"print(solve({xs}))", str(xs[-1])) for xs in ([1, 2, 3], [4, 5, 6], [0, 7, 9])],
    solution="def solve(items):\n    return items[-1]\n",
    split="train",
)
# `2 + n` and `n * n` pass every test: each n is 2.
DOUBLE = python_problem(
    "double",
    "Write solve(n) that returns 2 * n.",
    [("print(solve(2))", "4")] * 3,
    solution="def solve(n):\n    return 2 * n\n",
    split="train",
)


def run_data(*args):
    return subprocess.run(
        [sys.executable, "-m", "data", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )


def test_verify_lists_a_weak_problem_with_the_input_where_its_wrong_program_is_wrong(tmp_path):
    path = tmp_path / "weak.jsonl"
    path.write_text(json.dumps(LAST.record()) + "\n")
    result = run_data("verify", path, "--language", "python")
    assert result.returncode == 1, result.stderr
    weak = [line for line in result.stdout.splitlines() if "weak tests" in line]
    found = [
        re.fullmatch(
            rf"{re.escape(str(path))}:1: last: weak tests: returning max\(x\) passes 3/3; "
            r"differs on solve\((\[.*\])\)",
            line,
        )
        for line in weak
    ]
    counter = json.loads(next(m for m in found if m).group(1))
    assert max(counter) != counter[-1]  # where max is not the last item
    assert "0 broken, 0 guessable (trivial share above 0.34), 1 weak" in result.stdout.splitlines()[-1]
    assert re.search(r"mutation score .* of 1 problems: mean 0\.\d+, min 0\.\d+; below 1: last \d+/\d+", result.stdout)


def test_check_adequacy_counts_killed_and_surviving_programs(judge):
    (adequacy,) = check_adequacy([DOUBLE], judge)
    survivors = {s.program for s in adequacy.survivors}
    assert "mutant line 2: `2 * n` -> `2 + n`" in survivors and "returning x * x" in survivors
    assert adequacy.killed > 0 and 0 < adequacy.score < 1


def test_strengthen_adds_tests_that_reject_the_surviving_programs(judge):
    (strong,), (record,), (before,), (after,) = strengthen([DOUBLE], judge)
    assert record.added >= 2 and not record.left and len(strong.tests) >= 5
    assert before.survivors and not after.survivors and after.score == 1
    (adequacy,) = check_adequacy([strong], judge)
    assert not adequacy.survivors
    (canonical, mutant) = score(
        judge,
        [strong, strong],
        [DOUBLE.solution, "def solve(n):\n    return 2 + n\n"],
        ScoringArguments(),
        extract=False,
    )
    assert canonical.judgement.passed == 5 and mutant.judgement.passed < 5


@pytest.mark.slow
def test_strengthen_command_writes_out_never_in(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(DOUBLE.record()) + "\n" + json.dumps(LAST.record()) + "\n")
    before = source.read_text()
    result = run_data("strengthen", source, source, "--language", "python")
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"{source}: OUT is the source itself; write the strengthened set to another file",
    )
    out = tmp_path / "out.jsonl"
    result = run_data("strengthen", source, out, "--language", "python")
    assert result.returncode == 0, result.stderr
    assert source.read_text() == before
    lines = result.stdout.splitlines()
    assert re.fullmatch(
        r"before: mutation score .* of 2 problems: mean 0\.\d+, min 0\.\d+; below 1: double \d+/\d+, "
        r"last \d+/\d+",
        lines[-4],
    )
    assert re.fullmatch(r"after:  mutation score .* of 2 problems: mean 1\.000, min 1\.00", lines[-3])
    assert re.fullmatch(
        r"strengthened 2 problems in \d+ s \(\d+\.\d s a problem, \d+ judge workers, load average "
        r"\d+\.\d\)",
        lines[-2],
    )
    # Nothing it does not mean: every problem was strengthened, so no "left as they are" line, and each problem's
    # line agrees with its mutation score after (1: nothing passes the first 5 tests still).
    assert not any(line.startswith("left as they are") for line in lines)
    strengthened = [line for line in lines if ": double: " in line or ": last: " in line]
    assert len(strengthened) == 2 and all(
        re.search(r": \d+ tests added, mutation score (\d+)/(\d+) -> (\d+)/\3$", line) for line in strengthened
    ), strengthened
    assert run_data("verify", out, "--language", "python").returncode == 0
