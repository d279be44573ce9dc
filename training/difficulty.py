"""Per-problem records of the training groups, and the online difficulty filter (`--difficulty_filter`).

A group is one problem's `num_generations` completions. They may be spread over several ranks, so everything here
works on the gathered rewards and the gathered problem ids of a generation batch, which every rank holds alike.

Records: `logs/problem_stats.jsonl` gets one line per problem per step in which it was sampled: the step the
generation trains (`global_step + 1` when it is made; with TRL's default `steps_per_generation =
gradient_accumulation_steps` every step has its own generation), the problem id, the samples, the mean and the
(sample) std of the weighted total reward, how many completions passed every test (`passed`, null when the
run has no `test_cases` reward), and of those, how many were judged on the problem's hidden tests and how many
failed one (`hidden_checked`, `hidden_failed`; null without the hidden-test watch, training/hidden_tests.py),
and with `--feedback_turns` the replies its completions wrote in all (`replies`; training/feedback.py).
`scripts/plot_run.py` draws them as problems x steps.

Filter: a group is zero-signal when all its scored completions earned the same total reward (all passed, or all
failed alike): its advantages are zero, so it costs a generation and judging and teaches nothing. TRL's
`frac_reward_zero_std` counts the same groups (with its default per-group scaling). A problem is *settled* when
its last `window` groups were all zero-signal; one group with a spread unsettles it.

The dataloader keeps TRL's `RepeatSampler` order untouched. Just before each generation, the filter rewrites the
generation batch's problems: each settled problem keeps its slot with probability `recheck` (a re-check, so nothing
is dropped for good) and otherwise hands it to an unsettled problem that is not in the batch yet (problems never
seen are unsettled). Every problem of the new batch still fills `num_generations` consecutive slots and the batch
keeps its size. When no problem is settled, or every problem is, or no unsettled problem is left to take a slot,
the batch is the normal order's. The choice uses the filter's state and a generator seeded with (seed, number of
generations so far), both the same on every rank, so every rank rewrites the batch identically.

Why rewrite at generation time rather than weight the sampler: the dataloader draws indices ahead of training
(gradient accumulation batches, accelerate's one-batch prefetch, and each rank pulling the other ranks' batches
to skip them), at moments that differ between ranks relative to the filter's updates. At generation time every
rank has seen exactly the same groups.

The state (each problem's recent zero-signal flags and the generation count) is saved into every checkpoint as
`difficulty_filter.json` and read back on resume.
"""

import json
import logging
import math
import os
import random
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

STATE_FILE = "difficulty_filter.json"


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


def groups_of(ids: list[str], rewards: list[float], passed_all: list[bool] | None, size: int,
              passed_hidden: list[bool | None] | None = None, replies: list[int] | None = None) -> list[Group]:
    """Split a gathered generation batch into its groups of `size` consecutive completions; `passed_hidden` says
    which passed their problem's hidden tests (None: not judged on them), for the whole batch or None.

    Raises RuntimeError when a group mixes problems: TRL's layout (each prompt `num_generations` times in a row,
    over all ranks) is broken, so the rewards would be normalised across different problems.
    """
    if len(ids) % size:
        raise RuntimeError(f"generation batch of {len(ids)} completions is not whole groups of {size}")
    groups = []
    for start in range(0, len(ids), size):
        block = ids[start : start + size]
        if len(set(block)) != 1:
            raise RuntimeError(f"a group of {size} completions mixes problems {sorted(set(block))}: the ranks "
                               "disagree on the order of the generation batch")
        passed = None if passed_all is None else sum(passed_all[start : start + size])
        group = Group(block[0], rewards[start : start + size], passed)
        if passed_hidden is not None:
            verdicts = [v for v in passed_hidden[start : start + size] if v is not None]
            group.hidden_checked, group.hidden_failed = len(verdicts), verdicts.count(False)
        if replies is not None:
            group.replies = sum(replies[start : start + size])
        groups.append(group)
    return groups


def problem_record(step: int, problem_id: str, groups: list[Group]) -> dict:
    """One line of problem_stats.jsonl: a problem's groups of one step, merged."""
    rewards = [r for g in groups for r in g.rewards]
    scored = [r for r in rewards if not math.isnan(r)]
    passed = None if groups[0].passed is None else sum(g.passed for g in groups)
    watched = groups[0].hidden_checked is not None
    record = {
        "step": step, "id": problem_id, "samples": len(rewards),
        "mean_reward": round(statistics.fmean(scored), 6) if scored else None,
        "reward_std": round(statistics.stdev(scored), 6) if len(scored) > 1 else None,
        "passed": passed,
        "hidden_checked": sum(g.hidden_checked for g in groups) if watched else None,
        "hidden_failed": sum(g.hidden_failed for g in groups) if watched else None,
    }
    if groups[0].replies is not None:
        record["replies"] = sum(g.replies for g in groups)
    return record


