"""The execution boundary: everything that runs untrusted code and turns it into a verdict.

Security-critical: the rules every test runs under (``policy.py``, ``seccomp.py``), the sandbox levels
(``sandbox.py``, ``running.py``), warm workers (``warm.py``, the worker itself in ``worker/``), the q licence proxy
(``licence_proxy.py``), the language executors (``executors.py``, ``languages.py``) and the judge that runs tests
through them (``judge.py``, ``setup.py``, ``execution.py``, ``grading.py``). docs/judge.md says how it protects the
host. It imports nothing from ``rewards``, ``data`` or ``training`` and nothing heavier than tqdm.
"""

from judging.arguments import JudgeArguments
from judging.judge import STATUSES, Judge, Judgement, JudgeUnavailable, TestResult

__all__ = ["JudgeArguments", "Judge", "Judgement", "JudgeUnavailable", "TestResult", "STATUSES"]
