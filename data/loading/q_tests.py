"""Only output is compared, on the host, for q too: a q test is accepted only as printed calls of the entry point on
literals, an allow-list.

q values carry no behaviour, but a solution can read the script it runs in, and a test that computes on the result
keeps the compared value in its text: ``show solve[3]-6`` expecting ``0`` is passed by a ``solve`` that finds ``-6``
there and returns 6, and so are ``show not solve[3]~6``, ``show signum solve[3]-6``, ``show ?[solve[3]=6;1;0]``,
``show solve[1 2] except 2``, ``show distinct solve[1 2]`` and every other form that hands the verdict to what the
script says. A test that prints the result, compared as text by the judge on the host, holds nothing to read: its
expected output never enters the sandbox. Rather than name the ways to compute on a result (q has many), only this
form is accepted (``refusal`` says why anything else is not, with its line):

- set-up lines ``name:LITERAL`` (a q name, not the entry point), each name passed to a call below (an unused one is
  a constant a solution could read);
- then lines ``show CALL`` or ``show (CALL;CALL;...)``, each ``CALL`` the entry point applied to its arguments,
  ``solve[a;b]`` (``solve[]`` for none) or ``solve a`` (one argument), each argument a literal or a set-up name;
- blank lines and comments (a line starting with ``/``, `` /`` after code, a block between lines ``/`` and ``\\``);
  statements of one line may be separated by ``;``.

A literal is a number, boolean, temporal or null atom, or a vector of them (``6``, ``-1 2``, ``101b``, ``3 9 2f``,
``1e-6``, ``2020.01.01``, ``12:30``, ``0N``), a string (``"ab"``, escapes included), symbols (`` `a`b ``), a general
list of literals (``(1 2;"ab")``, ``()``), a typed empty list (`` `long$() ``), or ``enlist`` or ``til`` of a literal.
q has no parser here (q is not always installed), so the form is read by the small grammar below; it reads each
token as q's own lexer does for these forms (a ``-`` is a sign only where an argument starts, ``x-1`` subtracts).
"""

from __future__ import annotations

import re

