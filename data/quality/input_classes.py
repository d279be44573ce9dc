"""Inputs of another class than a test's: where the wrong programs a model writes first are wrong.

A value perturbation (+1, reversed, one element shorter) keeps an input's class: a test set of lower-case strings
perturbed stays lower case, and a Caesar shift that also shifts upper case letters agrees with the solution on every
one of them. The first wrong programs a model writes are wrong on a whole class of inputs it forgot: upper case, 0,
a square of a prime, an empty list, touching intervals, a leading zero. ``class_values(value, description)`` gives,
for one literal argument, values of the classes it is not in:

- strings: the case swapped, all upper case, capitalised; an upper-case letter, a digit, punctuation or a space put
  in; and, where the description names them, leading zeros on the numbers it holds;
- integers: 0, 1, -1, 2, a negative, the powers of two near it and their neighbours, the squares of primes near it;
- lists: empty, one item, sorted, reversed, sorted the other way, an item repeated, every item the same; lists of
  ``[start, end]`` pairs also with one interval starting where another ends (touching).

What the description says the input is (sorted, positive, letters ...) is kept by ``wrong_programs.nearby_calls``,
which filters these values as it filters the others; what the solution refuses (an ``assert``, a ``domain``) is left
out when the solution is run on them.
"""

from __future__ import annotations

import math
import re

SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31)


def class_values(value, description: str = "") -> list:
    """Values of other classes than ``value`` (its type kept), in a fixed order; ``value`` itself left out."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        found = _integers(value)
    elif isinstance(value, str):
        found = _strings(value, description)
    elif isinstance(value, (list, tuple)):
        found = [type(value)(items) for items in _lists(list(value))]
    else:
        return []
    seen, unique = {repr(value)}, []
    for other in found:
        if repr(other) not in seen:
            seen.add(repr(other))
            unique.append(other)
    return unique


def _integers(value: int) -> list[int]:
    size = max(abs(value), 2)
    below = 1 << (size.bit_length() - 1)
    powers = [below, below * 2]
    root = math.isqrt(size)
    primes = sorted(SMALL_PRIMES, key=lambda p: abs(p - root))[:2]
    return [
        0,
        1,
        -1,
        2,
        -abs(value) or -1,
        *(p for power in powers for p in (power, power - 1, power + 1)),
        *sorted(p * p for p in primes),
        4,
        9,
        25,
    ]


def _strings(value: str, description: str) -> list[str]:
    middle = len(value) // 2
    found = [
        value.swapcase(),
        value.upper(),
        value[:1].upper() + value[1:],
        value + "Q",
        "Q" + value,
        value[:middle] + "7" + value[middle:],
        value + "!",
        value[:middle] + "," + value[middle:],
        value[:middle] + " " + value[middle:],
        " " + value,
        value + " ",
    ]
    if re.search(r"leading zero", description, re.IGNORECASE) and re.search(r"\d", value):
        numbers = list(re.finditer(r"\d+", value))
        for number in (numbers[0], numbers[-1]):
            found.append(value[: number.start()] + "0" + value[number.start() :])
    return found


def _lists(items: list) -> list[list]:
    found = [[], items[:1], items[-1:], items + items[:1], items[:1] + items, items[:1] * max(len(items), 2)]
    try:
        found += [sorted(items), sorted(items, reverse=True)]
    except TypeError:  # items that do not compare
        pass
    if len(items) > 1 and all(_is_interval(item) for item in items):
        found += _touching(items)
    return found


def _is_interval(item) -> bool:
    return (
        isinstance(item, (list, tuple))
        and len(item) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in item)
        and item[0] <= item[1]
    )


def _touching(intervals: list) -> list[list]:
    """The intervals with one of them moved to start where another ends, and the last two made to touch."""
    kind = type(intervals[0])
    ordered = sorted(intervals)
    found = []
    for first, second in ((ordered[0], ordered[1]), (ordered[-2], ordered[-1])):
        moved = kind([first[1], first[1] + (second[1] - second[0])])
        found.append([moved if item is second else item for item in intervals])
    found.append([*intervals, kind([ordered[-1][1], ordered[-1][1] + 1])])
    return found


# The classes a value is in, as generated pools count them (data/generation/pool.py).


def value_classes(value, depth: int = 0) -> set:
    """The features of a value the shape rule compares: its type, character classes, signs, short lengths, by
    depth."""
    if isinstance(value, bool):
        return {("bool", depth)}
    if isinstance(value, int):
        return {("int", depth), ("sign", depth, (value > 0) - (value < 0))}
    if isinstance(value, float):
        return {("float", depth), ("sign", depth, (value > 0) - (value < 0))}
    if isinstance(value, str):
        found = {("str", depth)} | {("chars", _char_class(c)) for c in value}
        found |= {("repeated", depth)} if len(set(value)) < len(value) else set()
        return found | ({("length", depth, len(value))} if len(value) < 2 else set())
    if value is None:
        return {("none", depth)}
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        found = {(type(value).__name__, depth)} | ({("length", depth, len(value))} if len(value) < 2 else set())
        if isinstance(value, (list, tuple)) and len(value) > 1:
            found |= _order_classes(list(value), depth)
        for item in value.items() if isinstance(value, dict) else value:
            found |= value_classes(item, depth + 1)
        return found
    return {(type(value).__name__, depth)}


def _order_classes(items: list, depth: int) -> set:
    """Duplicates, a tie for the largest, sorted and reversed order, and length: where ``sorted``, ``max`` and
    ``index`` go wrong."""
    found = {("long", depth)} if len(items) > 20 else set()
    try:
        if len({repr(item) for item in items}) < len(items):
            found.add(("duplicates", depth))
        if items.count(max(items)) > 1:
            found.add(("tie", depth))
        if items == sorted(items):
            found.add(("sorted", depth))
        elif items == sorted(items, reverse=True):
            found.add(("reversed", depth))
    except (TypeError, ValueError):
        pass
    return found


def _char_class(c: str) -> str:
    if not c.isascii():
        return "non-ascii"
    return (
        "lower"
        if c.islower()
        else "upper"
        if c.isupper()
        else "digit"
        if c.isdigit()
        else ("space" if c.isspace() else "other")
    )
