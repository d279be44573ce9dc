"""How a judgement becomes the test-case reward, for training, scoring and pass@k's mean reward."""

from dataclasses import dataclass, field

from cli import UsageError, positive

PARTIAL_CREDIT = ("fraction", "above_trivial", "none")
MAX_TESTS_PER_PROBLEM = 5  # the given tests the training reward judges: ScoringArguments' default, and data's checks


@dataclass
class ScoringArguments:
    """How a judgement becomes the test-case reward: over the first N tests, base x partial credit, plus the
    perfect-solution bonus when all pass."""

    max_tests_per_problem: int | None = field(
        default=MAX_TESTS_PER_PROBLEM,
        metadata={
            "help": "Training reward uses the first N tests of each problem, of those not marked "
            "hidden; the rest are its hidden tests, which never enter the reward."
        },
    )
    perfect_bonus: float = field(default=1.0, metadata={"help": "Bonus when every test passes."})
    base_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the partial credit."})
    perfect_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the perfect-solution bonus."})
    partial_credit: str = field(
        default="fraction",
        metadata={
            "help": "Partial credit for passing some tests. fraction: passed/total (the reference's). above_trivial: "
            "the share passed above what a trivial program (a constant, echoing the input, printing nothing) "
            "passes, (passed/total - trivial) / (1 - trivial), at least 0; each problem's trivial share is "
            "measured once when the problems load. none: no partial credit, only the bonus for passing all.",
            "choices": list(PARTIAL_CREDIT),
        },
    )

    pool_tests_per_problem: int = field(
        default=50,
        metadata={
            "help": "Besides its first --max_tests_per_problem tests, the training reward judges "
            "this many tests of each problem's generated pool (python -m data pool), a fresh "
            "sample each step from a seeded generator (the run's --seed), all in one run of the "
            "program; the rest of the pool are hidden tests for the watch. Evaluation judges the "
            "whole pool. 0: the given tests only. Not used with --partial_credit above_trivial, "
            "whose trivial share is measured over the given tests."
        },
    )

    def __post_init__(self):
        positive("--max_tests_per_problem", self.max_tests_per_problem)
        if self.pool_tests_per_problem < 0:
            raise UsageError(
                f"--pool_tests_per_problem {self.pool_tests_per_problem}: give 0 (the given tests only) "
                "or a positive number of pool tests"
            )
        if self.partial_credit not in PARTIAL_CREDIT:
            raise UsageError(f"--partial_credit {self.partial_credit}: choose one of {', '.join(PARTIAL_CREDIT)}")

    @property
    def needs_trivial_shares(self) -> bool:
        return self.partial_credit == "above_trivial"

    @property
    def pool_sample_size(self) -> int:
        """How many pool tests the reward judges a problem on each step (none under above_trivial)."""
        return 0 if self.needs_trivial_shares else self.pool_tests_per_problem

    @property
    def best(self) -> float:
        """The reward of a completion that passes every test."""
        return self.of(1, 1)

    def of(self, passed: int, total: int, trivial_share: float = 0.0) -> float:
        """The reward of a completion that passed ``passed`` of ``total`` tests, where a trivial program passes
        ``trivial_share`` of those same tests (read by ``above_trivial`` only)."""
        reward = self.base_reward_weight * self.credit(passed, total, trivial_share)
        if passed == total:
            reward += self.perfect_reward_weight * self.perfect_bonus
        return reward

    def credit(self, passed: int, total: int, trivial_share: float = 0.0) -> float:
        """The partial credit, in [0, 1]; 1 whenever every test passes."""
        if passed == total:
            return 1.0 if self.partial_credit != "none" else 0.0
        share = passed / total
        if self.partial_credit == "fraction":
            return share
        if self.partial_credit == "above_trivial":
            return max(0.0, share - trivial_share) / (1.0 - trivial_share) if trivial_share < 1 else 0.0
        return 0.0
