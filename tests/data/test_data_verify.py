"""Verification of problem sets through the real judge, on planted broken and guessable problems."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from data import (
    Problem,
    Test,
    bundled_path,
    cached_trivial_shares,
    load_problems,
    measure_trivial_shares,
    verify_problems,
)
from data.generation.strengthen import strengthen
from data.quality.trivial import PROBES, cheap_programs, constant_passes, described_example
from data.quality.wrong_programs import BATTERY
from judging import Judge
from judging.executors import find_q
from rewards import ScoringArguments, score

FIXTURES = Path(__file__).parents[1] / "fixtures" / "data"
REPO = Path(__file__).resolve().parents[2]
DOUBLE = "def double(x):\n    return 2 * x"


def problem(problem_id, tests, solution=DOUBLE):
    return Problem(
        problem_id,
        "python",
        "Write double(x) that returns 2 * x.",
        tuple(Test(code, expected) for code, expected in tests),
        solution,
        entry_point="double",
    )


# Three tests with three answers each: with fewer, printing an expected output whatever the input passes more than
# a third (the best constant), and every problem would be guessable.
PLANTED = [
    problem("clean", [("print(double(3))", "6"), ("print(double(-3))", "-6"), ("print(double(5))", "10")]),
    # two wrong answers: 2 * x, the answer, passes one test in three
    problem("wrong-expected", [("print(double(2))", "4"), ("print(double(3))", "7"), ("print(double(-4))", "-9")]),
    problem("no-op-passes", [("print(6)", "6")]),
    problem(
        "crashing-solution",
        [("print(double(2))", "4"), ("print(double(3))", "6"), ("print(double(-5))", "-10")],
        solution="def double(x):\n    return x / 0",
    ),
    problem(
        "no-solution",
        [("print(double(5))", "10"), ("print(double(1))", "2"), ("print(double(-3))", "-6")],
        solution=None,
    ),
    problem("no-solution-no-op-passes", [("print('ok')", "ok")], solution=None),
]


@pytest.fixture(scope="module")
def report():
    return verify_problems(PLANTED, Judge(timeout=5.0), show_progress=False)


def broken_by_id(report):
    return {broken["id"]: broken for broken in report.broken}


def test_every_problem_is_checked_and_only_planted_faults_are_broken(report):
    assert report.checked == len(PLANTED)
    assert sorted(broken_by_id(report)) == [
        "crashing-solution",
        "no-op-passes",
        "no-solution-no-op-passes",
        "wrong-expected",
    ]
    assert not report.clean


def test_a_wrong_expected_output_is_reported_with_the_failing_test_and_output(report):
    broken = broken_by_id(report)["wrong-expected"]
    assert (broken["test"], broken["expected"], broken["got"].strip()) == (1, "7", "6")
    assert broken["reason"] == "solution fails test 1 (failed)"


def test_a_solution_that_raises_is_reported_with_its_stderr(report):
    broken = broken_by_id(report)["crashing-solution"]
    assert broken["test"] == 0 and broken["reason"].startswith("solution fails test 0 (")
    assert "ZeroDivisionError" in broken["stderr"]


def test_a_test_that_a_no_op_passes_is_broken_even_without_a_solution(report):
    broken = broken_by_id(report)
    assert broken["no-op-passes"]["reason"] == "a no-op solution passes every test"
    assert broken["no-solution-no-op-passes"]["reason"] == "a no-op solution passes every test"


def test_problems_without_solution_are_unverifiable_not_broken(report):
    assert report.unverifiable == ["no-solution"]
    assert report.summary() == (
        "verified 6 problems: 4 broken, 2 guessable (trivial share above 0.34), "
        "0 weak (a wrong program passes the judged tests), 1 unverifiable (no solution), "
        "1 clean"
    )


def test_a_test_that_prints_without_the_solution_is_guessable_too(report):
    assert [g["id"] for g in report.guessable] == ["no-op-passes", "no-solution-no-op-passes"]
    assert report.trivial["no-op-passes"].share == 1.0
    # clean: no probe passes a test, a constant one of its three (each answer differs).
    clean = report.trivial["clean"]
    assert (clean.probe, clean.passed, clean.total) == ("printing '6' whatever the input", 1, 3)


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "data", "verify", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )


def test_cli_exits_0_on_a_clean_file_and_counts_unverifiable():
    result = run_cli(str(FIXTURES / "problems.jsonl"), "--language", "python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-3:] == [
        "mutation score (the share of wrong programs the first 5 tests reject) of 2 problems: mean 1.000, min 1.00",
        "unverifiable (no solution): greet",
        "verified 3 problems: 0 broken, 0 guessable (trivial share above 0.34), 0 weak (a wrong program passes the "
        "judged tests), 1 unverifiable (no solution), 2 clean",
    ]


def test_cli_exits_1_and_prints_each_broken_problem(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(problem.record()) + "\n" for problem in PLANTED[:2]))
    result = run_cli(str(path), "--language", "python", "--timeout", "5")
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "BROKEN wrong-expected: solution fails test 1 (failed)",
        "  test 1 expected: '7'",
        "  test 1 got:      '6'",
        "trivial share (the most of a problem's tests a constant, an echo, printing nothing or a cheap program "
        "passes): mean 0.33, max 0.33",
        "mutation score (the share of wrong programs the first 5 tests reject) of 1 problems: mean 1.000, min 1.00",
        "verified 2 problems: 1 broken, 0 guessable (trivial share above 0.34), 0 weak (a wrong program passes the "
        "judged tests), 0 unverifiable (no solution), 1 clean",
    ]


def test_cli_exits_2_on_bad_input(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps({"id": "x", "description": "d", "tests": [{"test_code": "print(1)"}]}) + "\n")
    result = run_cli(str(path), "--language", "python")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"{path}:1: tests[0] has no 'expected_output' (use \"\" for a test that prints nothing)"
    )
    result = run_cli(str(path), "--timeout", "0")
    assert result.returncode == 2 and "must be a positive number of seconds" in result.stderr
    result = run_cli(str(path), "--max_trivial_share", "1.5")
    assert result.returncode == 2 and "--max_trivial_share: '1.5' is not a fraction between 0 and 1" in result.stderr


@pytest.mark.skipif(find_q() is not None, reason="a q binary is installed here; this checks the missing-q path")
def test_cli_exits_2_with_the_preflight_message_when_q_is_missing(tmp_path):
    path = tmp_path / "q_problems.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "sum",
                "description": "Sum a list.",
                "solution": "solve:{sum x}",
                "tests": [{"test_code": "show solve 1 2", "expected_output": "3"}],
            }
        )
        + "\n"
    )
    result = run_cli(str(path), "--language", "q")
    assert (result.returncode, result.stdout) == (2, "")
    message = result.stderr.strip()
    assert message.startswith(f"{path}: ") and "\n" not in message


# Trivial programs (data/quality/trivial.py): constants, echoing the first argument and printing nothing, judged for real.


def solve_problem(problem_id, tests, solution):
    return Problem(
        problem_id, "python", "Write solve.", tuple(Test(code, expected) for code, expected in tests), solution
    )


IS_PALINDROME = "def solve(s):\n    return s == s[::-1]\n"
# The bundled is-palindrome before its tests were balanced: returning True passes 3 of 4.
OLD_PALINDROME = solve_problem(
    "is-palindrome",
    [(f"print(solve({word!r}))", str(word == word[::-1])) for word in ("racecar", "hello", "abba", "a")],
    IS_PALINDROME,
)
ALL_TRUE = solve_problem(
    "all-true", [(f"print(solve({n}))", "True") for n in (2, 4, 6)], "def solve(n):\n    return n % 2 == 0\n"
)
ONE_IN_THREE = solve_problem(
    "one-in-three",
    [("print(solve(4))", "True"), ("print(solve(3))", "False"), ("print(solve(4), solve(3))", "True False")],
    "def solve(n):\n    return n % 2 == 0\n",
)


def write_jsonl(path, records, blank_after_first=False):
    lines = [json.dumps(record.record() if isinstance(record, Problem) else record) for record in records]
    if blank_after_first:
        lines.insert(1, "")
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.slow
def test_cli_lists_each_guessable_problem_at_file_and_line_with_the_program_that_scores(tmp_path):
    path = write_jsonl(
        tmp_path / "problems.jsonl", [PLANTED[0], ONE_IN_THREE, ALL_TRUE, OLD_PALINDROME], blank_after_first=True
    )
    result = run_cli(str(path), "--language", "python")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    # one-in-three: its yes/no tests answer in call order; all-true's tests are weak too (n % 2 == 1 passes them).
    assert lines[:4] == [
        f"{path}:3: one-in-three: returning True, then False, alternating passes 2/3 tests",
        f"{path}:4: all-true: returning True passes 3/3 tests",
        f"{path}:5: is-palindrome: returning True passes 3/4 tests",
        f"{path}:4: all-true: weak tests: mutant line 2: `2` -> `1` passes 3/3; differs on solve(1)",
    ]
    assert lines[-1] == (
        "verified 4 problems: 0 broken, 3 guessable (trivial share above 0.34), 1 weak (a wrong "
        "program passes the judged tests), 0 unverifiable (no solution), 1 clean"
    )
    result = run_cli(str(path), "--language", "python", "--max_trivial_share", "0.8")
    assert (
        result.returncode == 1
        and result.stdout.splitlines()[0] == f"{path}:4: all-true: returning True passes 3/3 tests"
    )
    assert "is-palindrome" not in result.stdout
    result = run_cli(str(path), "--language", "python", "--max_trivial_share", "1")
    assert result.returncode == 1 and "0 guessable (trivial share above 1), 1 weak" in result.stdout


def test_a_twin_s_trivial_share_is_measured_but_not_held_to_the_limit(tmp_path):
    """A record marked "twin_of" answers for another language's tests and is not trained on: verify still runs its
    solution, a no-op and the wrong programs, says in one line why its share does not count, and exits 0; the
    trainer's --verify_data (verify_problems as it calls it) still holds it to the limit."""
    twin = {**OLD_PALINDROME.record(), "twin_of": "q"}
    path = write_jsonl(tmp_path / "twins.jsonl", [PLANTED[0], twin])
    result = run_cli(str(path), "--language", "python")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        f'{path}: 1 of 2 problems are twins ("twin_of"), which check the tests of a problem in another '
        "language and are not trained on: their trivial shares are not held to --max_trivial_share (1 above "
        "0.34: is-palindrome 3/4)" in result.stdout.splitlines()
    )
    assert result.stdout.splitlines()[-1] == (
        "verified 2 problems: 0 broken, 0 guessable (trivial share above 0.34), 0 weak (a wrong program passes the "
        "judged tests), 0 unverifiable (no solution), 2 clean"
    )
    # A broken twin is still broken.
    wrong = {**twin, "tests": [*twin["tests"], {"test_code": "print(solve('ab'))", "expected_output": "True"}]}
    result = run_cli(str(write_jsonl(tmp_path / "wrong.jsonl", [wrong])), "--language", "python")
    assert result.returncode == 1 and "BROKEN is-palindrome: solution fails test 4 (failed)" in result.stdout
    # Unmarked, or verified as a run that trains on it verifies, the same problem is guessable.
    unmarked = write_jsonl(tmp_path / "unmarked.jsonl", [PLANTED[0], OLD_PALINDROME])
    result = run_cli(str(unmarked), "--language", "python")
    assert result.returncode == 1 and f"{unmarked}:2: is-palindrome: returning True passes 3/4 tests" in result.stdout
    assert "are twins" not in result.stdout
    loaded = load_problems(str(path), "python")
    with Judge(timeout=5.0) as judge:
        report = verify_problems(loaded, judge, show_progress=False)
    assert [g["id"] for g in report.guessable] == ["is-palindrome"] and not report.clean


