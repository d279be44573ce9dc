"""A completion's given tests joined with its pool sample in one run of calls (judging/records.py, `joined_runs`)
give the verdicts separate runs give: the same status for every test, in the same order, whatever the program does
(right, wrong on some tests, raising in some calls or all, looping, printing too much, running out of memory,
exiting early, not compiling), on both bwrap paths, whether the last given test joins the pool (the reward's way) or
all of them do; and the reward's scoring judges them so, training's sample and hidden tests and evaluation's all
tests alike, with no expected output in the program's view. A program answering by call order is why only the last
given test joins."""

import asyncio

import pytest

from bwrap_paths import judge, sandbox, warm_workers_handle_it_themselves  # noqa: F401 (fixtures)
from judging import Calls, Test
from judging.records import Problem, count, in_runs, joined_runs
from rewards.arguments import ScoringArguments
from rewards.scoring import _tests, ascore, score

GIVEN = (
    Test("print(solve(1))", "2"),
    Test("print(solve(2))\nprint(solve(3))", "4\n6"),
    Test("x = solve(4)\nprint(x)", "8"),
)
POOL = tuple(Test(f"print(solve({n}))", str(2 * n)) for n in range(5, 15))


def solve(body: str) -> str:
    return f"import os, sys\ndef solve(n):\n    {body}\n    return n * 2\n"


PROGRAMS = {
    "right": solve("pass"),
    "wrong on some tests": "def solve(n):\n    return 0 if n in (3, 9) else n * 2\n",
    "raising in some calls": solve("if n in (3, 11):\n        raise ValueError(n)"),
    "raising in every call": solve("raise ValueError(n)"),
    "printing its answer, then raising": solve("if n in (4, 6):\n        print(n * 2)\n        1 / 0"),
    "looping in a given test": solve("if n == 2:\n        while True: pass"),
    "looping in the pool": solve("if n == 9:\n        while True: pass"),
    "printing too much in every call": solve("print('x' * 3_000_000)"),
    "printing too much in one given test": solve("if n == 2:\n        print('x' * 3_000_000)"),
    "out of memory in one given test": solve("if n == 3:\n        bytearray(3 << 30)"),
    "exiting early in one given test": solve("if n == 2:\n        os._exit(0)"),
    "exiting with an error in one given test": solve("if n == 1:\n        sys.exit(2)"),
    "exiting early in the solution": "import os\nos._exit(0)\ndef solve(n):\n    return n * 2\n",
    "a syntax error": "def solve(n):\n    return n * \n",
}


def statuses(judgement):
    return [result.status for result in judgement.tests]


