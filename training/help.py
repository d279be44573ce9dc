"""`python rl_trainer.py --help`: a description with examples, the project's flags in groups, then TRL's and
transformers' fields under their own heading.

transformers' parser puts every dataclass field into one flat list (about 1,400 lines for GRPOConfig). The
project's flags are moved into their groups by destination; the help text, defaults and parsing stay the parser's.
"""

import argparse

from cli.flags import DefaultsHelpFormatter


class HelpFormatter(argparse.RawDescriptionHelpFormatter, DefaultsHelpFormatter):
    """The description as written (its examples keep their lines); each flag's default unless it is unset (None),
    where the flag's help says what is computed instead."""


def regroup(parser: argparse.ArgumentParser, groups: dict[str, tuple[str, ...]], rest: str, rest_help: str) -> None:
    """Move the flags named in ``groups`` (title: destinations, in order) into groups of those titles, and every
    other flag but --help into a last group ``rest``. A destination the parser lacks raises KeyError: a renamed
    field must be renamed here too."""
    actions: dict[str, list[argparse.Action]] = {}  # a flag with a --no_ twin has two actions for one destination
    for action in parser._actions:
        actions.setdefault(action.dest, []).append(action)
    for group in parser._action_groups:
        group._group_actions = [a for a in group._group_actions if a.dest == "help"]
    placed = {"help"}
    for title, dests in groups.items():
        group = parser.add_argument_group(title)
        for dest in dests:
            group._group_actions.extend(actions[dest])
        placed.update(dests)
    parser.add_argument_group(rest, rest_help)._group_actions.extend(
        action for dest, twins in actions.items() if dest not in placed for action in twins
    )
