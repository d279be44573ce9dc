"""What the model is told between its turns under ``--feedback_turns`` (training/feedback.py runs the rounds), and
which of its turns the reward judges.

**Examples.** A problem's examples are the tests the model has already seen (training/feedback.py,
`example_tests`); no other test is ever run for feedback, so no judged, pooled or hidden test's expected output
reaches the model. A problem without examples gets a load check instead: its code runs with no call after it, and
the feedback says only what loading it raised (nothing, for code that loads: that completion ends there).

**The message** reads as a person at the interpreter would see it: per example, passed, or the call, what it printed
or raised (the error's last lines: a Python traceback's, q's ``'type`` and the lines q prints under it), and what
was expected.

**The judged turn** is the last turn that ended (within the length limit) holding code (a fenced block); where none did, the first
turn, as a single-turn completion is judged. A turn cut by the length limit is never judged while an earlier one
ended with code, and the feedback text is never judged: the reward functions read the chosen turn's text from the
`ANSWER_COLUMN` column (`completion_texts`), not the completion (which holds every turn and message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from judging.grading import Judgement, TestResult
from judging.records import Problem, Test
from rewards.extract import parse_completion

ANSWER_COLUMN = "feedback_answer"  # the text of each completion's judged turn, a column TRL hands the rewards
ERROR_LINES = 3  # the last lines of a Python error shown; q's error line and the lines under it, at most this many
SHOWN_CHARS = 300  # what a call printed, at most, in the message
LOAD_CHECK = Test("", "")  # the code alone: what loading it raises


def feedback_tests(problem: Problem, examples: tuple[Test, ...]) -> tuple[Test, ...]:
    """What the code is run on: the problem's ``examples``, or the load check where there are none (a program
    reading standard input gets none: it would read an empty input)."""
    if examples or problem.reads_input:
        return examples
    return (LOAD_CHECK,)


@dataclass(frozen=True)
class Verdict:
    """The examples' run of one turn's code: whether all passed, and the message for the model (None: nothing to
    say, the turn is not continued: every example passed, the judge failed, or there was nothing to run)."""

    passed: bool
    message: str | None


def verdict(problem: Problem, tests: Sequence[Test], judgement: Judgement) -> Verdict:
    """The verdict of ``judgement``, the run of a turn's code on ``tests`` (`feedback_tests` of ``problem``)."""
    if judgement.status == "passed":
        return Verdict(True, None)
    if judgement.status in ("sandbox_error", "no_code"):  # not the code's fault, or nothing to run
        return Verdict(False, None)
    q = problem.language == "q"
    if judgement.status == "syntax_error":
        detail = judgement.tests[0].stderr if judgement.tests else ""
        return Verdict(False, f"Your code does not parse:\n{_indent(_error_lines(detail, q))}\n{FIX}")
    if tests == (LOAD_CHECK,):
        return Verdict(False, f"I loaded your code. {_what_happened(judgement.tests[0], q, load=True)}\n{FIX}")
    lines = ["I ran your code on the problem's examples."]
    for number, (test, result) in enumerate(zip(tests, judgement.tests), 1):
        if result.status == "passed":
            lines.append(f"Example {number}: passed")
            continue
        call = test.test_code.strip() if test.input is None else f"standard input:\n{_indent(test.input.strip())}"
        lines.append(f"Example {number}: {call}")
        lines.append(_indent(_what_happened(result, q)))
        lines.append(f"  expected: {str(test.expected_output).strip()}")
    lines.append(FIX)
    return Verdict(False, "\n".join(lines))


FIX = "Fix the code and reply with the complete code again."


def _what_happened(result: TestResult, q: bool, load: bool = False) -> str:
    printed = result.stdout.strip()[:SHOWN_CHARS]
    if result.status == "failed":
        if load:
            return f"It printed: {printed}" if printed else "It ended without an error."
        return f"printed: {printed}" if printed else "printed nothing"
    if result.status == "timeout":
        return "It ran past the time limit." if load else "ran past the time limit"
    if result.status == "memory":
        return "It ran out of memory." if load else "ran out of memory"
    if result.status == "output_limit":
        return "It printed past the output limit." if load else "printed past the output limit"
    error = _error_lines(result.stderr, q)
    return f"It raised:\n{_indent(error)}" if load else f"raised:\n{_indent(error)}"


def _error_lines(stderr: str, q: bool) -> str:
    """The error's last lines: for q, its last ``'name`` line and the indented lines q prints under it; for
    Python, the traceback's last lines."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    if q:
        starts = [i for i, line in enumerate(lines) if line.startswith("'")]
        if starts:
            shown = [lines[starts[-1]]]
            for line in lines[starts[-1] + 1 :]:
                if not line[:1].isspace() or len(shown) >= ERROR_LINES:
                    break
                shown.append(line)
            return "\n".join(shown)
    return "\n".join(lines[-ERROR_LINES:]) or "(no message)"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


@dataclass
class Turn:
    """One model turn: its text, whether it ended within the length limit, and its code (None: it holds no fenced
    block of code, as the prompt asks for: prose, which the judge would run as code, is no attempt to run)."""

    text: str
    ended: bool
    code: str | None


def judged_turn(turns: Sequence[Turn]) -> Turn:
    """The turn the reward judges: the last that ended holding code, else the first."""
    return next((turn for turn in reversed(turns) if turn.ended and turn.code is not None), turns[0])


def make_turn(text: str, ended: bool, language: str) -> Turn:
    completion = parse_completion(text, language)
    return Turn(text, ended, completion.code if completion.fenced else None)


def completion_texts(completions: Sequence, columns: Mapping) -> list[str]:
    """The text each reward function reads for each completion: its judged turn's, under feedback rounds (the
    `ANSWER_COLUMN` column), else the completion's own."""
    from rewards.reward_funcs import completion_text

    answers = columns.get(ANSWER_COLUMN)
    if answers is not None:
        return list(answers)
    return [completion_text(c) for c in completions]
