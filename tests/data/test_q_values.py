"""The Python-to-q value map (data/q/values.py): every documented form both ways, a refusal for each form outside the
printing convention, and the q tests deciding what Python cannot tell (a char, a string or a symbol)."""

import pytest

from data import Test
from data.q.values import (
    BOOLEANS,
    CHAR,
    LIST,
    LONG,
    LONGS,
    STRING,
    SYMBOL,
    SYMBOLS,
    Form,
    QForms,
    Refused,
    parse_literal,
    parse_shown,
    parse_test,
    q_literal,
    q_shown,
    q_shown_calls,
)

AS_STRING = {Form(STRING): "tests[0]"}
AS_CHAR = {Form(CHAR): "tests[1]"}
AS_SYMBOL = {Form(SYMBOL): "tests[2]"}
AS_SYMBOLS = {Form(SYMBOLS): "tests[2]"}
AS_STRINGS = {Form(LIST, frozenset({Form(STRING)})): "tests[0]"}

# Python argument, the q tests' forms at its place, its q literal.
ARGUMENTS = [
    (5, None, "5"),
    (-5, None, "-5"),
    (0, None, "0"),
    ([1, 2, 3], None, "1 2 3"),
    ([3, -1, -8], None, "3 -1 -8"),
    ([5], None, "enlist 5"),
    ([], {Form(LONGS): "tests[0]"}, "`long$()"),
    ("abc", AS_STRING, '"abc"'),
    ("hello world", AS_STRING, '"hello world"'),
    ("a", AS_STRING, 'enlist "a"'),
    ("", AS_STRING, '""'),
    ("a", {**AS_STRING, **AS_CHAR}, '"a"'),
    ("abc", {**AS_STRING, **AS_CHAR}, '"abc"'),
    (True, None, "1b"),
    (False, None, "0b"),
    ([True, False, True], None, "101b"),
    ([True], None, "enlist 1b"),
    ([], {Form(BOOLEANS): "tests[0]"}, "`boolean$()"),
    ("Fizz", AS_SYMBOL, "`Fizz"),
    (["a", "b"], AS_SYMBOLS, "`a`b"),
    (["a"], AS_SYMBOLS, "enlist `a"),
    ([], AS_SYMBOLS, "`$()"),
    ([[1, 2], [3, 4]], None, "(1 2;3 4)"),
    ([[1], [2, 3]], None, "(enlist 1;2 3)"),
    ([[1, 2, 3]], None, "enlist 1 2 3"),
    ([1, [2, [3, 4]], 5], None, "(1;(2;3 4);5)"),
    (["leet", "code"], AS_STRINGS, '("leet";"code")'),
    (["ab"], AS_STRINGS, 'enlist "ab"'),
    ([], {Form(LIST): "tests[0]"}, "()"),
]


@pytest.mark.parametrize("value, hints, literal", ARGUMENTS)
def test_a_python_argument_becomes_its_q_literal_and_reads_back(value, hints, literal):
    assert q_literal(value, hints).text == literal
    assert parse_literal(literal).python == value


# Python result, the q tests' result forms, what q's show prints.
RESULTS = [
    (6, None, "6"),
    (-1, None, "-1"),
    (True, None, "1b"),
    (False, None, "0b"),
    ([True, False, True], None, "101b"),
    ("Fizz", AS_SYMBOL, "`Fizz"),
    (["a", "b", "c"], AS_SYMBOLS, "`a`b`c"),
    ("l", AS_CHAR, '"l"'),
    ("olleh", AS_STRING, '"olleh"'),
    ([1, 3, 6, 10], None, "1 3 6 10"),
    ((0, 1), None, "0 1"),
]


@pytest.mark.parametrize("value, hints, shown", RESULTS)
def test_a_python_result_becomes_what_show_prints_and_reads_back(value, hints, shown):
    assert q_shown(value, hints).text == shown
    read = parse_shown(shown).python
    assert read == (list(value) if isinstance(value, tuple) else value)


def test_several_calls_make_one_vector_of_their_atoms():
    assert q_shown_calls([False, True]).text == "01b"
    assert q_shown_calls([True, True, False]).text == "110b"
    assert q_shown_calls([3, 5]).text == "3 5"
    assert q_shown_calls(["a", "b"], AS_SYMBOL).text == "`a`b"
    assert q_shown_calls(["a", "b"], AS_CHAR).text == '"ab"'
    assert q_shown_calls([7]).text == "7"


REFUSED_RESULTS = [
    (1.5, None, "float"),
    (None, None, "None"),
    ({"a": 1}, None, "dictionary"),
    ({1, 2}, None, "set"),
    ([5], None, "prints as ,5"),
    ([], {Form(LONGS): "tests[0]"}, "prints as `long$()"),
    ("a", AS_STRING, 'prints as ,"a"'),
    ([[1, 2], [3, 4]], None, "general list"),
    ('say "hi"', AS_STRING, "holds '\"'"),
    ("back\\slash", AS_STRING, "holds '\\\\'"),
    ("caf\u00e9", AS_STRING, "holds"),
    ("tab\there", AS_STRING, "holds"),
    (2**63 - 1, None, "outside q's longs"),
    (-(2**63), None, "outside q's longs"),
    (list(range(40)), None, "console width"),
    ("x", None, "no q test shows the result as text"),
    ("x", {**AS_SYMBOL, **AS_CHAR}, "cannot tell a q symbol from a char"),
    ("abc", AS_CHAR, "not one character"),
    (["a", "b"], None, "no q test shows a list of text"),
    ("a b", AS_SYMBOL, "the symbol 'a b'"),
    (b"bytes", None, "no q form"),
]


