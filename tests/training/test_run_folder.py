"""The run folder decides what a session resumes, checks it before any model loads, and says why in one log line."""

import json
import logging

import pytest

from cli import UsageError
from training.arguments import parse_args
from training.run_folder import Resume, RunFolder


def checkpoints(run: RunFolder, states: dict[int, str | None]) -> None:
    """checkpoint-N folders with the given trainer_state.json text (None: none written)."""
    for step, state in states.items():
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if state is not None:
            (folder / "trainer_state.json").write_text(state)


def whole(step: int, max_steps: int = 4) -> str:
    return json.dumps({"global_step": step, "max_steps": max_steps})


def grpo(run: RunFolder, *flags):
    return parse_args(["--model", "m", "--language", "python", "--output_dir", str(run.root), *flags]).grpo


def test_a_new_run_resumes_nothing(tmp_path, caplog):
    run = RunFolder(tmp_path)
    checkpoints(run, {2: whole(2)})
    with caplog.at_level(logging.INFO, logger="training.run_folder"):
        assert run.resume(grpo(run)) is None
    assert not caplog.records


def test_latest_is_the_newest_whole_checkpoint_and_the_log_says_which_were_skipped(tmp_path, caplog):
    run = RunFolder(tmp_path)
    checkpoints(run, {2: whole(2), 3: '{"global_st', 4: None})
    with caplog.at_level(logging.INFO, logger="training.run_folder"):
        resume = run.resume(grpo(run, "--resume_from_checkpoint", "latest", "--max_steps", "4"))
    newest = str(run.checkpoints / "checkpoint-2")
    assert resume == Resume(
        newest,
        2,
        f"--resume_from_checkpoint latest: the newest whole checkpoint in "
        f"{run.checkpoints} (checkpoint-3, checkpoint-4 skipped: cut off while being "
        f"saved)",
    )
    (line,) = [record.getMessage() for record in caplog.records]
    assert line == (
        f"resuming from {newest} at step 2 ({resume.why}); what was logged after step 2 is dropped, and "
        "--eval_on_start is not repeated"
    )


def test_a_named_checkpoint_is_checked_against_the_schedule_before_anything_loads(tmp_path):
    run = RunFolder(tmp_path)
    checkpoints(run, {2: whole(2, max_steps=3)})
    named = run.checkpoints / "checkpoint-2"
    assert (
        run.resume(grpo(run, "--resume_from_checkpoint", str(named), "--max_steps", "3")).why
        == "named by --resume_from_checkpoint"
    )
    with pytest.raises(UsageError, match=r"--max_steps 5: .* is from a run of 3 steps"):
        run.resume(grpo(run, "--resume_from_checkpoint", str(named), "--max_steps", "5"))
    with pytest.raises(UsageError, match="no checkpoint in"):
        RunFolder(tmp_path / "empty").resume(grpo(run, "--resume_from_checkpoint", "latest"))


def test_starting_a_resumed_run_cuts_the_logs_back_to_the_checkpoint(tmp_path):
    run = RunFolder(tmp_path)
    run.prepare(overwrite=False, resume=None)
    run.metrics.write_text("".join(json.dumps({"step": step, "reward": 0.5}) + "\n" for step in (1, 2, 3)))
    run.start({"max_steps": 3}, Resume(str(run.checkpoints / "checkpoint-2"), 2, "named"))
    assert [json.loads(line)["step"] for line in run.metrics.read_text().splitlines()] == [1, 2]
    assert run.training_log.read_text().startswith("--- resumed from checkpoint-2 at ")
    assert "max_steps: 3" in run.config.read_text()