@pytest.mark.parametrize("value", ["python", "java", True])
def test_a_bad_twin_of_is_bad_input(tmp_path, value):
    path = write_jsonl(tmp_path / "twins.jsonl", [{**OLD_PALINDROME.record(), "twin_of": value}])
    result = run_cli(str(path), "--language", "python")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip() == (
        f"{path}:1: 'twin_of' names the language of the problem this one is a twin of "
        f"(q), or is left out; got {value!r}"
    )


KINDS = [  # (tests as (code, expected), the probe that passes most, how many)
    ([("print(solve(1))", "False"), ("print(solve(2))", "False"), ("print(solve(3))", "True")], "returning False", 2),
    ([("print(solve(1))", "0"), ("print(solve(2))", "5")], "returning 0", 1),
    ([("print(solve(8))", "1"), ("print(solve(9))", "1"), ("print(solve(2))", "2")], "returning 1", 2),
    ([("print(solve([3], 4))", "-1"), ("print(solve([4], 4))", "2")], "returning -1", 1),
    ([("print(solve('ab'))", ""), ("print(solve('ba'))", "")], "returning ''", 2),
    ([("print(solve([0]))", "[]"), ("print(solve([1]))", "[5]")], "returning []", 1),
    ([("print(solve([]))", "None"), ("print(solve([2, 1]))", "2")], "returning None", 1),
    ([("print(solve(5))", "5"), ("print(solve(-5))", "5"), ("print(solve(0))", "0")], "echoing its first argument", 2),
    ([("print(solve([1]) + [2])", ""), ("print(solve([3]) + [4])", "x")], "printing nothing", 1),
    ([("print(solve(2) * 3)", "6"), ("print(len(solve('abc')))", "3")], "echoing its first argument", 2),
    ([("x = solve(3)\nprint('yes' if x else 'no')", "yes")], "returning True", 1),
]


