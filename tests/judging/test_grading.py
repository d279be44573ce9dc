"""Grading (judging/grading.py, judging/tolerance.py) on its own, no sandbox: linear on the outputs worst for it,
numbers compared as numbers, and the standard-input line rule. The judge's own cases are in tests/judging/test_judge.py."""

import json
import random
import subprocess
import sys

import pytest

from conftest import ROOT
from judging.executors import RAN
from judging.grading import by_lines, grade, matches
from judging.running import RunResult
import judging.tolerance
from judging.tolerance import MANY_NUMBERS, NUMBER, same_number, within_tolerance

MiB = 1 << 20
MARKER = "0123456789abcdef" * 2


def ran(stdout: str) -> RunResult:
    return RunResult(0, stdout, "", 0.1, False, False)


def repeated(unit: str, tail: str = "") -> str:
    """``unit`` repeated to 1 MiB, then ``tail`` (two calls with one unit make the same text before their tails)."""
    return unit * (MiB // len(unit)) + tail


# (name, printed, expected, tolerance, verdict as grade gives it after the marker line, and on standard input)
WORST = [
    ("digit run, then x", repeated("1", "x"), "6", 1e-6, "failed", "failed"),
    ("one integer, 1 MiB of digits, last digit off", repeated("1", "2"), repeated("1", "3"), 0.5, "failed", "failed"),
    ("the same, within a tolerance of 1", repeated("1", "2"), repeated("1", "3"), 1.0, "passed", "passed"),
    ("run of '.'", repeated("."), "6", 1e-6, "failed", "failed"),
    ("run of '.', expected", repeated(".", " 6.0"), repeated(".", " 6"), 0.0, "passed", "passed"),
    ("run of 'e'", repeated("e", " 6.0"), repeated("e", " 6"), 0.0, "passed", "passed"),
    ("run of '-'", repeated("-", "6.0"), repeated("-", "7"), 0.5, "failed", "failed"),
    ("run of '-', a sign", repeated("-", " -6.0"), repeated("-", " -6"), 0.0, "passed", "passed"),
    ("1e1e1e...", repeated("1e", " 6.0"), repeated("1e", " 6"), 0.0, "passed", "passed"),
    ("1e-1e-1e-...", repeated("1e-", " 6.0"), repeated("1e-", " 6"), 0.0, "passed", "passed"),
    ("1e-1e-...1e-5 read as one number", repeated("1e-", "5"), repeated("1e-", "5.0"), 10.0, "failed", "failed"),
    ("mixed", repeated("1.e-+. -.1e", " 6"), repeated("1.e-+. -.1e", " 6.0000001"), 1e-6, "passed", "passed"),
    ("numbers, one off at the end", repeated("1 ", "2"), repeated("1 ", "3"), 0.5, "failed", "failed"),
    # every number read and compared: the work grows with the expected output's numbers, a problem's, not the program's
    ("64 Ki numbers as floats", ("1.0" + " " * 13) * 65536, ("1" + " " * 13) * 65536, 0.0, "passed", "passed"),
    # against an expected output of many numbers the printed text is read whole: the worst of it costs no more
    ("many numbers expected, '-' printed", repeated("-"), "1 " * 4096, 1e-6, "failed", "failed"),
    ("many numbers expected, '-1' printed", repeated("-1"), "-1" * 4096, 1e-6, "failed", "failed"),
    ("many numbers expected, '1e-' printed", repeated("1e-"), "1e-" * 4096 + "5", 1e-6, "failed", "failed"),
    ("lines ending in spaces and tabs", "1 \t\r\n" * (MiB // 5), "1\n" * (MiB // 5), None, "failed", "passed"),
    ("spaces, then a line", repeated(" ", "\n6"), "6", None, "passed", "passed"),
    ("a lone \\r in every line", repeated("1\r"), repeated("1\n"), None, "failed", "failed"),
]
# Each case is graded in a process of its own: a pattern that backtracks holds the GIL for hours at 1 MiB (seconds at
# 12 KB), and only the timeout of a process ends it.
GRADE = """
import json, sys, time
from judging.executors import RAN
from judging.grading import grade
from judging.running import RunResult
printed, expected, tolerance, marker = json.load(sys.stdin)
stdout = printed if marker is None else f"noise\\n{marker}\\n{printed}"
start = time.perf_counter()
status = grade(RunResult(0, stdout, "", 0.1, False, False), RAN, False, marker, expected, tolerance).status
print(json.dumps([status, time.perf_counter() - start]))
"""


@pytest.mark.parametrize(
    "name, printed, expected, tolerance, after_marker, on_input", WORST, ids=[case[0] for case in WORST]
)
def test_the_worst_outputs_are_graded_in_linear_time(name, printed, expected, tolerance, after_marker, on_input):
    for marker, verdict in ((MARKER, after_marker), (None, on_input)):
        done = subprocess.run(
            [sys.executable, "-c", GRADE],
            input=json.dumps([printed, expected, tolerance, marker]),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        status, seconds = json.loads(done.stdout)
        assert status == verdict, (marker, status)
        # Milliseconds on a quiet machine (benchmarks/grading_time.py, docs/judge.md); a loaded one is allowed far more,
        # and a pattern that backtracks would take hours.
        assert seconds < 5.0, f"{seconds:.3f} s to grade 1 MiB"


def short(value):
    """A parameter's id: long texts cut."""
    return f"{value[:12]}...({len(value)})" if isinstance(value, str) and len(value) > 24 else None


@pytest.mark.parametrize(
    "printed, expected, tolerance, passes",
    [
        # integers compared exactly, at any size: as floats these are one number
        ("9007199254740992", "9007199254740993", 0.0, False),
        ("9007199254740993", "9007199254740993", 0.0, True),
        ("[9007199254740993, 1]", "[9007199254740992, 1]", 1e-6, False),
        ("9007199254740992", "9007199254740993", 1.0, True),  # an integer difference within the tolerance
        ("-0", "0", 0.0, True),
        ("+12", "12", 0.0, True),
        ("0012", "12", 0.0, True),
        ("1" + "0" * 400, "1" + "0" * 399 + "1", 0.5, False),  # past the float range
        ("1" + "0" * 5000, "1" + "0" * 5000, 0.0, True),  # past int()'s 4300 digits
        ("1" + "0" * 5000, "1" + "0" * 4999 + "1", 0.0, False),
        # an integer beside a float: as Python's == has them
        ("6", "6.0", 0.0, True),
        ("9007199254740993", "9007199254740992.0", 0.0, False),
        ("9007199254740992", "9007199254740992.0", 0.0, True),
        ("1" + "0" * 400, "1e308", 1e300, False),
        ("0.30000000000000004", "0.3", 1e-9, True),  # floats within the tolerance
        ("0.3001", "0.3", 1e-6, False),
        # beyond the float range: float() reads inf, and it never equals a finite number or an infinity
        ("1e999", "5", 1e300, False),
        ("1e999", "1e998", 1e300, False),
        ("1e999", "2e999", 1e300, False),
        ("-1e999", "1e999", 1e300, False),
        ("1e999", "inf", 1e300, False),
        ("inf", "1e999", 1e300, False),
        ("1e999", "1" + "0" * 999, 0.0, False),
        ("1e999", "1.0E+999", 0.0, True),  # the same value
        ("1e99999999999999999999", "1e99999999999999999999", 0.0, True),  # beyond what a Decimal holds: the same text
        ("x 1e99999999999999999999", "x 1e99999999999999999998", 0.0, False),
        # infinities written as such, of one sign
        ("inf", "Infinity", 0.0, True),
        ("-inf", "inf", 1e300, False),
        ("inf", "1.7976931348623157e308", 1e300, False),
        # nan equals nothing, the whole text still equals itself
        ("nan 1", "nan 1.0", 1.0, False),
        ("nan", "nan", 1.0, True),
        ("1 nan", "1.0 NaN", 1.0, False),
        # a sign before a number is its own unless a word character or '.' stands before the sign
        ("-5", "--5", 20.0, False),  # printed: -5 after '-'; expected: '-' then -5
        ("x -5", "x -6", 2.0, True),
        ("x 5", "x -5", 5.0, False),
        ("x-5", "x-6", 2.0, True),  # x- then 5
        ("1e-5", "1e-5.5", 1.0, False),  # one number printed, text and 5.5 expected
    ],
    ids=short,
)
def test_numbers_are_compared_as_numbers(printed, expected, tolerance, passes):
    assert matches(printed, expected, tolerance) is passes
    assert (grade(ran(f"MARK\n{printed}\n"), RAN, False, "MARK", expected, tolerance).status == "passed") is passes
    # after more numbers than MANY_NUMBERS, where both texts are read whole
    many = "0 " * (MANY_NUMBERS + 1)
    assert matches(many + printed, many + expected, tolerance) is passes


@pytest.mark.parametrize(
    "printed, expected, passes",
    [
        ("1 2 \r\n3 4\t\n", "1 2\n3 4", True),  # the line ends and the spaces and tabs at a line's end do not count
        ("1 2\n\n3 4\n", "1 2\n\n3 4", True),
        ("1 2\r\n3 4\r\n", "1 2\n3 4\n", True),
        # nothing else ends a line or is set aside: str.splitlines and str.rstrip would have passed each of these
        ("1 2\r3 4", "1 2\n3 4", False),
        ("1 2\v3 4", "1 2\n3 4", False),
        ("1 2\f3 4", "1 2\n3 4", False),
        ("1 2\x1c3 4", "1 2\n3 4", False),
        ("1 2\x1d3 4", "1 2\n3 4", False),
        ("1 2\x1e3 4", "1 2\n3 4", False),
        ("1 2\x853 4", "1 2\n3 4", False),
        ("1 2\u20283 4", "1 2\n3 4", False),
        ("1 2\u20293 4", "1 2\n3 4", False),
        ("1 2\xa0\n3 4", "1 2\n3 4", False),  # a no-break space at a line's end
        ("1 2\r\r\n3 4", "1 2\n3 4", False),  # a lone \r before the line end
        ("1 2\v\n3 4", "1 2\n3 4", False),
        ("1  2\n3 4", "1 2\n3 4", False),  # spaces inside a line count
        (" 1 2\n3 4", "1 2\n3 4", True),  # the whole output is stripped, as every test's is
    ],
)
def test_standard_input_sets_aside_only_line_ends_and_trailing_spaces(printed, expected, passes):
    assert (grade(ran(printed), RAN, False, None, expected).status == "passed") is passes
    assert (by_lines(printed).strip() == by_lines(expected).strip()) is passes


def read_whole(printed: str, expected: str, tolerance: float) -> bool:
    """The rule read plainly: both texts split into numbers and the text between them, the texts equal, each number
    pair within the tolerance."""
    got, wanted = NUMBER.split(printed), NUMBER.split(expected)
    return (
        len(got) == len(wanted)
        and got[0::2] == wanted[0::2]
        and all(same_number(a, b, tolerance) for a, b in zip(got[1::2], wanted[1::2]))
    )


@pytest.mark.parametrize("many_numbers", [MANY_NUMBERS, 0], ids=["read where the expected text says", "read whole"])
def test_both_readings_are_the_rule_read_plainly(monkeypatch, many_numbers):
    """Short texts of the characters numbers are made of, the printed one changed a little or not at all: a reading
    anchored by the expected text must find every number a plain split finds (``x -`` then ``5`` is ``-5``)."""
    monkeypatch.setattr(judging.tolerance, "MANY_NUMBERS", many_numbers)
    chosen = random.Random(0)
    for case in range(40000):
        alphabet = "01.5e-+ xinfaE\n" if case % 2 else "15-+ .e"
        expected = "".join(chosen.choice(alphabet) for _ in range(chosen.randint(0, 8)))
        printed = list(expected)
        for _ in range(chosen.randint(0, 2)):  # a character changed, dropped or added
            where, change = chosen.randint(0, len(printed)), chosen.random()
            if where < len(printed) and change < 0.3:
                printed[where] = chosen.choice(alphabet)
            elif where < len(printed) and change < 0.5:
                del printed[where]
            else:
                printed.insert(where, chosen.choice(alphabet))
        printed = "".join(printed)
        tolerance = chosen.choice([0.0, 0.5, 10.0])
        assert within_tolerance(printed, expected, tolerance) is read_whole(printed, expected, tolerance), (
            printed,
            expected,
            tolerance,
        )