@pytest.mark.parametrize("join", [1, None], ids=["the last given test joins", "all given tests join"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_joined_runs_give_the_verdicts_of_separate_runs(judge, name, join):
    code = PROGRAMS[name]
    separate = judge.run(code, [*GIVEN, *in_runs(POOL)], "python")
    joined = judge.run(code, joined_runs(GIVEN, POOL, join=join), "python")
    assert statuses(joined) == statuses(separate), (name, joined.tests)
    assert (joined.status, joined.passed, joined.total) == (separate.status, separate.passed, separate.total)


CALL_ORDER = (
    "def solve(n):\n    solve.calls = getattr(solve, 'calls', -1) + 1\n    return 2 * n if solve.calls % 3 else 0\n"
)


def test_a_program_answering_by_call_order_gets_the_verdicts_of_separate_runs(judge):
    """Right but on every third call: apart, each given test's first call is wrong; joined after another given test,
    a call-order program answers from where the last one left off, which is why only the last given test joins.
    The pool's calls after it answer so too (a sample drawn afresh each step: no order to learn)."""
    separate = judge.run(CALL_ORDER, [*GIVEN, *in_runs(POOL)], "python")
    assert statuses(judge.run(CALL_ORDER, joined_runs(GIVEN, POOL), "python"))[:3] == statuses(separate)[:3]
    assert statuses(separate)[:3] == ["failed"] * 3
    all_joined = judge.run(CALL_ORDER, joined_runs(GIVEN, POOL, join=None), "python")
    assert statuses(all_joined)[:3] == ["failed", "passed", "failed"]  # calls 1 and 2 are the second test's


def test_the_last_given_test_and_the_pool_share_one_run():
    assert joined_runs(GIVEN, POOL) == (GIVEN[0], GIVEN[1], Calls((GIVEN[2], *POOL), 1))
    assert joined_runs(GIVEN, POOL)[-1].timeouts == 2
    (run,) = joined_runs(GIVEN, POOL, join=None)
    assert run.tests == (*GIVEN, *POOL) and run.given == 3 and run.timeouts == 4
    assert [len(each) for each in joined_runs(GIVEN, POOL * 7, join=None)] == [64, 9]
    assert [each.timeouts for each in joined_runs(GIVEN, POOL * 7, join=None)] == [4, 1]
    (alone,) = joined_runs(GIVEN, (), join=None)
    assert alone.timeouts == 3
    assert count(joined_runs(GIVEN, POOL)) == count(joined_runs(GIVEN, POOL, join=None)) == 13
    assert joined_runs(GIVEN, (), join=0) == GIVEN


def test_a_run_of_given_tests_may_take_a_timeout_each(judge):
    """Each given test alone had its own timeout: three of 0.6 s pass joined as they pass apart."""
    code = "import time\ndef solve(n):\n    time.sleep(0.6)\n    return n * 2\n"
    joined = judge.run(code, joined_runs(GIVEN[:1] * 3, (), join=None), "python", timeout=1.0)
    assert statuses(joined) == ["passed"] * 3


def problem(**fields):
    return Problem(
        "double", "python", "Double n.", (*GIVEN, Test("print(solve(20))", "40", hidden=True)), pool=POOL, **fields
    )


def test_the_reward_judges_the_last_given_test_and_the_pool_in_one_run():
    scoring = ScoringArguments(max_tests_per_problem=3, pool_tests_per_problem=10)
    assert _tests(scoring)(problem()) == (GIVEN[0], GIVEN[1], Calls((GIVEN[2], *POOL), 1))
    hidden = Test("print(solve(20))", "40", hidden=True)
    assert _tests(scoring, all_tests=True)(problem()) == (*GIVEN, Calls((hidden, *POOL), 1))


def test_tests_giving_standard_input_keep_their_own_runs():
    reads = Problem("sum", "python", "Sum.", (Test("", "3", input="1 2"), Test("", "7", input="3 4")))
    assert _tests(ScoringArguments())(reads) == reads.tests


def test_runs_of_calls_given_as_tests_stay_as_they_are():
    runs = in_runs(POOL, 4)
    assert joined_runs(runs, GIVEN) == (*runs, Calls(GIVEN))


def test_scores_are_those_of_separate_runs(judge):
    scoring = ScoringArguments(max_tests_per_problem=3, pool_tests_per_problem=10)
    # Those that print, raise or end; the limits' own are above, one program at a time (a loaded machine's cold
    # runs of 3 MB of output each can spend the budget of a completion judged beside others).
    codes = [code for name, code in PROGRAMS.items() if not name.startswith(("looping", "printing too", "out of"))]
    scored = score(judge, [problem()] * len(codes), codes, scoring, extract=False)
    for code, each in zip(codes, scored):
        separate = judge.run(code, [*GIVEN, *in_runs(POOL)], "python")
        assert statuses(each.judgement) == statuses(separate), code


def test_hidden_tests_are_joined_too(judge):
    scoring = ScoringArguments(max_tests_per_problem=2, pool_tests_per_problem=4)
    text = f"```python\n{PROGRAMS['right']}```"
    (scored,) = asyncio.run(ascore(judge, [problem()], [text], scoring, hidden_tests=True))
    assert scored.judgement.status == "passed" and scored.hidden.status == "passed"
    assert scored.hidden.total == 2 + 6  # the third given test, the hidden one, the rest of the pool


def test_no_expected_output_reaches_the_sandbox_in_a_joined_run(judge):
    given = (Test("print(solve(1))", "expected-7f3a"), Test("print(solve(2))", "expected-5d2e"))
    pool = (Test("print(solve(3))", "expected-91bc"),)
    code = (
        "import sys, os\n"
        "seen = open(sys.argv[0]).read() + repr(sorted(os.environ.items()))\n"
        "def solve(n):\n"
        "    return any(s[::-1] in seen for s in ('a3f7-detcepxe', 'e2d5-detcepxe', 'cb19-detcepxe'))\n"
    )  # not in its own text
    judgement = judge.run(code, joined_runs(given, pool), "python")
    assert [result.stdout.strip() for result in judgement.tests] == ["False"] * 3
