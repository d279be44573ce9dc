"""Problem data: loaders for every supported source, validation, and verification against the judge."""

from data.loaders import bundled_path, load_problems, split_problems
from data.validate import DataError
from data.verify import VerifyReport, verify_problems

__all__ = ["DataError", "VerifyReport", "bundled_path", "load_problems", "split_problems", "verify_problems"]
