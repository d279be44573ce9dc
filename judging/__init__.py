"""The execution boundary: everything that runs untrusted code and turns it into a verdict.

Security-critical: the rules every test runs under (``policy.py``, ``seccomp.py``), the sandbox levels
(``sandbox.py``, ``running.py``), warm workers (``warm.py``, the worker itself in ``worker/``), the q licence proxy
(``licence_proxy.py``), the language executors (``executors.py``, ``languages.py``) and the judge that runs tests
through them (``judge.py``, ``setup.py``, ``execution.py``, ``grading.py``). ``records.py`` holds the problem
records it judges, which every layer above shares. docs/judge.md says how it protects the host. It imports
nothing from ``rewards``, ``data`` or ``training`` and nothing heavier than tqdm.
"""

from judging.arguments import JudgeArguments
from judging.judge import STATUSES, Judge, Judgement, JudgeUnavailable, TestResult
from judging.records import Calls, Problem, Test

__all__ = [
    "Calls",
    "JudgeArguments",
    "Judge",
    "Judgement",
    "JudgeUnavailable",
    "Problem",
    "STATUSES",
    "Test",
    "TestResult",
]
