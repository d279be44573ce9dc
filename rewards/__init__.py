"""Rewards from judgements: code extraction, the one scoring path, the reward functions and pass@k.

Running code is ``judging``'s job; this package turns its verdicts into rewards.
"""

from rewards.arguments import MAX_TESTS_PER_PROBLEM, ScoringArguments
from rewards.extract import extract_code
from rewards.passk import mean_pass_at_k, pass_at_k
from rewards.reward_funcs import REWARD_FUNCS, JudgedRewards, RewardSetup, make_reward_funcs
from rewards.scoring import Score, TrivialShares, ascore, score

__all__ = [
    "MAX_TESTS_PER_PROBLEM",
    "extract_code",
    "ScoringArguments",
    "Score",
    "TrivialShares",
    "score",
    "ascore",
    "make_reward_funcs",
    "REWARD_FUNCS",
    "JudgedRewards",
    "RewardSetup",
    "pass_at_k",
    "mean_pass_at_k",
]
