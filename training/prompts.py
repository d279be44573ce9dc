"""Prompts for code problems, as plain text or as chat messages for instruct models.

The plain style is the reference Q trainer's layout (README.md): a system text, then
`Human: Problem:\\n...\\n\\nAssistant:`.
The chat style gives the same words as system and user messages, so the model's own chat template applies.
Both name the language being trained and what to write (a function named as the problem's tests call it, or a
program reading standard input, for problems whose tests give it) and, with the reasoning format, ask for
`<reasoning>` then `<answer>`.
"""

from collections.abc import Sequence

from judging.languages import language as language_named
from judging.records import Problem

SYSTEM_PROMPTS = {
    "answer": (
        "You are an expert {language} programmer. {task} "
        "Reply with the complete {language} code in one ```{fence} code block and nothing else."
    ),
    "reasoning": (
        "You are an expert {language} programmer. {task} "
        "First think it through inside <reasoning>...</reasoning>, then give the complete {language} code "
        "in a ```{fence} code block inside <answer>...</answer>."
    ),
}
TASKS = {
    "function": "Solve the problem by writing a function named `{entry_point}`.",
    "program": "Solve the problem by writing a program that reads its input from standard input and prints its "
    "answer to standard output.",
}


def system_prompt(
    language: str, use_reasoning_format: bool, entry_point: str = "solve", reads_input: bool = False
) -> str:
    template = SYSTEM_PROMPTS["reasoning" if use_reasoning_format else "answer"]
    spec = language_named(language)
    task = TASKS["program" if reads_input else "function"].format(entry_point=entry_point)
    return template.format(language=spec.display_name, fence=spec.fence, task=task)


def make_prompt(
    description: str,
    language: str,
    use_reasoning_format: bool,
    style: str,
    entry_point: str = "solve",
    reads_input: bool = False,
) -> str | list[dict]:
    """The prompt for one problem: a string for `plain`, a list of chat messages for `chat`; it asks for a function
    named ``entry_point``, or a program reading standard input where the problem's tests give it."""
    system = system_prompt(language, use_reasoning_format, entry_point, reads_input)
    if style == "plain":
        return f"{system}\n\nHuman: Problem:\n{description.strip()}\n\nAssistant:"
    if style == "chat":
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Problem:\n{description.strip()}"},
        ]
    raise ValueError(f"unknown prompt style {style!r}: use plain or chat")


def problem_prompt(problem: Problem, use_reasoning_format: bool, style: str) -> str | list[dict]:
    return make_prompt(
        problem.description, problem.language, use_reasoning_format, style, problem.entry_point, problem.reads_input
    )


def prompt_rows(problems: Sequence[Problem], use_reasoning_format: bool, style: str) -> list[dict]:
    """The problems as training rows, the columns TRL hands the reward functions: ``id`` (the test-case reward
    looks the problem up by it), ``language``, ``description``, the record's other fields, and the prompt. Tests and
    solutions stay with the problems."""
    return [
        {
            "id": problem.id,
            "language": problem.language,
            "description": problem.description,
            **problem.extra,
            "prompt": problem_prompt(problem, use_reasoning_format, style),
        }
        for problem in problems
    ]