def test_each_kind_of_trivial_program_is_found_through_the_judge():
    problems = [solve_problem(f"kind-{i}", tests, None) for i, (tests, _, _) in enumerate(KINDS)]
    with Judge(timeout=5.0) as judge:
        shares = measure_trivial_shares(problems, judge)
    assert [(s.probe, s.passed, s.total) for s in shares] == [
        (probe, passed, len(tests)) for tests, probe, passed in KINDS
    ]


def test_trivial_shares_by_number_of_tests_read_the_first_n_tests():
    problem = solve_problem(
        "late-trues",
        [("print(solve(1))", "1"), ("print(solve(2))", "5"), ("print(solve(3))", "True"), ("print(solve(4))", "True")],
        None,
    )
    with Judge(timeout=5.0) as judge:
        (share,) = measure_trivial_shares([problem], judge)
    # First test: the echo passes it; the first two: one of two; then True catches up.
    assert share.by_tests == [1.0, 0.5, 1 / 3, 0.5] and (share.probe, share.passed) == ("returning True", 2)


@pytest.mark.slow
def test_skipping_programs_that_cannot_pass_changes_no_share():
    """Left-out probes and battery programs are those whose output no test expects; running them all gives the same
    shares (a battery program passing every test is the answer and counts for none)."""
    problems = load_problems(bundled_path("python"), "python")[:12] + [OLD_PALINDROME, ALL_TRUE, ONE_IN_THREE]
    family = PROBES["python"] + BATTERY
    with Judge(timeout=5.0) as judge:
        measured = measure_trivial_shares(problems, judge)
        scores = score(
            judge,
            [p for p in problems for _ in family],
            [probe.program for _ in problems for probe in family],
            ScoringArguments(),
            all_tests=True,
            extract=False,
        )
    skipped = [len(family) - len(cheap_programs(p)) for p in problems]
    assert sum(skipped) > len(problems) * len(family) / 2  # most are never run on the bundled set
    for index, (problem, share) in enumerate(zip(problems, measured)):
        passes = [
            [t.status == "passed" for t in s.judgement.tests]
            for s in scores[index * len(family) : (index + 1) * len(family)]
        ]
        passes = [p for p, program in zip(passes, family) if program not in BATTERY or not all(p)]
        every = (*problem.tests, *problem.pool)  # a problem's pool is judged after its tests
        passes += [[described_example(problem, test) for test in every]]
        passes += [row for _, row in constant_passes([test.expected_output for test in every])]
        full = [max(sum(p[:n]) for p in passes) / n for n in range(1, len(every) + 1)]
        assert share.by_tests == full, problem.id


