"""Flags from dataclasses for the project's subcommands, without transformers.

``python -m rewards`` and ``python -m data`` parse the same dataclasses the trainer parses with TRL's parser
(``help``, ``choices`` and ``aliases`` in field metadata), but they must start in a fraction of a second, and
importing transformers for ``HfArgumentParser`` alone costs seconds.
"""

import argparse
import difflib
import typing
from dataclasses import MISSING, fields

from cli.errors import UsageError


def positive(flag: str, value, what: str = "number") -> None:
    """The one check of a positive setting: UsageError naming the flag otherwise (None means unset)."""
    if value is not None and not value > 0:
        raise UsageError(f"{flag} must be a positive {what}, got {value}")


def unknown_flag(known: list[str], remaining: list[str], help_hint: str) -> str:
    """The line for what a parser could not place: the first unknown flag with the closest known one, or a stray
    word; ``help_hint`` says where the flags are listed."""
    flag = next((word.partition("=")[0] for word in remaining if word.startswith("-")), None)
    if flag is None:
        return f"unexpected argument {remaining[0]!r}: flags take the form --name value; {help_hint}"
    # transformers adds a dashed twin of every underscored flag; suggest the spelling the user's flag is closest to
    candidates = [k for k in known if k.startswith("--") and ("-" in flag[2:] or "-" not in k[2:])]
    close = difflib.get_close_matches(flag, candidates, n=1, cutoff=0.6)
    if close:
        return f"unknown flag {flag}: did you mean {close[0]}? {help_hint}"
    return f"unknown flag {flag}; {help_hint}"


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "yes", "1"):
        return True
    if text.lower() in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except an unset one (None): such a flag's help says what it computes instead."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


class CommandParser(argparse.ArgumentParser):
    """Dataclass fields as flags, grouped per dataclass; a usage error is one line and exit 2."""

    def __init__(self, *args, dataclass_types=(), **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
        self.dataclass_types = list(dataclass_types)
        for dtype in self.dataclass_types:
            self._add_dataclass(dtype)

    def _add_dataclass(self, dtype) -> None:
        summary = (dtype.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        group = self.add_argument_group(dtype.__name__, summary)
        hints = typing.get_type_hints(dtype)
        for f in fields(dtype):
            if not f.init:
                continue
            kind = hints[f.name]
            choices = [a for a in typing.get_args(kind) if a is not type(None)]
            if type(None) in typing.get_args(kind):
                kind = choices[0]
            options = {"help": f.metadata.get("help", ""), "dest": f.name}
            if "choices" in f.metadata:
                options["choices"] = list(f.metadata["choices"])
            if typing.get_origin(kind) is list:
                options.update(nargs="+", type=typing.get_args(kind)[0])
            elif kind is bool:
                options.update(type=_boolean, nargs="?", const=True)
            else:
                options["type"] = kind
            if f.default is not MISSING:
                options["default"] = f.default
            elif f.default_factory is not MISSING:
                options["default"] = f.default_factory()
            else:
                options["required"] = True
            group.add_argument(f"--{f.name}", *f.metadata.get("aliases", []), **options)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is named with the closest one its command knows."""
        namespace, remaining = self.parse_known_args(args, namespace)
        if remaining:
            parser = self
            for action in self._actions:  # the subcommand's own flags, where one was chosen
                if isinstance(action, argparse._SubParsersAction):
                    parser = action.choices.get(getattr(namespace, action.dest, None), parser)
            self.error(unknown_flag(list(parser._option_string_actions), remaining, f"see `{parser.prog} --help`"))
        return namespace

    def dataclasses_from(self, namespace) -> tuple:
        """The parsed namespace as this parser's dataclasses; their checks raise UsageError."""
        return tuple(
            dtype(**{f.name: getattr(namespace, f.name) for f in fields(dtype) if f.init})
            for dtype in self.dataclass_types
        )
