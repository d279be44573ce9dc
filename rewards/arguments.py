"""How a judgement becomes the test-case reward, for training, scoring and pass@k's mean reward."""

from dataclasses import dataclass, field

from cli import positive


@dataclass
class ScoringArguments:
    """How a judgement becomes the test-case reward: over the first N tests, base x passed/total, plus the
    perfect-solution bonus when all pass."""

    max_tests_per_problem: int | None = field(
        default=5, metadata={"help": "Training reward uses the first N tests of each problem."}
    )
    perfect_bonus: float = field(default=1.0, metadata={"help": "Bonus when every test passes."})
    base_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the pass fraction."})
    perfect_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the perfect-solution bonus."})

    def __post_init__(self):
        positive("--max_tests_per_problem", self.max_tests_per_problem)

    @property
    def best(self) -> float:
        return self.base_reward_weight + self.perfect_reward_weight * self.perfect_bonus

    def of(self, passed: int, total: int) -> float:
        """The reward of a completion that passed ``passed`` of ``total`` tests."""
        reward = self.base_reward_weight * passed / total
        if passed == total:
            reward += self.perfect_reward_weight * self.perfect_bonus
        return reward
