"""verify and strengthen stay inside a problem's domain (data/quality/domain.py), judged for real: an input where the
solution raises (its own assert, or the record's ``domain`` expression), or that it answers only near the time
limit, is never a counter-example and never a new test."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from data import verify_problems
from data.generation.strengthen import strengthen
from data.loading.validate import DataError, validate_record
from data.quality.wrong_programs import kept_values, solve_calls
from judging import Judge, Problem, Test

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0) as judge:
        yield judge


def problem(problem_id, solution, arguments, domain=None, description="Write solve(n) for the integer n >= 0."):
    namespace = {}
    exec(solution, namespace)
    tests = tuple(Test(f"print(solve({n}))", str(namespace["solve"](n))) for n in arguments)
    return Problem(problem_id, "python", description, tests, solution, "train", domain=domain)


# Outside n >= 0 the solution answers 0; the mutant that drops the conditional (`n * (n + 1) // 2`) differs there
# only (solve(-2) is 1), so within the domain it is equivalent.
TRIANGLE = problem(
    "triangle", "def solve(n):\n    return n * (n + 1) // 2 if n > 0 else 0\n", (4, 1, 10, 0, 7, 5), domain="n >= 0"
)
# The same domain said by the solution itself.
ASSERTED = problem(
    "asserted", "def solve(n):\n    assert n >= 0\n    return n * (n + 1) // 2 if n > 0 else 0\n", (4, 1, 10, 0, 7, 5)
)
# Above 100 the solution takes 0.7 s of the 2 s limit (its assert sleeps there; mutants leave asserts alone): an
# answer there hangs on the load of the machine, and the mutant `n % 8` of its second branch differs there only.
SLOW = problem(
    "slow",
    "import time\n\ndef solve(n):\n    assert n <= 100 or time.sleep(0.7) is None\n"
    "    return n % 7 if n <= 100 else n % 7\n",
    (90, 3, 12, 53, 99),
)


def test_a_domain_is_a_python_expression_and_travels_with_the_record():
    record = {
        "id": "d",
        "description": "x",
        "tests": [{"test_code": "print(solve(1))", "expected_output": "1"}],
        "domain": "n >= 0",
    }
    assert validate_record(record, "f.jsonl:1", "python").record()["domain"] == "n >= 0"
    for bad, message in (
        (["n"], "'domain' must be a Python expression"),
        ("n >=", "'domain' is not a Python expression"),
    ):
        with pytest.raises(DataError, match=f"^f.jsonl:1: {message}"):
            validate_record({**record, "domain": bad}, "f.jsonl:1", "python")


def test_a_domain_on_standard_input_tests_is_refused():
    """Standard-input tests feed the program text, not arguments: a domain over arguments cannot apply to them."""
    record = {
        "id": "d",
        "description": "Read n; print n + 1.",
        "domain": "n >= 0",
        "tests": [{"input": "3\n", "expected_output": "4"}],
        "solution": "print(int(input()) + 1)\n",
    }
    with pytest.raises(
        DataError,
        match="^f.jsonl:1: 'domain' names the arguments of a function, and these tests "
        "give standard input; leave it out$",
    ):
        validate_record(record, "f.jsonl:1", "python")
    assert validate_record({k: v for k, v in record.items() if k != "domain"}, "f.jsonl:1", "python").reads_input


@pytest.mark.slow
@pytest.mark.parametrize("planted", [TRIANGLE, ASSERTED, SLOW], ids=lambda p: p.id)
def test_verify_finds_no_counter_example_where_the_solution_does_not_answer(judge, planted):
    report = verify_problems([planted], judge, show_progress=False)
    adequacy = report.adequacy[planted.id]
    assert not report.weak, [str(s) for s in adequacy.survivors]
    assert adequacy.equivalent > 0 and adequacy.outside_domain > 0  # the check ran, and left those inputs out
    # Without the domain the same mutant is a survivor, shown on an input the domain leaves out.
    if planted.domain:
        report = verify_problems([replace(planted, domain=None)], judge, show_progress=False)
        (weak,) = report.weak
        assert any(solve_calls(f"print({s.differs_on})")[0][0] < 0 for s in weak["adequacy"].survivors)


def test_a_test_outside_the_domain_breaks_its_problem(judge):
    outside = replace(TRIANGLE, tests=TRIANGLE.tests + (Test("print(solve(-2))", "0"),))
    (broken,) = verify_problems([outside], judge, show_progress=False).broken
    assert (
        broken["reason"] == "solution fails test 6 (runtime_error)"
        and "outside the problem's domain" in broken["stderr"]
    )


def test_verify_says_which_inputs_it_left_out(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(TRIANGLE.record()) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "data", "verify", str(path), "--language", "python"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "nearby inputs left out as outside the domain (the solution raises, fails an assert or the problem's "
        "domain, or takes over a quarter of the time limit there): " in result.stdout
    )
    assert ": triangle (" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("planted", [TRIANGLE, ASSERTED], ids=lambda p: p.id)
def test_strengthen_writes_no_test_where_the_solution_raises(judge, planted):
    weak = replace(planted, tests=planted.tests[:1] * 3)  # three times solve(3): weak, guessable
    ((strong,), (record,), _, _) = strengthen([weak], judge)
    assert record.added >= 3
    calls = [arguments for test in strong.tests for arguments in solve_calls(test.test_code)]
    assert len(calls) >= 5 and all(n >= 0 for (n,) in calls), calls
    assert strong.domain == planted.domain


@pytest.mark.parametrize(
    "description, kept",
    [
        ("Write `solve(nums)`: sorted unique elements of `nums`.", False),
        ("Return all distinct permutations of the string.", False),
        ("Return the word with the maximum number of unique characters.", False),
        ("Whether there are three distinct elements in the list that sum to zero.", False),
        ("Takes a list of `n` distinct integers taken from 0..n.", True),
        ("The given list is guaranteed to have\n    unique elements.", True),
        ("An ascending list of distinct integers.", True),
    ],
)
def test_distinct_inputs_are_kept_only_where_the_description_says_them_of_the_input(description, kept):
    """ "Unique" and "distinct" mostly say what is returned: read so, a list without duplicates in every test kept
    a problem's generated inputs without duplicates, where a program dropping repeated items goes wrong."""
    distinct_lists = [[1, 2, 3], [5, 4]]
    assert bool(kept_values(distinct_lists, description)) == kept
