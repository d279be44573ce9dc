"""q tests checked and made from each problem's Python twin, with no q: the cross-check in `python -m data verify
--python_twins`, the published schema's own python_solution, and `python -m data strengthen` for q. Everything
here runs Python through the real judge; no q is needed, and none is pretended."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from data import load_problems
from data.generation.q_strengthen import strengthen_q
from data.quality.q_twins import cross_check, twins_of
from data.q.values import QForms, parse_test, q_shown_calls
from data.quality.trivial import read_trivial_shares
from judging import Judge

REPO = Path(__file__).resolve().parents[2]

IS_EVEN_Q = {
    "id": "is-even",
    "language": "q",
    "solution": "solve:{0=x mod 2}",
    "description": "Write a q function `solve` that takes a long `x` and returns `1b` if it is even, `0b` otherwise.",
    "tests": [
        {"test_code": "show solve[4]", "expected_output": "1b"},
        {"test_code": "show solve[7]", "expected_output": "0b"},
        {"test_code": "show (solve[3];solve[8])", "expected_output": "01b"},
    ],
}
IS_EVEN_PY = {
    "id": "is-even",
    "language": "python",
    "solution": "def solve(n):\n    return n % 2 == 0\n",
    "description": "Write a Python function `solve(n)` that returns True if the integer n is even.",
    "tests": [
        {"test_code": "print(solve(4))", "expected_output": "True"},
        {"test_code": "print(solve(-3), solve(10))", "expected_output": "False True"},
        {"test_code": "print(solve(11))", "expected_output": "False"},
    ],
}
MAX_Q = {
    "id": "max-of-list",
    "language": "q",
    "solution": "solve:{max x}",
    "description": "Write a q function `solve` that takes a non-empty long vector and returns its largest item.",
    "tests": [
        {"test_code": "show solve[3 9 2]", "expected_output": "9"},
        {"test_code": "show solve[-5 -1 -8]", "expected_output": "-1"},
        {"test_code": "show solve[7 7 7]", "expected_output": "7"},
    ],
}
MAX_PY = {
    "id": "max-of-list",
    "language": "python",
    "solution": "def solve(items):\n    return max(items)\n",
    "description": "Write a Python function `solve(items)` that returns the largest of a non-empty list.",
    "tests": [
        {"test_code": "print(solve([3, 9, 2, 2]))", "expected_output": "9"},
        {"test_code": "print(solve([0, -1, -8, -9, -5]))", "expected_output": "0"},
        {"test_code": "print(solve([5, 3, 4, 4]))", "expected_output": "5"},
    ],
}
FIRST_Q = {
    "id": "first-item",
    "language": "q",
    "solution": "solve:{first x}",
    "description": "Write a q function `solve` that takes a non-empty list and returns its first item.",
    "tests": [
        {"test_code": "show solve[7 8 9]", "expected_output": "7"},
        {"test_code": "show solve[`a`b]", "expected_output": "`a"},
        {"test_code": 'show solve["xyz"]', "expected_output": '"x"'},
    ],
}
FIRST_PY = {
    "id": "first-item",
    "language": "python",
    "solution": "def solve(x):\n    return x[0]\n",
    "description": "Write a Python function `solve(x)` that returns the first item of x.",
    "tests": [
        {"test_code": "print(solve([4, 5]))", "expected_output": "4"},
        {"test_code": "print(solve(['p', 'q', 'r']))", "expected_output": "p"},
        {"test_code": "print(solve('kdb'))", "expected_output": "k"},
    ],
}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "data", *args], capture_output=True, text=True, cwd=REPO, timeout=600)


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0) as judge:
        judge.preflight("python")
        yield judge


def test_the_cross_check_agrees_with_right_tests_and_says_what_the_q_tests_decided(tmp_path, judge):
    problems = load_problems(write_jsonl(tmp_path / "q.jsonl", [IS_EVEN_Q, MAX_Q, FIRST_Q]), "q")
    twins = load_problems(write_jsonl(tmp_path / "twins.jsonl", [IS_EVEN_PY, MAX_PY, FIRST_PY]), "python")
    report = cross_check(problems, twins_of(problems, twins), judge)
    assert report.clean and report.disagreements == []
    assert (report.problems, report.tests) == (3, 9)
    assert report.decided == 2  # first-item's `a and "x": a symbol and a char, as its q tests show
    assert "cross-checked 9 q tests of 3 problems" in report.summary()


def test_a_wrong_q_expected_output_and_a_wrong_argument_form_are_listed_at_file_and_line(tmp_path, judge):
    wrong_output = json.loads(json.dumps(IS_EVEN_Q))
    wrong_output["tests"][2]["expected_output"] = "10b"
    wrong_form = json.loads(json.dumps(MAX_Q))
    wrong_form["tests"][1]["test_code"] = "show solve[-5]"  # an atom where the problem takes a vector
    wrong_form["tests"].append({"test_code": "show solve[3 9 2f]", "expected_output": "9"})  # a float vector
    path = write_jsonl(tmp_path / "q.jsonl", [wrong_output, wrong_form])
    problems = load_problems(path, "q")
    twins = load_problems(write_jsonl(tmp_path / "twins.jsonl", [IS_EVEN_PY, MAX_PY]), "python")
    report = cross_check(problems, twins_of(problems, twins), judge)
    assert report.disagreements[0] == (
        f"{path}:1: is-even: tests[2]: q expects 10b; the Python solution gives (False, True), shown by q as 01b"
    )
    assert report.disagreements[1].startswith(
        f"{path}:2: max-of-list: tests[1]: q expects -1; the Python solution "
        "fails on these arguments (runtime_error: TypeError: 'int' object is "
        "not iterable"
    )
    assert report.disagreements[2].startswith(
        f"{path}:2: max-of-list: tests[3]: q expects 9; the test is outside "
        "the map from Python: '2f' is not a q literal"
    )
    assert len(report.disagreements) == 3 and not report.clean


def test_a_published_row_is_checked_against_its_own_python_solution_and_expected_outputs(tmp_path, judge):
    """The published schema: each test's q_expected_output against its python_expected_output, and the q tests
    against the row's python_solution."""
    row = {
        "problem_id": "is-even",
        "problem_description": IS_EVEN_Q["description"],
        "q_solution": "solve:{0=x mod 2}",
        "python_solution": IS_EVEN_PY["solution"],
        "test_cases": [
            {
                "test_case_number": 1,
                "q_test_code": "show solve[4]",
                "q_expected_output": "1b",
                "python_test_code": "print(solve(4))",
                "python_expected_output": "True",
            },
            {
                "test_case_number": 2,
                "q_test_code": "show solve[6]",
                "q_expected_output": "1b",
                "python_test_code": "print(solve(6))",
                "python_expected_output": "False",
            },
            {
                "test_case_number": 3,
                "q_test_code": "show (solve[3];solve[8])",
                "q_expected_output": "01b",
                "python_test_code": "print(solve(3), solve(8))",
                "python_expected_output": "False True",
            },
        ],
    }
    path = write_jsonl(tmp_path / "published.jsonl", [row])
    problems = load_problems(path, "q")
    assert problems[0].extra["python_solution"] == IS_EVEN_PY["solution"]
    report = cross_check(problems, twins_of(problems), judge)
    assert report.disagreements == [
        f"{path}:1: is-even: tests[1]: q expects 1b; python_expected_output is 'False', shown by q as 0b"
    ]
    assert report.tests == 3


