"""Runs of calls (judging/records.py, `Calls`): many printed calls judged in one program, each graded on the host
against its own expected output. A call that raises, loops or prints too much fails with that status, and so does
every later call; the calls before it keep their verdicts; no expected output reaches the sandbox. Both bwrap paths
(warm workers and a fresh interpreter per test), and q through its stand-in."""

from pathlib import Path

import pytest

from bwrap_paths import judge, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Calls, Judge, Test
from judging.grading import equal_values
from judging.records import count, in_runs

DOUBLE = "def solve(n):\n    return n * 2\n"
CALLS = Calls(tuple(Test(f"print(solve({i}))", str(2 * i)) for i in range(20)))
FAKE_Q = str(Path(__file__).resolve().parents[1] / "helpers" / "fake_q" / "q")


def statuses(judgement):
    return [result.status for result in judgement.tests]


def test_a_run_of_calls_counts_each_call_as_a_test(judge):
    judgement = judge.run(DOUBLE, [Test("print(solve(3))", "6"), CALLS], "python")
    assert (judgement.status, judgement.passed, judgement.total) == ("passed", 21, 21)


def test_a_wrong_call_fails_alone(judge):
    judgement = judge.run("def solve(n):\n    return 0 if n == 5 else n * 2\n", [CALLS], "python")
    assert statuses(judgement) == ["passed"] * 5 + ["failed"] + ["passed"] * 14


@pytest.mark.parametrize(
    "failure, status",
    [
        ("raise ValueError('no')", "runtime_error"),
        ("while True: pass", "timeout"),
        ("print('x' * 3_000_000)", "output_limit"),
        ("bytearray(3 << 30)", "memory"),
    ],
)
def test_a_call_that_fails_ends_the_run_with_its_status(judge, failure, status):
    code = f"def solve(n):\n    if n == 7:\n        {failure}\n    return n * 2\n"
    judgement = judge.run(code, [CALLS], "python", timeout=1.0)
    assert statuses(judgement) == ["passed"] * 7 + [status] * 13, [r.stderr[-200:] for r in judgement.tests[6:8]]
    assert judgement.status == status


def test_a_program_that_ends_early_fails_the_calls_it_never_reached(judge):
    judgement = judge.run(
        "import os\ndef solve(n):\n    if n == 3:\n        os._exit(0)\n    return n * 2\n", [CALLS], "python"
    )
    assert statuses(judgement) == ["passed"] * 3 + ["failed"] * 17


def test_a_program_that_forges_the_separators_gains_nothing(judge):
    """Reading its own file shows a program the marker and the calls, never the expected outputs: printing the
    separators itself only moves its own answers."""
    code = (
        "import sys, re\n"
        "source = open(sys.argv[0]).read()\n"
        "marker = re.search(r\"print\\('([0-9a-f]{32}):0'\", source).group(1)\n"
        "def solve(n):\n"
        "    for i in range(20):\n"
        "        print(f'{marker}:{i}')\n"
        "        print(i * 2 + 1)\n"
        "    sys.stdout.flush()\n"
        "    import os; os._exit(0)\n"
    )
    judgement = judge.run(code, [CALLS], "python")
    assert judgement.passed == 0


def test_no_expected_output_reaches_the_sandbox(judge):
    secret = Calls((Test("print(solve(1))", "expected-7f3a"), Test("print(solve(2))", "expected-91bc")))
    code = (
        "import sys, os\n"
        "seen = open(sys.argv[0]).read() + repr(sorted(os.environ.items()))\n"
        "def solve(n):\n"
        "    return 'a3f7-detcepxe'[::-1] in seen or 'cb19-detcepxe'[::-1] in seen\n"
    )  # not in its own text
    judgement = judge.run(code, [secret], "python")
    assert [result.stdout.strip() for result in judgement.tests] == ["False", "False"]


def test_calls_share_the_program_s_state(judge):
    """What a batched test shares between its calls is the program's own state, as said in docs/judge.md."""
    code = "seen = []\ndef solve(n):\n    seen.append(n)\n    return len(seen)\n"
    judgement = judge.run(code, [Calls((Test("print(solve(5))", "1"), Test("print(solve(5))", "2")))], "python")
    assert judgement.passed == 2


def test_value_comparison_keeps_the_source_s_equality(judge):
    tests = Calls(
        (
            Test("print(repr(solve(120)))", "240", compare="value"),
            Test("print(repr({solve(1): 1, solve(2): 2}))", "{4.0: 2, 2: 1}", compare="value"),
            Test("print(repr(solve(120)))", "240"),
        )
    )
    judgement = judge.run("def solve(n):\n    return n * 2.0\n", [tests], "python")
    assert statuses(judgement) == ["passed", "passed", "failed"]


@pytest.mark.parametrize(
    "printed, expected, equal",
    [
        ("240.0", "240", True),
        ("{3, 1, 2}", "{1, 2, 3}", True),
        ("(1, 2)", "[1, 2]", False),
        ("'240'", "240", False),
        ("True", "1", True),
        ("[1, 2]", "[1, 2, 3]", False),
        ("nan", "nan", True),
        ("not a literal", "'x'", False),
        ("1" * 5000, "1", False),
        ("[" * 100000, "[]", False),
    ],
)
def test_equal_values(printed, expected, equal):
    assert equal_values(printed, expected) is equal


def test_a_pool_is_judged_in_runs_of_at_most_the_run_size():
    runs = in_runs([Test(f"print(solve({i}))", "0") for i in range(130)], 64)
    assert [len(run) for run in runs] == [64, 64, 2] and count(runs) == 130


@pytest.fixture()
def qhome(tmp_path, monkeypatch):
    monkeypatch.setenv("QHOME", str(tmp_path))
    return tmp_path


def test_q_runs_of_calls_find_the_call_that_wrote_an_error(qhome):
    """The stand-in (NOT q) prints `-1 "text";` lines and writes `'word` lines to stderr, as q does on an error;
    like q it goes on after one: the call whose stderr shows it fails with runtime_error, and every later one."""
    calls = Calls((Test('-1 "a";', "a"), Test("'type", "b"), Test('-1 "c";', "c")))
    with Judge(timeout=2.0, workers=1, q_binary=FAKE_Q) as q_judge:
        judgement = q_judge.run("", [calls], "q")
    assert statuses(judgement) == ["passed", "runtime_error", "runtime_error"]
