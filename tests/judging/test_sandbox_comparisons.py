"""Only output is compared, on the host: validation refuses test code that compares inside the sandbox, and the
loaders turn the simple assert form into a printing test. The cheats are judged for real."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data import DataError, load_problems
from judging import Judge, Test
from rewards import ScoringArguments, score

REPO = Path(__file__).resolve().parents[2]

ALWAYS_EQUAL = """
class Anything(int):
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    __hash__ = int.__hash__

def solve(*args):
    return Anything(0)
"""
# Reads the expected constant from the test's own code, the caller's frame.
FRAME_READER = """
import sys

def solve(*args):
    constants = sys._getframe(1).f_code.co_consts
    return [c for c in constants if isinstance(c, int) and not isinstance(c, bool) and c not in args][-1]
"""
CHEATS = [ALWAYS_EQUAL, FRAME_READER]
RIGHT = "def solve(n):\n    return 2 * n"


def write_problems(path, tests, language="python", solution=RIGHT):
    record = {
        "id": "double",
        "language": language,
        "description": "Write solve(n) that returns 2 * n.",
        "solution": solution,
        "tests": [{"test_code": code, "expected_output": out} for code, out in tests],
    }
    first = "print(solve(1))" if language == "python" else "show solve[1]"
    path.write_text(
        json.dumps({"id": "first", "description": "d", "tests": [{"test_code": first, "expected_output": "2"}]})
        + "\n"
        + json.dumps(record)
        + "\n"
    )
    return path


@pytest.fixture(scope="module", params=["bwrap", "bwrap-cold"])
def judge(request):
    """Both Python paths: the frame the test code runs in differs between a warm worker and a fresh interpreter."""
    with Judge(timeout=5.0, workers=2, sandbox=request.param) as judge:
        yield judge


# Reads a constant of the test's own code, the caller's frame: the forms below compare the result with it there.
CONSTANT_READER = """
import sys

def solve(*args):
    for c in sys._getframe(1).f_code.co_consts:
        if isinstance(c, (int, float)) and not isinstance(c, bool) and c not in args and c != 0:
            return c
        if isinstance(c, str) and c.isdigit():
            return int(c)
