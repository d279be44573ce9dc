"""What a run prints while it trains: transformers' progress bar and one short line per logged step, and the line
it ends with.

transformers prints every logged dict whole (about 40 keys a step under GRPO); every key still goes to
logs/metrics.jsonl, logs/training_log.txt (the longer readable line) and wandb.
"""

import sys

from transformers import ProgressCallback, TrainerCallback
from transformers.trainer_callback import PrinterCallback

from training.run_folder import readable_line

CONSOLE_KEYS = ("reward", "status/passed", "learning_rate", "step_time")


def console_line(step: int, max_steps: int, logs: dict) -> str:
    return readable_line(step, max_steps, logs, CONSOLE_KEYS)


class StepLineProgress(ProgressCallback):
    """The progress bar, with a short line per logged step written above it (rank 0)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            self.training_bar.write(console_line(state.global_step, state.max_steps, logs))


class StepLinePrinter(TrainerCallback):
    """A short line per logged step, without a bar (--disable_tqdm) (rank 0)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            print(console_line(state.global_step, state.max_steps, logs), flush=True)


def use_step_lines(trainer) -> None:
    """Replace the trainer's printing of whole log dicts with step lines."""
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(StepLineProgress)
    if trainer.pop_callback(PrinterCallback) is not None:
        trainer.add_callback(StepLinePrinter)


def close_progress_bars() -> None:
    """Close every live tqdm bar of this process: transformers' training bar, the evaluation's, the judge's (in any
    thread). A bar left open prints its last state whenever it is closed or freed (a run stopped by an exception
    leaves the trainer and its bars in a reference cycle, freed at a garbage collection that may come at any time),
    so after this no bar writes again. Nested bars close innermost first."""
    std = sys.modules.get("tqdm.std")
    if std is None or not std.tqdm._instances:  # tqdm never loaded, or no bar open
        return
    with std.tqdm.get_lock():
        bars = list(std.tqdm._instances)
    for bar in sorted(bars, key=lambda b: -abs(getattr(b, "pos", 0))):
        bar.close()


def print_last(line: str) -> None:
    """Print the line a run ends with on standard error, after closing every progress bar, so that it is the last
    line a user sees."""
    close_progress_bars()
    print(line, file=sys.stderr, flush=True)
