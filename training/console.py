"""What a run prints while it trains: transformers' progress bar and one short line per logged step.

transformers prints every logged dict whole (about 40 keys a step under GRPO); every key still goes to
logs/metrics.jsonl, logs/training_log.txt (the longer readable line) and wandb.
"""

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
