"""Only output is compared, on the host: test code that compares inside the sandbox is found, or rewritten.

A test that prints ``solve(3) == 6`` or asserts it hands the verdict to the judged code: a result whose ``__eq__``
is always true, or one read from the test's own constants (``sys._getframe(1).f_code.co_consts``, the script
file), passes without solving. A test that prints the result, compared as text by the judge on the host, cannot
be talked into passing that way.

``printing_form`` turns the simple assert form, one or more ``assert CALL == LITERAL`` (either side, an
optional message) optionally followed by ``print(CONSTANT)`` whose text is the expected output, into
``print(CALL)`` lines whose expected output is what ``print`` writes for each literal. Only literals whose
printed text is equal exactly when the values are equal are converted: strings, ints, booleans, None, and
lists and tuples of them (not floats, ``6 == 6.0`` prints differently, nor sets and dicts, whose order varies).

``sandbox_comparison`` names what a test compares inside the sandbox, or returns None. It is a check of the
data (the data's author is trusted; the policy cannot write tests), so it is kept simple and errs towards
refusing:

- Python (``ast``): any comparison (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``is``, ``is not``, ``in``,
  ``not in``), ``assert``, ``match``, a comparison method by name (``__eq__`` ... ``__contains__``, the
  ``operator`` module's ``eq`` ... ``contains``, ``isclose``, ``assert*`` methods), and, in a test that calls
  anything but ``print``, a literal whose printed text is the expected output anywhere but in a call's
  arguments or the assignment of a variable passed to a call (``print('yes' if solve(3) else 'no')``, an unused
  ``x = 6`` read from the frame).
  Code that does not parse is left to ``python -m data verify`` (it cannot pass).
- q (no parser here: q is not always installed): outside strings and comments, any of ``=``, ``~``, ``<``,
  ``>`` (so ``<>``, ``<=``, ``>=`` too) or the words ``in``, ``within``, ``like``. q values carry no
  behaviour, but a solution can read the script, where a compared value sits in the test's text.
"""

from __future__ import annotations

import ast
import functools
import re

COMPARISON_NAMES = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__cmp__",
                              "eq", "ne", "lt", "le", "gt", "ge", "is_", "is_not", "contains", "isclose"})
OPERATOR_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
PASS_THROUGH_CALLS = frozenset({"print", "str", "repr", "format"})  # their arguments are what is printed
CONVERTIBLE = (str, int, bool, type(None))
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)  # ValueError: a lone surrogate in the text
LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)  # what ast.literal_eval raises
Q_COMPARISON = re.compile(r"[=~<>]|\b(?:in|within|like)\b")


def printing_form(test_code: str, expected_output: str) -> tuple[str, str] | None:
    """``(test_code, expected_output)`` of the printing test equal to a simple assert test, or None."""
    try:
        statements = _parsed(test_code).body
    except PARSE_ERRORS:
        return None
    marker = _printed_constant(statements[-1]) if statements else None
    if marker is not None:
        statements = statements[:-1]
    if not statements or (marker if marker is not None else "") != expected_output.strip():
        return None
    calls, outputs = [], []
    for statement in statements:
        pair = _asserted_call_and_literal(statement)
        if pair is None:
            return None
        calls.append(f"print({ast.unparse(pair[0])})")
        outputs.append(str(pair[1]))
    return "\n".join(calls), "\n".join(outputs)


def sandbox_comparison(test_code: str, expected_output: str, language: str) -> str | None:
    """What ``test_code`` compares inside the sandbox, with its line (``"line 1: `==`"``), or None."""
    if language == "q":
        return _q_comparison(test_code)
    try:
        tree = _parsed(test_code)
    except PARSE_ERRORS:
        return None
    for node in ast.walk(tree):
        found = _python_comparison(node)
        if found:
            return f"line {node.lineno}: {found}"
    return _expected_literal(tree, expected_output.strip())


