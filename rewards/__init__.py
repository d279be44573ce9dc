"""Judging completions: code extraction, sandboxed executors, the scoring path, reward functions and pass@k."""

from rewards.arguments import JudgeArguments, ScoringArguments
from rewards.errors import UsageError
from rewards.extract import extract_code
from rewards.judge import STATUSES, Judge, Judgement, JudgeUnavailable, TestResult
from rewards.passk import mean_pass_at_k, pass_at_k
from rewards.reward_funcs import REWARD_FUNCS, make_reward_funcs
from rewards.scoring import Score, ascore, score

__all__ = [
    "STATUSES", "extract_code", "Judge", "JudgeArguments", "JudgeUnavailable", "Judgement", "TestResult",
    "ScoringArguments", "Score", "score", "ascore", "make_reward_funcs", "REWARD_FUNCS", "pass_at_k",
    "mean_pass_at_k", "UsageError",
]
