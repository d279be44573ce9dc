"""A problem's pool (data/generation/pool.py): tests generated from its solution, judged in runs of many calls, a
fresh sample of them in every training step's reward (rewards/scoring.py)."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from data import load_problems
from data.generation.pool import build_pool, build_q_pool, own_calls, suggested_domain
from data.quality.input_classes import value_classes
from data.quality.q_twins import twins_of
from data.quality.wrong_programs import printed_calls
from judging import Judge, Problem, Test
from rewards import ScoringArguments, score
from rewards.scoring import pool_sample

ROOT = Path(__file__).resolve().parents[2]
UPPER = Problem(
    "shout",
    "python",
    "Write `solve(s)` that returns `s` with every letter upper case, other characters as they are.",
    (Test("print(solve('abc'))", "ABC"), Test("print(solve('a b!'))", "A B!"), Test("print(solve('Hello'))", "HELLO")),
    "def solve(s):\n    return s.upper()\n",
    domain="isinstance(s, str)",
)
DIVIDE = Problem(
    "divide",
    "python",
    "Write `solve(a, b)`: `a // b`, or None when b is 0.",
    (Test("print(solve(7, 2))", "3"), Test("print(solve(9, 3))", "3")),
    "def solve(a, b):\n    return None if b == 0 else a // b\n",
    domain="isinstance(a, int) and isinstance(b, int) and abs(a) <= 1000 and abs(b) <= 1000",
)


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


def test_a_pool_has_a_hundred_distinct_inputs_of_every_class_its_type_allows(judge):
    pool = build_pool(UPPER, judge)
    inputs = {test.test_code for test in pool.tests}
    assert len(inputs) == len(pool.tests) >= 100
    assert {("chars", kind) for kind in ("lower", "upper", "digit", "space", "other", "non-ascii")} <= pool.classes
    assert ("length", 1, 0) in pool.classes and ("length", 1, 1) in pool.classes  # empty, one character (depth 1:
    # the argument inside the call)
    assert any(len(set(eval(t.test_code[12:-2]))) == 1 and len(eval(t.test_code[12:-2])) > 2 for t in pool.tests)
    judgement = score(
        judge,
        [replace(UPPER, pool=tuple(pool.tests))],
        [UPPER.solution],
        ScoringArguments(),
        all_tests=True,
        extract=False,
    )[0].judgement
    assert (judgement.status, judgement.total) == ("passed", 3 + len(pool.tests))


def test_a_pool_meets_the_arguments_and_keeps_to_the_domain(judge):
    pool = build_pool(DIVIDE, judge)
    calls = [eval(test.test_code[len("print(solve") : -1]) for test in pool.tests]
    assert any(b == 0 for _, b in calls) and any(a == b for a, b in calls) and any(a < 0 for a, _ in calls)
    assert all(abs(a) <= 1000 and abs(b) <= 1000 for a, b in calls)
    assert pool.outside > 0  # the edges beyond 1000 were tried and left out


def test_an_input_only_a_later_test_holds_is_in_the_pool(judge):
    """The reward judges the first five tests and the pool: ``solve(0)`` as a sixth test, left out of the pool as a
    test's own input, was never judged, and a program wrong only at 0 was paid in full."""
    fibonacci = Problem(
        "fibonacci",
        "python",
        "Write `solve(n)`: the n-th Fibonacci number, F(0) = 0.",
        tuple(
            Test(f"print(solve({n}))", str(f)) for n, f in ((20, 6765), (7, 13), (10, 55), (12, 144), (9, 34), (0, 0))
        ),
        "def solve(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        domain="isinstance(n, int) and 0 <= n <= 200",
    )
    pool = build_pool(fibonacci, judge)
    assert "print(solve(0))" in {test.test_code for test in pool.tests}
    assert not {"print(solve(20))", "print(solve(7))"} & {test.test_code for test in pool.tests}
    from_one = "def solve(n):\n    a, b = 1, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return a\n"
    judged = replace(fibonacci, tests=fibonacci.tests[:5], pool=tuple(pool.tests))
    [scored] = score(judge, [judged], [from_one], ScoringArguments(), all_tests=True, extract=False)
    assert scored.judgement.status == "failed"


