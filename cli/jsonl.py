"""The one JSONL reader: problem files, completion files, scores and run logs."""

import json
from pathlib import Path
from typing import Iterator

from cli.errors import LocatedError, UsageError


def json_lines(text: str, path, hint: str = "") -> Iterator[tuple[int, object]]:
    """``(line number, value)`` of each non-blank line of ``text`` read from ``path``; a line that is not JSON
    raises ``LocatedError`` at ``path:line``, with ``hint`` (how to fix it) appended."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            reason = f"invalid JSON ({error.msg} at column {error.colno})" + (f"; {hint}" if hint else "")
            raise LocatedError(f"{path}:{number}", reason) from None


def read_json_objects(path, required: dict[str, type] | None = None, hint: str = "") -> list[dict]:
    """The JSON objects of the file at ``path``, one per line, each with ``_line`` set to its line number.

    ``required`` maps keys to the type their values must have. Missing or unreadable files raise UsageError;
    a bad line raises LocatedError at ``path:line``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror}") from None
    records = []
    for number, record in json_lines(text, path, hint):
        if not isinstance(record, dict):
            raise LocatedError(f"{path}:{number}", "expected a JSON object" + (f"; {hint}" if hint else ""))
        for key, kind in (required or {}).items():
            if not isinstance(record.get(key), kind):
                raise LocatedError(
                    f"{path}:{number}", f"'{key}' must be a {_kind_name(kind)}" + (f"; {hint}" if hint else "")
                )
        record["_line"] = number
        records.append(record)
    return records


def _kind_name(kind) -> str:
    return " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
