"""The hidden-test watch (training/hidden_tests.py): hidden tests in the record, judged only for completions that pass
every judged test and never in the reward, and the watch over real GRPO runs of the warm model.

The planted weak problems are the warm model's own fixture problems with one judged test, `print(solve(1))`
expecting `2`, which both of the model's programs pass (`x + 1` and `x * 2`), and their original test kept as a
hidden test, which one of the two fails: a completion that passes the judged test and fails a hidden one.
"""

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from trained_run_checks import lines
from trainer_runs import run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

from data import DataError, load_problems
from data.quality.adequacy import check_adequacy
from judging import Judge, Problem, Test
from rewards import ScoringArguments, make_reward_funcs, score
from rewards.scoring import ascore
from training.arguments import parse_args
from cli import UsageError
from training.hidden_tests import HIDDEN_TESTS_EXIT_CODE, HiddenTestWatch
from training.judged_batch import JudgedBatch

sys.path.insert(0, str(ROOT / "scripts"))
import plot_run  # noqa: E402

PLUS_ONE = "```python\nsolve = lambda x: x + 1\n```"
TIMES_TWO = "```python\nsolve = lambda x: x * 2\n```"
PLUS_FIVE = "```python\nsolve = lambda x: x + 5\n```"
# Double, judged on one input where adding one is right too; its hidden tests tell the two apart.
WEAK_DOUBLE = Problem(
    "weak-double",
    "python",
    "Return x times two.",
    (Test("print(solve(1))", "2"), Test("print(solve(3))", "6"), Test("print(solve(-4))", "-8", hidden=True)),
    "solve = lambda x: x * 2",
)
RUN = [
    "--language",
    "python",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "8",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--judge_timeout",
    "2",
    "--eval_pass_at_k",
    "false",
    "--hidden_tests_threshold",
    "0.2",
]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_a_hidden_test_is_read_and_written_back_and_judged_tests_are_the_others(tmp_path):
    path = write(tmp_path / "p.jsonl", [WEAK_DOUBLE.record()])
    (problem,) = load_problems(str(path), "python")
    assert problem == WEAK_DOUBLE and problem.record()["tests"][2] == {
        "test_code": "print(solve(-4))",
        "expected_output": "-8",
        "hidden": True,
    }
    assert "hidden" not in problem.record()["tests"][0]
    assert problem.judged_tests(1) == WEAK_DOUBLE.tests[:1] and problem.hidden_tests(1) == WEAK_DOUBLE.tests[1:]
    assert problem.judged_tests(5) == problem.judged_tests(None) == WEAK_DOUBLE.tests[:2]
    assert problem.hidden_tests(5) == WEAK_DOUBLE.tests[2:]


@pytest.mark.parametrize(
    "tests, message",
    [
        (
            [{"test_code": "print(1)", "expected_output": "1", "hidden": "yes"}],
            "tests[0].hidden must be true or false, got str",
        ),
        (
            [{"test_code": "print(1)", "expected_output": "1", "hidden": True}],
            'every test is hidden; the reward needs at least one test it judges (leave "hidden" out of one)',
        ),
        (
            [
                {"test_code": "print(1)", "expected_output": "1"},
                {"test_code": "print(2)", "expected_output": "2", "hidden": True},
                {"test_code": "print(3)", "expected_output": "3"},
            ],
            "tests[2] is judged but comes after hidden tests[1]; put the hidden tests last",
        ),
    ],
)
def test_a_bad_hidden_field_is_refused_with_its_line(tmp_path, tests, message):
    path = write(
        tmp_path / "p.jsonl",
        [
            {"id": "ok", "description": "d", "tests": [{"test_code": "print(1)", "expected_output": "1"}]},
            {"id": "bad", "description": "d", "tests": tests},
        ],
    )
    with pytest.raises(DataError) as error:
        load_problems(str(path), "python")
    assert str(error.value) == f"{path}:2: {message}"


def test_hidden_tests_never_enter_the_reward_and_are_judged_only_for_perfect_completions(judge):
    scoring = ScoringArguments(max_tests_per_problem=1)
    texts = [PLUS_ONE, TIMES_TWO, PLUS_FIVE, "no code"]
    scores = asyncio.run(ascore(judge, [WEAK_DOUBLE] * 4, texts, scoring, hidden_tests=True))
    assert [s.reward for s in scores] == [2.0, 2.0, 0.0, 0.0], "the same reward, right or wrong on hidden tests"
    assert [s.judgement.total for s in scores] == [1] * 4
    assert [s.passed_hidden for s in scores] == [False, True, None, None]
    assert [(s.hidden.passed, s.hidden.total) for s in scores[:2]] == [(0, 2), (2, 2)]
    assert all(s.hidden is None for s in asyncio.run(ascore(judge, [WEAK_DOUBLE] * 4, texts, scoring)))
    # Without --max_tests_per_problem cutting it, the second test is judged (the hidden one still is not).
    plus_one, times_two = score(judge, [WEAK_DOUBLE] * 2, texts[:2], ScoringArguments(max_tests_per_problem=None))
    assert (plus_one.judgement.total, plus_one.reward, times_two.reward) == (2, 0.5, 2.0)
    # Evaluation judges every test, hidden ones included.
    assert score(judge, [WEAK_DOUBLE], [PLUS_ONE], scoring, all_tests=True)[0].judgement.total == 3