def test_strengthen_gives_a_three_test_q_problem_five_tests_the_twin_answers(tmp_path, judge):
    problems = load_problems(write_jsonl(tmp_path / "q.jsonl", [IS_EVEN_Q, MAX_Q, FIRST_Q]), "q")
    twin_problems = load_problems(write_jsonl(tmp_path / "twins.jsonl", [IS_EVEN_PY, MAX_PY, FIRST_PY]), "python")
    twins = twins_of(problems, twin_problems)
    strengthened, records = strengthen_q(problems, twins, judge)
    for problem, old, record in zip(strengthened, problems, records):
        assert record.skipped is None and record.added >= 2, (problem.id, record)
        assert len(problem.tests) >= 5
        assert set(old.tests) <= set(problem.tests)  # all kept
        # Every expected output is what the twin's solution gives, mapped (recomputed here, in this process).
        namespace = {}
        exec(twins[problem.id].problem.solution, namespace)
        forms = QForms.of_tests(old.tests)
        for test in problem.tests:
            calls = parse_test(test.test_code)
            values = [namespace["solve"](*[argument.python for argument in call]) for call in calls]
            hints = forms.result_of(tuple(a.form for a in calls[0])) if len(calls) == 1 else forms.result
            assert q_shown_calls(values, hints).text == test.expected_output, (problem.id, test)
        # No expected output takes more than one of the first five, nor a third of all.
        first = [t.expected_output for t in problem.tests[:5]]
        assert max(map(first.count, first)) == 1
        every = [t.expected_output for t in problem.tests]
        assert max(map(every.count, every)) <= len(every) / 3
    # Inputs keep what the q problem takes: no zero or empty list where its tests show none, a char from a string.
    max_tests = [parse_test(t.test_code)[0][0].python for t in strengthened[1].tests]
    assert all(x and 0 not in x for x in max_tests)
    first_item = {t.test_code: t.expected_output for t in strengthened[2].tests}
    assert any(code.startswith('show solve["') and output.startswith('"') for code, output in first_item.items())
    # The yes/no problem prints calls in mixed orders: pairs or triples showing both answers, either way round.
    outputs = {t.expected_output for t in strengthened[0].tests if t.test_code.startswith("show (")}
    assert {"01b", "10b"} & outputs and any(len(o) > 3 and "0" in o and "1" in o for o in outputs)
    assert read_trivial_shares(strengthened)[0].by_tests[4] <= 1 / 3


