"""What every command shares and nothing heavy: one-line usage errors, flag checks and parsing, the JSONL
reader. It imports only the standard library, so any package may import it."""

from cli.errors import LocatedError, UsageError
from cli.flags import CommandParser, positive
from cli.jsonl import json_lines, read_json_objects

__all__ = ["UsageError", "LocatedError", "CommandParser", "positive", "json_lines", "read_json_objects"]