"""
# Each prints the judged result through code that compares it with a constant of the test, in the sandbox.
OTHER_FORMS = [
    ("print([6].index(solve(3)))", "0"),
    ("print(len({solve(3), 6}))", "1"),
    ("print(round(solve(3.125) - 6.25, 9))", "0.0"),
    ("print(not solve(4) - 8)", "True"),
    ("print(str(solve(5)).startswith('10'))", "True"),
]
UNSAFE = [  # (test_code, expected_output, what the refusal names)
    ("print(solve(3) == 6)", "True", "line 1: it prints `solve(3) == 6`, not a call of solve"),
    ("r = solve(21)\nassert r == 42\nprint('ok')", "ok", "line 1: `r` is set to `solve(21)`, not a literal"),
    ("r = solve(3)\nprint(r != 6)", "False", "line 1: `r` is set to `solve(3)`, not a literal"),
    ("print(solve(3) is not None and solve(3) >= 6)", "True", "not a call of solve"),
    ("print(solve(3).__eq__(6))", "True", "line 1: it prints `solve(3).__eq__(6)`, not a call of solve"),
    ("print('yes' if solve(3) else 'no')", "yes", "not a call of solve"),
    ("x = 6\nprint(solve(3))", "6", "line 1: `x` is set but never passed to solve"),
    ("assert solve(3) > 5", "", "line 1: `assert solve(3) > 5` is not print(solve(...), ...)"),
    ("print(1)", "1", "line 1: it prints `1`, not a call of solve"),
    ("print(sorted(solve([2, 1])))", "[1, 2]", "it prints `sorted(solve([2, 1]))`, not a call of solve"),
    ("print(solve(3), end='')", "6", "line 1: `print(solve(3), end='')` is not print(solve(...), ...)"),
    ("print(solve(*[3]))", "6", "`solve(*[3])` unpacks its arguments"),
    ("print(solve(len('abc')))", "6", "`len('abc')` in `solve(len('abc'))` is not a literal or a set-up name"),
    ("print(double(3))", "6", "it prints `double(3)`, not a call of solve"),
    ("import sys\nprint(solve(3))", "6", "line 1: `import sys` is not print(solve(...), ...)"),
    ("print(solve(3))\nx = 1", "6", "line 2: `x = 1` is not print(solve(...), ...)"),
    *((code, expected, "not a call of solve") for code, expected in OTHER_FORMS),
]


@pytest.mark.parametrize("test_code, expected, named", UNSAFE)
def test_a_test_that_is_not_printed_calls_is_refused_with_file_and_line(tmp_path, test_code, expected, named):
    path = write_problems(tmp_path / "p.jsonl", [("print(solve(1))", "2"), (test_code, expected)])
    with pytest.raises(DataError) as error:
        load_problems(path, "python")
    message = str(error.value)
    assert message.startswith(f"{path}:2: tests[1] is not a printing test (") and "\n" not in message
    assert named in message and "--allow_in_sandbox_comparisons" in message


@pytest.mark.parametrize("test_code, expected, named", UNSAFE)
def test_no_cheat_passes_a_validated_test(tmp_path, judge, test_code, expected, named):
    """Before: the int whose == is always true and the frame reader earned 2.0 on these tests."""
    path = write_problems(tmp_path / "p.jsonl", [(test_code, expected)])
    try:
        problems = load_problems(path, "python")
    except DataError:
        return
    scores = score(judge, problems[1:] * len(CHEATS), CHEATS, ScoringArguments(), extract=False)
    assert [s.judgement.passed for s in scores] == [0] * len(CHEATS)


def test_the_cheats_pass_a_test_that_compares_in_the_sandbox(tmp_path, judge):
    """What the flag allows, and the control that the cheats above are real: both earn 2.0."""
    path = write_problems(
        tmp_path / "p.jsonl", [("print(solve(3) == 6)", "True"), ("r = solve(21)\nassert r == 42\nprint('ok')", "ok")]
    )
    problems = load_problems(path, "python", allow_in_sandbox_comparisons=True)
    scores = score(judge, problems[1:] * len(CHEATS), CHEATS, ScoringArguments(), extract=False)
    assert [s.reward for s in scores] == [2.0, 2.0]


@pytest.mark.parametrize("test_code, expected", OTHER_FORMS)
def test_a_constant_reader_earns_everything_on_the_other_forms_the_rule_refuses(tmp_path, judge, test_code, expected):
    """The control for the five forms refused above: kept with the flag, a `solve` that reads the test's constant
    from its caller's frame passes them, where the right `solve` (2 * n) does too."""
    path = write_problems(tmp_path / "p.jsonl", [(test_code, expected)])
    problems = load_problems(path, "python", allow_in_sandbox_comparisons=True)
    right, cheat = score(judge, problems[1:] * 2, [RIGHT, CONSTANT_READER], ScoringArguments(), extract=False)
    assert (right.reward, cheat.reward) == (2.0, 2.0)


def test_the_flag_keeps_such_tests_as_they_are(tmp_path):
    tests = [(code, expected) for code, expected, _ in UNSAFE]
    path = write_problems(tmp_path / "p.jsonl", tests)
    problems = load_problems(path, "python", allow_in_sandbox_comparisons=True)
    assert [(t.test_code, t.expected_output) for t in problems[1].tests] == tests