@pytest.mark.parametrize("value, hints, reason", REFUSED_RESULTS)
def test_a_result_outside_the_convention_is_refused_by_name(value, hints, reason):
    with pytest.raises(Refused, match=None) as refused:
        q_shown(value, hints)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "values, reason", [([1, True], "different types"), ([[1, 2], [3, 4]], "not all atoms"), ([None, 1], "None")]
)
def test_calls_whose_results_make_no_vector_are_refused(values, reason):
    with pytest.raises(Refused) as refused:
        q_shown_calls(values)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "value, hints, reason",
    [
        (1.5, None, "float"),
        (None, None, "None"),
        ({"a": 1}, None, "dictionary"),
        ('a"b', AS_STRING, "holds"),
        ([], None, "cannot tell which q type an empty list is"),
        ([], {Form(LONGS): "tests[0]", Form(SYMBOLS): "tests[1]"}, "cannot tell which q type"),
        ("a", None, "cannot tell whether 'a' is a q string, char or symbol"),
        (["a", "b"], {**AS_SYMBOLS, **AS_STRINGS}, "cannot tell a symbol vector from a list of strings"),
        (2**64, None, "outside q's longs"),
    ],
)
def test_an_argument_outside_the_map_is_refused_by_name(value, hints, reason):
    with pytest.raises(Refused) as refused:
        q_literal(value, hints)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "literal", ["1.5", "3f", "6i", "0N", "0W", "1-2", "til 3", "`a`b!1 2", "(1;2", '"a\\"b"', "1 2f"]
)
def test_a_q_literal_outside_the_convention_is_refused(literal):
    with pytest.raises(Refused):
        parse_literal(literal)


@pytest.mark.parametrize(
    "shown", [",5", "`long$()", '""', ',"a"', "3f", "6i", "`s#1 2 3", "1 2\n3 4", "0N", "1 0N 3", '"a\\"b"']
)
def test_shown_text_outside_the_convention_is_refused(shown):
    with pytest.raises(Refused):
        parse_shown(shown)


def test_q_tests_read_as_their_calls():
    (call,) = parse_test("show solve[1 2 5;11]")
    assert [argument.python for argument in call] == [[1, 2, 5], 11]
    assert [argument.form.name for argument in call] == [LONGS, LONG]
    assert [[a.python for a in c] for c in parse_test('show (solve["abba"];solve["abca"])')] == [["abba"], ["abca"]]
    assert [a.python for a in parse_test('show solve["leetcode";("leet";"code")]')[0]] == ["leetcode", ["leet", "code"]]
    assert [a.python for a in parse_test("show solve 1 2 3")[0]] == [[1, 2, 3]]
    assert [a.python for a in parse_test("show f[2;3]", entry_point="f")[0]] == [2, 3]
    for code in ("show solve[1] + 1", "solve[1]", "show 1+solve[2]", "show (solve[1];2)", "-1 string solve[1];"):
        with pytest.raises(Refused):
            parse_test(code)


def test_the_q_tests_decide_what_python_cannot_tell_and_the_map_says_which():
    """first-item: a symbol vector's first item is a symbol, a string's a char; count-occurrences shows symbols and
    chars at the same place, so a str there is refused rather than guessed."""
    tests = [Test("show solve[7 8 9]", "7"), Test("show solve[`a`b]", "`a"), Test('show solve["xyz"]', '"x"')]
    forms = QForms.of_tests(tests)
    assert set(forms.arguments[0]) == {Form(LONGS), Form(SYMBOLS), Form(STRING)}
    assert forms.result == {Form(LONG): "tests[0]", Form(SYMBOL): "tests[1]", Form(CHAR): "tests[2]"}
    mapped = q_literal(["p", "q"], forms.arguments[0])
    assert mapped.text == "`p`q" and mapped.decided == ("['p', 'q'] is a symbol vector, as tests[1] shows",)
    assert q_literal("pq", forms.arguments[0]).decided == ("'pq' is a string, as tests[2] shows",)
    with pytest.raises(Refused, match="tests\\[1\\] shows a symbol here and tests\\[2\\] a char"):
        q_shown("p", forms.result)
    # What a call's arguments are decides first: a symbol vector's first item is a symbol, a string's a char.
    assert q_shown("p", forms.result_of((Form(SYMBOLS),))).text == "`p"
    assert q_shown("p", forms.result_of((Form(STRING),))).text == '"p"'
    assert q_shown("p", forms.result_of((Form(STRING),))).decided == ("'p' is a char, as tests[2] shows",)
    assert q_literal(7).decided == ()  # the Python type decides alone

    pairs = QForms.of_tests([Test('show (solve["ab"];solve["aba"])', "01b")])
    assert pairs.result == {Form("boolean"): "tests[0]"}
