"""A test with a tolerance: where the numbers of a printed text are, and whether each is within the tolerance of
the expected one at its place. Pure, and linear in the texts: it runs in the judge's threads on whatever a program
printed (up to the 1 MiB output cap), so no input may make it slow.

A number is written as Python, C and most languages print one, and is not part of a word: ``3``, ``-2``, ``0.5``,
``1e-06``, ``.5``, ``2.``, ``inf``, ``-Infinity``, ``nan`` (case aside; ASCII digits only). Its sign belongs to it
unless a word character or ``.`` stands before the sign (``x-1`` is ``x-`` and ``1``); no word character or ``.``
may stand right before or after it (``x1``, ``1.2.3`` and ``1e5x`` are text).

Two numbers at one place are compared as numbers, as Python's ``==`` compares them, within the tolerance:

- two integers (no ``.``, no exponent) exactly, at any size: ``9007199254740993`` is not ``9007199254740992``
  (as floats they are one number);
- otherwise as the floats their text reads as (``0.30000000000000004`` is within 1e-9 of ``0.3``), an integer beside
  a float exactly as Python compares an int with a float;
- a literal beyond the float range (``1e999``, which ``float`` reads as inf) is never equal to a finite number nor to
  an infinity, only to another such literal of the same value; an infinity equals only an infinity of its sign
  written as one (``inf``, ``Infinity``); nan equals nothing (a text is still equal to itself, nan and all).

Why a search anchored by the expected text, not two tokenised texts: the printed text is the program's and may be a
1 MiB run of characters that each start a number and fail (``1111...x``, ``1e-1e-...``); each has to be read
only as far as the expected text says a number or its text is there. The regular expression's quantifiers are
possessive, so no attempt backtracks: a digit run is read once, whatever follows it.
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal

NUMBER = re.compile(r"(?<![\w.])[-+]?+(?:(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][-+]?+[0-9]++)?+"
                    r"|inf(?:inity)?+|nan)(?![\w.])", re.IGNORECASE)
INTEGER, FLOAT, INFINITY, NAN = "integer", "float", "infinity", "nan"
EXACT_FLOAT_DIGITS = 15  # an integer of at most this many digits is a float exactly (2^53 has 16)
# Digits an exact difference of an integer and a float may need beyond the integer's own: a double's value spans
# from 10^308 down to 10^-1074.
DOUBLE_SPAN = 1400


def within_tolerance(printed: str, expected: str, tolerance: float) -> bool:
    """Whether ``printed`` is ``expected`` with each number within ``tolerance`` of the expected one at its place,
    the text around the numbers equal (module docstring). Both texts are read as one reading of each would read
    them: the text between two numbers must be equal, and the printed number must start where that text ends and
    be the first number read from where the text before it starts."""
    position, last = 0, 0  # where the next text between numbers starts, in printed and in expected
    for wanted in NUMBER.finditer(expected):
        between = expected[last:wanted.start()]
        if not printed.startswith(between, position):
            return False
        start = position + len(between)
        got = NUMBER.match(printed, start)
        if got is None:
            return False
        # A number read from inside the text before and running on into this one is read first: only a sign can
        # join them (``x -`` + ``5`` is ``-5``, ``1e-`` + ``5`` is ``1e-5``). The search is bounded: there is a
        # number at ``start``.
        if between[-1:] in ("-", "+") and NUMBER.search(printed, position).start() != start:
            return False
        if not same_number(got.group(), wanted.group(), tolerance):
            return False
        position, last = got.end(), wanted.end()
    return len(printed) - position == len(expected) - last and printed.endswith(expected[last:])


def same_number(got: str, wanted: str, tolerance: float) -> bool:
    """Whether the number written ``got`` is within ``tolerance`` of the one written ``wanted`` (module docstring);
    each is a ``NUMBER``."""
    if got == wanted:
        return kind(got) != NAN
    kinds = kind(got), kind(wanted)
    if NAN in kinds:
        return False
    if INFINITY in kinds:
        return kinds == (INFINITY, INFINITY) and got.startswith("-") == wanted.startswith("-")
    if kinds == (INTEGER, INTEGER):
        return _integers_within(got, wanted, tolerance)
    floats = [float(text) if each == FLOAT else None for text, each in zip((got, wanted), kinds)]
    beyond = [value is not None and value in (float("inf"), float("-inf")) for value in floats]
    if any(beyond):
        return all(beyond) and _same_value(got, wanted)
    if INTEGER in kinds:  # an integer beside a float, exactly as Python compares them
        integer, other = (got, floats[1]) if kinds[0] == INTEGER else (wanted, floats[0])
        if len(integer.lstrip("+-")) > EXACT_FLOAT_DIGITS:
            return _exact_difference(Decimal(integer), Decimal(other), len(integer) + DOUBLE_SPAN) <= tolerance
        floats = [float(integer) if value is None else value for value in floats]
    return abs(floats[0] - floats[1]) <= tolerance


def kind(number: str) -> str:
    """``INTEGER``, ``FLOAT``, ``INFINITY`` or ``NAN``: what a ``NUMBER`` writes."""
    body = number.lstrip("+-")
    if body[0] in "iI":
        return INFINITY
    if body[0] in "nN":
        return NAN
    return FLOAT if "." in body or "e" in body or "E" in body else INTEGER


def _integers_within(got: str, wanted: str, tolerance: float) -> bool:
    """Two integers, at any size, in time linear in their length: Python's ``int`` of a long text is quadratic and
    refuses over 4300 digits; a ``Decimal``'s is linear."""
    if max(len(got), len(wanted)) <= 18:
        return abs(int(got) - int(wanted)) <= tolerance  # int against float: exact in Python
    return _exact_difference(Decimal(got), Decimal(wanted), max(len(got), len(wanted)) + 1) <= tolerance


def _exact_difference(a: Decimal, b: Decimal, digits: int) -> Decimal:
    """``|a - b|`` worked out to ``digits`` significant digits, enough to be exact for the operands given."""
    with decimal.localcontext() as context:
        context.prec, context.Emax, context.Emin = digits, decimal.MAX_EMAX, decimal.MIN_EMIN
        return abs(a - b)


def _same_value(got: str, wanted: str) -> bool:
    """Two literals beyond the float range: equal values (``1e999``, ``1.0E+999``); the same text where an exponent
    is beyond what a ``Decimal`` holds."""
    try:
        return Decimal(got) == Decimal(wanted)
    except decimal.InvalidOperation:
        return got == wanted