def test_the_simple_assert_form_becomes_a_printing_test(tmp_path, judge, caplog):
    path = write_problems(
        tmp_path / "p.jsonl",
        [
            ("assert solve(21) == 42", ""),
            ("assert solve(-1) == -2, 'negative'", ""),
            ("assert 8 == solve(4)\nassert solve(0) == 0", ""),
            ("assert solve(3) == 6; print('ok')", "ok"),
        ],
        solution="def solve(n):\n    return 2 * n",
    )
    with caplog.at_level(logging.INFO, logger="data.loading.loaders"):
        problems = load_problems(path, "python")
    # One assert of a number is compared as a value (print(repr(...)), ==); several in one test as printed text.
    assert [(t.test_code, t.expected_output, t.compare) for t in problems[1].tests] == [
        ("print(repr(solve(21)))", "42", "value"),
        ("print(repr(solve(-1)))", "-2", "value"),
        ("print(solve(4))\nprint(solve(0))", "8\n0", "text"),
        ("print(repr(solve(3)))", "6", "value"),
    ]
    assert f"{path}: converted 4 assert tests into printing tests" in caplog.text
    right, *cheats = score(judge, problems[1:] * 3, [RIGHT, *CHEATS], ScoringArguments(), extract=False)
    assert (right.judgement.passed, right.judgement.total) == (4, 4)
    assert [c.judgement.passed for c in cheats] == [0, 0]


@pytest.mark.parametrize(
    "literal, test",
    [
        ("'ba'", Test("print(solve(0))", "ba")),
        ("[1, 3]", Test("print(repr(solve(0)))", "[1, 3]", compare="value")),
        ("('a', 2)", Test("print(repr(solve(0)))", "('a', 2)", compare="value")),
        ("True", Test("print(solve(0))", "True")),
        ("None", Test("print(solve(0))", "None")),
        ("[['x'], []]", Test("print(solve(0))", "[['x'], []]")),
        ("-3", Test("print(repr(solve(0)))", "-3", compare="value")),
        ("{2, 1}", Test("print(repr(solve(0)))", "{1, 2}", compare="value")),
        ("{'b': 1, 'a': 2.0}", Test("print(repr(solve(0)))", "{'b': 1, 'a': 2.0}", compare="value")),
    ],
)
def test_converted_expected_output_is_what_print_writes(tmp_path, judge, literal, test):
    """Text where printed text is equal exactly when the values are; a number, set or dict compared as a value."""
    path = write_problems(
        tmp_path / "p.jsonl", [(f"assert solve(0) == {literal}", "")], solution=f"def solve(n):\n    return {literal}"
    )
    (loaded,) = load_problems(path, "python")[1].tests
    assert loaded == test
    (right,) = score(
        judge,
        load_problems(path, "python")[1:],
        [f"def solve(n):\n    return {literal}"],
        ScoringArguments(),
        extract=False,
    )
    assert right.status == "passed"


@pytest.mark.parametrize(
    "assertion, printing, expected, tolerance",
    [
        ("assert solve(3) == 6.0", "print(repr(solve(3)))", "6.0", None),  # 6 == 6.0: compared as values
        ("assert solve(1.5) == [3.0, 1]", "print(repr(solve(1.5)))", "[3.0, 1]", None),
        ("assert abs(solve(0.1) - 0.2) < 1e-6", "print(solve(0.1))", "0.2", 1e-6),
        ("assert math.fabs(0.2 - solve(0.1)) <= 1e-9", "print(solve(0.1))", "0.2", 1e-9),
        ("assert abs(solve(1.0) - 2.0/3.0) < 1e-6", "print(solve(1.0))", "0.6666666666666666", 1e-6),
        ("assert solve(3)", "print(solve(3))", "True", None),
        ("assert not solve(3)", "print(solve(3))", "False", None),
        ("assert solve(3) is None", "print(solve(3))", "None", None),
        ("assert list(solve(3)) == [1, 2]", "print(solve(3))", "[1, 2]", None),
        ("assert tuple(solve(3)) == tuple([1, 2])", "print(solve(3))", "[1, 2]", None),
        ("assert solve(3 * 19) == 2 ** 3", "print(repr(solve(57)))", "8", None),  # literal arithmetic, worked out here
    ],
)
def test_assert_forms_convert_to_printed_calls_with_their_tolerance(tmp_path, assertion, printing, expected, tolerance):
    path = write_problems(tmp_path / "p.jsonl", [(assertion, "")])
    (test,) = load_problems(path, "python")[1].tests
    assert (test.test_code, test.expected_output, test.tolerance) == (printing, expected, tolerance)


