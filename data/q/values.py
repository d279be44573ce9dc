"""The map between Python values and q's, within the printing convention of data/README.md ("q tests: the printing
convention"), so that a problem's Python twin can make and check q tests where no q runs.

- ``q_literal``: a Python argument as a q literal (``5``, ``1 2 3``, ``enlist 5``, `` `long$() ``, ``"abc"``,
  ``enlist "a"``, ``1b``, ``101b``, `` `a`b ``, ``(1 2;3 4)``);
- ``q_shown``: a Python result as the text q's ``show`` prints for it (``9``, ``01b``, `` `Fizz ``, ``"olleh"``,
  ``1 3 6``), and ``q_shown_calls`` for a test printing several calls, ``show (solve[a];solve[b])``, whose atoms
  form one vector (``(False, True)`` is shown as ``01b``);
- ``parse_test`` and ``parse_literal`` the other way: a q test's calls and literals as Python values, and
  ``parse_shown`` a q test's expected output.

Python cannot tell a q char from a one-character string, nor a symbol from a string: each is a ``str``. Where the
Python type does not decide, the problem's own q tests do (``QForms.of_tests``: the forms their literals and
expected outputs show at each argument position and for the result), and the mapping says which test decided
(``Mapped.decided``). Anything outside the convention is refused with a ``Refused`` naming it, never guessed:
floats, ``None``, dictionaries, sets, a one-item or empty vector or a general list as a result, a string holding
``"``, ``\\`` or a character outside printable ASCII, a shown line of 80 characters or more, a long outside q's
(``0N`` and ``0W`` are nulls and infinities).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from judging.records import Test

LONG, BOOLEAN, SYMBOL, CHAR = "long", "boolean", "symbol", "char"
LONGS, BOOLEANS, SYMBOLS, STRING = "long vector", "boolean vector", "symbol vector", "string"
LIST = "general list"
ATOM_OF = {LONGS: LONG, BOOLEANS: BOOLEAN, SYMBOLS: SYMBOL, STRING: CHAR}
VECTOR_OF = {atom: vector for vector, atom in ATOM_OF.items()}
TEXT_FORMS = (SYMBOL, CHAR, STRING)  # what a Python str may be
EMPTY_LITERAL = {LONGS: "`long$()", BOOLEANS: "`boolean$()", SYMBOLS: "`$()", STRING: '""', LIST: "()"}
LONG_MIN, LONG_MAX = -(2**63) + 2, 2**63 - 2  # -2^63 is 0N, +-(2^63 - 1) are +-0W
CONSOLE_WIDTH = 80  # q's default \c: a shown line this long or longer is cut with ..
SYMBOL_TEXT = re.compile(r"[A-Za-z0-9_.]+")
STRING_TEXT = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII without " and \


class Refused(ValueError):
    """A value or text outside the printing convention; ``str(error)`` names what and why."""


@dataclass(frozen=True)
class Form:
    """A q value's form: an atom, a simple vector, or a general list with the forms of its items."""

    name: str
    items: frozenset = frozenset()

    def __str__(self):
        if self.name != LIST or not self.items:
            return self.name
        items = sorted(map(str, self.items))
        return f"{LIST} of " + (items[0] if len(items) == 1 else "(" + " or ".join(items) + ")")


@dataclass(frozen=True)
class QValue:
    """A value read from q text: its ``form`` and the Python value a twin is called with (int, bool, str, list)."""

    form: Form
    python: object


@dataclass(frozen=True)
class Mapped:
    """A mapping's q text and, for each choice the Python type did not decide, what decided it; ``form`` is the q
    form of what was mapped (None for several calls' results)."""

    text: str
    decided: tuple[str, ...] = ()
    form: Form | None = None


Hints = dict  # Form -> where the q tests show it ("tests[2]")


