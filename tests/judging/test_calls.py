"""Runs of calls (judging/records.py, `Calls`): many printed calls judged in one program, each graded on the host
against its own expected output. A call that raises fails alone (the harness catches it and the run goes on); one
that loops, runs out of memory, exits or prints too much ends the run: it fails with that status, and so does every
later call; the calls before it keep their verdicts; no expected output reaches the sandbox. Both bwrap paths
(warm workers and a fresh interpreter per test), and q through its stand-in."""

import re
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
        ("raise SystemExit(3)", "runtime_error"),
        ("raise KeyboardInterrupt", "runtime_error"),
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


@pytest.mark.parametrize(
    "failure", ["raise ValueError('no')", "print(14)\n        raise ValueError('no')", "return solve(n)", "1 / 0"]
)
def test_a_call_that_raises_fails_alone_and_the_calls_after_it_are_graded(judge, failure):
    """Whatever the call printed before it raised (its right answer here), it fails as a separate run of it would;
    the next calls run on, each graded on its own output (call 9 is wrong)."""
    code = f"def solve(n):\n    if n == 7:\n        {failure}\n    return 0 if n == 9 else n * 2\n"
    judgement = judge.run(code, [CALLS], "python", timeout=1.0)
    assert statuses(judgement) == ["passed"] * 7 + ["runtime_error", "passed", "failed"] + ["passed"] * 10
    assert judgement.status == "runtime_error"
    raised = judgement.tests[7]
    assert "Error" in raised.stderr and "Traceback" in raised.stderr, raised
    assert "Traceback" not in judgement.tests[8].stderr


def test_calls_that_raise_each_fail_alone_with_their_own_traceback(judge):
    code = "def solve(n):\n    if n % 2:\n        raise ValueError(f'odd {n}')\n    return n * 2\n"
    judgement = judge.run(code, [CALLS], "python")
    assert statuses(judgement) == ["passed", "runtime_error"] * 10
    assert all(f"odd {i}" in judgement.tests[i].stderr for i in range(1, 20, 2))
    assert "odd 3" not in judgement.tests[5].stderr


def test_a_traceback_is_written_once_per_error_and_line_and_after_that_its_last_line_alone(judge):
    """The first call raising an error at a line writes its whole traceback (from the call's code on, as a run of
    it alone shows it); a later call raising the same error there, the error's line alone (a traceback costs the
    sandbox ~45 us: a wrong program raising on all fifty pool calls spent more on them than on running them);
    another error, or another line, its whole traceback."""
    code = (
        "def solve(n):\n"
        "    if n % 5 == 4:\n"
        "        return {}[n]\n"
        "    if n % 2:\n"
        "        raise ValueError(f'odd {n}')\n"
        "    return n * 2\n"
    )
    tests = judge.run(code, [CALLS], "python").tests
    ran = ["passed", "runtime_error", "passed", "runtime_error", "runtime_error", "runtime_error", "passed"]
    assert [result.status for result in tests[:7]] == ran
    for index, (line, last) in {1: (5, "ValueError: odd 1"), 4: (3, "KeyError: 4")}.items():
        assert tests[index].stderr.startswith("Traceback (most recent call last)"), tests[index].stderr
        assert f"line {line}, in solve" in tests[index].stderr, tests[index].stderr
        assert "_judge_calls" not in tests[index].stderr, "the harness's own frame is not the call's"
        assert tests[index].stderr.rstrip().endswith(last), tests[index].stderr
    for index, last in {3: "ValueError: odd 3", 5: "ValueError: odd 5", 9: "KeyError: 9", 19: "KeyError: 19"}.items():
        assert tests[index].stderr.strip() == last, tests[index].stderr


def test_a_call_whose_test_code_does_not_compile_fails_alone(judge):
    calls = Calls((Test("print(solve(1))", "2"), Test("print(solve(", "4"), Test("print(solve(3))", "6")))
    judgement = judge.run(DOUBLE, [calls], "python")
    assert statuses(judgement) == ["passed", "runtime_error", "passed"]


