"""The per-problem records of the training groups, and the tracker's check that every rank generated the batch it
chose."""

import json
import math

import pytest

from training.difficulty import DifficultyFilter
from training.judged_batch import JudgedBatch
from training.problem_records import Group, ProblemTracker, groups_of, problem_record


def test_groups_of_refuses_a_group_that_mixes_problems():
    batch = JudgedBatch(1, ["a", "a", "b", "b"], [0, 1, 1, 1], 2, [False, True, True, True])
    assert [g.id for g in groups_of(batch)] == ["a", "b"]
    assert groups_of(JudgedBatch(1, ["a", "a"], [0.0, 2.0], 2, [False, True]))[0].passed == 1
    with pytest.raises(RuntimeError, match="ranks disagree"):
        groups_of(JudgedBatch(1, ["a", "b", "b", "b"], [0.0] * 4, 2))


def test_records_merge_a_problems_groups_per_step_and_count_full_passes_and_hidden_test_failures(tmp_path):
    path = tmp_path / "problem_stats.jsonl"
    tracker = ProblemTracker(path)
    ids = ["a", "a", "b", "b", "a", "a"]
    tracker.observe(
        JudgedBatch(
            1,
            ids,
            [2.0, 0.5, 0.0, 0.0, 2.0, math.nan],
            2,
            [True, False, False, False, True, False],
            [False, None, None, None, True, None],
        )
    )
    tracker.observe(JudgedBatch(2, ["b", "b"], [1.0, 1.0], 2, [False, False]))  # without the hidden-test watch
    tracker.flush(1)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 1]
    tracker.flush()
    a, b, b2 = [json.loads(line) for line in path.read_text().splitlines()]
    assert a == {
        "step": 1,
        "id": "a",
        "samples": 4,
        "mean_reward": 1.5,
        "reward_std": pytest.approx(0.866025, abs=1e-6),
        "passed": 2,
        "hidden_checked": 2,
        "hidden_failed": 1,
    }
    assert b == {
        "step": 1,
        "id": "b",
        "samples": 2,
        "mean_reward": 0.0,
        "reward_std": 0.0,
        "passed": 0,
        "hidden_checked": 0,
        "hidden_failed": 0,
    }
    assert b2["step"] == 2 and b2["passed"] == 0 and b2["hidden_checked"] is None and b2["hidden_failed"] is None
    assert problem_record(3, "c", [Group("c", [math.nan], None)]) == {
        "step": 3,
        "id": "c",
        "samples": 1,
        "mean_reward": None,
        "reward_std": None,
        "passed": None,
        "hidden_checked": None,
        "hidden_failed": None,
    }


def test_a_batch_other_than_the_chosen_one_is_refused():
    tracker = ProblemTracker(None, DifficultyFilter(["a", "b", "c"], 1, 0.01, seed=0))
    tracker.filter.update([Group("a", [0.0, 0.0], None)])
    rewrite = tracker.rewrite(["a", "a", "b", "b"], 2)
    assert rewrite.ids == ["c", "c", "b", "b"] and rewrite.swapped == 1  # a is settled; c, never seen, takes its slot
    tracker.expect(rewrite)
    with pytest.raises(RuntimeError, match="differs between ranks"):
        tracker.observe(JudgedBatch(1, ["a", "a", "b", "b"], [0.0] * 4, 2))
    tracker.expect(rewrite)
    # b and c failed alike: with a, three problems are settled; the swap is the chosen batch's.
    assert tracker.observe(JudgedBatch(1, rewrite.ids, [0.0] * 4, 2)) == {
        "difficulty/settled": 3.0,
        "difficulty/swapped": 1.0,
    }
