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

How the texts are read: the printed text is the program's and may be a 1 MiB run of characters that each start a
number and fail (``1111...x``, ``1e-1e-...``). Against an expected output of few numbers it is read only where the
expected text says a number is; against one of many (``MANY_NUMBERS``) it is read whole, in C, as a correct output
must be. The pattern's quantifiers are possessive, so no attempt backtracks: a digit run is read once, whatever
follows it (a pattern that backtracks tries every split of the run in ``'1' * 12000 + 'x'``: seconds, holding the
GIL).
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal

# One group, the whole number: ``NUMBER.split`` gives the text and the numbers in turn.
NUMBER = re.compile(
    r"(?<![\w.])([-+]?+(?:(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][-+]?+[0-9]++)?+"
    r"|inf(?:inity)?+|nan))(?![\w.])",
    re.IGNORECASE,
)
INTEGER, FLOAT, INFINITY, NAN = "integer", "float", "infinity", "nan"
EXACT_FLOAT_DIGITS = 15  # an integer of at most this many digits is a float exactly (2^53 has 16)
# Digits an exact difference of an integer and a float may need beyond the integer's own: a double's value spans
# from 10^308 down to 10^-1074.
DOUBLE_SPAN = 1400
SIGNS = ("-", "+")
# An expected output with more numbers than this reads the printed text whole, in C, and compares the numbers after:
# a correct output costs more then than any other could (each of its numbers is compared), and a number at a time
# costs twice as much. With fewer, the printed text is read only where the expected one says a number is: a 1 MiB
# output of characters that each start a number and fail costs nothing past the expected output's length.
MANY_NUMBERS = 1024
INFINITIES = (float("inf"), float("-inf"))


def within_tolerance(printed: str, expected: str, tolerance: float) -> bool:
    """Whether ``printed`` is ``expected`` with each number within ``tolerance`` of the expected one at its place,
    the text around the numbers equal (module docstring): both texts read into numbers and the text between them,
    the same reading for each."""
    wanted = NUMBER.split(expected)  # text, number, text, ..., text
    if len(wanted) > 2 * MANY_NUMBERS:
        got = NUMBER.split(printed, len(wanted) // 2 + 1)  # one number more than expected is enough to tell
        return (
            len(got) == len(wanted)
            and got[0::2] == wanted[0::2]
            and all(
                (number == reference and number[-1] not in "nN") or same_number(number, reference, tolerance)
                for number, reference in zip(got[1::2], wanted[1::2])
            )
        )
    position = 0  # where the next text between numbers starts in printed
    match, search = NUMBER.match, NUMBER.search
    for index in range(1, len(wanted), 2):
        between = wanted[index - 1]
        if not printed.startswith(between, position):
            return False
        start = position + len(between)
        got = match(printed, start)
        if got is None:
            return False
        # A number read from inside the text before and running on into this one is read first: only a sign can
        # join them (``x -`` + ``5`` is ``-5``, ``1e-`` + ``5`` is ``1e-5``). The search is bounded: there is a
        # number at ``start``.
        if between[-1:] in SIGNS and search(printed, position).start() != start:
            return False
        if not same_number(got.group(), wanted[index], tolerance):
            return False
        position = got.end()
    return len(printed) - position == len(wanted[-1]) and printed.endswith(wanted[-1])


def same_number(got: str, wanted: str, tolerance: float) -> bool:
    """Whether the number written ``got`` is within ``tolerance`` of the one written ``wanted`` (module docstring);
    each is a ``NUMBER``. The common cases (the same text; two floats) come first: a long expected output may hold
    hundreds of thousands of numbers."""
    if got == wanted:
        return kind(got) is not NAN
    got_kind, wanted_kind = kind(got), kind(wanted)
    if got_kind is INTEGER and wanted_kind is INTEGER:
        return _integers_within(got, wanted, tolerance)
    if got_kind is NAN or wanted_kind is NAN:
        return False
    if got_kind is INFINITY or wanted_kind is INFINITY:
        return got_kind is wanted_kind and got.startswith("-") == wanted.startswith("-")
    # a float and a float or an integer; an integer a float does not hold exactly is compared exactly, as Python's
    # int == float has it
    if got_kind is INTEGER or wanted_kind is INTEGER:
        integer, other = (got, wanted) if got_kind is INTEGER else (wanted, got)
        if len(integer) > EXACT_FLOAT_DIGITS and len(integer.lstrip("+-")) > EXACT_FLOAT_DIGITS:
            value = float(other)
            if value in INFINITIES:  # a literal beyond the float range is no finite number
                return False
            return _exact_difference(Decimal(integer), Decimal(value), len(integer) + DOUBLE_SPAN) <= tolerance
    a, b = float(got), float(wanted)
    if a in INFINITIES or b in INFINITIES:  # beyond the float range, not an infinity: only the same value
        return a in INFINITIES and b in INFINITIES and _same_value(got, wanted)
    return abs(a - b) <= tolerance


def kind(number: str) -> str:
    """``INTEGER``, ``FLOAT``, ``INFINITY`` or ``NAN``: what a ``NUMBER`` writes (``inf`` and ``infinity`` end in
    ``f`` and ``y``, ``nan`` in ``n``; every other one in a digit or ``.``)."""
    end = number[-1]
    if end in "fFyY":
        return INFINITY
    if end in "nN":
        return NAN
    return FLOAT if "." in number or "e" in number or "E" in number else INTEGER


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
