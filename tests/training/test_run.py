"""A run's checks and exits (training/run.py, training/stops.py), each called directly: no model is loaded, the judge
is real."""

import json
from dataclasses import replace

import pytest
from accelerate import PartialState

from cli import UsageError
from data import Problem, Test
from judging import Judge
from training.arguments import parse_args
from training.canary import CANARY_EXIT_CODE, CanaryAlarm
from training.run import TrainingRun, check_judge, interrupted, load_data, measure_trivial_shares, summary, verify_data
from training.run_folder import RunFolder
from training.stops import RunStopped, finish, stopped_by

DOUBLE = Problem(
    "double",
    "python",
    "Write solve(n) that returns 2 * n.",
    tuple(Test(f"print(solve({n}))", str(2 * n)) for n in (0, 3, 5, -2, 11)),
    "def solve(n):\n    return 2 * n\n",
    "train",
)
# Its tests expect 2 * n + 1 where n is 3: the solution fails one.
BROKEN = replace(
    DOUBLE, id="broken", tests=DOUBLE.tests[:1] + (Test("print(solve(3))", "7"),) + DOUBLE.tests[2:], split="test"
)
# Every test expects True: a constant passes them all.
GUESSABLE = Problem(
    "all-true",
    "python",
    "Write solve(n): whether n is even.",
    tuple(Test(f"print(solve({n}))", "True") for n in (2, 4, 6)),
    "def solve(n):\n    return n % 2 == 0\n",
    "test",
)


def write_jsonl(path, problems):
    path.write_text("".join(json.dumps(p.record()) + "\n" for p in problems))
    return path


def arguments(tmp_path, *flags):
    return parse_args(["--model", "unused", "--language", "python", "--output_dir", str(tmp_path / "run"), *flags])


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=5.0, workers=2) as judge:
        yield judge


def training_run(tmp_path, judge, train, evaluated, *flags):
    args = arguments(tmp_path, *flags)
    return TrainingRun(
        args, PartialState(), "problems.jsonl", train, evaluated, RunFolder(args.run_dir), None, None, judge
    )


def test_load_data_splits_by_the_records_and_names_an_empty_side(tmp_path):
    data = write_jsonl(tmp_path / "p.jsonl", [DOUBLE, BROKEN])
    train, evaluated = load_data(arguments(tmp_path, "--data", str(data)), str(data))
    assert (train, evaluated) == ([DOUBLE], [BROKEN]) and train[0].location == f"{data}:1"
    _, evaluated = load_data(arguments(tmp_path, "--data", str(data), "--eval_split", "train"), str(data))
    assert evaluated == [DOUBLE]
    with pytest.raises(UsageError, match="no training problems after the split; lower --test_fraction"):
        load_data(arguments(tmp_path, "--max_train_problems", "0"), str(data))
    only_train = write_jsonl(tmp_path / "train.jsonl", [DOUBLE])
    with pytest.raises(UsageError, match="no test problems to evaluate; raise --test_fraction"):
        load_data(arguments(tmp_path, "--test_fraction", "0"), str(only_train))


def test_the_judge_check_points_at_the_python_problems_when_q_is_missing(tmp_path):
    with Judge(timeout=5.0, workers=1, q_binary=str(tmp_path / "no-q")) as judge:
        with pytest.raises(UsageError, match="; to try the trainer without q, train on the bundled Python problems"):
            check_judge(judge, {"q"}, bundled=True)
        with pytest.raises(UsageError) as own_data:
            check_judge(judge, {"q"}, bundled=False)
        assert "bundled Python problems" not in str(own_data.value)
        check_judge(judge, {"python"}, bundled=True)


