"""Every language the trainer judges, in one place: its name in prompts, the fence tags its code may carry,
the trusted program that proves it runs here, and its executor.

Adding a language is one executor class (``judging/executors.py``) and one entry in ``LANGUAGES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from judging.executors import Executor, PythonExecutor, QExecutor


@dataclass(frozen=True)
class Language:
    name: str
    display_name: str
    fence_tags: tuple[str, ...]  # the first is the tag prompts ask for; any of them marks code in this language
    preflight_code: str  # trusted code that prints 2; run once before any model loads
    make_executor: Callable[[str | None], Executor]  # called with the q binary setting (only q uses it)

    @property
    def fence(self) -> str:
        return self.fence_tags[0]


LANGUAGES: dict[str, Language] = {
    language.name: language
    for language in (
        Language("q", "Q (kdb+/q)", ("q", "k", "kdb", "kdb+"), "-1 string 1+1;", QExecutor),
        Language("python", "Python", ("python", "python3", "py"), "print(1+1)", lambda q_binary: PythonExecutor()),
    )
}


def language(name: str) -> Language:
    try:
        return LANGUAGES[name]
    except KeyError:
        raise ValueError(f"unknown language {name!r}; use one of {', '.join(LANGUAGES)}") from None