def test_q_probes_run_through_the_judge_and_are_listed(tmp_path):
    """With tests/helpers/fake_q/q, a STAND-IN that evaluates no q: every probe passes a test that prints by itself, so this
    checks that q problems get the q probes through the judge and the listing, not what real q prints."""
    q_problem = {
        "id": "prints-itself",
        "language": "q",
        "description": "d",
        "solution": "solve:{x}",
        "tests": [
            {"test_code": '-1 "1b";', "expected_output": "1b"},
            {"test_code": '-1 "0b";', "expected_output": "0b"},
        ],
    }
    path = write_jsonl(tmp_path / "q.jsonl", [q_problem])
    # the stand-in's tests print by themselves, not q's show solve[...]: only the flag loads them
    result = run_cli(
        str(path),
        "--language",
        "q",
        "--q_binary",
        str(REPO / "tests" / "helpers" / "fake_q" / "q"),
        "--allow_in_sandbox_comparisons",
    )
    assert result.returncode == 1, result.stderr
    assert f"{path}:1: prints-itself: returning 1b passes 2/2 tests" in result.stdout.splitlines()
    assert [probe.program.splitlines()[0] for probe in PROBES["q"]][:2] == [
        "solve:('[{1b};enlist])",
        "solve:('[{0b};enlist])",
    ]