@dataclass
class QForms:
    """The forms a q problem's tests show: at each argument position (0-based), for the result of one call, and for
    the result of a call whose arguments have given forms (the first item of a symbol vector is a symbol, of a string
    a char)."""

    arguments: dict[int, Hints] = field(default_factory=dict)
    result: Hints = field(default_factory=dict)
    result_by_arguments: dict[tuple, Hints] = field(default_factory=dict)

    def result_of(self, argument_forms: tuple | None = None) -> Hints:
        """The result forms the q tests show for a call with arguments of these forms, else for any call."""
        return self.result_by_arguments.get(tuple(argument_forms or ()), self.result)

    @classmethod
    def of_tests(cls, tests: Sequence[Test], entry_point: str = "solve") -> "QForms":
        """The forms every test that reads (``parse_test``, ``parse_shown``) shows; the others add nothing."""
        forms = cls()
        for index, test in enumerate(tests):
            where = f"tests[{index}]"
            try:
                calls = parse_test(test.test_code, entry_point)
            except Refused:
                continue
            for arguments in calls:
                for position, argument in enumerate(arguments):
                    forms.arguments.setdefault(position, {}).setdefault(argument.form, where)
            try:
                shown = parse_shown(test.expected_output)
            except Refused:
                continue
            if len(calls) == 1:
                results = [shown.form]
            elif shown.form.name in ATOM_OF and len(shown.python) == len(calls):
                results = [Form(ATOM_OF[shown.form.name])] * len(calls)
            else:
                continue
            for arguments, result in zip(calls, results):
                forms.result.setdefault(result, where)
                key = tuple(argument.form for argument in arguments)
                forms.result_by_arguments.setdefault(key, {}).setdefault(result, where)
        return forms


# Python to q.


def q_literal(value, hints: Hints | None = None) -> Mapped:
    """The q literal of a Python argument; ``hints`` (the forms the q tests show at its position) decide what a
    ``str`` or an empty list is."""
    decided: list[str] = []
    form = _form(value, hints or {}, decided)
    return Mapped(_literal_of(value, form, hints or {}, decided), _once(decided), form)


def q_shown(value, hints: Hints | None = None) -> Mapped:
    """What q's ``show`` prints for a Python result; ``hints`` (the result forms the q tests show) decide what a
    ``str`` is."""
    decided: list[str] = []
    form = _form(value, hints or {}, decided, result=True)
    return Mapped(_line(_shown(value, form)), _once(decided), form)


def q_shown_calls(values: list, hints: Hints | None = None) -> Mapped:
    """What ``show (solve[a];solve[b];...)`` prints for the results of a test's calls: one call's result as
    ``q_shown``; several atoms of one form as the vector they make (``(False, True)``: ``01b``)."""
    if len(values) == 1:
        return q_shown(values[0], hints)
    decided: list[str] = []
    forms = [_form(value, hints or {}, decided, result=True) for value in values]
    if any(form.name not in VECTOR_OF for form in forms):
        raise Refused(
            f"the results {_python_text(values)} are not all atoms: shown together they are a general list, "
            "printed on several lines"
        )
    if len(set(forms)) > 1:
        raise Refused(
            f"the results {_python_text(values)} are atoms of different types ("
            f"{', '.join(sorted({f.name for f in forms}))}): shown together they are a general list"
        )
    vector = Form(VECTOR_OF[forms[0].name])
    return Mapped(_line(_shown(list(values) if vector.name != STRING else "".join(values), vector)), _once(decided))


def _once(decided: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(decided))


def q_shown_values(values: list[QValue]) -> str:
    """What ``show`` prints for q values read from a test (``parse_test``): one value as itself, several atoms of one
    form as their vector (the identity echoing ``(solve[a];solve[b])``'s arguments)."""
    if len(values) == 1:
        return _line(_shown(values[0].python, values[0].form))
    forms = {value.form for value in values}
    if len(forms) != 1 or next(iter(forms)).name not in VECTOR_OF:
        raise Refused("the values are not atoms of one type: shown together they are a general list")
    vector = Form(VECTOR_OF[next(iter(forms)).name])
    items = [value.python for value in values]
    return _line(_shown("".join(items) if vector.name == STRING else items, vector))