def test_numeric_tests_pass_what_the_assert_passed_and_fail_what_it_failed(tmp_path, judge):
    path = write_problems(
        tmp_path / "p.jsonl", [("assert solve(3) == 6.0", ""), ("assert abs(solve(0.1) - 0.2) < 1e-6", "")]
    )
    problems = load_problems(path, "python")[1:] * 3
    exact, rounding, wrong = score(
        judge,
        problems,
        [
            "def solve(n):\n    return 2 * n",
            "def solve(n):\n    return 2 * n + 1e-9",
            "def solve(n):\n    return 2 * n + 1e-3",
        ],
        ScoringArguments(),
        extract=False,
    )
    assert [t.status for t in exact.judgement.tests] == ["passed", "passed"]  # prints 6 for 6.0
    assert [t.status for t in rounding.judgement.tests] == ["failed", "passed"]  # 6.000000001 is not == 6.0
    assert [t.status for t in wrong.judgement.tests] == ["failed", "failed"]


@pytest.mark.parametrize(
    "test_code, kept",
    [
        ("print(solve(6))", "print(solve(6))"),  # an input may equal the output
        ("nums = [1, 6]\nprint(solve(nums))", "nums = [1, 6]\nprint(solve(nums))"),  # as may set-up data
        ("print(solve(3), solve(4))", "print(solve(3), solve(4))"),
        ("print(solve(3))\nprint(solve(n=4))", "print(solve(3))\nprint(solve(n=4))"),
        ("print(solve({1: 'a'}, {2}, b'x', -1.5))", "print(solve({1: 'a'}, {2}, b'x', -1.5))"),
        ("n = 3 * 19\nprint(solve(n, [2 ** 10, -(1 + 1)]))", "n = 57\nprint(solve(n, [1024, -2]))"),
        ("print(solve('ab' * 2000))", "print(solve('ab' * 2000))"),  # too long to show: left as it is
    ],
)
def test_printing_tests_are_accepted_with_literal_arithmetic_worked_out(tmp_path, test_code, kept):
    path = write_problems(tmp_path / "p.jsonl", [(test_code, "6")])
    assert load_problems(path, "python")[1].tests == (Test(kept, "6"),)


@pytest.mark.parametrize(
    "test_code", ["print(solve(10 ** 100000))", "print(solve('a' * 10 ** 9))", "print(solve(1 / 0))"]
)
def test_arithmetic_too_large_or_failing_is_refused_without_being_worked_out(tmp_path, test_code):
    path = write_problems(tmp_path / "p.jsonl", [(test_code, "6")])
    with pytest.raises(DataError, match="is not a literal or a set-up name"):
        load_problems(path, "python")


def test_a_problem_naming_its_function_is_held_to_calls_of_that_function(tmp_path):
    record = {
        "id": "d",
        "description": "Write double(n).",
        "entry_point": "double",
        "tests": [{"test_code": "assert double(3) == 6", "expected_output": ""}],
    }
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (problem,) = load_problems(path, "python")
    assert problem.tests == (Test("print(repr(double(3)))", "6", compare="value"),)
    assert problem.entry_point == "double"
    record["tests"] = [{"test_code": "print(solve(3))", "expected_output": "6"}]
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match=r"it prints `solve\(3\)`, not a call of double"):
        load_problems(path, "python")


