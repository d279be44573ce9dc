"""Wrong programs a policy can reach cheaply, and the inputs near a problem's tests that tell them apart.

Under GRPO a small model samples cheap programs long before the algorithm: the first element, the length, "True,
then False". Tests that such a program passes pay it. This module makes those programs for Python problems:

- ``BATTERY``: cheap programs that read their input (element picks, min/max/len/sum, parity, sortedness) or keep
  state across calls (the call-order answers "True, then False"); data/quality/trivial.py counts them in a problem's trivial
  share and data/quality/adequacy.py checks that the judged tests reject them;
- ``mutants(solution)``: the solution with one small change (an operator, a comparison, a constant +-1, an index,
  the returned variable, a negated condition, min for max), which data/quality/adequacy.py checks the same way;
- ``nearby_calls(problem)``: the tests' calls with one literal argument perturbed, plus edge cases (empty, one
  element, zero, negatives), where a wrong program shows that it is wrong.
"""

from __future__ import annotations

import ast
import copy
import random
import re
from dataclasses import dataclass

from data.quality.input_classes import class_values
from judging.records import Problem

MAX_MUTANTS = 32
MAX_NEARBY_CALLS = 48


@dataclass(frozen=True)
class Probe:
    name: str  # how a report names it: "returning True passes 3/4 tests"
    program: str
    prints: str | None = None  # what it makes `print(solve(<literals>))` print, stripped, when that is certain
    reads: str = "any"  # what its first argument must be for it to run: "any", "sequence" or "number"


def _battery_probe(name: str, body: str, reads: str) -> Probe:
    return Probe(name, f"def solve(*args, **kwargs):\n    x = args[0]\n    return {body}\n", reads=reads)


def _call_order_probe(name: str, first: bool, switch_every: int | None) -> Probe:
    """``first`` on the first call, then the other answer: every call (alternating) or for good after the first."""
    flip = "solve.calls % 2 == 1" if switch_every else "solve.calls > 0"
    return Probe(
        name,
        "def solve(*args, **kwargs):\n    solve.calls = getattr(solve, 'calls', -1) + 1\n"
        f"    return {first} != ({flip})\n",
    )


BATTERY: tuple[Probe, ...] = (
    *(
        _battery_probe(f"returning {body}", body, "sequence")
        for body in (
            "x[0]",
            "x[-1]",
            "x[len(x) // 2]",
            "min(x)",
            "max(x)",
            "len(x)",
            "len(x) - 1",
            "sum(x)",
            "sorted(x)",
            "sorted(x, reverse=True)",
            "x[::-1]",
            "x == sorted(x)",
            "len(x) % 2 == 0",
        )
    ),
    *(
        _battery_probe(f"returning {body}", body, "number")
        for body in ("x % 2 == 0", "x % 2 == 1", "x + 1", "x - 1", "2 * x", "x * x", "x > 0")
    ),
    _battery_probe("returning its last argument", "args[-1]", "any"),
    _call_order_probe("returning True, then False, alternating", True, 2),
    _call_order_probe("returning False, then True, alternating", False, 2),
    _call_order_probe("returning True once, then False", True, None),
    _call_order_probe("returning False once, then True", False, None),
)


# The calls in a test: `print(solve(1, [2]))`, `print(solve('a'), solve('b'))`.


