"""Per-problem records of the training groups, kept for every run, and the tracker that sees each generation batch.

A group is one problem's `num_generations` completions. They may be spread over several ranks, so everything here
works on the gathered batch (`JudgedBatch`, training/judged_batch.py), which every rank holds alike.

`logs/problem_stats.jsonl` gets one line per problem per step in which it was sampled: the step the generation
trains (`global_step + 1` when it is made; with TRL's default `steps_per_generation = gradient_accumulation_steps`
every step has its own generation), the problem id, the samples, the mean and the (sample) std of the weighted total
reward, how many completions passed every test (`passed`, null when the run has no `test_cases` reward), and of
those, how many were judged on the problem's hidden tests and how many failed one (`hidden_checked`,
`hidden_failed`; null without the hidden-test watch, training/hidden_tests.py), and with `--feedback_turns` the
replies its completions wrote in all (`replies`; training/feedback.py). `scripts/plot_run.py` draws them as
problems x steps.

With `--difficulty_filter` (training/difficulty.py) the tracker also has the filter choose each batch's problems
before it is generated and tells it which groups were zero-signal once the batch is judged.
"""

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback

from training.difficulty import DifficultyFilter
from training.judged_batch import JudgedBatch


@dataclass
class Group:
    """One problem's completions in one generation: their total rewards (NaN: unscorable, e.g. a sandbox error),
    how many passed every test (None without the test_cases reward), and of those how many were judged on hidden
    tests and how many failed one (None without the hidden-test watch)."""

    id: str
    rewards: list[float]
    passed: int | None
    hidden_checked: int | None = None
    hidden_failed: int | None = None
    replies: int | None = None  # with --feedback_turns, the replies its completions wrote in all

    @property
    def zero_signal(self) -> bool:
        scored = [r for r in self.rewards if not math.isnan(r)]
        return len(scored) < 2 or math.isclose(max(scored) - min(scored), 0.0, abs_tol=1e-8)


def group_ids(ids: list[str], size: int) -> list[str]:
    """The problem of each group of ``size`` consecutive completions.

    Raises RuntimeError when a group mixes problems: TRL's layout (each prompt `num_generations` times in a row,
    over all ranks) is broken, so the rewards would be normalised across different problems.
    """
    if len(ids) % size:
        raise RuntimeError(f"generation batch of {len(ids)} completions is not whole groups of {size}")
    for start in range(0, len(ids), size):
        block = ids[start : start + size]
        if len(set(block)) != 1:
            raise RuntimeError(
                f"a group of {size} completions mixes problems {sorted(set(block))}: the ranks "
                "disagree on the order of the generation batch"
            )
    return ids[::size]


def groups_of(batch: JudgedBatch) -> list[Group]:
    """A judged generation batch split into its groups."""
    size, groups = batch.group_size, []
    for index, pid in enumerate(group_ids(batch.ids, size)):
        part = slice(index * size, (index + 1) * size)
        passed = None if batch.passed_all is None else sum(batch.passed_all[part])
        group = Group(pid, batch.rewards[part], passed)
        if batch.passed_hidden is not None:
            verdicts = [v for v in batch.passed_hidden[part] if v is not None]
            group.hidden_checked, group.hidden_failed = len(verdicts), verdicts.count(False)
        if batch.replies is not None:
            group.replies = sum(batch.replies[part])
        groups.append(group)
    return groups


def problem_record(step: int, problem_id: str, groups: list[Group]) -> dict:
    """One line of problem_stats.jsonl: a problem's groups of one step, merged."""
    rewards = [r for g in groups for r in g.rewards]
    scored = [r for r in rewards if not math.isnan(r)]
    passed = None if groups[0].passed is None else sum(g.passed for g in groups)
    watched = groups[0].hidden_checked is not None
    record = {
        "step": step,
        "id": problem_id,
        "samples": len(rewards),
        "mean_reward": round(statistics.fmean(scored), 6) if scored else None,
        "reward_std": round(statistics.stdev(scored), 6) if len(scored) > 1 else None,
        "passed": passed,
        "hidden_checked": sum(g.hidden_checked for g in groups) if watched else None,
        "hidden_failed": sum(g.hidden_failed for g in groups) if watched else None,
    }
    if groups[0].replies is not None:
        record["replies"] = sum(g.replies for g in groups)
    return record