def test_the_test_cases_reward_says_which_perfect_completions_passed_their_hidden_tests(judge):
    scoring = ScoringArguments(max_tests_per_problem=1)
    (watching,) = make_reward_funcs(["test_cases"], judge, scoring, [WEAK_DOUBLE], watch_hidden_tests=True)
    extras = {}
    rewards = asyncio.run(
        watching(
            prompts=["p"] * 3,
            completions=[PLUS_ONE, TIMES_TWO, PLUS_FIVE],
            id=["weak-double"] * 3,
            log_extra=lambda name, values: extras.update({name: values}),
        )
    )
    assert rewards.rewards == [2.0, 2.0, 0.0] and rewards.passed_all == [True, True, False]
    assert rewards.passed_hidden == [False, True, None]
    assert extras["hidden_tests_passed"] == ["0/2", "2/2", ""]
    (unwatched,) = make_reward_funcs(["test_cases"], judge, scoring, [WEAK_DOUBLE])
    assert asyncio.run(unwatched(prompts=["p"], completions=[PLUS_ONE], id=["weak-double"])).passed_hidden is None


def test_hidden_tests_do_not_make_weak_judged_tests_adequate(judge):
    """Verification's wrong programs run on the judged tests alone: the hidden ones protect no reward."""
    (weak,) = check_adequacy([WEAK_DOUBLE], judge, max_tests=1)
    (strong,) = check_adequacy([WEAK_DOUBLE], judge, max_tests=2)
    assert weak.survivors and not strong.survivors


def test_strengthen_writes_new_tests_as_hidden_after_the_problem_s_own(tmp_path):
    """`python -m data strengthen --hidden_tests N`: each problem gets up to N hidden tests (its own counted), last,
    answered by its solution; the judged tests are chosen from the others, so the reward never sees them."""
    lists = ([1, 2, 3], [4, -5], [-1, 2, 0])
    count = Problem(
        "count",
        "python",
        "Write solve(xs) that returns how many items of xs are positive.",
        (
            *(Test(f"print(solve({xs}))", str(sum(x > 0 for x in xs))) for xs in lists),
            Test("print(solve([-3, 5, 6, 7]))", "3", hidden=True),
        ),
        "def solve(xs):\n    return sum(x > 0 for x in xs)\n",
    )
    source, out = write(tmp_path / "in.jsonl", [count.record()]), tmp_path / "out.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "data", "strengthen", source, out, "--language", "python", "--hidden_tests", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r": count: \d+ tests added, 3 hidden tests added, mutation score", result.stdout)
    (strong,) = load_problems(str(out), "python")
    hidden = [test for test in strong.tests if test.hidden]
    assert [t.hidden for t in strong.tests] == [False] * (len(strong.tests) - 4) + [True] * 4
    assert hidden[0] == count.tests[-1] and len(set(hidden)) == 4
    assert strong.hidden_tests(5)[-4:] == tuple(hidden), "tests beyond the judged 5 are hidden tests too"
    assert not {(t.test_code, t.expected_output) for t in hidden} & {
        (t.test_code, t.expected_output) for t in strong.judged_tests(None)
    }
    with Judge(timeout=2.0) as judge:
        (solved,) = score(judge, [strong], [strong.solution], ScoringArguments(), all_tests=True, extract=False)
        (adequacy,) = check_adequacy([strong], judge)
    assert solved.judgement.passed == solved.judgement.total == len(strong.tests)
    assert not adequacy.survivors, "the judged tests alone reject the wrong programs"


def judged(step: int, ids: list[str], passed_hidden: list[bool | None] | None) -> JudgedBatch:
    return JudgedBatch(step, ids, [2.0] * len(ids), 4, [True] * len(ids), passed_hidden)