def test_trivial_shares_are_keyed_by_problem_and_read_back_from_the_cache(tmp_path, judge):
    cache = tmp_path / "trivial_shares.json"
    shares = measure_trivial_shares([DOUBLE, GUESSABLE], judge, PartialState(), cache)
    assert set(shares) == {DOUBLE, GUESSABLE} and shares[GUESSABLE].share == 1.0 and shares[DOUBLE].share < 1
    assert measure_trivial_shares([GUESSABLE, DOUBLE], None, PartialState(), cache) == shares  # nothing measured


def test_verify_data_names_the_command_that_lists_each_problem(tmp_path, judge):
    verify_data(training_run(tmp_path, judge, [DOUBLE], []))
    with pytest.raises(UsageError) as raised:
        verify_data(training_run(tmp_path, judge, [DOUBLE], [BROKEN, GUESSABLE]))
    # broken's tests are guessable too: `2 * x`, a cheap program, passes four of its five.
    assert str(raised.value).startswith("--verify_data: verified 3 problems: 1 broken, 2 guessable")
    assert str(raised.value).endswith(
        "`python -m data verify problems.jsonl --language python --max_trivial_share "
        "0.34 --max_tests_per_problem 5` lists each problem"
    )


def test_test_reward_function_prints_each_solutions_reward(tmp_path, judge, capsys):
    assert training_run(tmp_path, judge, [DOUBLE], []).test_reward_function() == 0
    assert training_run(tmp_path, judge, [DOUBLE, BROKEN], []).test_reward_function() == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3:] == [
        "double: reward 2.000 (5/5 tests, passed)",
        "broken: reward 0.800 (4/5 tests, failed)",
        "1/2 canonical solutions earn the full reward 2",
    ]
    # Under above_trivial, the shares are measured first: the constant True passes all of all-true's tests.
    above_trivial = training_run(tmp_path, judge, [GUESSABLE], [], "--partial_credit", "above_trivial")
    assert above_trivial.test_reward_function() == 0


def test_the_tracker_filters_only_when_asked(tmp_path, judge):
    assert not training_run(tmp_path, judge, [DOUBLE], []).tracker().filtering
    assert training_run(tmp_path, judge, [DOUBLE, BROKEN], [], "--difficulty_filter").tracker().filtering


def test_a_canary_stop_names_the_weights_it_leaves(tmp_path):
    run = RunFolder(tmp_path / "run")
    alarm = CanaryAlarm(step=0, passed=1, completions=4, canaries=["x~canary-changed"], samples_file="s.jsonl")
    assert alarm.weights(None, "base") == "model evaluated base (the run's start: nothing trained yet)"
    (run.checkpoints / "checkpoint-2").mkdir(parents=True)
    (run.checkpoints / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    latest = run.latest_checkpoint()
    assert replace(alarm, step=2).weights(latest, "base") == f"last checkpoint {latest} (the weights that passed it)"
    assert replace(alarm, step=3).weights(latest, "base") == f"last checkpoint {latest}"


def test_a_stop_prints_one_line_and_exits_with_its_code(capsys):
    alarm = CanaryAlarm(step=4, passed=1, completions=8, canaries=["x~canary-changed"], samples_file="s.jsonl")
    stop = stopped_by(alarm, "c", "base")
    assert finish(stop) == CANARY_EXIT_CODE == 3
    assert capsys.readouterr().err == f"rl_trainer.py: {alarm.what()}; last checkpoint c\n"
    assert finish(RunStopped(1, "vLLM server gone")) == 1
    assert capsys.readouterr().err == "rl_trainer.py: vLLM server gone\n"


def test_interrupted_and_summary_say_where_things_are(tmp_path):
    args = arguments(tmp_path)
    run = RunFolder(args.run_dir)
    assert interrupted(args).line == f"interrupted before the first checkpoint; nothing to resume in {run.root}"
    assert interrupted(arguments(tmp_path, "--eval_only")).line == "interrupted; the evaluation was not recorded"
    assert interrupted(args).code == 130
    assert summary(run, 3) == (
        f"finished 3 steps. Outputs in {run.root}/ (final model: {run.final_model}, logs: {run.logs})"
    )
