"""The line a run ends with is the last line a user sees: every stop closes the progress bars before writing it.

A run stopped by an exception leaves its bars open (transformers' `on_train_end` never runs) and held, with the
trainer, in a reference cycle; an open bar prints its last state whenever it is closed or freed, and a garbage
collection frees the cycle at no fixed time, so under load the bar came after the stop's line. Each stop here is
taken with real bars open as a stopped run has them: transformers' training bar and the evaluation's bar held in a
reference cycle, and the judge's bar of a `run_many` still judging in another thread. Then the judging finishes and
the cycle is collected, and the last line on standard error must still be the stop's.
"""

import gc
import threading
import time

import pytest
from tqdm.auto import tqdm
from tqdm.std import tqdm as std_tqdm
from transformers import ProgressCallback, TrainerControl, TrainerState

import rl_trainer
from judging import Judge, Test
from cli import UsageError
from training.canary import CANARY_EXIT_CODE, CanaryAlarm
from training.hidden_tests import HIDDEN_TESTS_EXIT_CODE, HiddenTestsAlarm
from training.stops import ENTRY, RunStopped, finish, stopped_by

# Each judged completion spins until its test's timeout: the judge's bar stays open for a second at least.
SPIN = ("while True:\n    pass\n", (Test("print(1)", "1"),), "python")


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=1.0) as judge:
        yield judge


def open_bars(judge) -> tuple[dict, threading.Thread]:
    """The bars of a run stopped mid-way, all open: the training bar (at 0 of 2 steps, as at an evaluation on
    start) and the evaluation's, in a reference cycle; and the judge's, judging in another thread."""
    progress = ProgressCallback()
    progress.on_train_begin(None, TrainerState(max_steps=2, is_world_process_zero=True), TrainerControl())
    evaluation = tqdm(total=3, desc="evaluation: generating", unit="problem")
    held = {"callbacks": [progress], "evaluation": evaluation}
    held["self"] = held
    judging = threading.Thread(target=judge.run_many, args=([SPIN] * 2,), kwargs={"progress": True})
    judging.start()
    deadline = time.monotonic() + 30
    while not any(bar.desc == "judging" for bar in list(std_tqdm._instances)):
        assert judging.is_alive() and time.monotonic() < deadline, "the judge's bar never opened"
        time.sleep(0.01)
    return held, judging


def canary_stop(tmp_path) -> tuple[int, str]:
    alarm = CanaryAlarm(0, 1, 1, ["sum~canary-changed"], str(tmp_path / "logs/canary/step-0.jsonl"))
    weights = "model evaluated tiny_model (the run's start: nothing trained yet)"
    return finish(stopped_by(alarm, None, "tiny_model")), f"{ENTRY}: {alarm.what()}; {weights}"


def hidden_tests_stop(tmp_path) -> tuple[int, str]:
    alarm = HiddenTestsAlarm(1, 2, 2, 0.2, {"sum": (2, 2)}, str(tmp_path / "logs/problem_stats.jsonl"))
    weights = "last checkpoint None (trained on that step's completions)"  # no checkpoint saved
    return finish(stopped_by(alarm, None, "tiny_model")), f"{ENTRY}: {alarm.what()}; {weights}"


def usage_error(tmp_path) -> tuple[int, str]:
    code = finish(RunStopped.usage(UsageError("--data x.jsonl: no such file")))
    return code, f"{ENTRY}: error: --data x.jsonl: no such file"


def ctrl_c(tmp_path, monkeypatch) -> tuple[int, str]:
    def interrupted_run(args, state):  # the user's Ctrl-C, as it lands in the training
        raise KeyboardInterrupt

    monkeypatch.setattr(rl_trainer, "run", interrupted_run)
    code = rl_trainer.main(["--model", "tiny_model", "--language", "python", "--output_dir", str(tmp_path / "run")])
    return code, f"{ENTRY}: interrupted before the first checkpoint; nothing to resume in {tmp_path / 'run'}"


@pytest.mark.parametrize(
    "stop, exit_code",
    [(canary_stop, CANARY_EXIT_CODE), (hidden_tests_stop, HIDDEN_TESTS_EXIT_CODE), (usage_error, 2), (ctrl_c, 130)],
)
def test_the_stop_line_comes_after_every_progress_bar(stop, exit_code, judge, tmp_path, monkeypatch, capsys):
    held, judging = open_bars(judge)
    args = (tmp_path, monkeypatch) if stop is ctrl_c else (tmp_path,)
    code, line = stop(*args)
    assert judging.is_alive(), "the judging ended before the stop: its bar was not open when the line was written"
    judging.join()
    del held
    gc.collect()
    err = capsys.readouterr().err
    assert code == exit_code
    # The bars were shown (a terminal shows a '\r'-separated bar update as a line of its own) ...
    assert "0/2" in err and "evaluation: generating" in err and "judging" in err
    # ... and none of them wrote after the stop's line.
    assert [part for part in err.splitlines() if part.strip()][-1] == line
    assert not std_tqdm._instances