class DifficultyFilter:
    """Which problems are settled, and the rewrite of a generation batch that gives their slots to others."""

    def __init__(self, ids: list[str], window: int, recheck: float, seed: int):
        self.ids = list(ids)
        self.window = window
        self.recheck = recheck
        self.seed = seed
        self.recent: dict[str, list[bool]] = {}  # each problem's last `window` zero-signal flags, oldest first
        self.generations = 0

    def settled(self) -> set[str]:
        return {pid for pid, flags in self.recent.items() if len(flags) >= self.window and all(flags)}

    def update(self, groups: list[Group]) -> None:
        for group in groups:
            flags = self.recent.setdefault(group.id, [])
            flags.append(group.zero_signal)
            del flags[: -self.window]
        self.generations += 1

    def choose(self, batch: list[str]) -> list[str]:
        """The problems of one generation batch (distinct, in order): settled ones mostly replaced."""
        settled = self.settled()
        present = set(batch)
        candidates = [pid for pid in self.ids if pid not in settled and pid not in present]
        if not (settled & present) or not candidates:
            return list(batch)
        rng = random.Random(f"difficulty-filter:{self.seed}:{self.generations}")
        rng.shuffle(candidates)
        return [candidates.pop() if pid in settled and candidates and rng.random() >= self.recheck else pid
                for pid in batch]

    def state_dict(self) -> dict:
        return {"window": self.window, "recheck": self.recheck, "generations": self.generations, "recent": self.recent}

    def load_state_dict(self, state: dict) -> None:
        self.generations = int(state["generations"])
        self.recent = {pid: [bool(f) for f in flags][-self.window :] for pid, flags in state["recent"].items()}


class ProblemTracker:
    """Sees every generation batch of training: rewrites it through the filter (if any), records its groups, and
    updates the filter. `records` is the problem_stats.jsonl path on the main process, None on the others."""

    def __init__(self, records: Path | None, difficulty: DifficultyFilter | None = None):
        self.records = records
        self.filter = difficulty
        self.pending: dict[int, list[Group]] = defaultdict(list)
        self.swapped = 0
        self.expected: list[str] | None = None  # the batch this rank chose; every rank must have chosen the same

    def rewrite(self, ids: list[str], size: int) -> list[str]:
        """The generation batch (gathered ids, each problem `size` times in a row) after the filter's choice."""
        self.swapped = 0
        self.expected = ids
        if self.filter is None:
            return ids
        batch = [group.id for group in groups_of(ids, [math.nan] * len(ids), None, size)]
        chosen = self.filter.choose(batch)
        self.swapped = sum(a != b for a, b in zip(batch, chosen))
        self.expected = [pid for pid in chosen for _ in range(size)]
        return self.expected

    def observe(self, step: int, ids: list[str], rewards: list[float], passed_all: list[bool] | None,
                size: int, passed_hidden: list[bool | None] | None = None,
                replies: list[int] | None = None) -> dict[str, float]:
        """Record one judged generation batch for `step`; returns the metrics to log with the step. `passed_all`
        says which completions passed every test (None without the test_cases reward), `passed_hidden` which of
        those passed their hidden tests (None without the hidden-test watch), as the judge found.

        Raises RuntimeError when the batch the ranks generated for (gathered `ids`) is not the one this rank chose:
        the ranks disagreed on the rewrite.
        """
        if self.expected is not None and ids != self.expected:
            raise RuntimeError("the ranks generated for a different batch than this rank chose: the difficulty "
                               "filter's state differs between ranks")
        self.expected = None
        groups = groups_of(ids, rewards, passed_all, size, passed_hidden, replies)
        self.pending[step] += groups
        if self.filter is None:
            return {}
        self.filter.update(groups)
        return {"difficulty/settled": float(len(self.filter.settled())), "difficulty/swapped": float(self.swapped)}

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
        if self.filter is None or self.records is None:
            return
        tmp = checkpoint / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(self.filter.state_dict()))
        os.replace(tmp, checkpoint / STATE_FILE)

    def restore(self, checkpoint: str | Path) -> None:
        """On resume: the filter's state as it was saved with `checkpoint` (every rank reads the same file)."""
        if self.filter is None:
            return
        path = Path(checkpoint) / STATE_FILE
        if not path.exists():
            logger.warning("difficulty filter: %s has no %s (saved without --difficulty_filter?); the filter starts "
                           "with no problem settled", checkpoint, STATE_FILE)
            return
        self.filter.load_state_dict(json.loads(path.read_text()))
        logger.info("difficulty filter: restored from %s (%d problems settled)", path, len(self.filter.settled()))

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
