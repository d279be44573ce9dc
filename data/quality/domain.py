"""A problem's domain: the inputs its solution answers, where the checks of its tests may look.

`python -m data verify` and `strengthen` run the solution on inputs of their own making (data/quality/wrong_programs.py,
``nearby_calls``). An input the problem does not allow (a malformed bracket string, a negative index into a
sequence defined for n >= 0) is no counter-example and no test: a wrong program may answer anything there. An input
is outside the domain when the solution, run through the judge, raises there (an ``assert`` of its own, or the
problem's ``domain`` expression, checked on the outermost call of its function), runs out of time, or answers in more
than a quarter of the time limit: a counter-example is one the solution answers well under it, so that a verdict
does not hang on the load of the machine.
"""

from __future__ import annotations

from judging.grading import KEEP_CHARS
from judging.records import Problem

# A counter-example or a new test is an input the solution answers in at most this share of the judge's time limit.
WELL_UNDER = 0.25

# Appended to the solution: the judged function raises outside the domain on its outermost call (recursive calls
# may go outside it on their way, as fib(n - 2) does at n = 1).
DOMAIN_GUARD = """
def _checked_in_domain(_function):
    import functools, inspect
    _signature, _depth = inspect.signature(_function), [0]

    @functools.wraps(_function)
    def checked(*args, **kwargs):
        if not _depth[0]:
            _bound = _signature.bind(*args, **kwargs)
            _bound.apply_defaults()
            if not eval({expression!r}, {{**globals(), **_bound.arguments}}):
                raise ValueError("outside the problem's domain: " + {expression!r})
        _depth[0] += 1
        try:
            return _function(*args, **kwargs)
        finally:
            _depth[0] -= 1
    return checked


{name} = _checked_in_domain({name})
"""


def reference_program(problem: Problem) -> str | None:
    """The problem's solution, its function (``entry_point``) raising outside the problem's ``domain`` when the
    record gives one."""
    if problem.solution is None or not problem.domain:
        return problem.solution
    return (
        problem.solution.rstrip("\n") + "\n" + DOMAIN_GUARD.format(expression=problem.domain, name=problem.entry_point)
    )


def answered(result, timeout: float) -> bool:
    """Whether the solution's run of a test whose expected output nothing prints (data/quality/adequacy.py, UNMATCHABLE) is
    an answer inside the domain: it ended normally, printed less than the judge keeps, well under ``timeout``."""
    return result.status == "failed" and len(result.stdout) < KEEP_CHARS and result.seconds <= WELL_UNDER * timeout
