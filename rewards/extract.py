"""Read a model completion: the one parse that both the judge and the format reward use.

Tags are the lower-case ``<reasoning>``, ``</reasoning>``, ``<answer>``, ``</answer>``, matched exactly, case
included: ``<Answer>`` is text, as the format reward reads it. Text inside ``<reasoning>`` (up to its first
``</reasoning>``, or to the end) never runs. The answer is the first ``<answer>`` outside the reasoning, up to
its ``</answer>`` or the end; without one, the text outside the reasoning. Inside the answer: the first fenced
block tagged with the language, else the first fenced block of any tag, else the plain text.

So whatever earns the format reward (a fenced block in the answer) is exactly the code judged. Every step is
linear in the completion's length (``str.find`` for the tags; benchmarks/format_reward_time.py times adversarial
inputs): both run in the trainer's own process on whatever the policy writes.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from judging import languages

REASONING, END_REASONING, ANSWER, END_ANSWER = "<reasoning>", "</reasoning>", "<answer>", "</answer>"
TAGS = (REASONING, END_REASONING, ANSWER, END_ANSWER)
_FENCE = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Completion:
    """What a completion holds: the code to judge, and how it was written."""

    text: str  # the chosen block's body, or the answer's text
    fenced: bool  # that text is a fenced block with code in it (what both prompts ask for)
    laid_out: bool  # exactly <reasoning>R</reasoning><answer>A</answer>, each tag once, R not blank

    @property
    def code(self) -> str | None:
        """The code to judge, dedented; None: nothing runnable. Computed on use: the format reward needs none."""
        code = textwrap.dedent(self.text).strip("\n").rstrip()
        return code if code.strip() else None


def parse_completion(completion: str, language: str) -> Completion:
    tags = languages.language(language).fence_tags
    if not isinstance(completion, str):
        return Completion("", False, False)
    text = _outside_reasoning(completion)
    start = text.find(ANSWER)
    if start >= 0:
        end = text.find(END_ANSWER, start)
        text = text[start + len(ANSWER) : end if end >= 0 else len(text)]
    for tag in TAGS:
        text = text.replace(tag, "")
    block = _first_block(text, tags)
    return Completion(text if block is None else block, bool(block and block.strip()), _laid_out(completion))


def extract_code(completion: str, language: str) -> str | None:
    return parse_completion(completion, language).code


def _first_block(text: str, tags: tuple[str, ...]) -> str | None:
    """The body of the first fenced block tagged with one of ``tags``, else of the first fenced block."""
    first = None
    for block in _FENCE.finditer(text):
        if block[1].strip().lower() in tags:
            return block[2]
        if first is None:
            first = block[2]
    return first


def _outside_reasoning(text: str) -> str:
    kept, position = [], 0
    while (start := text.find(REASONING, position)) >= 0:
        kept.append(text[position:start])
        end = text.find(END_REASONING, start)
        if end < 0:
            return "".join(kept)
        position = end + len(END_REASONING)
    kept.append(text[position:])
    return "".join(kept)


def _laid_out(text: str) -> bool:
    if any(text.count(tag) != 1 for tag in TAGS):
        return False
    positions = [text.index(tag) for tag in TAGS]
    if positions != sorted(positions):
        return False
    reasoning_at, reasoning_end, answer_at, answer_end = positions
    return (
        not text[:reasoning_at].strip()
        and bool(text[reasoning_at + len(REASONING) : reasoning_end].strip())
        and not text[reasoning_end + len(END_REASONING) : answer_at].strip()
        and not text[answer_end + len(END_ANSWER) :].strip()
    )