# One token: a string; symbols (`a`b, `:file/path) and a typed empty list (`long$()); a numeric, boolean, temporal,
# null or byte atom (a sign only where a value may start, an exponent's sign, a time's colons after two digits); a
# name; white space; one of the punctuation q's literals and calls use; anything else, one character at a time.
TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*")
    |(?P<typed>`[a-z]*\$\(\))
    |(?P<symbols>(?:`(?::[A-Za-z0-9._/:]*|[A-Za-z0-9._]*))+)
    |(?P<atom>(?:(?<![^\s\[(;:])-)?(?:[0-9]|\.[0-9])
              (?:[0-9A-Za-z.]|(?<=[0-9][eE])[-+](?=[0-9])|(?<=[0-9]{2}):(?=[0-9]{2}))*)
    |(?P<name>[A-Za-z][A-Za-z0-9_]*)
    |(?P<space>[ \t]+)
    |(?P<punct>[\[\]();:])
    |(?P<other>.)""",
    re.VERBOSE,
)
# q keywords that make a value of a literal: they run before the call, never on its result
VALUE_WORDS = ("enlist", "til")
SHOWN = 40  # characters of a statement quoted in a refusal


class Refusal(Exception):
    """Why a q test is not printed calls on literals; ``str`` is the reason."""


def refusal(test_code: str, entry_point: str = "solve") -> str | None:
    """Why a q test is not in the printing form (``"line 2: ..."``), or None when it is."""
    set_up, passed, printed = {}, set(), False
    for number, line in _code_lines(test_code):
        if line[:1] in (" ", "\t"):
            return f"line {number}: it starts with white space, which q reads as the line before continued"
        for statement in _statements(_tokens(line)):
            if not statement:
                continue
            try:
                if not printed and _is_set_up(statement):
                    name = statement[0][1]
                    if name == entry_point:
                        raise Refusal(f"`{name}` is set: the test would replace the judged function")
                    if _literal(statement, _skip_space(statement, 2)) != len(statement):
                        raise Refusal(f"`{name}` is set to `{_shown(statement, 2).strip()}`, not a literal")
                    set_up[name] = number
                    continue
                passed |= _printed_calls(statement, entry_point, set_up)
                printed = True
            except Refusal as reason:
                return f"line {number}: {reason}"
    if not printed:
        return f"it shows no call of {entry_point}"
    unused = sorted(set(set_up) - passed, key=set_up.get)
    if unused:
        return f"line {set_up[unused[0]]}: `{unused[0]}` is set but never passed to {entry_point}"
    return None


def _code_lines(test_code: str):
    """``(number, line)`` for each line that is not blank or a comment, with its trailing comment removed."""
    in_block = False
    for number, line in enumerate(test_code.split("\n"), 1):
        if in_block or line.rstrip() == "/":
            in_block = line.rstrip() != "\\"
            continue
        line = _without_comment(line)
        if line.startswith("/") or not line.strip():
            continue
        yield number, line.rstrip()


def _without_comment(line: str) -> str:
    """``line`` up to a `` /`` outside strings (q's trailing comment)."""
    in_string, escaped = False, False
    for index, char in enumerate(line):
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            in_string = True
        elif char == "/" and index and line[index - 1] in " \t":
            return line[:index]
    return line


def _tokens(line: str) -> list[tuple[str, str]]:
    return [(match.lastgroup, match.group()) for match in TOKEN.finditer(line)]


def _statements(tokens: list) -> list[list]:
    """``tokens`` split at the semicolons outside brackets and parentheses, each without its outer white space."""
    statements, current, depth = [], [], 0
    for token in tokens:
        if token == ("punct", ";") and depth == 0:
            statements.append(current)
            current = []
            continue
        if token[0] == "punct" and token[1] in "[(":
            depth += 1
        elif token[0] == "punct" and token[1] in "])":
            depth -= 1
        current.append(token)
    statements.append(current)
    return [_trimmed(statement) for statement in statements]


def _trimmed(tokens: list) -> list:
    start, end = 0, len(tokens)
    while start < end and tokens[start][0] == "space":
        start += 1
    while end > start and tokens[end - 1][0] == "space":
        end -= 1
    return tokens[start:end]


def _shown(tokens: list, start: int = 0) -> str:
    text = "".join(token[1] for token in tokens[start:])
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _is_set_up(statement: list) -> bool:
    return (
        len(statement) > 2
        and statement[0][0] == "name"
        and statement[0][1] not in ("show", *VALUE_WORDS)
        and statement[1] == ("punct", ":")
    )


def _printed_calls(statement: list, entry_point: str, set_up: dict) -> set[str]:
    """The set-up names a statement ``show CALL`` or ``show (CALL;...)`` passes; Refusal for any other statement."""
    if (
        statement[0] != ("name", "show")
        or len(statement) < 3
        or statement[1][0] != "space"
        and statement[1] != ("punct", "(")
    ):
        raise Refusal(f"`{_shown(statement)}` is not show {entry_point}[...] or a set-up line `name:literal`")
    position, names = _skip_space(statement, 1), set()
    if statement[position] == ("punct", "("):
        position += 1
        while True:
            position = _skip_space(statement, position)
            position = _call(statement, position, entry_point, set_up, names, (";", ")"))
            position = _skip_space(statement, position)
            if position < len(statement) and statement[position] == ("punct", ";"):
                position += 1
                continue
            if position < len(statement) and statement[position] == ("punct", ")"):
                position += 1
                break
            raise Refusal(f"`{_shown(statement, 2)}`: each item of the shown list must be a call of {entry_point}")
    else:
        position = _call(statement, position, entry_point, set_up, names, ())
    if position != len(statement):
        raise Refusal(
            f"`{_shown(statement, position).strip()}` after the call in `{_shown(statement)}`: a test "
            f"shows what {entry_point} returns, and computes nothing on it"
        )
    return names


def _call(tokens: list, position: int, entry_point: str, set_up: dict, names: set, ends: tuple) -> int:
    """Where the call of ``entry_point`` at ``position`` ends, its argument names added to ``names``."""
    if position >= len(tokens) or tokens[position] != ("name", entry_point):
        raise Refusal(
            f"`{_shown(tokens, position)}` is not a call of {entry_point} (a test shows what "
            f"{entry_point} returns, and computes nothing on it)"
        )
    position += 1
    if position < len(tokens) and tokens[position] == ("punct", "["):
        position += 1
        if tokens[position : position + 1] == [("punct", "]")]:
            return position + 1  # no arguments
        while True:
            position = _argument(tokens, _skip_space(tokens, position), set_up, names, entry_point)
            position = _skip_space(tokens, position)
            if position < len(tokens) and tokens[position] == ("punct", ";"):
                position += 1
                continue
            if position < len(tokens) and tokens[position] == ("punct", "]"):
                return position + 1
            raise Refusal(
                f"`{_shown(tokens, position)}` in the arguments of {entry_point} is not a literal or a set-up name"
            )
    if position < len(tokens) and tokens[position][0] == "space":
        return _argument(tokens, position + 1, set_up, names, entry_point)
    raise Refusal(f"`{_shown(tokens, position - 1)}` is not {entry_point}[...] or {entry_point} followed by a literal")


def _argument(tokens: list, position: int, set_up: dict, names: set, entry_point: str) -> int:
    if position < len(tokens) and tokens[position][0] == "name" and tokens[position][1] in set_up:
        names.add(tokens[position][1])
        return position + 1
    if position >= len(tokens) or tokens[position] in (("punct", ";"), ("punct", "]")):
        raise Refusal(f"an argument of {entry_point} is left out (a projection, not a call)")
    return _literal(tokens, position)


def _literal(tokens: list, position: int) -> int:
    """Where the literal at ``position`` ends; Refusal when none starts there."""
    if position >= len(tokens):
        raise Refusal("a literal is missing")
    kind, text = tokens[position]
    if kind in ("string", "typed", "symbols"):
        return position + 1
    if kind == "atom":  # a vector: atoms apart by white space
        position += 1
        while position + 1 < len(tokens) and tokens[position][0] == "space" and tokens[position + 1][0] == "atom":
            position += 2
        return position
    if kind == "name" and text in VALUE_WORDS and position + 1 < len(tokens) and tokens[position + 1][0] == "space":
        return _literal(tokens, position + 2)
    if (kind, text) == ("punct", "("):
        position = _skip_space(tokens, position + 1)
        if position < len(tokens) and tokens[position] == ("punct", ")"):
            return position + 1
        while True:
            position = _skip_space(tokens, _literal(tokens, _skip_space(tokens, position)))
            if position < len(tokens) and tokens[position] == ("punct", ";"):
                position += 1
                continue
            if position < len(tokens) and tokens[position] == ("punct", ")"):
                return position + 1
            raise Refusal(f"`{_shown(tokens, position)}` in a list is not a literal")
    raise Refusal(f"`{_shown(tokens, position)}` is not a literal or a set-up name")


def _skip_space(tokens: list, position: int) -> int:
    while position < len(tokens) and tokens[position][0] == "space":
        position += 1
    return position