def test_test_code_of_every_form_runs_in_a_run_of_calls_as_alone(judge):
    """The harness runs each call's test code compiled alone on the host, or its text where it does not compile
    alone (a ``return`` outside a function): every form (a string over lines, tabs, a continued line, nothing but
    a comment) gives the verdict a run of its own gives."""
    tests = (
        Test('s = """a\n  b"""\nprint(s, solve(1))', "a\n  b 2"),
        Test("return 1", "1"),
        Test("# nothing", ""),
        Test("x = [1,\n2]\nprint(solve(len(x)))", "4"),
        Test("if True:\n\tprint(solve(2))", "4"),
        Test("print(solve(1)); \\\nprint(solve(2))", "2\n4"),
        Test("print(solve(3))", "6"),
    )
    alone = judge.run(DOUBLE, list(tests), "python", timeout=3.0)
    together = judge.run(DOUBLE, [Calls(tests)], "python", timeout=3.0)
    assert statuses(together) == statuses(alone) == ["passed", "runtime_error"] + ["passed"] * 5


@pytest.mark.parametrize(
    "names",
    [
        "def print(*args, **kwargs):\n    __builtins__.print(*args, **kwargs)\n",
        "exec = eval = compile = None\n",
        "enumerate = globals = bytes = None\n",
        "def __import__(*args, **kwargs):\n    raise ImportError('none')\n",
        "import sys\nsys = None\nmarshal = 'not a module'\n",
    ],
)
def test_a_solution_naming_what_the_harness_uses_is_judged_as_alone(judge, names):
    """The harness runs after the solution, in its globals: a correct solution that defines a name the harness
    uses (``print``, ``exec``, ``enumerate``, ``__import__``, ``marshal`` ...) is judged as in runs of its own,
    and a wrong one gains nothing."""
    calls = Calls((Test("print(solve(1))", "2"), Test("print(solve(2))", "4"), Test("print([0][solve(1)])", "0")))
    for code in (names + DOUBLE, names + "def solve(n):\n    return n * 3\n"):
        alone = judge.run(code, list(calls.tests), "python", timeout=3.0)
        together = judge.run(code, [calls], "python", timeout=3.0)
        assert statuses(together) == statuses(alone)
    assert statuses(together) == ["failed", "failed", "runtime_error"]


@pytest.mark.parametrize(
    "tampering",
    [
        "import sys, types\nsys.modules['marshal'] = types.SimpleNamespace(loads=lambda blob: ())\n",
        "import sys, types\nsys.modules['marshal'] = types.SimpleNamespace(loads=lambda blob: 1 / 0)\n",
        "import builtins\nbuiltins.exec = lambda *args: None\n",
        "import builtins\nbuiltins.enumerate = lambda calls: [(0, 'print(7)')]\n",
        "import sys, types\nsys.modules['zlib'] = types.SimpleNamespace(decompress=lambda blob: b'')\n",
        "import sys, types, marshal\nsys.modules['zlib'] = types.SimpleNamespace(decompress=lambda blob: "
        "marshal.dumps(('print(-1)',) * 5))\n",
    ],
)
def test_a_program_that_tampers_with_the_harness_gains_nothing(judge, tampering):
    """The harness runs after the solution, which can replace what it imports or takes from ``builtins``: skipping
    calls, running other code in their place or breaking the loop only fails the program's own calls, never as the
    judge's fault (``sandbox_error``), since it never sees an expected output."""
    calls = Calls(tuple(Test(f"print(solve({i}))", str(2 * i)) for i in range(1, 6)))
    judgement = judge.run(tampering + "def solve(n):\n    return n * 3\n", [calls], "python", timeout=3.0)
    assert judgement.passed == 0
    assert "sandbox_error" not in statuses(judgement)


@pytest.mark.parametrize(
    "error",
    [
        "class Meta(type):\n    def __hash__(cls):\n        raise RuntimeError('no hash')\n"
        "class Wrong(Exception, metaclass=Meta):\n    pass\n",
        "class Wrong(Exception):\n    def __str__(self):\n        raise RuntimeError('no text')\n",
        "class Wrong(Exception):\n    __traceback__ = None\n",
    ],
)
def test_an_error_the_harness_cannot_place_or_show_only_fails_the_program_s_own_calls(judge, error):
    """An error the harness cannot hash (its class's metaclass raising), show (``__str__`` raising) or walk (its
    traceback hidden by the class) ends the run or is shown as the interpreter shows it: every call fails, none as
    the judge's fault."""
    code = error + "def solve(n):\n    raise Wrong()\n"
    judgement = judge.run(code, [CALLS], "python", timeout=3.0)
    assert judgement.passed == 0 and judgement.status == "runtime_error", statuses(judgement)
    assert set(statuses(judgement)) == {"runtime_error"}, statuses(judgement)