def solve_calls(test_code: str) -> list[tuple] | None:
    """The literal argument tuples of each ``solve(...)`` call printed by a test that is only
    ``print(solve(<literals>), ...)``; None for any other test (nothing about it can be perturbed)."""
    try:
        body = ast.parse(test_code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    printed = body[0].value
    if not _call_of(printed, "print") or printed.keywords or not printed.args:
        return None
    calls = []
    for node in printed.args:
        if not _call_of(node, "solve") or node.keywords:
            return None
        try:
            calls.append(tuple(ast.literal_eval(argument) for argument in node.args))
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return None
    return calls


def printed_calls(test_code: str) -> list[tuple] | None:
    """The literal argument tuples of every ``solve`` call a test prints, in the forms tests and pools take:
    ``print(solve(1))``, ``print(repr(solve(1)))``, ``print(repr((solve(1), solve(2),)))``, one print a line;
    None for any other test."""
    try:
        body = ast.parse(test_code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls = []
    for statement in body:
        if not (isinstance(statement, ast.Expr) and _call_of(statement.value, "print")):
            return None
        for argument in statement.value.args:
            if _call_of(argument, "repr") and len(argument.args) == 1:
                argument = argument.args[0]
            for call in argument.elts if isinstance(argument, ast.Tuple) else [argument]:
                if not _call_of(call, "solve") or call.keywords:
                    return None
                try:
                    calls.append(tuple(ast.literal_eval(each) for each in call.args))
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    return None
    return calls


def _call_of(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def call_text(arguments: tuple) -> str:
    """``solve(<arguments>)`` as source."""
    return f"solve({', '.join(repr(argument) for argument in arguments)})"


def printing_test(calls: list[tuple]) -> str:
    return f"print({', '.join(call_text(arguments) for arguments in calls)})"


def first_arguments(problem: Problem) -> list:
    return [calls[0][0] for calls in map(solve_calls, (t.test_code for t in problem.tests)) if calls and calls[0]]


def battery(problem: Problem) -> tuple[Probe, ...]:
    """The battery programs that can run on ``problem``: those reading a sequence or a number only when its tests'
    first argument is one (all of them when the tests cannot be read)."""
    if problem.language != "python":
        return ()
    firsts = first_arguments(problem)
    if len(firsts) < len(problem.tests):
        return BATTERY
    kinds = {"any"}
    if any(isinstance(x, (list, tuple, str)) for x in firsts):
        kinds.add("sequence")
    if any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in firsts):
        kinds.add("number")
    return tuple(probe for probe in BATTERY if probe.reads in kinds)


# Inputs near the tests'.


def _nearby_values(value) -> list:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, 0, -value, 2 * value + 1]
    if isinstance(value, str):
        swapped = value[1] + value[0] + value[2:] if len(value) > 1 else value
        return [
            value[::-1],
            value[1:],
            value[:-1],
            value + value[:1],
            swapped,
            "",
            value[:1],
            value.replace(value[:1], "z", 1),
            "".join(random.Random(value).sample(value, len(value))),
        ]
    if isinstance(value, (list, tuple)):
        kind = type(value)
        items = list(value)
        rng = random.Random(repr(items))
        nearby = [
            items[::-1],
            items[1:],
            items[:-1],
            items + items[-1:],
            [],
            items[:1],
            items[1:2] + items[:1] + items[2:],
            items[1:] + items[:1],
            items[-1:] + items[:-1],
            *(rng.sample(items, len(items)) for _ in range(3)),
        ]
        if items and all(isinstance(row, list) and all(isinstance(x, int) for x in row) for row in items):
            nearby += [
                [[x + 1 for x in row] for row in items],
                [row[::-1] for row in items],
                [[-x for x in row] for row in items],
            ]
        if items and all(isinstance(x, int) and not isinstance(x, bool) for x in items):
            nearby += [
                [-x for x in items],
                [x + 1 for x in items],
                items[:-1] + [items[-1] + 1],
                sorted(items),
                [items[0] - 1] + items[1:],
                items + [max(items) + 1],
                [0] + items,
                random.Random(repr(items)).sample(items + [max(items) + 1, min(items) - 1], len(items) + 2),
            ]
        return [kind(x) for x in nearby]
    if isinstance(value, dict):
        keys = list(value)
        return [{k: value[k] for k in keys[1:]}, {k: value[k] for k in keys[::-1]}, {}]
    return []


# What a nearby input keeps when every test's value at its argument position has it and the description says so
# (any of the words): a problem defined on sorted lists, or positive numbers, may answer anything elsewhere. Both
# are needed: three sorted test lists for the first element of a list say nothing about the lists it takes. Case is
# not among them: "shifts every lower-case letter" says what is done to lower case, not that the text has no other
# (a problem whose input is lower case says so with an assert or a ``domain``). Nor is "distinct" or "unique" alone,
# which mostly says what is returned ("sorted unique elements", "distinct permutations", "how many distinct"): only
# said of what is given ("a list of n distinct integers", "guaranteed to have unique elements").
GIVEN_DISTINCT = re.compile(r"(?<!number )\b(of|have|has|with)\s+([\w`]+\s+)?(distinct|unique)\b|no duplicate")
_INVARIANTS = {
    ("non-negative", "nonnegative", "natural", "positive", "0 or more", "digit", "1 to"): lambda v: (
        isinstance(v, int) and not isinstance(v, bool) and v >= 0
    ),
    ("positive", "1 to"): lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    ("non-empty", "nonempty", "at least one", "at least two"): lambda v: (
        isinstance(v, (str, list, tuple, dict)) and len(v) > 0
    ),
    ("sorted", "ascending"): lambda v: isinstance(v, (list, tuple)) and all(a <= b for a, b in zip(v, v[1:])),
    (GIVEN_DISTINCT,): lambda v: isinstance(v, (list, tuple)) and len(set(map(repr, v))) == len(v),
    ("non-negative", "nonnegative", "natural", "positive", "heights", "digit"): lambda v: (
        isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
    ),
    ("positive",): lambda v: (
        isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)
    ),
    ("letter", "alphabetic", "word"): lambda v: isinstance(v, str) and v.isalpha(),
    ("digit",): lambda v: isinstance(v, str) and v.isdigit(),
    ("matrix", "grid", "rows"): lambda v: (
        isinstance(v, (list, tuple))
        and len(v) > 0
        and all(isinstance(row, (list, tuple)) and len(row) == len(v[0]) for row in v)
    ),
    ("square",): lambda v: (
        isinstance(v, (list, tuple)) and all(isinstance(row, (list, tuple)) and len(row) == len(v) for row in v)
    ),
}