# Printed calls on literals, as q reads them: accepted.
Q_PRINTING = [
    "show solve[1 2 3]",
    "show (solve[1];solve[2])",
    'show solve["a=b<c"]',  # inside a string
    "show solve[3] / is it = 6?",  # a trailing comment
    "/ compare with = here\nshow solve[3]",  # a comment line
    "/\nshow 6~solve[3]\n\\\nshow solve[3]",  # a block comment
    "show solve 1 2 3",
    "show solve enlist 5",
    "show solve til 5",
    "show solve[enlist 1;2]",
    "show solve[]",
    "show solve[`a`b]",
    "show solve[3 9 2f]",
    "show solve[-5 -1 -8]",
    'show solve[(1 2;"a;b)")]',
    "show solve[1e-6;0N;0W;-0W;101b;0x0f;2020.01.01;12:30]",
    "show solve[`long$()]",
    "show solve[(); ` ]",
    "x:1 2 3\nshow solve x",
    'x:1 2;y:"ab"\nshow solve[x;y];show (solve[y;x];solve[1;2])',
    "show(solve[1];solve[2])",
]
# Everything that computes on the result, or is not a printed call on literals: refused, whatever it computes with.
Q_REFUSED = [
    # the forms that loaded under the deny-list of comparison signs
    "show solve[3]-6",
    "show not solve[3]~6",
    "show signum solve[3]-6",
    "show abs solve[3]-6",
    "show ?[solve[3]=6;1;0]",
    "show solve[1 2] except 2",
    "show solve[1 2] inter 1 2",
    "show distinct solve[1 2]",
    "show any not solve[1 2]=1 2",
    # comparisons, match, membership
    "show solve[3]=6",
    "show 6~solve[3]",
    "show solve[3]<>6",
    "show solve[3]<7",
    "show solve[3]>5",
    "show solve[3]>=6",
    "show 6 in solve[3]",
    'show solve["ab"] like "a*"',
    "show solve[3] within 5 7",
    "show all solve[1 2]=1 2",
    "show any solve[1 2]=1",
    "show solve[1] ~ 1",
    "show (solve[1]; solve[2]) ~ 1 2",
    # arithmetic on the result, either side, spaced or not
    "show solve[3]+0",
    "show -6+solve[3]",
    "show solve[3] - 6",
    "show solve[3] -6",
    "show 2*solve[3]",
    "show solve 3-6",
    "show neg solve[3]",
    "show solve[3] mod 2",
    "show solve[3]|6",
    # reading the result: count, first, indexing, casts, lambdas, iterators
    "show count solve[1]",
    "show first solve[1]",
    "show solve[1] 0",
    "show solve[1][0]",
    "show solve[1]@0",
    "show `long$solve[1]",
    'show "j"$solve[1]',
    "show string solve[1]",
    "show {x+1} solve[1]",
    "show {x=6}[solve[3]]",
    "show solve each 1 2 3",
    "show solve/[1 2]",
    "show solve'[1 2]",
    # other calls and printing forms
    "show solve[1;]",
    "show solve[solve[1]]",
    "show solve solve 1",
    "show solve[3 - 1]",
    "show (solve[1];6)",
    "solve[1]",
    "-1 string solve[1];",
    "0N!solve[1]",
    "show[solve[1]]",
    "show solve[1]; show 6",
    "show .q.solve[1]",
    "show solve[.z.p]",
    # set-up: literals only, each passed on, never the judged function
    "x:6\nshow solve[1]",
    "x:solve[1]\nshow x",
    "x:3+3\nshow solve x",
    "solve:{x}\nshow solve[1]",
    "show solve[1]\nx:2",
    # what q reads as more code: a continued line, a system command, the end of the script
    " show solve[1]",
    "show solve[1]\n  -6",
    "\\l evil.q\nshow solve[1]",
    "show solve[1]\n\\",
]


@pytest.mark.parametrize(
    "test_code, refused", [(code, False) for code in Q_PRINTING] + [(code, True) for code in Q_REFUSED]
)
def test_a_q_test_is_printed_calls_on_literals(tmp_path, test_code, refused):
    path = write_problems(tmp_path / "q.jsonl", [(test_code, "1b")], language="q", solution="solve:{2*x}")
    if refused:
        with pytest.raises(
            DataError,
            match=r":2: tests\[0\] is not a printing test \(line \d+: .*"
            r"--allow_in_sandbox_comparisons",
        ):
            load_problems(path, "q")
        assert load_problems(path, "q", allow_in_sandbox_comparisons=True)[1].tests[0].test_code == test_code
    else:
        assert load_problems(path, "q")[1].tests[0].test_code == test_code