def test_the_watch_counts_a_step_and_sounds_above_its_threshold():
    watch = HiddenTestWatch(threshold=0.25, action="warn", records="RUN/logs/problem_stats.jsonl")
    ids = ["a"] * 4 + ["b"] * 4
    metrics, alarm = watch.observe(judged(3, ids, [True, True, True, False, None, None, True, None]))
    assert metrics == {"hidden_tests/checked": 5.0, "hidden_tests/failed": 1.0, "hidden_tests/failed_share": 0.2}
    assert alarm is None
    metrics, alarm = watch.observe(judged(4, ids, [False, False, True, None, True, False, None, None]))
    assert metrics["hidden_tests/failed_share"] == 0.6
    assert alarm.what() == (
        "hidden tests: 3 of 5 completions that passed every judged test failed a hidden test at "
        "step 4 (a 2/3, b 1/2; share 0.60, above --hidden_tests_threshold 0.25), so the policy "
        "passes these problems' judged tests without solving them; each problem's counts in "
        "RUN/logs/problem_stats.jsonl"
    )
    assert not watch.sound(alarm, log=False) and HiddenTestWatch(action="stop").sound(alarm, log=False)
    # A step with no perfect completion logs the counts only: a share of nothing is no 0.
    assert watch.observe(judged(5, ids, [None] * 8)) == (
        {"hidden_tests/checked": 0.0, "hidden_tests/failed": 0.0},
        None,
    )
    # At the threshold exactly it stays quiet; 0 sounds at the first failure.
    assert watch.observe(judged(6, ["a"] * 4, [False, True, True, True]))[1] is None
    assert HiddenTestWatch(threshold=0).observe(judged(6, ["a"] * 4, [False, True, True, True]))[1] is not None
    # A batch judged without the watch has nothing for it.
    assert watch.observe(judged(7, ids, None)) == ({}, None)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--hidden_tests_threshold", "1"], "--hidden_tests_threshold 1.0: must be a share in [0, 1)"),
        (["--hidden_tests_threshold", "-0.1"], "--hidden_tests_threshold -0.1: must be a share in [0, 1)"),
        (
            ["--hidden_tests_action", "loud"],
            "--hidden_tests_action/--hidden-tests-action: invalid choice: 'loud' (choose from 'warn', 'stop', 'off')",
        ),
    ],
)
def test_bad_watch_flags_are_refused(flags, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_args(["--language", "python", *flags])


def warm_problems(split: str = "train") -> list[dict]:
    return [
        json.loads(line) for line in WARM_PYTHON_DATA.read_text().splitlines() if json.loads(line)["split"] == split
    ]


def weak(record: dict) -> dict:
    """A planted weak problem: judged on `solve(1)` alone, where both of the warm model's programs print 2; its
    original test kept, hidden."""
    return {
        **record,
        "id": f"weak-{record['id']}",
        "tests": [{"test_code": "print(solve(1))", "expected_output": "2"}, {**record["tests"][0], "hidden": True}],
    }


def honest(record: dict, index: int) -> dict:
    """The fixture problem with a second test its solution passes: marked hidden on every other problem, else
    hidden by --max_tests_per_problem 1 alone."""
    scope = {}
    exec(record["solution"], scope)
    second = {
        "test_code": "print(solve(0), solve(100))",
        "expected_output": f"{scope['solve'](0)} {scope['solve'](100)}",
    }
    return {**record, "tests": [*record["tests"], {**second, "hidden": True} if index % 2 else second]}


def train_steps(run: Path) -> list[dict]:
    return [m for m in lines(run / "logs/metrics.jsonl") if "reward" in m]


@pytest.mark.slow
def test_a_planted_weak_problem_sounds_the_watch_and_warn_trains_on(warm_model, tmp_path):
    problems = warm_problems()
    data = write(
        tmp_path / "planted.jsonl",
        [weak(r) if r["id"].startswith("double") else honest(r, i) for i, r in enumerate(problems)],
    )
    run = tmp_path / "warned"
    result = run_trainer(
        "--model",
        warm_model,
        "--data",
        data,
        "--output_dir",
        run,
        *RUN,
        "--max_steps",
        "3",
        "--max_tests_per_problem",
        "1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = train_steps(run)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert sum(s["hidden_tests/failed"] for s in steps) > 0
    sounded = [s["step"] for s in steps if s.get("hidden_tests/failed_share", 0) > 0.2]
    warnings = [line for line in result.stderr.splitlines() if "(--hidden_tests_action warn)" in line]
    assert sounded and len(warnings) == len(sounded)
    assert all(f" at step {step} (weak-double-" in line for step, line in zip(sounded, warnings))
    records = lines(run / "logs/problem_stats.jsonl")
    assert {r["id"] for r in records if r["hidden_failed"]} <= {f"weak-double-{n}" for n in range(4)}
    assert sum(r["hidden_failed"] for r in records) == sum(s["hidden_tests/failed"] for s in steps)
    assert any(r["hidden_checked"] for r in records if not r["id"].startswith("weak"))
    assert "hidden_tests/failed_share=" in (run / "logs/training_log.txt").read_text()
    assert (run / "final_model/config.json").exists()
    written, _ = plot_run.plot_run(run, tmp_path / "plots")
    assert tmp_path / "plots/hidden_tests.png" in written


@pytest.mark.slow
def test_stop_ends_the_run_after_that_steps_checkpoint_with_its_own_exit_code(warm_model, tmp_path):
    data = write(tmp_path / "weak.jsonl", [weak(r) for r in warm_problems()])
    run = tmp_path / "stopped"
    # Checkpoints only every 5 steps: the checkpoint at step 1 is the watch's own.
    result = run_trainer(
        "--model",
        warm_model,
        "--data",
        data,
        "--output_dir",
        run,
        *RUN,
        "--max_steps",
        "3",
        "--save_steps",
        "5",
        "--hidden_tests_action",
        "stop",
    )
    assert result.returncode == HIDDEN_TESTS_EXIT_CODE == 4, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rl_trainer.py: hidden tests: ") and " failed a hidden test at step 1 (weak-" in last
    checkpoint = run / "checkpoints/checkpoint-1"
    assert last.endswith(
        f"each problem's counts in {run / 'logs/problem_stats.jsonl'}; last checkpoint "
        f"{checkpoint} (trained on that step's completions)"
    )
    assert (checkpoint / "model.safetensors").exists() and not (run / "final_model").exists()
    (step,) = train_steps(run)
    assert step["step"] == 1 and step["hidden_tests/failed_share"] > 0.2
    assert all(r["step"] == 1 for r in lines(run / "logs/problem_stats.jsonl"))


@pytest.mark.slow
def test_an_honest_run_keeps_the_watch_at_zero(warm_model, tmp_path):
    data = write(tmp_path / "honest.jsonl", [honest(r, i) for i, r in enumerate(warm_problems())])
    run = tmp_path / "honest"
    result = run_trainer(
        "--model",
        warm_model,
        "--data",
        data,
        "--output_dir",
        run,
        *RUN,
        "--max_steps",
        "3",
        "--max_tests_per_problem",
        "1",
        "--hidden_tests_threshold",
        "0",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = train_steps(run)
    assert any(s["reward_std"] > 0 for s in steps), "no signal: the run trained on nothing"
    assert sum(s["hidden_tests/checked"] for s in steps) > 0, "nothing was checked: a 0 that says nothing"
    assert all(s["hidden_tests/failed"] == 0 and s.get("hidden_tests/failed_share", 0) == 0 for s in steps)
    records = lines(run / "logs/problem_stats.jsonl")
    assert all(r["hidden_failed"] == 0 for r in records) and "hidden tests:" not in result.stderr


@pytest.mark.slow
def test_a_synchronous_judge_backed_reward_feeds_the_records_and_the_watch(warm_model, judge, tmp_path):
    """The test-case reward called synchronously, as TRL calls a plain function: its verdicts still reach the
    per-problem records (`passed`, the hidden-test counts) and the hidden-test watch, as an async one's do."""
    from datasets import Dataset
    from trl import GRPOConfig

    from training.problem_records import ProblemTracker
    from training.prompts import prompt_rows
    from training.trainer import QGRPOTrainer

    problems = load_problems(str(write(tmp_path / "weak.jsonl", [weak(r) for r in warm_problems()])), "python")
    (judged,) = make_reward_funcs(
        ["test_cases"], judge, ScoringArguments(max_tests_per_problem=1), problems, watch_hidden_tests=True
    )

    def test_cases(prompts, completions, **kwargs):
        return asyncio.run(judged(prompts, completions, **kwargs))

    records = tmp_path / "problem_stats.jsonl"
    config = GRPOConfig(
        output_dir=str(tmp_path / "checkpoints"),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
    )
    trainer = QGRPOTrainer(
        model=str(warm_model),
        reward_funcs=[test_cases],
        args=config,
        train_dataset=Dataset.from_list(prompt_rows(problems, False, "plain")),
        tracker=ProblemTracker(records),
        hidden_watch=HiddenTestWatch(threshold=0.2),
    )
    trainer.train()
    written = lines(records)
    assert written and all(r["passed"] is not None and r["hidden_checked"] is not None for r in written)
    assert sum(r["passed"] for r in written) > 0 and sum(r["hidden_failed"] for r in written) > 0
    step = next(logged for logged in trainer.state.log_history if "reward" in logged)
    assert step["hidden_tests/checked"] == sum(r["hidden_checked"] for r in written) > 0
    assert step["reward_std"] > 0, "no signal: the step trained on nothing"