def kept_values(values: list, description: str) -> list:
    """The invariants every one of ``values`` has that the description names."""
    kept = []
    description = " ".join(description.lower().split())
    for words, check in _INVARIANTS.items():
        if not any(word.search(description) if isinstance(word, re.Pattern) else word in description for word in words):
            continue
        try:
            if all(check(value) for value in values):
                kept.append(check)
        except TypeError:  # items that do not compare
            continue
    return kept


def keeps_invariants(value, invariants: list) -> bool:
    try:
        return all(check(value) for check in invariants)
    except TypeError:
        return False


def nearby_calls(problem: Problem, limit: int = MAX_NEARBY_CALLS) -> list[tuple]:
    """Argument tuples one literal away from the tests' calls, each argument changed in turn: to a nearby value of
    its class (+-1, 0, negated, reversed, shortened, lengthened, emptied, one element) or to a value of another class
    (data/quality/input_classes.py: the case swapped, a digit or a space put in, 0, a power of two, a square of a prime,
    sorted, repeated, touching intervals, a leading zero ...), keeping what every test's argument there has and the
    description names (sorted, distinct, positive, letters ...), the tests' own calls left out. A seeded sample of at
    most ``limit``, the same on every run, half of it of other classes where there are that many."""
    calls = [arguments for t in problem.tests for arguments in (solve_calls(t.test_code) or [])]
    positions = {}
    for arguments in calls:
        for index, value in enumerate(arguments):
            positions.setdefault((len(arguments), index), []).append(value)
    invariants = {position: kept_values(values, problem.description) for position, values in positions.items()}
    seen = {repr(arguments) for arguments in calls}
    nearby, other_class = [], []
    for arguments in calls:
        for index, value in enumerate(arguments):
            for found, values in (
                (nearby, _nearby_values(value)),
                (other_class, class_values(value, problem.description)),
            ):
                for other in values:
                    changed = arguments[:index] + (other,) + arguments[index + 1 :]
                    key = repr(changed)
                    if key not in seen and keeps_invariants(other, invariants[(len(arguments), index)]):
                        seen.add(key)
                        found.append(changed)
    rng = random.Random(problem.id)
    rng.shuffle(nearby)
    rng.shuffle(other_class)
    classes = min(len(other_class), max(limit // 2, limit - len(nearby)))
    chosen = other_class[:classes] + nearby[: limit - classes]
    rng.shuffle(chosen)
    return chosen


# Mutants of a solution.

_OPERATOR_SWAPS = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Add, ast.FloorDiv],
    ast.FloorDiv: [ast.Mult, ast.Mod],
    ast.Div: [ast.Mult],
    ast.Mod: [ast.FloorDiv],
    ast.Pow: [ast.Mult],
    ast.LShift: [ast.RShift],
    ast.RShift: [ast.LShift],
    ast.BitAnd: [ast.BitOr],
    ast.BitOr: [ast.BitAnd],
}
_COMPARISON_SWAPS = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
}
_CALL_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any", "sorted": "reversed", "reversed": "sorted"}