def test_letters_whose_case_maps_part_ways_reach_the_pool(judge):
    """Two strings equal but for case, one holding a letter whose case maps are not one to one (upper ß is SS,
    case-folded ß is ss): a program folding with casefold() where the problem says lower() fails the pool."""
    same_letters = Problem(
        "same-letters",
        "python",
        "Write `solve(a, b)`: whether `a.lower()` and `b.lower()` hold the same letters the same number of times.",
        (
            Test("print(solve('Listen', 'Silent'))", "True"),
            Test("print(solve('ab', 'abc'))", "False"),
            Test("print(solve('evil', 'vile'))", "True"),
        ),
        "def solve(a, b):\n    return sorted(a.lower()) == sorted(b.lower())\n",
        domain="isinstance(a, str) and isinstance(b, str)",
    )
    pool = build_pool(same_letters, judge)
    folding = "def solve(a, b):\n    return sorted(a.casefold()) == sorted(b.casefold())\n"
    [scored] = score(
        judge,
        [replace(same_letters, pool=tuple(pool.tests))],
        [folding],
        ScoringArguments(),
        all_tests=True,
        extract=False,
    )
    assert scored.judgement.status == "failed"


def test_an_input_where_the_solution_raises_or_loops_is_never_a_test(judge):
    picky = replace(
        DIVIDE,
        domain=None,
        solution="def solve(a, b):\n    assert a >= 0\n    while b == 5:\n"
        "        pass\n    return None if b == 0 else a // b\n",
    )
    pool = build_pool(picky, judge)
    calls = [eval(test.test_code[len("print(solve") : -1]) for test in pool.tests]
    assert calls and all(a >= 0 and b != 5 for a, b in calls)


def test_without_a_domain_the_pool_keeps_to_the_classes_the_tests_show(judge):
    pool = build_pool(replace(UPPER, domain=None), judge)
    assert pool.tests and ("chars", "digit") not in pool.classes and ("length", 1, 0) not in pool.classes


def test_a_solution_printing_differently_twice_is_reported_not_trusted(judge):
    unstable = replace(
        UPPER, solution="import random\ndef solve(s):\n    return s.upper() + str(random.random() < 0.5)\n"
    )
    pool = build_pool(unstable, judge)
    assert pool.unstable and not pool.tests and "not trusted" in pool.skipped


def test_a_second_solution_that_disagrees_is_reported_and_its_inputs_left_out(judge):
    second = replace(
        UPPER,
        extra={
            "second_solution": "def solve(s):\n    return ''.join(chr(ord(c) - 32) if "
            "'a' <= c <= 'z' else c for c in s)\n"
        },
    )
    pool = build_pool(second, judge)
    inputs = [line.split(": solution")[0] for line in pool.disagreements]
    assert inputs and all(any(not c.isascii() and c.islower() for c in call) for call in inputs)
    assert not any(any(not c.isascii() and c.islower() for c in test.test_code) for test in pool.tests)


def test_a_memorising_program_fails_its_pool_sample(judge):
    pool = build_pool(UPPER, judge)
    problem = replace(UPPER, pool=tuple(pool.tests))
    memorised = "def solve(s):\n    return {'abc': 'ABC', 'a b!': 'A B!', 'Hello': 'HELLO'}.get(s, s)\n"
    result = score(judge, [problem], [memorised], ScoringArguments(), extract=False)[0]
    assert result.judgement.total == 3 + 50 and result.status == "failed"


def test_the_sample_is_fresh_each_draw_the_same_for_one_draw_and_the_rest_is_hidden():
    problem = replace(UPPER, pool=tuple(Test(f"print(solve({i!r}))", str(i)) for i in range(120)))
    first, rest = pool_sample(problem, 50, "0:1")
    assert len(first) == 50 and len(rest) == 70 and not set(first) & set(rest)
    assert pool_sample(problem, 50, "0:1") == (first, rest)
    assert pool_sample(problem, 50, "0:2")[0] != first and pool_sample(problem, 50, "1:1")[0] != first
    assert pool_sample(problem, 0, "0:1") == ((), problem.pool)