def test_an_exit_in_a_call_still_ends_the_run(judge):
    code = "import sys\ndef solve(n):\n    if n == 4:\n        sys.exit(0)\n    return n * 2\n"
    judgement = judge.run(code, [CALLS], "python")
    assert statuses(judgement) == ["passed"] * 4 + ["failed"] * 16


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
        "marker = re.search(r\"_judge_calls\\('([0-9a-f]{32})'\", source).group(1)\n"
        "def solve(n):\n"
        "    for i in range(20):\n"
        "        print(f'{marker}:{i}')\n"
        "        print(i * 2 + 1)\n"
        "    sys.stdout.flush()\n"
        "    import os; os._exit(0)\n"
    )
    judgement = judge.run(code, [CALLS], "python")
    assert judgement.passed == 0
    assert re.search(r"^[0-9a-f]{32}:0$", judgement.tests[0].stdout, re.M), "the attack never found the marker"


def test_a_program_that_forges_raised_lines_only_fails_its_own_calls(judge):
    """A program that reads the marker from its file can print the line the harness prints when a call raises:
    for its own call, that call fails; for another call, the line is only what this call printed (a wrong answer),
    never a verdict on the other call."""
    code = (
        "import sys, re\n"
        "source = open(sys.argv[0]).read()\n"
        "marker = re.search(r\"_judge_calls\\('([0-9a-f]{32})'\", source).group(1)\n"
        "def solve(n):\n"
        "    if n == 3:\n"
        "        print(f'{marker}:3:raised')\n"
        "    if n == 5:\n"
        "        print(f'{marker}:6:raised')\n"
        "    if n == 8:\n"
        "        print(f'{marker}:8:raised', file=sys.stderr)\n"
        "    return n * 2\n"
    )
    judgement = judge.run(code, [CALLS], "python")
    assert statuses(judgement) == ["passed"] * 3 + ["runtime_error", "passed", "failed"] + ["passed"] * 14


def test_a_program_that_hides_its_raise_gains_nothing_over_not_raising(judge):
    """A program can swallow its own errors (as it can end a separate run normally after one, through ``atexit``
    and ``os._exit(0)``): what each call printed is then graded, and it never saw an expected output."""
    code = (
        "import builtins\n"
        "real_print = builtins.print\n"
        "builtins.print = lambda *a, **k: None if ':raised' in str(a) else real_print(*a, **k)\n"
        "def solve(n):\n"
        "    if n == 7:\n"
        "        raise ValueError('no')\n"
        "    return n * 2\n"
    )
    judgement = judge.run(code, [CALLS], "python")
    assert judgement.tests[7].status in ("runtime_error", "failed")
    assert judgement.passed == 19


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


def test_q_runs_of_calls_fail_only_the_calls_that_wrote_an_error(qhome):
    """The stand-in (NOT q) prints `-1 "text";` lines and writes `'word` lines to stderr, as q does on an error;
    like q it goes on after one: the call whose stderr shows it fails with runtime_error, the others are graded."""
    calls = Calls((Test('-1 "a";', "a"), Test("'type", "b"), Test('-1 "c";', "c"), Test('-1 "x";', "d")))
    with Judge(timeout=2.0, workers=1, q_binary=FAKE_Q) as q_judge:
        judgement = q_judge.run("", [calls], "q")
    assert statuses(judgement) == ["passed", "runtime_error", "passed", "failed"]


def test_a_q_error_before_the_first_call_fails_every_call(qhome):
    """An error in the solution itself is in every separate run of a test: every call of the run fails so."""
    calls = Calls((Test('-1 "a";', "a"), Test('-1 "c";', "c")))
    with Judge(timeout=2.0, workers=1, q_binary=FAKE_Q) as q_judge:
        judgement = q_judge.run("'length", [calls], "q")
        alone = q_judge.run("'length", list(calls.tests), "q")
    assert statuses(judgement) == statuses(alone) == ["runtime_error", "runtime_error"]