def _changes(node: ast.AST, names: list[str]) -> list[ast.AST]:
    """The nodes ``node`` may become in a mutant."""
    if isinstance(node, ast.BinOp):
        return [ast.BinOp(node.left, new(), node.right) for new in _OPERATOR_SWAPS.get(type(node.op), [])]
    if isinstance(node, ast.AugAssign):
        return [ast.AugAssign(node.target, new(), node.value) for new in _OPERATOR_SWAPS.get(type(node.op), [])]
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return [
            ast.Compare(node.left, [new()], node.comparators) for new in _COMPARISON_SWAPS.get(type(node.ops[0]), [])
        ]
    if isinstance(node, ast.BoolOp):
        return [ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [node.operand]
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return [ast.Constant(not node.value)]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return [ast.Constant(node.value + 1), ast.Constant(node.value - 1)]
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        return [
            ast.Subscript(node.value, ast.BinOp(node.slice, op(), ast.Constant(1)), node.ctx)
            for op in (ast.Add, ast.Sub)
        ]
    if isinstance(node, (ast.If, ast.While)):
        return [type(node)(ast.UnaryOp(ast.Not(), node.test), node.body, node.orelse)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALL_SWAPS:
        return [ast.Call(ast.Name(_CALL_SWAPS[node.func.id], ast.Load()), node.args, node.keywords)]
    if isinstance(node, ast.Return) and node.value is not None:
        returned = ast.unparse(node.value)
        return [ast.Return(ast.Name(name, ast.Load())) for name in names if name != returned] + (
            [ast.Return(ast.UnaryOp(ast.Not(), node.value))]
            if isinstance(node.value, (ast.Compare, ast.BoolOp))
            else []
        )
    return []


def _local_names(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        found = (
            [node.arg]
            if isinstance(node, ast.arg)
            else [node.id]
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
            else []
        )
        names += [name for name in found if name not in names]
    return names


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node).strip().splitlines()[0]
    return text if len(text) <= 60 else text[:57] + "..."


# Changes that make a program wrong on a whole class of inputs, as the first programs a model writes are: a branch
# deleted or taken always, a guard dropped, a string method for its sibling, a normalising call left out.
_METHOD_SWAPS = {
    "lower": ["upper"],
    "upper": ["lower"],
    "casefold": ["upper"],
    "swapcase": ["lower", "upper"],
    "capitalize": ["title", "upper"],
    "title": ["capitalize"],
    "isalpha": ["islower", "isdigit", "isalnum"],
    "islower": ["isupper", "isalpha"],
    "isupper": ["islower", "isalpha"],
    "isdigit": ["isalpha", "isalnum"],
    "isnumeric": ["isalpha"],
    "isdecimal": ["isalpha"],
    "isalnum": ["isalpha", "isdigit"],
    "isspace": ["isalpha"],
    "startswith": ["endswith"],
    "endswith": ["startswith"],
    "strip": ["lstrip", "rstrip"],
    "lstrip": ["strip"],
    "rstrip": ["strip"],
    "find": ["rfind"],
    "rfind": ["find"],
}
_NORMALISING = {"lower", "upper", "casefold", "strip", "lstrip", "rstrip"}  # `s.lower()` -> `s`


def _class_changes(node: ast.AST) -> list[ast.AST]:
    """The nodes ``node`` may become in a mutant that is wrong on a whole class of inputs."""
    if isinstance(node, ast.If):
        return [ast.If(ast.Constant(value), node.body, node.orelse) for value in (True, False)]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.BoolOp):  # a guard dropped: `n > 0 and n & (n - 1) == 0` -> `n & (n - 1) == 0`
        return [
            node.values[1 - i] if len(node.values) == 2 else ast.BoolOp(node.op, node.values[:i] + node.values[i + 1 :])
            for i in range(len(node.values))
        ]
    if isinstance(node, ast.Compare) and len(node.ops) > 1:  # one side of `'a' <= c <= 'z'` dropped
        return [
            ast.Compare(node.left, node.ops[:-1], node.comparators[:-1]),
            ast.Compare(node.comparators[0], node.ops[1:], node.comparators[1:]),
        ]
    if isinstance(node, ast.comprehension) and node.ifs:
        return [
            ast.comprehension(node.target, node.iter, node.ifs[:i] + node.ifs[i + 1 :], node.is_async)
            for i in range(len(node.ifs))
        ]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _METHOD_SWAPS:
        method = node.func
        found = [
            ast.Call(ast.Attribute(method.value, other, ast.Load()), node.args, node.keywords)
            for other in _METHOD_SWAPS[method.attr]
        ]
        return found + ([method.value] if method.attr in _NORMALISING and not node.args else [])
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.swapcase() != node.value:
        return [ast.Constant(node.value.swapcase())]  # 'a' <= c -> 'A' <= c, 'aeiou' -> 'AEIOU'
    return []


def mutants(solution: str, limit: int = MAX_MUTANTS) -> list[Probe]:
    """Programs that differ from ``solution`` by one small change, named by it (``mutant line 3: `a + b` ->
    `a - b```), without duplicates or programs that do not compile: an operator, a comparison, a constant, an index,
    the returned variable, a negated condition (``_changes``), or a change that is wrong on a whole class of inputs
    (``_class_changes``). ``assert`` statements are left alone: they state the domain. An even spread of at most
    ``limit`` of them, half of each family where there are that many."""
    try:
        tree = ast.parse(solution)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = _local_names(tree)
    original = ast.unparse(tree)
    operators, classes = families = ([], [])
    seen = {original}
    for path, node in _walk_with_paths(tree):
        for family, replacements in zip(families, (_changes(node, names), _class_changes(node))):
            for replacement in replacements:
                mutated = copy.deepcopy(tree)
                _replace(mutated, path, replacement)
                try:
                    program = ast.unparse(ast.fix_missing_locations(mutated)) + "\n"
                    compile(program, "<mutant>", "exec")
                except (SyntaxError, ValueError, TypeError, RecursionError):
                    continue
                if program in seen:
                    continue
                seen.add(program)
                line = getattr(node, "lineno", None) or _line_of(tree, path)
                name = f"mutant line {line}: `{_shown(node)}` -> `{_shown(replacement)}`"
                named = sum(probe.name.startswith(name) for probe in (*operators, *classes))
                family.append(Probe(name + (f" (#{named + 1} on the line)" if named else ""), program))
    kept_classes = min(len(classes), max(limit // 2, limit - len(operators)))
    return _spread(operators, limit - kept_classes) + _spread(classes, kept_classes)


def _spread(items: list, count: int) -> list:
    if len(items) <= count:
        return items
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def _line_of(tree: ast.AST, path: tuple):
    """The line of the nearest node on ``path`` that has one (a comprehension has none)."""
    node, line = tree, None
    for name, index in path:
        node = getattr(node, name) if index is None else getattr(node, name)[index]
        line = getattr(node, "lineno", line)
    return line


def _walk_with_paths(node: ast.AST, path: tuple = ()):
    if isinstance(node, ast.Assert):
        return
    yield path, node
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield from _walk_with_paths(item, path + ((name, index),))
        elif isinstance(value, ast.AST) and not isinstance(
            value, (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)
        ):
            yield from _walk_with_paths(value, path + ((name, None),))


def _replace(tree: ast.AST, path: tuple, replacement: ast.AST) -> None:
    parent = tree
    for name, index in path[:-1]:
        parent = getattr(parent, name) if index is None else getattr(parent, name)[index]
    name, index = path[-1]
    if index is None:
        setattr(parent, name, replacement)
    else:
        getattr(parent, name)[index] = replacement
