"""How a run ends early: one `RunStopped` for every reason (a bad input, a canary, the hidden-test watch, a vLLM
server that stopped answering, Ctrl-C), printed once by `finish` as the last line a user sees.

A watch that can stop a run (training/canary.py, training/hidden_tests.py) reports an `Alarm`; `stopped_by` turns it
into the run's stop once the run knows which weights it leaves.
"""

import os
import time
from typing import Protocol

from cli import UsageError
from training.console import print_last

ENTRY = "rl_trainer.py"
USAGE_EXIT_CODE = 2
VLLM_EXIT_CODE = 1
INTERRUPTED_EXIT_CODE = 130
# A bad input fails on every rank, each at its own moment: the other ranks wait this long before exiting, so that
# the main one's line is out before the launcher, seeing a rank fail, stops the rest.
RANK_EXIT_DELAY_S = 5


class RunStopped(Exception):
    """A run that ends before it finishes: its exit ``code``, what stopped it (``reason``), and the weights it leaves
    (``weights``: a checkpoint, the model it evaluated, where to resume; None when that says nothing)."""

    def __init__(self, code: int, reason: str, weights: str | None = None):
        super().__init__(reason)
        self.code, self.reason, self.weights = code, reason, weights

    @property
    def line(self) -> str:
        """The one line the run ends with, after the entry point's name."""
        return self.reason if self.weights is None else f"{self.reason}; {self.weights}"

    @classmethod
    def usage(cls, error: UsageError) -> "RunStopped":
        """A bad input, found while checking or late: the message, exit 2."""
        return cls(USAGE_EXIT_CODE, f"error: {error}")


class Alarm(Protocol):
    """What a watch reports when it finds that the rewards can be gamed, shaped alike for every watch."""

    exit_code: int

    def what(self) -> str:
        """The finding, in one sentence."""

    def weights(self, latest_checkpoint: str | None, model: str) -> str:
        """Which weights a run stopped by it leaves, given its newest checkpoint and the model it started from."""


def stopped_by(alarm: Alarm, latest_checkpoint: str | None, model: str) -> RunStopped:
    return RunStopped(alarm.exit_code, alarm.what(), alarm.weights(latest_checkpoint, model))


def main_rank() -> bool:
    """Whether this is the launch's rank 0 (or a lone process). Read from the launcher's RANK: accelerate's process
    state says "main" on every rank of a CPU launch until the training settings set it up."""
    return os.environ.get("RANK", "0") == "0"


def finish(stop: RunStopped) -> int:
    """Print the stop's line on the main rank (the progress bars closed first, so it is the last line); the exit
    code."""
    if main_rank():
        print_last(f"{ENTRY}: {stop.line}")
    elif stop.code == USAGE_EXIT_CODE:
        time.sleep(RANK_EXIT_DELAY_S)
    return stop.code