@dataclass(frozen=True)
class Rewrite:
    """A generation batch as the filter chose it (gathered ids, each problem `size` times in a row) and how many of
    its problems it swapped."""

    ids: list[str]
    swapped: int = 0


class ProblemTracker:
    """Sees every generation batch of training: rewrites it through the difficulty filter (if any), records its
    groups, and updates the filter. `records` is the problem_stats.jsonl path on the main process, None on the
    others."""

    def __init__(self, records: Path | None, difficulty: DifficultyFilter | None = None):
        self.records = records
        self.filter = difficulty
        self.pending: dict[int, list[Group]] = defaultdict(list)
        self.expected: Rewrite | None = None  # the batch this rank chose; every rank must have chosen the same

    @property
    def filtering(self) -> bool:
        return self.filter is not None

    def rewrite(self, ids: list[str], size: int) -> Rewrite:
        """The generation batch (gathered ids, each problem `size` times in a row) after the filter's choice."""
        if self.filter is None:
            return Rewrite(ids)
        batch = group_ids(ids, size)
        chosen = self.filter.choose(batch)
        return Rewrite([pid for pid in chosen for _ in range(size)], sum(a != b for a, b in zip(batch, chosen)))

    def expect(self, rewrite: Rewrite) -> None:
        """The batch the next `observe` must see: the one this rank chose to generate."""
        self.expected = rewrite

    def observe(self, batch: JudgedBatch) -> dict[str, float]:
        """Record one judged generation batch; returns the metrics to log with its step.

        Raises RuntimeError when the batch the ranks generated for is not the one this rank chose: the ranks
        disagreed on the rewrite.
        """
        expected, self.expected = self.expected, None
        if expected is not None and batch.ids != expected.ids:
            raise RuntimeError(
                "the ranks generated for a different batch than this rank chose: the difficulty "
                "filter's state differs between ranks"
            )
        groups = groups_of(batch)
        self.pending[batch.step] += groups
        if self.filter is None:
            return {}
        self.filter.update(groups)
        return {
            "difficulty/settled": float(len(self.filter.settled())),
            "difficulty/swapped": float(expected.swapped if expected else 0),
        }

    def flush(self, upto_step: float = math.inf) -> None:
        """Write the records of the steps up to `upto_step` (main process; the others only drop them)."""
        done = sorted(step for step in self.pending if step <= upto_step)
        lines = []
        for step in done:
            by_problem: dict[str, list[Group]] = defaultdict(list)
            for group in self.pending.pop(step):
                by_problem[group.id].append(group)
            lines += [json.dumps(problem_record(step, pid, groups)) + "\n" for pid, groups in by_problem.items()]
        if self.records is not None and lines:
            with self.records.open("a") as f:
                f.writelines(lines)

    def save(self, checkpoint: Path) -> None:
        """The filter's state into ``checkpoint`` (main process)."""
        if self.filter is not None and self.records is not None:
            self.filter.save(checkpoint)

    def restore(self, checkpoint: str | Path) -> None:
        """On resume: the filter's state as it was saved with `checkpoint` (every rank reads the same file)."""
        if self.filter is not None:
            self.filter.restore(Path(checkpoint))

    def callback(self) -> TrainerCallback:
        return ProblemTrackerCallback(self)


class ProblemTrackerCallback(TrainerCallback):
    """Writes each step's records when the step ends and the filter's state into every checkpoint."""

    def __init__(self, tracker: ProblemTracker):
        self.tracker = tracker

    def on_step_end(self, args, state, control, **kwargs):
        self.tracker.flush(state.global_step)

    def on_save(self, args, state, control, **kwargs):
        self.tracker.save(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    def on_train_end(self, args, state, control, **kwargs):
        self.tracker.flush()