@functools.lru_cache(maxsize=4)
def _parsed(test_code: str) -> ast.Module:
    """``test_code``'s tree, parsed once for ``printing_form`` and ``sandbox_comparison`` in turn (neither changes
    it): a problem's tests are checked by both, and parsing is most of what loading a large dataset costs."""
    return ast.parse(test_code)


def _printed_constant(statement: ast.stmt) -> str | None:
    """The text of ``print(CONSTANT)``, else None."""
    if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and not statement.value.keywords
            and isinstance(statement.value.func, ast.Name) and statement.value.func.id == "print"
            and len(statement.value.args) == 1 and isinstance(statement.value.args[0], ast.Constant)):
        return str(statement.value.args[0].value).strip()
    return None


def _asserted_call_and_literal(statement: ast.stmt) -> tuple[ast.Call, object] | None:
    if not (isinstance(statement, ast.Assert) and isinstance(statement.test, ast.Compare)):
        return None
    compare = statement.test
    if len(compare.ops) != 1 or not isinstance(compare.ops[0], ast.Eq):
        return None
    for call, literal in ((compare.left, compare.comparators[0]), (compare.comparators[0], compare.left)):
        if isinstance(call, ast.Call):
            try:
                value = ast.literal_eval(literal)
            except LITERAL_ERRORS:
                continue
            if _convertible(value):
                return call, value
    return None


def _convertible(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_convertible(item) for item in value)
    return isinstance(value, CONVERTIBLE)


def _python_comparison(node: ast.AST) -> str | None:
    if isinstance(node, ast.Compare):
        return f"`{OPERATOR_SYMBOLS[type(node.ops[0])]}`"
    if isinstance(node, ast.Assert):
        return "`assert`"
    if isinstance(node, ast.Match):
        return "`match`"
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    if isinstance(node, ast.alias):
        name = node.name
    if name and (name in COMPARISON_NAMES or (isinstance(node, ast.Attribute) and name.startswith("assert"))):
        return f"`{name}`"
    return None


def _expected_literal(tree: ast.Module, expected: str) -> str | None:
    """A literal printing as the expected output, outside the arguments of a call and the set-up of a variable
    passed to one."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    if not expected or all(_called_name(call) in PASS_THROUGH_CALLS for call in calls):
        return None
    arguments = [part for call in calls if _called_name(call) not in PASS_THROUGH_CALLS
                 for part in call.args + [keyword.value for keyword in call.keywords]]
    passed = {node.id for part in arguments for node in ast.walk(part) if isinstance(node, ast.Name)}
    set_up = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and all(isinstance(target, ast.Name) and target.id in passed for target in node.targets)]
    inputs = {id(inner) for part in arguments + set_up for inner in ast.walk(part)}
    for node in ast.walk(tree):
        if id(node) in inputs or not isinstance(node, (ast.Constant, ast.List, ast.Tuple)):
            continue
        try:
            text = str(ast.literal_eval(node)).strip()
        except LITERAL_ERRORS:
            continue
        if text == expected:
            return f"line {node.lineno}: the expected output {expected!r} is a literal in the test"
    return None


def _called_name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else call.func.attr \
        if isinstance(call.func, ast.Attribute) else None


def _q_comparison(test_code: str) -> str | None:
    in_block_comment = False
    for number, line in enumerate(test_code.splitlines(), 1):
        if in_block_comment or line.rstrip() == "/":
            in_block_comment = line.rstrip() != "\\"
            continue
        found = Q_COMPARISON.search(_q_code(line))
        if found:
            return f"line {number}: `{found.group()}`"
    return None


def _q_code(line: str) -> str:
    """``line`` without its strings and its comment (a line starting with ``/``, or `` /`` after code)."""
    if line.startswith("/"):
        return ""
    kept, in_string, escaped = [], False, False
    for index, char in enumerate(line):
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            in_string = True
        elif char == "/" and index and line[index - 1] in " \t":
            break
        else:
            kept.append(char)
    return "".join(kept)
