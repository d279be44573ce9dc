"""The q executor against a real, licensed kdb+ q; skipped (with the reason) where none is found."""

import pytest

from judging import Judge, Test
from judging.executors import find_q

Q = find_q()
pytestmark = [
    pytest.mark.real_q,
    pytest.mark.skipif(
        Q is None, reason="no q binary found (q_binary, Q_INTERPRETER_PATH, Q_EXECUTABLE_PATH, $QHOME/l64/q, PATH)"
    ),
]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=5.0, workers=2) as judge:
        judge.preflight("q")
        yield judge


def test_correct_wrong_and_error(judge):
    tests = [Test("show solve 1 2 3", "6"), Test("show solve 10 20", "30")]
    assert judge.run("solve:{sum x}\nexit 0;", tests, "q").status == "passed"
    assert judge.run("solve:{count x}", tests, "q").status == "failed"
    assert judge.run("solve:{x+`a}", tests, "q").status == "runtime_error"


def test_printing_the_answer_then_exiting_fails(judge):
    assert judge.run('-1 "6";\nexit 0;', [Test("", "6")], "q").status == "failed"


def test_hang_times_out(judge):
    assert judge.run("solve:{while[1b;]}", [Test("solve[]", "")], "q").status == "timeout"
