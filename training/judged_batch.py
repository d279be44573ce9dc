"""`JudgedBatch`: one training generation batch once judged, the one record every step observer reads.

The trainer makes it from TRL's rewards and the verdicts of the judge-backed reward function
(`rewards.JudgedRewards`), whether that function is synchronous or not, gathered from every rank so that each rank
holds the same batch. The observers: the per-problem records and the difficulty filter (training/problem_records.py,
training/difficulty.py) and the hidden-test watch (training/hidden_tests.py); the metrics they return are logged
with the step.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgedBatch:
    """The step a generation batch trains, its problem ids (each problem `group_size` times in a row), each
    completion's total reward as TRL forms it for the advantage (NaN: no reward function scored it), which passed
    every judged test (None: no reward function judged), and of those which passed their problem's hidden tests
    (None: the hidden-test watch is off; an item None: not judged on them), and with --feedback_turns the replies
    each completion wrote (training/feedback.py; None without)."""

    step: int
    ids: list[str]
    rewards: list[float]
    group_size: int
    passed_all: list[bool] | None = None
    passed_hidden: list[bool | None] | None = None
    replies: list[int] | None = None
