"""The online difficulty filter (`--difficulty_filter`): slots of problems that teach nothing go to others.

The filter sees each generation batch through the per-problem tracker (training/problem_records.py), which works on
the batch gathered from every rank, so every rank holds the same state.

A group is zero-signal when all its scored completions earned the same total reward (all passed, or all
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
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from training.problem_records import Group

logger = logging.getLogger(__name__)

STATE_FILE = "difficulty_filter.json"


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

    def update(self, groups: list["Group"]) -> None:
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
        return [
            candidates.pop() if pid in settled and candidates and rng.random() >= self.recheck else pid for pid in batch
        ]

    def state_dict(self) -> dict:
        return {"window": self.window, "recheck": self.recheck, "generations": self.generations, "recent": self.recent}

    def save(self, checkpoint: Path) -> None:
        tmp = checkpoint / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(self.state_dict()))
        os.replace(tmp, checkpoint / STATE_FILE)

    def restore(self, checkpoint: Path) -> None:
        """On resume: the state as it was saved with ``checkpoint``; a checkpoint saved without the filter starts
        it with no problem settled."""
        path = checkpoint / STATE_FILE
        if not path.exists():
            logger.warning(
                "difficulty filter: %s has no %s (saved without --difficulty_filter?); the filter starts "
                "with no problem settled",
                checkpoint,
                STATE_FILE,
            )
            return
        self.load_state_dict(json.loads(path.read_text()))
        logger.info("difficulty filter: restored from %s (%d problems settled)", path, len(self.settled()))

    def load_state_dict(self, state: dict) -> None:
        self.generations = int(state["generations"])
        self.recent = {pid: [bool(f) for f in flags][-self.window :] for pid, flags in state["recent"].items()}
