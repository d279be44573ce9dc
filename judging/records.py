"""The problem record as typed values: a `Problem` and its `Test`s, frozen, from the loaders to the judge and back.

The JSONL record (docs/data.md, "Record format") is the published form; `data/loading/validate.py` is the one way in
(it checks a raw record and says ``file:line`` when it is wrong) and `Problem.record` the one way out. In between
a problem is never changed in place: a changed problem (strengthened tests, a canary's impossible variant) is a
new one, made with `dataclasses.replace`. What is measured about a problem (its trivial shares) is kept beside it,
keyed by the problem, not written into it.

They live in `judging`, the lowest layer that reads them: the judge runs a `Test` (its code in the sandbox, its
expected output kept on the host), `rewards` scores a `Problem`, `data` loads them and `training` trains on them,
all above. Nothing here runs code or imports more than the standard library.

A field the record gains is a field here with a default (so every record without it still loads), read by
`data/loading/validate.py` and written back by `record`; until then, fields this module does not know are kept in
``extra`` and travel with the problem: back into the JSONL file, and to the reward functions as dataset columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Test:
    """One test: the program is the judged code, a marker line, then ``test_code``; it passes when what it prints
    after the marker, stripped, equals ``expected_output``, stripped (judging/grading.py).

    A test with an ``input`` (``test_code`` is then empty) gives the judged program that text as its standard input
    and counts all it prints. A ``tolerance`` compares the numbers in the printed text to those of the expected
    output within that absolute difference, the rest of the text exactly. ``compare="value"`` reads both the printed
    text and the expected output as Python literals and compares the values with ``==``, as the ``assert`` a test
    was converted from did (``240.0`` for ``240``, a set in any printed order); text that is no literal is compared
    as text. A ``hidden`` test never enters the reward: training judges it only to watch the completions that passed
    every judged test."""

    __test__ = False  # not a pytest test class

    test_code: str
    expected_output: str
    extra: dict[str, Any] = field(default_factory=dict, hash=False)  # the test's other fields, as read
    input: str | None = None
    tolerance: float | None = None
    hidden: bool = False
    compare: str = "text"  # or "value" (COMPARE)

    def record(self) -> dict[str, Any]:
        """The test as the JSONL record writes it: ``test_code`` or ``input``, and a tolerance, ``hidden`` and
        ``compare`` only when they are not the default."""
        record = {"test_code": self.test_code} if self.input is None else {"input": self.input}
        record["expected_output"] = self.expected_output
        if self.tolerance is not None:
            record["tolerance"] = self.tolerance
        if self.hidden:
            record["hidden"] = True
        if self.compare != "text":
            record["compare"] = self.compare
        return {**record, **self.extra}


COMPARE = ("text", "value")
# The most calls one run judges (`Calls`): a pool's tests are judged in runs of at most this many.
MAX_CALLS = 64


@dataclass(frozen=True)
class Calls:
    """Tests judged in one run of the program: the solution, then each test's code (a printed call) after a line of
    its own that the judge prints, so that what each call printed is graded on the host against its own expected
    output (judging/execution.py). The calls share the program's state, as the calls of one test do; none sees an
    expected output. A call that raises fails alone, with ``runtime_error``, as a run of it alone would: the
    executor's harness catches the error, says so on a line of its own, and the run goes on to the next call (q
    goes on by itself, its errors read from stderr). A call that runs out of time or memory, exits or prints past
    the output limit ends the run: it fails with that status, and so does every call after it: they are not run.
    Each call counts as one test in the reward.

    A problem's generated pool (`Problem.pool`) is judged so: fifty inputs cost about what one test does. The
    reward joins a completion's last given test (one that prints calls) to its pool sample (`joined_runs`): the
    first ``given`` calls are given tests, each of which a run of its own would have judged within one timeout, so
    the run may take ``timeouts`` of them (within the completion's budget), and where several given tests join, a
    call of theirs that ends the run early has the later given tests judged in a fresh run (judging/judge.py), as
    separate runs would."""

    __test__ = False

    tests: tuple[Test, ...]
    given: int = 0  # how many of the first calls are given tests, each once judged in a run of its own

    def __len__(self) -> int:
        return len(self.tests)

    @property
    def timeouts(self) -> int:
        """How many test timeouts the run may take: one per given test, one for the pool's calls together."""
        return self.given + (len(self.tests) > self.given)


def call_separator(marker: str, index: int) -> str:
    """The line the judge prints before call ``index`` of a run of calls (its marker is random per run)."""
    return f"{marker}:{index}"


def call_raised(marker: str, index: int) -> str:
    """The line a harness prints when call ``index`` of a run of calls raised, after what the call printed."""
    return f"{marker}:{index}:raised"


def call_spans(text: str | None, marker: str, calls: int) -> list[tuple[int, int]]:
    """Where what each call reached printed starts and ends in ``text`` (what a run printed after its marker line;
    None: the marker never came): from the end of call ``i``'s separator line to the start of the next's, the
    last one's to the end. Each separator is looked for after the one before it."""
    spans: list[tuple[int, int]] = []
    position = 0
    for index in range(calls if text is not None else 0):
        separator = call_separator(marker, index) + "\n"
        found = text.find(separator, position)
        if found < 0:
            break
        if spans:
            spans[-1] = (spans[-1][0], found)
        position = found + len(separator)
        spans.append((position, len(text)))
    return spans


def in_runs(tests, size: int = MAX_CALLS) -> tuple[Calls, ...]:
    """``tests`` (printed calls, none giving standard input) as runs of at most ``size`` calls each."""
    tests = tuple(tests)
    return tuple(Calls(tests[start : start + size]) for start in range(0, len(tests), size))


# How many of a completion's given tests join its pool sample's run (`joined_runs`). One, the last: a given test
# after another in a run starts from the state the calls before it left, where a run of its own started afresh, so
# a program answering by call order ("True, then False") would answer across the given tests; three bundled Python
# problems (is-prime, is-palindrome, balanced-brackets) have a call-order program pass 2 of their first 5 tests so,
# 1 of 5 apart. The given test that joins starts its run afresh, as alone; the pool's calls after it are a fresh
# sample each step.
JOINED_GIVEN_TESTS = 1


def joined_runs(given, pool, size: int = MAX_CALLS, join: int | None = JOINED_GIVEN_TESTS) -> tuple[Test | Calls, ...]:
    """A completion's ``given`` tests and its ``pool`` tests in as few runs as hold them, in their order: the given
    tests but the last ``join`` (None: none) a run of their own each, then one run of calls of the last ``join``
    given tests (`Calls.given`) and the pool's calls, then the rest of the pool in runs of calls: for a HumanEval
    program's one check and its pool sample, one run instead of two. Where a given test gives standard input, the
    given tests are runs of their own, as the program is then judged whole, and only the pool is joined in runs;
    so too where ``given`` holds runs of calls already (a caller's own: data/quality/adequacy.py)."""
    given, pool = tuple(given), tuple(pool)
    if any(isinstance(test, Calls) or test.input is not None for test in given):
        return (*given, *in_runs(pool, size))
    alone = given[: max(0, len(given) - join)] if join is not None else ()
    tests = given[len(alone) :] + pool
    joined = len(tests) - len(pool)
    return (
        *alone,
        *(
            Calls(tests[start : start + size], max(0, min(size, joined - start)))
            for start in range(0, len(tests), size)
        ),
    )


def count(tests) -> int:
    """How many tests a sequence of `Test` and `Calls` holds, each call one."""
    return sum(len(test) if isinstance(test, Calls) else 1 for test in tests)


@dataclass(frozen=True)
class Problem:
    """A validated problem: its tests in order, any marked hidden after the others (the training reward judges
    the first ``--max_tests_per_problem`` of the others, `judged_tests`; the rest are its `hidden_tests`), its
    canonical ``solution`` when it has one, its ``split`` when the source gives one, and ``location``, where it
    was read (``file:line``, ``path/to/folder``, ``file:row N``), for every message about it.

    ``entry_point`` is the function its tests call (``solve`` unless the source names another); a problem whose
    tests give standard input (`Test.input`) is judged as a whole program instead.

    ``pool``, when the record has one, holds tests generated from the solution (data/generation/pool.py): printed
    calls on inputs inside the domain, their expected outputs what the solution printed. Training judges a fresh
    sample of it each step beside the judged tests, evaluation all of it, in runs of many calls (`Calls`).

    ``domain``, when the record gives one, is a Python expression over the solution's arguments that is true on the
    inputs the problem allows (``n >= 0``, ``set(s) <= set('()')``); the checks of its tests (data/quality/domain.py) make no
    counter-example and no test outside it.

    Two problems are equal when their records are (the location is not compared). Problems hash by their fields
    other than ``extra``, so they key the mappings of what is measured about them."""

    id: str
    language: str
    description: str
    tests: tuple[Test, ...]
    solution: str | None = None
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)  # the record's other fields, as read
    location: str | None = field(default=None, compare=False)
    entry_point: str = "solve"
    domain: str | None = None
    pool: tuple[Test, ...] = field(default=(), hash=False)  # equal problems have equal ids: hashing it adds nothing

    @property
    def reads_input(self) -> bool:
        """Whether its tests give the program standard input (a whole program is judged, not a function)."""
        return any(test.input is not None for test in self.tests)

    def judged_tests(self, max_tests: int | None) -> tuple[Test, ...]:
        """The tests the reward judges: the first ``max_tests`` (None: all) of those not marked hidden."""
        return tuple(self.tests[i] for i in self._judged(max_tests))

    def hidden_tests(self, max_tests: int | None) -> tuple[Test, ...]:
        """The tests that never enter the reward under ``max_tests``: those marked hidden and those beyond it."""
        judged = set(self._judged(max_tests))
        return tuple(test for i, test in enumerate(self.tests) if i not in judged)

    def _judged(self, max_tests: int | None) -> list[int]:
        return [i for i, test in enumerate(self.tests) if not test.hidden][:max_tests]

    def record(self) -> dict[str, Any]:
        """The problem as the JSONL record writes it; a field left out of the source stays out."""
        record = {
            "id": self.id,
            "language": self.language,
            "description": self.description,
            "tests": [test.record() for test in self.tests],
        }
        record.update(
            (name, value)
            for name, value in (("solution", self.solution), ("split", self.split), ("domain", self.domain))
            if value is not None
        )
        if self.entry_point != "solve":
            record["entry_point"] = self.entry_point
        if self.pool:
            record["pool"] = [test.record() for test in self.pool]
        return {**record, **self.extra}