def _line(text: str) -> str:
    if len(text) >= CONSOLE_WIDTH:
        raise Refused(
            f"q's show prints {len(text)} characters on the line, which the console width ({CONSOLE_WIDTH}) "
            "cuts with .."
        )
    return text


def _refuse_type(value) -> None:
    if isinstance(value, float):
        raise Refused(f"the float {value!r} (q prints floats to \\P digits, not as Python does)")
    if value is None:
        raise Refused("None (q has no value that prints as it)")
    if isinstance(value, dict):
        raise Refused("a dictionary (q prints one on several lines)")
    if isinstance(value, (set, frozenset)):
        raise Refused("a set (no q form; its order varies)")
    raise Refused(f"a {type(value).__name__} ({_python_text(value)}) has no q form in the convention")


def _python_text(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_long(value: int) -> None:
    if not LONG_MIN <= value <= LONG_MAX:
        raise Refused(f"the integer {value} is outside q's longs (or one of its nulls and infinities)")


def _check_text(value: str, what: str) -> None:
    if not STRING_TEXT.fullmatch(value):
        bad = next(c for c in value if not STRING_TEXT.fullmatch(c))
        raise Refused(
            f'the {what} {value!r} holds {bad!r} (q escapes " and \\ and has no such character in a printable form)'
        )


def _text_form(value: str, hints: Hints, decided: list, result: bool) -> Form:
    """What a Python ``str`` is in q (symbol, char or string), as the q tests show at its place."""
    seen = {form.name: where for form, where in hints.items() if form.name in TEXT_FORMS}
    if SYMBOL in seen and (CHAR in seen or STRING in seen):
        other = CHAR if CHAR in seen else STRING
        raise Refused(
            f"cannot tell a q symbol from a {other} for {value!r}: {seen[SYMBOL]} shows a symbol here and "
            f"{seen[other]} a {other}"
        )
    if SYMBOL in seen:
        decided.append(f"{value!r} is a symbol, as {seen[SYMBOL]} shows")
        return Form(SYMBOL)
    if CHAR in seen and (len(value) == 1 or STRING not in seen):
        if len(value) != 1:
            raise Refused(f"{value!r} is not one character, and {seen[CHAR]} shows a char here")
        decided.append(f"{value!r} is a char, as {seen[CHAR]} shows")
        return Form(CHAR)
    if STRING in seen:
        decided.append(f"{value!r} is a string, as {seen[STRING]} shows")
        return Form(STRING)
    place = "the result" if result else "this argument"
    raise Refused(f"cannot tell whether {value!r} is a q string, char or symbol: no q test shows {place} as text")


def _list_hints(hints: Hints) -> tuple[Hints, list[str]]:
    """The item hints of the general lists the q tests show here, and where."""
    items: Hints = {}
    where = []
    for form, seen in hints.items():
        if form.name == LIST:
            where.append(seen)
            for item in form.items:
                items.setdefault(item, seen)
    return items, where


def _form(value, hints: Hints, decided: list, result: bool = False) -> Form:
    """The q form of a Python value: by its type where that decides, by ``hints`` where it does not."""
    if isinstance(value, bool):
        return Form(BOOLEAN)
    if isinstance(value, int):
        _check_long(value)
        return Form(LONG)
    if isinstance(value, str):
        return _text_form(value, hints, decided, result)
    if not isinstance(value, (list, tuple)):
        _refuse_type(value)
    items = list(value)
    vectors = {form.name: where for form, where in hints.items() if form.name in ATOM_OF or form.name == LIST}
    if not items:
        if len(vectors) != 1:
            shown = ", ".join(f"{name} ({where})" for name, where in vectors.items()) or "no list"
            raise Refused(f"cannot tell which q type an empty list is: the q tests show {shown} here")
        ((name, where),) = vectors.items()
        decided.append(f"the empty list is a {name}, as {where} shows")
        return Form(name)
    if all(isinstance(x, bool) for x in items):
        return Form(BOOLEANS)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        for x in items:
            _check_long(x)
        return Form(LONGS)
    if all(isinstance(x, str) for x in items):
        item_hints, lists = _list_hints(hints)
        if SYMBOLS in vectors and lists:
            raise Refused(
                f"cannot tell a symbol vector from a list of strings for {_python_text(value)}: "
                f"{vectors[SYMBOLS]} shows one here, {lists[0]} the other"
            )
        if SYMBOLS in vectors:
            decided.append(f"{_python_text(value)} is a symbol vector, as {vectors[SYMBOLS]} shows")
            for x in items:
                _symbol_text(x)
            return Form(SYMBOLS)
        if not lists:
            raise Refused(
                f"cannot tell whether {_python_text(value)} is a q symbol vector or a list of strings: no q "
                "test shows a list of text here"
            )
        decided.append(f"{_python_text(value)} is a general list, as {lists[0]} shows")
        return Form(LIST, frozenset(_form(x, item_hints, decided, result) for x in items))
    item_hints, _ = _list_hints(hints)
    return Form(LIST, frozenset(_form(x, item_hints, decided, result) for x in items))


def _symbol_text(value: str) -> str:
    if not SYMBOL_TEXT.fullmatch(value):
        raise Refused(
            f"the symbol {value!r} holds characters other than letters, digits, _ and . (its `name form "
            "would not read back)"
        )
    return "`" + value


def _atom_text(value, form: Form) -> str:
    if form.name == BOOLEAN:
        return "1b" if value else "0b"
    if form.name == LONG:
        return str(value)
    if form.name == SYMBOL:
        return _symbol_text(value)
    _check_text(value, "char")
    return f'"{value}"'


def _literal_of(value, form: Form, hints: Hints, decided: list) -> str:
    if form.name in VECTOR_OF:
        return _atom_text(value, form)
    if form.name == STRING:
        _check_text(value, "string")
        return f'enlist "{value}"' if len(value) == 1 else f'"{value}"'
    items = list(value)
    if not items:
        return EMPTY_LITERAL[form.name]
    if form.name == LIST:
        item_hints, _ = _list_hints(hints)
        texts = [_literal_of(x, _form(x, item_hints, decided), item_hints, decided) for x in items]
        return f"enlist {texts[0]}" if len(texts) == 1 else "(" + ";".join(texts) + ")"
    atom = Form(ATOM_OF[form.name])
    texts = [_atom_text(x, atom) for x in items]
    if len(texts) == 1:
        return f"enlist {texts[0]}"
    if form.name == BOOLEANS:
        return "".join(text[0] for text in texts) + "b"
    return ("" if form.name == SYMBOLS else " ").join(texts)


def _shown(value, form: Form) -> str:
    if form.name in VECTOR_OF:
        return _atom_text(value, form)
    if form.name == LIST:
        raise Refused(f"{_python_text(value)} is a general list (q prints it on several lines)")
    items = list(value)
    if len(items) < 2:
        printed = "," + _atom_text(items[0], Form(ATOM_OF[form.name])) if items else EMPTY_LITERAL[form.name]
        raise Refused(
            f"{_python_text(value)} is a {form.name} of {len(items)} item{'s' * (len(items) != 1)}, which "
            f"q prints as {printed}; the convention forbids it"
        )
    if form.name == STRING:
        _check_text(value, "string")
        return f'"{value}"'
    return _literal_of(value, form, {}, [])


# q to Python.

_TOKEN = re.compile(
    r"""\s*(?:(?P<string>"[^"\\]*")|(?P<typed>`(?:long|boolean|symbol)?\$\(\))
                        |(?P<bools>[01]+b)(?![\w.])
                        |(?P<number>-?\d+)(?![\w.])|(?P<symbols>(?:`[A-Za-z0-9_.]+)+)(?![\w`])
                        |(?P<punct>[();\[\]])|(?P<enlist>enlist)(?![\w.]))""",
    re.VERBOSE,
)
TYPED_EMPTY = {"`long$()": LONGS, "`boolean$()": BOOLEANS, "`symbol$()": SYMBOLS, "`$()": SYMBOLS}


def _tokens(text: str) -> list[tuple[str, str, bool]]:
    """``(kind, text, after whitespace)`` for each token of a q literal."""
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            rest = text[position:].strip()
            raise Refused(
                f"{rest[:30]!r} is not a q literal of the convention (longs, booleans, symbols, chars, "
                "strings, enlist, (a;b), `long$() ...)"
            )
        kind = match.lastgroup
        tokens.append((kind, match.group(kind), match.start(kind) > position))
        position = match.end()
    return tokens


def parse_literal(text: str) -> QValue:
    """A q literal of the convention (as ``q_literal`` writes them, and general lists) as a ``QValue``."""
    tokens = _tokens(text)
    value, position = _expression(tokens, 0)
    if position != len(tokens):
        raise Refused(f"{text.strip()[:40]!r} is more than one q literal")
    return value


def _expression(tokens: list, position: int) -> tuple[QValue, int]:
    if position >= len(tokens):
        raise Refused("a q literal is missing")
    kind, text, _ = tokens[position]
    if kind == "enlist":
        item, position = _expression(tokens, position + 1)
        return _enlisted(item), position
    if kind == "punct" and text == "(":
        items, position = [], position + 1
        if position < len(tokens) and tokens[position][:2] == ("punct", ")"):
            return QValue(Form(LIST), []), position + 1
        while True:
            item, position = _expression(tokens, position)
            items.append(item)
            if position < len(tokens) and tokens[position][:2] == ("punct", ";"):
                position += 1
                continue
            if position < len(tokens) and tokens[position][:2] == ("punct", ")"):
                break
            raise Refused("a ( without its ) in a q literal")
        return (items[0] if len(items) == 1 else _general(items)), position + 1
    if kind == "typed":
        return QValue(Form(TYPED_EMPTY[text]), []), position + 1
    if kind == "string":
        body = text[1:-1]
        _check_text(body, "string")
        return (QValue(Form(CHAR), body) if len(body) == 1 else QValue(Form(STRING), body)), position + 1
    if kind == "bools":
        bits = [c == "1" for c in text[:-1]]
        return (QValue(Form(BOOLEAN), bits[0]) if len(bits) == 1 else QValue(Form(BOOLEANS), bits)), position + 1
    if kind == "symbols":
        names = text.split("`")[1:]
        return (QValue(Form(SYMBOL), names[0]) if len(names) == 1 else QValue(Form(SYMBOLS), names)), position + 1
    if kind == "number":
        numbers = []
        while position < len(tokens) and tokens[position][0] == "number" and (not numbers or tokens[position][2]):
            number = int(tokens[position][1])
            _check_long(number)
            numbers.append(number)
            position += 1
        return (QValue(Form(LONG), numbers[0]) if len(numbers) == 1 else QValue(Form(LONGS), numbers)), position
    raise Refused(f"{text!r} cannot start a q literal")


def _enlisted(item: QValue) -> QValue:
    if item.form.name in VECTOR_OF:
        vector = VECTOR_OF[item.form.name]
        return QValue(Form(vector), item.python if vector == STRING else [item.python])
    return QValue(Form(LIST, frozenset({item.form})), [item.python])


def _general(items: list[QValue]) -> QValue:
    """``(a;b;...)``: a simple vector where every item is an atom of one type (as q makes it), else a general list."""
    forms = {item.form for item in items}
    if len(forms) == 1 and next(iter(forms)).name in VECTOR_OF:
        vector = VECTOR_OF[next(iter(forms)).name]
        values = [item.python for item in items]
        return QValue(Form(vector), "".join(values) if vector == STRING else values)
    return QValue(Form(LIST, frozenset(forms)), [item.python for item in items])


def parse_test(test_code: str, entry_point: str = "solve") -> list[tuple[QValue, ...]]:
    """The argument tuples of the calls a q test shows: ``show solve[a;b]``, ``show solve a`` or
    ``show (solve[a];solve[b];...)``."""
    code = test_code.strip()
    name = re.escape(entry_point)
    single = re.fullmatch(rf"show\s+{name}\s*(\[.*\]|\s.*)", code, re.DOTALL)
    if single:
        return [_call_arguments(single.group(1))]
    several = re.fullmatch(r"show\s*\((.*)\)", code, re.DOTALL)
    if several:
        calls = [re.fullmatch(rf"\s*{name}\s*(\[.*\])\s*", part, re.DOTALL) for part in _top_level(several.group(1))]
        if len(calls) > 1 and all(calls):
            return [_call_arguments(call.group(1)) for call in calls]
    raise Refused(f"{code[:50]!r} is not show {entry_point}[args] or show ({entry_point}[a];{entry_point}[b]...)")


def _call_arguments(text: str) -> tuple[QValue, ...]:
    text = text.strip()
    if not text.startswith("["):
        return (parse_literal(text),)
    if not text.endswith("]"):
        raise Refused(f"{text[:40]!r}: a [ without its ]")
    inner = text[1:-1]
    if not inner.strip():
        raise Refused("a call without arguments")
    return tuple(parse_literal(part) for part in _top_level(inner))


def _top_level(text: str) -> list[str]:
    """``text`` split at the semicolons outside strings, parentheses and brackets."""
    parts, depth, start, quoted = [], 0, 0, False
    for index, char in enumerate(text):
        if quoted:
            quoted = char != '"'
        elif char == '"':
            quoted = True
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == ";" and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return parts + [text[start:]]


_SHOWN = (
    (re.compile(r"-?\d+"), lambda t: QValue(Form(LONG), _long(t))),
    (re.compile(r"-?\d+(?: -?\d+)+"), lambda t: QValue(Form(LONGS), [_long(x) for x in t.split(" ")])),
    (re.compile(r"[01]b"), lambda t: QValue(Form(BOOLEAN), t[0] == "1")),
    (re.compile(r"[01]{2,}b"), lambda t: QValue(Form(BOOLEANS), [c == "1" for c in t[:-1]])),
    (re.compile(r"`[A-Za-z0-9_.]+"), lambda t: QValue(Form(SYMBOL), t[1:])),
    (re.compile(r"(?:`[A-Za-z0-9_.]+){2,}"), lambda t: QValue(Form(SYMBOLS), t.split("`")[1:])),
    (re.compile(r'"[ !#-\[\]-~]"'), lambda t: QValue(Form(CHAR), t[1:-1])),
    (re.compile(r'"[ !#-\[\]-~]{2,}"'), lambda t: QValue(Form(STRING), t[1:-1])),
)


def _long(text: str) -> int:
    value = int(text)
    _check_long(value)
    return value


def parse_shown(text: str) -> QValue:
    """A q test's expected output, as ``show`` prints a value of the convention, read as a ``QValue``."""
    text = text.strip()
    if "\n" in text:
        raise Refused("output on several lines (a general list, dictionary or table), outside the convention")
    for pattern, read in _SHOWN:
        if pattern.fullmatch(text):
            return read(text)
    if text.startswith(","):
        raise Refused(f"{text[:40]!r} is a one-item vector, which the convention forbids")
    raise Refused(f"{text[:40]!r} is not what show prints for a value of the convention")
