"""Judging completions: code extraction, sandboxed executors, reward functions and pass@k."""

from rewards.extract import extract_code
from rewards.judge import STATUSES, Judge, Judgement, JudgeUnavailable, TestResult
from rewards.passk import mean_pass_at_k, pass_at_k
from rewards.reward_funcs import REWARD_FUNCS, RewardSettings, make_reward_funcs, test_reward

__all__ = [
    "STATUSES", "extract_code", "Judge", "JudgeUnavailable", "Judgement", "TestResult", "test_reward",
    "RewardSettings", "make_reward_funcs", "REWARD_FUNCS", "pass_at_k", "mean_pass_at_k",
]