def test_strengthen_adds_no_test_the_description_shows(tmp_path, judge):
    problem = {**MAX_Q, "description": MAX_Q["description"] + " For example solve[4 10 3 11] gives 11."}
    problems = load_problems(write_jsonl(tmp_path / "q.jsonl", [problem]), "q")
    twin = {
        **MAX_PY,
        "tests": MAX_PY["tests"] + [{"test_code": "print(solve([4, 10, 3, 11]))", "expected_output": "11"}],
    }
    twins = twins_of(problems, load_problems(write_jsonl(tmp_path / "twins.jsonl", [twin]), "python"))
    (strengthened,), _ = strengthen_q(problems, twins, judge)
    assert "show solve[4 10 3 11]" not in [t.test_code for t in strengthened.tests]


def test_strengthen_keeps_a_q_problem_s_hidden_tests_last_as_they_are(tmp_path, judge):
    hidden = {"test_code": "show solve[1 2]", "expected_output": "2", "hidden": True}
    problems = load_problems(write_jsonl(tmp_path / "q.jsonl", [{**MAX_Q, "tests": [*MAX_Q["tests"], hidden]}]), "q")
    twins = twins_of(problems, load_problems(write_jsonl(tmp_path / "twins.jsonl", [MAX_PY]), "python"))
    (strengthened,), (record,) = strengthen_q(problems, twins, judge)
    assert record.skipped is None and record.added >= 2
    assert [t.hidden for t in strengthened.tests] == [False] * (len(strengthened.tests) - 1) + [True]
    assert strengthened.tests[-1] == problems[0].tests[-1]
    # What strengthen writes loads again: the hidden test after every judged one.
    reread = load_problems(write_jsonl(tmp_path / "out.jsonl", [strengthened.record()]), "q")
    assert reread[0].tests == strengthened.tests


def test_verify_with_twins_runs_without_q_and_names_a_changed_expected_output(tmp_path):
    """The q solutions cannot run here; the cross-check and the trivial shares by reading can, and a q expected
    output changed in a copy makes verify exit 1 naming its file:line."""
    problems_path = write_jsonl(tmp_path / "q.jsonl", [IS_EVEN_Q, MAX_Q, FIRST_Q])
    strengthened = tmp_path / "q-strengthened.jsonl"
    twins = write_jsonl(tmp_path / "twins.jsonl", [IS_EVEN_PY, MAX_PY, FIRST_PY])
    made = run_cli("strengthen", str(problems_path), str(strengthened), "--language", "q", "--python_twins", str(twins))
    assert made.returncode == 0, made.stderr[-2000:]
    assert "tests added from its Python twin" in made.stdout
    clean = run_cli("verify", str(strengthened), "--language", "q", "--python_twins", str(twins))
    assert clean.returncode == 0, clean.stdout[-3000:]
    tests = sum(len(json.loads(line)["tests"]) for line in strengthened.read_text().splitlines())
    assert (
        f"cross-checked {tests} q tests of 3 problems against their Python twins: {tests} agree, 0 disagree"
        in clean.stdout
    )
    lines = strengthened.read_text().splitlines()
    record = json.loads(lines[1])
    record["tests"][0]["expected_output"] = "12345"
    lines[1] = json.dumps(record)
    changed = tmp_path / "q-changed.jsonl"
    changed.write_text("\n".join(lines) + "\n")
    broken = run_cli("verify", str(changed), "--language", "q", "--python_twins", str(twins))
    assert broken.returncode == 1
    assert f"{changed}:2: max-of-list: tests[0]: q expects 12345; the Python solution gives" in broken.stdout


def test_the_bundled_twins_verify_as_twins():
    """data/q_twins.jsonl is marked as twins, so verify runs its solutions and wrong programs and exits 0 though
    some of its tests are guessable (a twin only answers for its q problem's tests)."""
    records = [json.loads(line) for line in (REPO / "data/q_twins.jsonl").read_text().splitlines()]
    assert {record.get("twin_of") for record in records} == {"q"}
    result = run_cli("verify", "data/q_twins.jsonl", "--language", "python")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f'data/q_twins.jsonl: {len(records)} of {len(records)} problems are twins ("twin_of")' in result.stdout
    assert result.stdout.splitlines()[-1].endswith(f"0 unverifiable (no solution), {len(records)} clean")


def test_a_twin_given_twice_is_bad_input(tmp_path):
    problems = write_jsonl(tmp_path / "q.jsonl", [MAX_Q])
    twins = write_jsonl(tmp_path / "twins.jsonl", [MAX_PY])
    again = write_jsonl(tmp_path / "again.jsonl", [MAX_PY])
    result = run_cli("verify", str(problems), "--language", "q", "--python_twins", str(twins), str(again))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"{again}:1: the twin 'max-of-list' is given twice (first at {twins}:1); give each q problem one twin"
    )