def test_the_reward_judges_the_given_tests_and_one_run_of_the_sample(judge):
    problem = replace(UPPER, pool=tuple(Test(f"print(solve({c!r}))", c.upper()) for c in "abcdefghij" * 3))
    scoring = ScoringArguments(max_tests_per_problem=2, pool_tests_per_problem=10)
    judgement = score(judge, [problem], [UPPER.solution], scoring, extract=False, draw="3:4")[0].judgement
    assert judgement.total == 12 and judgement.passed == 12
    assert (
        score(
            judge,
            [problem],
            [UPPER.solution],
            ScoringArguments(partial_credit="above_trivial"),
            extract=False,
            trivial_shares={problem: [0.0, 0.0, 0.0]},
        )[0].judgement.total
        == 3
    )


def test_a_pool_round_trips_through_the_record(tmp_path, judge):
    problem = replace(UPPER, pool=tuple(build_pool(UPPER, judge).tests[:5]))
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(problem.record()) + "\n")
    assert load_problems(str(path), "python")[0].pool == problem.pool


@pytest.mark.parametrize(
    "test, refusal",
    [
        ({"input": "x", "expected_output": "X"}, "pool[0] gives standard input"),  # a pool holds printed calls only
        ({"test_code": "print(solve('a') == 'A')", "expected_output": "True"}, "pool[0] is not a printing test"),
    ],
)
def test_a_pool_test_is_held_to_the_printing_form(tmp_path, test, refusal):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({**UPPER.record(), "pool": [test]}) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "data", "check", str(path), "--language", "python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and refusal in result.stderr, result.stderr


def test_a_problem_naming_its_function_gets_a_pool_calling_it(judge):
    named = replace(
        UPPER,
        entry_point="shout",
        solution="def shout(s):\n    return s.upper()\n",
        tests=tuple(replace(t, test_code=t.test_code.replace("solve", "shout")) for t in UPPER.tests),
    )
    pool = build_pool(named, judge)
    assert pool.tests and all(t.test_code.startswith("print(shout(") for t in pool.tests)
    problem = replace(named, pool=tuple(pool.tests))
    assert score(judge, [problem], [named.solution], ScoringArguments(), extract=False)[0].status == "passed"


def test_q_pools_come_from_the_twin_in_q_s_forms(judge):
    q_problems = load_problems(str(ROOT / "data" / "q_problems.jsonl"), "q")
    python = load_problems(str(ROOT / "data" / "python_problems.jsonl"), "python")
    twins = twins_of(q_problems, python + load_problems(str(ROOT / "data" / "q_twins.jsonl"), "python"))
    problem = next(p for p in q_problems if p.id == "max-of-list")
    pool = build_q_pool(problem, twins[problem.id], judge)
    assert len(pool.tests) >= 100
    assert all(test.test_code.startswith("show solve[") for test in pool.tests)
    assert all(test.expected_output.lstrip("-").isdigit() for test in pool.tests)


