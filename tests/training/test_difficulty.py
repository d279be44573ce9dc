"""The difficulty filter's rewrite of generation batches, on TRL's own RepeatSampler order."""

import math
from collections import Counter

from trl.trainer.utils import RepeatSampler

from training.difficulty import DifficultyFilter
from training.problem_records import Group, ProblemTracker, group_ids

IDS = [f"p{i}" for i in range(12)]
SIZE = 4  # num_generations
PER_BATCH = 3  # distinct problems per generation batch


def generation_batches(epochs: int, seed: int = 0):
    """Gathered id lists of successive generation batches, as TRL's sampler lays them out."""
    sampler = RepeatSampler(IDS, mini_repeat_count=SIZE, batch_size=PER_BATCH, seed=seed)
    for _ in range(epochs):
        order = [IDS[i] for i in sampler]
        step = PER_BATCH * SIZE
        yield from (order[start : start + step] for start in range(0, len(order), step))


def group(pid: str, rewards: list[float]) -> Group:
    return Group(pid, rewards, None)


def judge(pid: str, hard: set[str]) -> Group:
    """Hard problems always fail alike (zero-signal); the others get a spread of rewards."""
    return group(pid, [0.0] * SIZE if pid in hard else [0.0, 1.0, 2.0, 1.0])


def train(tracker: ProblemTracker, epochs: int, hard: set[str]) -> list[list[str]]:
    """Feed the tracker generation batches as the trainer does; returns the batches it chose."""
    chosen = []
    for ids in generation_batches(epochs):
        rewritten = tracker.rewrite(ids, SIZE).ids
        chosen.append(rewritten)
        tracker.filter.update([judge(pid, hard) for pid in group_ids(rewritten, SIZE)])
    return chosen


def test_zero_signal_is_no_spread_among_scored_completions():
    assert group("a", [0.0, 0.0, 0.0]).zero_signal
    assert group("a", [2.0, 2.0, math.nan]).zero_signal  # all passed; the unscorable one does not count
    assert group("a", [1.0, math.nan, math.nan]).zero_signal  # one scored completion: no advantage either
    assert not group("a", [0.0, 0.5, 0.0]).zero_signal


def test_rewritten_batches_keep_trls_layout():
    tracker = ProblemTracker(None, DifficultyFilter(IDS, window=1, recheck=0.25, seed=3))
    hard = set(IDS[:8])
    for original, rewritten in zip(generation_batches(6), train(tracker, 6, hard)):
        assert len(rewritten) == len(original)
        problems = rewritten[::SIZE]
        assert rewritten == [pid for pid in problems for _ in range(SIZE)]  # each problem SIZE times in a row
        assert len(set(problems)) == PER_BATCH and set(problems) <= set(IDS)


def test_same_seed_and_state_give_the_same_batches_on_every_rank():
    def run(seed):
        return train(ProblemTracker(None, DifficultyFilter(IDS, 1, 0.25, seed=seed)), 6, set(IDS[:8]))

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_settled_problems_are_sampled_less_but_not_never():
    hard = set(IDS[:8])
    epochs = 40
    plain = Counter(pid for ids in generation_batches(epochs) for pid in ids[::SIZE])
    tracker = ProblemTracker(None, DifficultyFilter(IDS, window=2, recheck=0.25, seed=0))
    filtered = Counter(pid for ids in train(tracker, epochs, hard) for pid in ids[::SIZE])
    assert sum(filtered.values()) == sum(plain.values())
    for pid in IDS:
        if pid in hard:
            assert 0 < filtered[pid] < 0.6 * plain[pid], pid
        else:
            assert filtered[pid] > 1.5 * plain[pid], pid


def test_when_every_problem_is_settled_the_order_is_the_normal_one():
    difficulty = DifficultyFilter(IDS, window=1, recheck=0.25, seed=0)
    difficulty.update([group(pid, [1.0] * SIZE) for pid in IDS])
    assert difficulty.settled() == set(IDS)
    for ids in generation_batches(2):
        assert difficulty.choose(ids[::SIZE]) == ids[::SIZE]


def test_a_group_with_a_spread_unsettles_its_problem():
    difficulty = DifficultyFilter(IDS, window=2, recheck=0.25, seed=0)
    difficulty.update([group("p0", [0.0] * SIZE)])
    assert difficulty.settled() == set()  # one zero-signal group is not yet a window of two
    difficulty.update([group("p0", [0.0] * SIZE)])
    assert difficulty.settled() == {"p0"}
    difficulty.update([group("p0", [0.0, 2.0, 0.0, 0.0])])
    assert difficulty.settled() == set()


def test_state_round_trips_through_a_checkpoint(tmp_path):
    tracker = ProblemTracker(tmp_path / "records.jsonl", DifficultyFilter(IDS, 2, 0.25, seed=5))
    train(tracker, 3, set(IDS[:8]))
    tracker.save(tmp_path)
    fresh = ProblemTracker(None, DifficultyFilter(IDS, 2, 0.25, seed=5))
    fresh.restore(tmp_path)
    assert fresh.filter.state_dict() == tracker.filter.state_dict()
    assert fresh.filter.settled() and fresh.filter.generations == tracker.filter.generations
    batch = next(generation_batches(1))[::SIZE]
    assert fresh.filter.choose(batch) == tracker.filter.choose(batch)
