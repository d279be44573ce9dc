"""Pull the code to run out of a model completion.

Order: the ``<answer>`` block when there is one (text in ``<reasoning>`` never runs); inside it, the
first fenced block tagged with the language, else the first fenced block of any tag, else the plain
text. ``None`` means nothing runnable was found.
"""

from __future__ import annotations

import re
import textwrap

from judging import languages

_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_REASONING = re.compile(r"<reasoning>.*?(?:</reasoning>|\Z)", re.DOTALL | re.IGNORECASE)
_TAGS = re.compile(r"</?(?:answer|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)```", re.DOTALL)


def extract_code(completion: str, language: str) -> str | None:
    tags = languages.language(language).fence_tags
    if not isinstance(completion, str):
        return None
    answer = _ANSWER.search(completion)
    text = answer.group(1) if answer else _REASONING.sub("", completion)
    text = _TAGS.sub("", text)
    blocks = [(tag.strip().lower(), body) for tag, body in _FENCE.findall(text)]
    tagged = [body for tag, body in blocks if tag in tags]
    if tagged:
        code = tagged[0]
    elif blocks:
        code = blocks[0][1]
    else:
        code = text
    code = textwrap.dedent(code).strip("\n").rstrip()
    return code if code.strip() else None


def has_fenced_block(completion: str) -> bool:
    return any(body.strip() for _, body in _FENCE.findall(completion))
