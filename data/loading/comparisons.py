"""Only output is compared, on the host: a Python test is accepted only as printed calls, and the simple assert forms
are rewritten into them.

A test that prints ``solve(3) == 6`` or asserts it hands the verdict to the judged code: a result whose ``__eq__``
is always true, or one read from the test's own constants (``sys._getframe(1).f_code.co_consts``, the script
file), passes without solving. So do subtler forms (``[6].index(solve(3))``, ``len({solve(3), 6})``,
``not solve(4) - 8``, ``str(solve(5)).startswith('10')``): any code after the judged function's result but
``print`` lets the result's own methods, or the test's constants, decide. A test that prints the result, compared
as text by the judge on the host, cannot be talked into passing that way.

``refusal`` holds a Python test to an allow-list, the printing form:

- set-up lines ``NAME = LITERAL``, each name passed to a call below (an unused constant is what a frame reader
  reads);
- then one or more lines ``print(CALL, CALL, ...)`` (or ``print(repr(CALL))``), each ``CALL`` a call of the problem's entry point (``solve``
  unless the record names another) whose arguments, positional or by keyword, are literals or set-up names.

A literal is what ``ast.literal_eval`` reads (numbers, strings, bytes, booleans, None, and lists, tuples, sets and
dicts of them) or pure arithmetic on literals (``3 * 19``, ``2.0 / 3.0``, ``'ab' * 3``, ``-x`` of a number):
``with_literal_values`` works it out here, on the host, where its value prints in at most ``SHOWN_LITERAL``
characters, so the test shows the value the judged code gets. Anything else, code that does not parse included,
is refused (``--allow_in_sandbox_comparisons`` keeps it as it is).

``printing_form`` turns the assert forms into printing tests, one ``print(CALL)`` line per assert and the expected
output what ``print`` writes for the value asserted, so what was compared in the sandbox is compared on the host:

- ``assert CALL == LITERAL`` (either side; an optional message), alone in its test: a value test
  (``print(repr(CALL))``, ``"compare": "value"``) where the literal holds a number, a set or a dict, compared as
  values on the host with ``==`` (``240.0`` for ``240``, a set in any order, a tuple never a list); text otherwise
  (strings, booleans, None and lists of them). Among several asserts of one test: text where the printed text is
  equal exactly when the values are; a float anywhere makes it a numeric test of tolerance 0; sets and dicts are
  not converted there.
- ``assert abs(CALL - LITERAL) < TOLERANCE`` (``<=``, ``math.fabs``, either order inside): a numeric test of that
  tolerance (judging/grading.py compares the numbers of the printed text).
- ``assert CALL``, ``assert not CALL``, ``assert CALL is True|False|None``: expecting ``True``, ``False``, ``None``
  (stricter than the assert: a truthy result that is not ``True`` fails).
- ``assert list(CALL) == LIST``, ``assert tuple(CALL) == tuple(LIST)``: expecting the list, so the function must
  return the list its description names (stricter: a tuple result fails).

optionally followed by ``print(CONSTANT)`` whose text is the test's expected output.

q tests are held to their own allow-list, printed calls on literals: data/loading/q_tests.py.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from dataclasses import dataclass

CONVERTIBLE = (str, int, bool, type(None))
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)  # ValueError: a lone surrogate in the text
LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)  # what ast.literal_eval raises
SHOWN_LITERAL = 1000  # the most characters of a value worked out on the host that replace its arithmetic
MAX_SEQUENCE = 1 << 20  # the longest string, bytes, list or tuple literal arithmetic may make
MAX_INT_BITS = 1 << 14  # the largest integer it may make
ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
TOLERANCE_CHECKS = (ast.Lt, ast.LtE)


class NotLiteral(ValueError):
    """An expression that is not a literal or pure arithmetic on literals within the bounds."""


@dataclass(frozen=True)
class Printing:
    """A test in the printing form: its code, expected output and tolerance (None: compared as text)."""

    test_code: str
    expected_output: str
    tolerance: float | None = None
    compare: str = "text"


def literal_value(node: ast.AST):
    """The value of a literal or of pure arithmetic on literals, worked out within bounds (no value of more than
    ``MAX_SEQUENCE`` items or ``MAX_INT_BITS`` bits is made); NotLiteral for anything else."""
    try:
        return ast.literal_eval(node)
    except LITERAL_ERRORS:
        pass
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        operand = literal_value(node.operand)
        if not _is_number(operand):
            raise NotLiteral("a sign before a value that is not a number")
        return UNARY[type(node.op)](operand)
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [literal_value(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if not (isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC):
        raise NotLiteral(f"`{_shown(node)}` is not a literal")
    left, right = literal_value(node.left), literal_value(node.right)
    _check_bounds(node.op, left, right)
    try:
        return ARITHMETIC[type(node.op)](left, right)
    except (ArithmeticError, TypeError, ValueError) as error:
        raise NotLiteral(f"`{_shown(node)}` fails ({type(error).__name__})") from None


def _is_number(value) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


def _check_bounds(op: ast.operator, left, right) -> None:
    """NotLiteral when ``left op right`` would make a value past the bounds."""
    if (
        isinstance(op, ast.Pow)
        and isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and max(1, abs(left).bit_length()) * right > MAX_INT_BITS
        and abs(left) > 1
    ):
        raise NotLiteral("a power too large to work out")
    if isinstance(op, ast.Mult):
        for sequence, count in ((left, right), (right, left)):
            if (
                isinstance(sequence, (str, bytes, list, tuple))
                and isinstance(count, int)
                and len(sequence) * count > MAX_SEQUENCE
            ):
                raise NotLiteral("a repeated sequence too long to work out")
    if (
        isinstance(op, ast.Add)
        and isinstance(left, (str, bytes, list, tuple))
        and isinstance(right, (str, bytes, list, tuple))
        and len(left) + len(right) > MAX_SEQUENCE
    ):
        raise NotLiteral("a sequence too long to work out")


def is_literal(node: ast.AST) -> bool:
    try:
        literal_value(node)
    except (NotLiteral, RecursionError, MemoryError):
        return False
    return True


def refusal(test_code: str, entry_point: str = "solve") -> str | None:
    """Why a Python test is not in the printing form (``"line 2: ..."``), or None when it is."""
    try:
        statements = _parsed(test_code).body
    except SyntaxError as error:
        return f"line {error.lineno}: it does not parse ({error.msg})"
    except PARSE_ERRORS as error:
        return f"it does not parse ({type(error).__name__})"
    set_up, printed, passed = {}, False, set()
    for statement in statements:
        if not printed and _is_set_up(statement):
            name = statement.targets[0].id
            if not is_literal(statement.value):
                return f"line {statement.lineno}: `{name}` is set to `{_shown(statement.value)}`, not a literal"
            set_up[name] = statement.lineno
            continue
        calls = _printed_calls(statement)
        if calls is None:
            return f"line {statement.lineno}: `{_shown(statement)}` is not print({entry_point}(...), ...)"
        for call in calls:
            if _call_of(call, "repr", 1) and not call.keywords:
                call = call.args[0]  # print(repr(CALL)): a value test's form
            found = _call_refusal(call, entry_point, set_up)
            if found:
                return f"line {statement.lineno}: {found}"
            passed |= {
                node.id for node in [*call.args, *(k.value for k in call.keywords)] if isinstance(node, ast.Name)
            }
        printed = True
    if not printed:
        return f"it prints no call of {entry_point}"
    unused = sorted(set(set_up) - passed, key=set_up.get)
    if unused:
        return f"line {set_up[unused[0]]}: `{unused[0]}` is set but never passed to {entry_point}"
    return None


def _is_set_up(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
    )


def _printed_calls(statement: ast.stmt) -> list[ast.AST] | None:
    """The arguments of ``print(...)`` as a statement with positional arguments only, or None."""
    if not (isinstance(statement, ast.Expr) and _call_of(statement.value, "print")):
        return None
    call = statement.value
    if call.keywords or not call.args or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return call.args


def _call_refusal(node: ast.AST, entry_point: str, set_up: dict) -> str | None:
    if not _call_of(node, entry_point):
        return f"it prints `{_shown(node)}`, not a call of {entry_point}"
    for argument in [*node.args, *(k.value for k in node.keywords)]:
        if isinstance(argument, ast.Starred) or any(k.arg is None for k in node.keywords):
            return f"`{_shown(node)}` unpacks its arguments"
        if isinstance(argument, ast.Name) and argument.id in set_up:
            continue
        if not is_literal(argument):
            return f"`{_shown(argument)}` in `{_shown(node)}` is not a literal or a set-up name"
    return None


def with_literal_values(test_code: str) -> str:
    """``test_code`` (in the printing form) with each argument and set-up value that is arithmetic on literals
    replaced by its value, where that prints in at most ``SHOWN_LITERAL`` characters and reads back as itself."""
    tree = ast.parse(test_code.encode("utf-8", "replace").decode("utf-8"))  # changed below: not _parsed's own
    changed = False

    class Evaluated(ast.NodeTransformer):
        def visit_BinOp(self, node):
            return self._value(node)

        def visit_UnaryOp(self, node):
            return self._value(node)

        def _value(self, node):
            nonlocal changed
            try:
                value = literal_value(node)
                text = repr(value)
                if len(text) > SHOWN_LITERAL or ast.literal_eval(text) != value or type(value) is complex:
                    return node
            except (NotLiteral, *LITERAL_ERRORS):
                return node
            replacement = ast.parse(text, mode="eval").body
            if ast.dump(replacement) != ast.dump(node):
                changed = True
            return ast.copy_location(replacement, node)

    evaluated = Evaluated().visit(tree)
    return ast.unparse(evaluated) if changed else test_code


def printing_form(test_code: str, expected_output: str, entry_point: str = "solve") -> Printing | None:
    """The printing test equal to a test of assert lines (module docstring), or None."""
    try:
        statements = _parsed(test_code).body
    except PARSE_ERRORS:
        return None
    marker = _printed_constant(statements[-1]) if statements else None
    if marker is not None:
        statements = statements[:-1]
    if not statements or (marker if marker is not None else "") != expected_output.strip():
        return None
    if len(statements) == 1:  # one assert: compared as the values it compared, where its text would not be exact
        asserted = asserted_value(statements[0], entry_point, by_value=True)
        if asserted is not None and asserted[3] == "value":
            return Printing(f"print(repr({ast.unparse(asserted[0])}))", asserted[1], None, "value")
    calls, outputs, tolerances = [], [], set()
    for statement in statements:
        asserted = asserted_value(statement, entry_point)
        if asserted is None:
            return None
        call, text, tolerance, _ = asserted
        calls.append(f"print({ast.unparse(call)})")
        outputs.append(text)
        tolerances.add(tolerance)
    numeric = tolerances - {None}
    if len(numeric) > 1:
        return None  # asserts of different tolerances in one test
    return Printing("\n".join(calls), "\n".join(outputs), numeric.pop() if numeric else None)


def asserted_value(
    statement: ast.stmt, entry_point: str = "solve", by_value: bool = False
) -> tuple[ast.Call, str, float | None, str] | None:
    """``(CALL, expected text, tolerance, compare)`` of one assert of a form ``printing_form`` converts, or None.
    ``by_value``: ``CALL == LITERAL`` whose value holds a number, a set or a dict is a value test (``compare`` is
    ``"value"``, the expected text the literal's ``repr``, printed with ``print(repr(CALL))``), so ``240.0`` passes
    for ``240`` and a set in any order, as the assert had them; else the printed text is compared."""
    if not isinstance(statement, ast.Assert):
        return None
    test = statement.test
    if _call_of(test, entry_point):
        return test, "True", None, "text"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _call_of(test.operand, entry_point):
        return test.operand, "False", None, "text"
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if (
        isinstance(op, ast.Is)
        and _call_of(left, entry_point)
        and isinstance(right, ast.Constant)
        and right.value in (True, False, None)
        and not _is_number(right.value)
    ):
        return left, str(right.value), None, "text"
    if isinstance(op, TOLERANCE_CHECKS):
        found = _within_tolerance(left, right, entry_point)
        return None if found is None else (*found, "text")
    if not isinstance(op, ast.Eq):
        return None
    for call, literal in ((left, right), (right, left)):
        call, literal, as_list = _unwrapped(call, literal)
        if not _call_of(call, entry_point):
            continue
        value = _literal_or_unreadable(literal)
        if value is UNREADABLE:
            continue
        if as_list:
            if not isinstance(value, (list, tuple)):
                continue
            value = list(value)
        if by_value and not as_list and _value_literal(value) and _needs_value(value):
            return call, repr(value), None, "value"
        if _convertible(value):
            return call, str(value), 0.0 if _has_float(value) else None, "text"
    return None


def _value_literal(value) -> bool:
    """Whether ``repr(value)`` reads back as ``value`` with ``ast.literal_eval`` (no frozenset, nan or inf)."""
    if isinstance(value, (list, tuple, set)):
        return all(_value_literal(item) for item in value)
    if isinstance(value, dict):
        return all(_value_literal(key) and _value_literal(item) for key, item in value.items())
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool, bytes, complex, type(None)))


def _needs_value(value) -> bool:
    """Whether text would compare ``value`` otherwise than ``==`` does: it holds a number (``240`` is ``240.0``), a
    set or a dict (printed in any order)."""
    if isinstance(value, (set, dict)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_needs_value(item) for item in value)
    return _is_number(value)


UNREADABLE = object()


def _literal_or_unreadable(node: ast.AST):
    """The literal's value, or ``UNREADABLE`` where it is not a literal (or too deep or too big to make)."""
    try:
        return literal_value(node)
    except (NotLiteral, RecursionError, MemoryError):
        return UNREADABLE


def _unwrapped(call: ast.AST, literal: ast.AST) -> tuple[ast.AST, ast.AST, bool]:
    """``list(CALL) == L`` and ``tuple(CALL) == tuple(L)`` (or ``== (..)``) as ``(CALL, L, True)``; else as they are."""
    for wrapper in ("list", "tuple"):
        if _call_of(call, wrapper, 1):
            inner = literal.args[0] if _call_of(literal, wrapper, 1) else literal
            return call.args[0], inner, True
    return call, literal, False


def _within_tolerance(left: ast.AST, right: ast.AST, entry_point: str):
    """``abs(CALL - L) < T`` (``math.fabs``, ``abs(L - CALL)``) as ``(CALL, text of L, T)``, or None."""
    if not (
        (_call_of(left, "abs", 1) or _is_fabs(left))
        and isinstance(left.args[0], ast.BinOp)
        and isinstance(left.args[0].op, ast.Sub)
    ):
        return None
    difference = left.args[0]
    tolerance = _literal_or_unreadable(right)
    if tolerance is UNREADABLE or not (
        _is_number(tolerance) and not isinstance(tolerance, complex) and 0 < tolerance < math.inf
    ):
        return None
    for call, literal in ((difference.left, difference.right), (difference.right, difference.left)):
        if not _call_of(call, entry_point):
            continue
        value = _literal_or_unreadable(literal)
        if value is UNREADABLE:
            continue
        if _is_number(value) and not isinstance(value, complex) and math.isfinite(value):
            return call, repr(value), float(tolerance)
    return None


def _is_fabs(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "fabs"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "math"
        and len(node.args) == 1
        and not node.keywords
    )


def _convertible(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_convertible(item) for item in value)
    return isinstance(value, CONVERTIBLE) or (isinstance(value, float) and math.isfinite(value))


def _has_float(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_float(item) for item in value)
    return isinstance(value, float)


@functools.lru_cache(maxsize=4)
def _parsed(test_code: str) -> ast.Module:
    """``test_code``'s tree, parsed once for ``printing_form`` and ``refusal`` in turn (neither changes it): a
    problem's tests are checked by both, and parsing is most of what loading a large dataset costs. A lone
    surrogate is read as "?", as the judge runs it."""
    return ast.parse(test_code.encode("utf-8", "replace").decode("utf-8"))


def _printed_constant(statement: ast.stmt) -> str | None:
    """The text of ``print(CONSTANT)``, else None."""
    if (
        isinstance(statement, ast.Expr)
        and _call_of(statement.value, "print", 1)
        and isinstance(statement.value.args[0], ast.Constant)
    ):
        return str(statement.value.args[0].value).strip()
    return None


def _call_of(node: ast.AST, name: str, arguments: int | None = None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and (arguments is None or (len(node.args) == arguments and not node.keywords))
    )


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0] if not isinstance(node, ast.Module) else ""
    return text if len(text) <= 60 else text[:57] + "..."