def test_a_q_refusal_names_the_line_and_what_is_wrong(tmp_path):
    path = write_problems(tmp_path / "q.jsonl", [("x:1 2\nshow solve[x]-6", "1b")], language="q")
    with pytest.raises(
        DataError,
        match=r"tests\[0\] is not a printing test \(line 2: `-6` after the call in "
        r"`show solve\[x\]-6`: a test shows what solve returns, and computes "
        r"nothing on it\)",
    ):
        load_problems(path, "q")
    record = {
        "id": "f",
        "language": "q",
        "description": "d",
        "entry_point": "f",
        "tests": [{"test_code": "show solve[1]", "expected_output": "2"}],
    }
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match=r"line 1: `solve\[1\]` is not a call of f"):
        load_problems(path, "q")
    record["tests"][0]["test_code"] = "show f[1]"
    path.write_text(json.dumps(record) + "\n")
    assert load_problems(path, "q")[0].tests[0].test_code == "show f[1]"


def test_the_bundled_q_set_is_printed_calls_on_literals():
    from data.loading.loaders import bundled_path

    assert len(load_problems(bundled_path("q"), "q")) == 72


def run_data(*args):
    return subprocess.run(
        [sys.executable, "-m", "data", *args], cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ}
    )


def test_check_refuses_and_the_flag_allows(tmp_path):
    path = write_problems(tmp_path / "p.jsonl", [("print(solve(3) == 6)", "True"), ("assert solve(1) == 2", "")])
    refused = run_data("check", str(path), "--language", "python")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().startswith(f"{path}:2: tests[0] ") and "\n" not in refused.stderr.strip()
    allowed = run_data("check", str(path), "--language", "python", "--allow_in_sandbox_comparisons")
    assert allowed.returncode == 0, allowed.stderr
    assert "2 problems valid" in allowed.stdout


@pytest.mark.parametrize("test_code", ["print(solve('\ud800')", "print(solve(1)\x00)", "print(solve(1)", "(" * 300])
def test_code_that_does_not_parse_is_refused(tmp_path, test_code):
    path = write_problems(tmp_path / "p.jsonl", [(test_code, "2")])
    with pytest.raises(DataError, match="does not parse"):
        load_problems(path, "python")


@pytest.mark.parametrize(
    "test_code",
    [
        "assert solve(3 == 3) == True",
        "assert solve(operator.eq) == 1",
        "from operator import eq as same\nprint(solve(same))",
    ],
)
def test_a_comparison_left_after_conversion_is_still_refused(tmp_path, test_code):
    path = write_problems(tmp_path / "p.jsonl", [(test_code, "")])
    with pytest.raises(DataError, match="is not a printing test"):
        load_problems(path, "python")


def test_reference_folders_and_published_rows_are_checked_too(tmp_path):
    problem = tmp_path / "SFT_Data" / "train" / "double"
    problem.mkdir(parents=True)
    (problem / "problem_description.txt").write_text("Write solve that doubles x.")
    (problem / "q_test_case_1.q").write_text("show solve[3]=6\n")
    (problem / "q_exact_ans_test_case_1.txt").write_text("1b\n")
    with pytest.raises(DataError, match=rf"^{problem}: tests\[0\] is not a printing test \(line 1: `=6` after"):
        load_problems(tmp_path / "SFT_Data", "q")
    row = {
        "problem_id": "double",
        "problem_description": "d",
        "test_cases": [
            {"test_case_number": 1, "python_test_code": "assert solve(3) == 6", "python_expected_output": ""}
        ],
    }
    path = tmp_path / "published.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (converted,) = load_problems(path, "python")
    assert converted.tests == (Test("print(repr(solve(3)))", "6", compare="value"),)