def test_cached_shares_are_read_back_and_a_changed_problem_is_measured_again(tmp_path):
    cache = tmp_path / "trivial_shares.json"
    with Judge(timeout=5.0) as judge:
        first = cached_trivial_shares([OLD_PALINDROME, ALL_TRUE], judge, cache)
    assert [s.share for s in first] == [0.75, 1.0]
    assert cached_trivial_shares([OLD_PALINDROME, ALL_TRUE], None, cache) == first  # no judge: nothing measured
    changed = replace(ALL_TRUE, tests=ALL_TRUE.tests + (Test("print(solve(3))", "False"),))
    with pytest.raises(AttributeError):
        cached_trivial_shares([changed], None, cache)
    with Judge(timeout=5.0) as judge:
        (share,) = cached_trivial_shares([changed], judge, cache)
    assert (share.passed, share.total) == (3, 4)
    assert sorted(entry["id"] for entry in json.loads(cache.read_text()).values()) == [
        "all-true",
        "all-true",
        "is-palindrome",
    ]


# count-uppercase as it was: a program printing 2 whatever its input passed 3 of its 5 tests.
COUNT_UPPERCASE = Problem(
    "count-uppercase",
    "python",
    "Write a Python function `solve(s)` that returns how many upper-case letters the string `s` contains.",
    tuple(
        Test(f"print(solve({s!r}))", str(sum(c.isupper() for c in s)))
        for s in ("ABC def G", "Hello World", "abc", "Hello Worl", "lrolWoedlH ")
    ),
    "def solve(s):\n    return sum(1 for c in s if c.isupper())\n",
    "train",
)
TWO = "def solve(*args):\n    return 2\n"