def test_the_pool_command_writes_pools_and_says_what_it_built(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(UPPER.record()) + "\n" + json.dumps(replace(DIVIDE, domain=None).record()) + "\n")
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "data", "pool", str(source), str(out), "--language", "python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pools for 2 of 2 problems" in result.stdout and f"wrote {out}" in result.stdout
    assert "divide: no domain" in result.stdout and "suggested: isinstance(a, int)" in result.stdout
    written = load_problems(str(out), "python")
    assert [len(p.pool) > 0 for p in written] == [True, True]
    again = subprocess.run(
        [sys.executable, "-m", "data", "pool", str(source), str(source), "--language", "python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "OUT is the source itself" in again.stderr


def test_suggested_domain_reads_the_tests():
    assert suggested_domain(DIVIDE) == (
        "isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= 100 and "
        "isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 40"
    )
    assert own_calls(DIVIDE) == [(7, 2), (9, 3)]
    assert ("sign", 0, -1) in value_classes(-3)


def _fails_the_pool(judge, problem: Problem, program: str) -> bool:
    """Whether ``program`` fails ``problem`` judged on its tests and its whole pool (built here)."""
    pool = build_pool(problem, judge)
    assert pool.tests, pool.skipped
    [scored] = score(
        judge, [replace(problem, pool=tuple(pool.tests))], [program], ScoringArguments(), all_tests=True, extract=False
    )
    return scored.judgement.status == "failed"


def test_a_problem_naming_its_function_gets_a_suggested_domain():
    named = replace(
        DIVIDE,
        entry_point="divide",
        solution="def divide(a, b):\n    return None if b == 0 else a // b\n",
        tests=tuple(replace(t, test_code=t.test_code.replace("solve", "divide")) for t in DIVIDE.tests),
    )
    assert suggested_domain(named) == suggested_domain(DIVIDE) is not None


def test_a_suggested_domain_keeps_a_string_of_few_characters_to_them_and_words_to_none():
    brackets = Problem(
        "balanced",
        "python",
        "Write `solve(s)`: whether the brackets of `s` are balanced.",
        (
            Test("print(solve('(())'))", "True"),
            Test("print(solve('(()'))", "False"),
            Test("print(solve('()()'))", "True"),
        ),
        "def solve(s):\n    depth = 0\n    for c in s:\n        depth += 1 if c == '(' else -1\n"
        "        if depth < 0:\n            return False\n    return depth == 0\n",
    )
    assert suggested_domain(brackets).endswith("set(s) <= set('()')")
    assert "set(" not in suggested_domain(UPPER)


def test_with_suggested_domains_a_pool_reaches_the_classes_the_tests_leave_out(tmp_path):
    """Tests showing only positive numbers and lists without duplicates: the suggested domain lets the pool reach
    zero, negative items and duplicates, where a forgetful program fails."""
    largest = Problem(
        "running-largest",
        "python",
        "Write `solve(nums, k)`: the largest of the first `k` numbers of the list `nums`, or None if there are none.",
        (
            Test("print(solve([3, 1, 4], 2))", "3"),
            Test("print(solve([5, 9, 2, 6], 4))", "9"),
            Test("print(solve([7, 8], 1))", "7"),
        ),
        "def solve(nums, k):\n    return max(nums[:k], default=None)\n",
    )
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps(largest.record()) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "data", "pool", str(source), str(out), "--language", "python", "--domains", "suggested"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "running-largest: domain suggested and written, check it: isinstance(nums, list)" in result.stdout
    [written] = load_problems(str(out), "python")
    assert written.domain == suggested_domain(largest) and "0 <= k <= 50" in written.domain
    calls = [call for test in written.pool for call in printed_calls(test.test_code)]
    assert any(k == 0 for _, k in calls) and any(min(nums, default=0) < 0 for nums, _ in calls)
    assert any(len(set(nums)) < len(nums) for nums, _ in calls)
    from_zero = (
        "def solve(nums, k):\n    best = 0\n    for x in nums[:k]:\n        best = max(best, x)\n"
        "    return best if k else None\n"
    )
    with Judge(timeout=2.0, workers=2) as judge:
        [scored] = score(judge, [written], [from_zero], ScoringArguments(), all_tests=True, extract=False)
    assert scored.judgement.status == "failed"


def test_a_problem_answering_one_of_its_arguments_still_gets_a_pool(judge):
    """Every answer one argument or the other: one call a test, the echo of either would pass half the pool, and
    thinning to a third left nothing. Three calls a test keep a pool that a program wrong on ties fails."""
    shorter = Problem(
        "shorter-list",
        "python",
        "Write `solve(a, b)`: the list of `a` and `b` with fewer items; `a` when they have as many.",
        (
            Test("print(solve([1, 2], [3]))", "[3]"),
            Test("print(solve([1], [2, 3]))", "[1]"),
            Test("print(solve([4, 5, 6], [7, 8]))", "[7, 8]"),
        ),
        "def solve(a, b):\n    return b if len(b) < len(a) else a\n",
    )
    assert _fails_the_pool(judge, shorter, "def solve(a, b):\n    return a if len(a) < len(b) else b\n")


def test_a_number_written_in_strings_changes_everywhere_at_once(judge):
    """Fractions written as text: "1/5" and "5/1" become "1/49" and "49/1", still each other's inverse, where a
    program multiplying floats misses a whole product."""
    whole = Problem(
        "whole-product",
        "python",
        "Write `solve(x, n)`: whether the product of the fractions `x` and `n`, written 'a/b', is a whole number.",
        (
            Test("print(solve('1/5', '5/1'))", "True"),
            Test("print(solve('1/6', '2/1'))", "False"),
            Test("print(solve('7/10', '10/2'))", "False"),
        ),
        "def solve(x, n):\n    a, b = map(int, x.split('/'))\n    c, d = map(int, n.split('/'))\n"
        "    return (a * c) % (b * d) == 0\n",
        domain="all(int(p) > 0 for p in x.split('/') + n.split('/'))",
    )
    floats = (
        "def solve(x, n):\n    a, b = map(int, x.split('/'))\n    c, d = map(int, n.split('/'))\n"
        "    value = (a / b) * (c / d)\n    return value == int(value)\n"
    )
    assert _fails_the_pool(judge, whole, floats)


def test_a_number_written_out_meets_the_float_below_a_half(judge):
    rounding = Problem(
        "round-half-away",
        "python",
        "Write `solve(value)`: the integer nearest to the number written in `value`, halves away from zero.",
        (
            Test("print(solve('10'))", "10"),
            Test("print(solve('14.5'))", "15"),
            Test("print(solve('-14.5'))", "-15"),
            Test("print(solve('15.3'))", "15"),
        ),
        "from decimal import Decimal, ROUND_HALF_UP\n"
        "def solve(value):\n    return int(Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP))\n",
        domain="isinstance(value, str) and abs(float(value)) < 1000",
    )
    adding = "def solve(value):\n    x = float(value)\n    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)\n"
    assert _fails_the_pool(judge, rounding, adding)


def test_verify_says_each_pool_s_size_classes_and_catches(judge):
    from data.quality.adequacy import check_adequacy, pool_classes

    pool = build_pool(DIVIDE, judge)
    problem = replace(DIVIDE, pool=tuple(pool.tests))
    [adequacy] = check_adequacy([problem], judge)
    classes = pool_classes(problem)
    assert adequacy.pool == len(pool.tests) and adequacy.pool_classes == len(classes)
    assert {("sign", 1, -1), ("sign", 1, 0), ("sign", 1, 1)} <= classes  # negative, zero and positive arguments


def test_an_integer_meets_the_powers_of_another(judge):
    """243 and 3: where a float logarithm misses an exact power (math.log(243, 3) is 4.999...)."""
    power = Problem(
        "is-power-of",
        "python",
        "Write `solve(x, n)`: whether `x` is a whole power of `n` (n ** k == x for some k >= 0).",
        (
            Test("print(solve(8, 2))", "True"),
            Test("print(solve(5, 3))", "False"),
            Test("print(solve(16, 4))", "True"),
            Test("print(solve(12, 6))", "False"),
        ),
        "def solve(x, n):\n    power = 1\n    while power < x:\n        power *= n\n    return power == x\n",
        domain="2 <= n <= 20 and 1 <= x <= 10 ** 6",
    )
    logarithm = "import math\ndef solve(x, n):\n    return x == 1 or math.log(x, n) == int(math.log(x, n))\n"
    assert _fails_the_pool(judge, power, logarithm)


def test_a_suggested_domain_holds_where_a_parameter_hides_a_type(judge):
    """HumanEval's check_dict_case takes a parameter named ``dict``: ``isinstance(dict, dict)`` raised on every
    input, so every candidate was outside the domain and the pool came out empty."""
    keys_of_one_case = Problem(
        "keys-of-one-case",
        "python",
        "Write `solve(dict)`: whether every key of `dict` is a lower-case string.",
        (
            Test("print(solve({'a': 1, 'b': 2}))", "True"),
            Test("print(solve({'a': 1, 'B': 2}))", "False"),
            Test("print(solve({'x': 1, 5: 2}))", "False"),
            Test("print(solve({'ab': 3}))", "True"),
        ),
        "def solve(dict):\n    return all(isinstance(k, str) and k.islower() for k in dict)\n",
    )
    domain = suggested_domain(keys_of_one_case)
    assert domain.startswith("dict.__class__.__name__ == 'dict'")
    assert build_pool(replace(keys_of_one_case, domain=domain), judge).tests
