"""Problem data: loaders for every supported source, validation, verification against the judge, trivial shares.

Every loader returns `Problem` records (judging/records.py, re-exported here).
"""

from judging.records import Problem, Test
from data.loading.loaders import bundled_path, load_problems, split_problems
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE, TrivialShare, cached_trivial_shares, measure_trivial_shares
from data.loading.validate import ALLOW_COMPARISONS_HELP, DataError
from data.quality.verify import VerifyReport, verify_problems

__all__ = [
    "ALLOW_COMPARISONS_HELP",
    "DEFAULT_MAX_TRIVIAL_SHARE",
    "DataError",
    "Problem",
    "Test",
    "TrivialShare",
    "VerifyReport",
    "bundled_path",
    "cached_trivial_shares",
    "load_problems",
    "measure_trivial_shares",
    "split_problems",
    "verify_problems",
]