def test_the_constant_two_is_the_best_constant_and_pays_nothing_above_it():
    with Judge(timeout=5.0) as judge:
        report = verify_problems([COUNT_UPPERCASE], judge, show_progress=False)
        (guessable,) = report.guessable
        assert (guessable["probe"], guessable["passed"], guessable["total"]) == (
            "printing '2' whatever the input",
            3,
            5,
        )
        shares = {COUNT_UPPERCASE: report.trivial[COUNT_UPPERCASE.id].by_tests}
        rewards = [
            score(
                judge,
                [COUNT_UPPERCASE],
                [TWO],
                ScoringArguments(partial_credit=mode),
                trivial_shares=shares,
                extract=False,
            )[0].reward
            for mode in ("fraction", "above_trivial")
        ]
        assert rewards == [0.6, 0.0]
        # strengthen adds no test expecting 2 beyond a third: the constant pays no more, in the first five or in all.
        ((strong,), (record,), _, _) = strengthen([COUNT_UPPERCASE], judge)
        first = [test.expected_output for test in strong.tests[:5]]
        everything = [test.expected_output for test in strong.tests]
        assert record.added > 0 and first.count("2") <= 1 and everything.count("2") <= len(everything) / 3
        (after,) = measure_trivial_shares([strong], judge)
        assert after.by_tests[4] <= 1 / 5 and after.share <= 1 / 3


def test_a_problem_with_no_nearby_input_is_verified():
    """Float arguments have no nearby inputs (HumanEval's truncate_number): the wrong programs that pass its tests,
    generated or given, have nowhere to show a difference, and verify says so instead of raising."""
    from data.quality.given_programs import GivenProgram

    solution = "def solve(x):\n    if x > 100:\n        return 0.0\n    return x - int(x)\n"
    floats = Problem(
        "fraction",
        "python",
        "Write solve(x): the fractional part of the positive float x.",
        tuple(Test(f"print(solve({x}))", str(x - int(x))) for x in (3.5, 1.25, 7.75, 2.0, 9.5)),
        solution,
    )
    given = GivenProgram("rounds", "def solve(x):\n    return x % 1\n")
    with Judge(timeout=2.0) as judge:
        report = verify_problems([floats], judge, show_progress=False, given={"fraction": [given]})
    adequacy = report.adequacy["fraction"]
    assert adequacy.killed > 0 and adequacy.equivalent > 0 and not adequacy.survivors and not report.broken
    assert (given.passed, given.total, given.differs_on) == (5, 5, None)


@pytest.mark.parametrize("where", ["a test past the judged ones", "the pool"])
def test_a_given_program_is_tried_on_every_tests_inputs_and_the_pools(where):
    """A wrong program right on the judged tests' inputs and with none near them (floats) is shown wrong where only a
    later test's input, or only a pool's, shows it."""
    from data.quality.given_programs import GivenProgram

    solution = "def solve(x):\n    if x > 100:\n        return 0.0\n    return x - int(x)\n"
    judged = tuple(Test(f"print(solve({x}))", str(x - int(x))) for x in (3.5, 1.25, 7.75, 2.0, 9.5))
    beyond = (Test("print(solve(150.5))", "0.0"),)
    floats = Problem(
        "fraction",
        "python",
        "Write solve(x): the fractional part of x, or 0.0 above 100.",
        judged + beyond if where.startswith("a test") else judged,
        solution,
        pool=() if where.startswith("a test") else (Test("print(solve(150.5), solve(3.5))", "0.0 0.5"),),
    )
    given = GivenProgram("forgets the bound", "def solve(x):\n    return x % 1\n")
    with Judge(timeout=2.0) as judge:
        verify_problems([floats], judge, show_progress=False, given={"fraction": [given]}, max_tests=5)
    assert (given.passed, given.total, given.differs_on) == (5, 5, "solve(150.5)")
