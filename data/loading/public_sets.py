"""The public code sets, read as they are published, converted into the problem record (docs/data.md, "Bringing
your own data"), and what was dropped on the way, counted by reason.

A row's schema is told by its fields (``schema_of``):

- **HumanEval** (``task_id``, ``prompt``, ``entry_point``, ``test``, ``canonical_solution``): the id is the
  ``task_id``; the description is the prompt (the signature and docstring); the solution the prompt and the
  canonical solution; each assert of ``check(candidate)`` becomes one printing test of the entry point
  (data/loading/comparisons.py: ``asserted_value``; ``abs(candidate(x) - y) < 1e-6`` a numeric test of that tolerance).
- **MBPP** (``task_id``, ``text``, ``code``, ``test_list``, ``test_setup_code``, ``challenge_test_list``): the
  function its asserts call is the entry point, named in the description with the first test's call; set-up code
  of literal assignments goes before each test that passes its names.
- **APPS and TACO** (``problem_id``, ``question``, ``input_output`` as a JSON string of ``inputs``/``outputs``,
  ``solutions`` as a JSON string list): a test per input, given on standard input; a problem whose
  ``input_output`` names a ``fn_name`` calls that function with each input's arguments instead. TACO rows carry no
  id: a row's id is its index in the file (from 0), as the dataset numbers it.
- **CodeContests** (``name``, ``description``, ``public_tests``/``private_tests``/``generated_tests`` of
  ``input``/``output`` lists, ``solutions`` by language): standard-input tests in that order; the solution is the
  first Python 3 one.
- **LiveCodeBench** (``question_id``, ``question_content``, ``public_test_cases``, ``private_test_cases``, the
  latter a JSON string or its zlib-compressed pickle in base64, read here without running any pickled code):
  its standard-input problems (AtCoder, Codeforces); its functional ones (a LeetCode class method) are dropped.

What cannot become a test is dropped with its reason (a loop, a comparison with another call, a dict result, an
argument that is not a literal ...), and a problem left without a test is dropped; ``Conversion.summary`` says
how many of each. Sets of these schemas are Python.
"""

from __future__ import annotations

import ast
import base64
import builtins
import io
import json
import pickle
import zlib
from collections import Counter
from dataclasses import dataclass, field

from data.loading.comparisons import asserted_value, literal_value, NotLiteral, printing_form, refusal

SHOWN_DROPPED = 8  # problem ids named per reason in the summary
PYTHON3 = 3  # CodeContests' language number for Python 3 solutions
SCHEMAS = ("HumanEval", "MBPP", "APPS/TACO", "CodeContests", "LiveCodeBench")


@dataclass
class Conversion:
    """What converting one source's rows did: rows read, problems and tests made, tests and problems dropped (each
    by reason; problems with their ids)."""

    rows: Counter = field(default_factory=Counter)  # schema -> rows read
    problems: int = 0
    tests: int = 0
    dropped_tests: Counter = field(default_factory=Counter)
    dropped_problems: dict = field(default_factory=dict)  # reason -> [ids]

    def drop_test(self, reason: str) -> None:
        self.dropped_tests[reason] += 1

    def drop_problem(self, problem_id: str, reason: str) -> None:
        self.dropped_problems.setdefault(reason, []).append(problem_id)

    def summary(self, source) -> str | None:
        """One line: what was read in which schema, what was made, what was dropped and why; None when no row was
        in a public schema."""
        if not self.rows:
            return None
        read = ", ".join(f"{count} {schema} rows" for schema, count in self.rows.items())
        line = f"{source}: {read}: {self.problems} problems with {self.tests} tests loaded"
        if self.dropped_tests:
            line += (
                f"; {sum(self.dropped_tests.values())} tests dropped ("
                + ", ".join(f"{count} {reason}" for reason, count in self.dropped_tests.most_common())
                + ")"
            )
        if self.dropped_problems:
            line += (
                f"; {sum(map(len, self.dropped_problems.values()))} problems dropped ("
                + ", ".join(
                    f"{len(ids)} {reason}: {', '.join(ids[:SHOWN_DROPPED])}"
                    + (" ..." if len(ids) > SHOWN_DROPPED else "")
                    for reason, ids in self.dropped_problems.items()
                )
                + ")"
            )
        return line


def schema_of(row) -> str | None:
    """The public schema a row is in, or None (the project's record, the published dataset's, anything else)."""
    if not isinstance(row, dict) or "tests" in row:
        return None
    if {"task_id", "prompt", "entry_point", "test"} <= row.keys():
        return "HumanEval"
    if {"text", "code", "test_list"} <= row.keys():
        return "MBPP"
    if {"question", "input_output"} <= row.keys():
        return "APPS/TACO"
    if {"name", "description", "public_tests"} <= row.keys():
        return "CodeContests"
    if {"question_content", "public_test_cases"} <= row.keys():
        return "LiveCodeBench"
    return None


def convert(row: dict, schema: str, index: int, conversion: Conversion) -> dict | None:
    """The record of one row in ``schema`` (its ``index`` in its file, from 0), or None when none of its tests
    converts (counted in ``conversion`` with the reason)."""
    conversion.rows[schema] += 1
    record = CONVERTERS[schema](row, index, conversion)
    if record is not None:
        conversion.problems += 1
        conversion.tests += len(record["tests"])
    return record


def _problem_id(value, fallback) -> str:
    return str(value) if value is not None and str(value).strip() else str(fallback)


def _with_tests(record: dict, tests: list[dict], conversion: Conversion, why_none: str = "no test converts"):
    if not tests:
        conversion.drop_problem(record["id"], why_none)
        return None
    return {**record, "language": "python", "tests": tests}


# HumanEval and MBPP: asserts of a function.


class _Renamed(ast.NodeTransformer):
    """Calls of ``candidate`` (HumanEval's name for the function under test) as calls of the entry point."""

    def __init__(self, entry_point: str):
        self.entry_point = entry_point

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(self.entry_point, node.ctx), node) if node.id == "candidate" else node


def _assert_tests(
    statements: list[ast.stmt], entry_point: str, set_up: dict[str, str], conversion: Conversion
) -> list[dict]:
    """A printing test per assert of ``statements`` that converts (``set_up``: literal assignments by name, put
    before the tests that pass their names); every other statement dropped with its reason."""
    tests = []
    for statement in statements:
        reason = None
        if isinstance(statement, (ast.Import, ast.ImportFrom)) or (
            isinstance(statement, ast.Expr) and isinstance(statement.value, (ast.Name, ast.Constant))
        ):
            continue  # an import or a bare name checks nothing; an assert that needs it is dropped below
        if not isinstance(statement, ast.Assert):
            reason = "loops" if isinstance(statement, (ast.For, ast.While)) else "statements that are not asserts"
        elif isinstance(statement.test, ast.Constant):
            reason = "asserts of a constant (assert True)"
        else:
            asserted = asserted_value(statement, entry_point, by_value=True)
            if asserted is None:
                reason = _why_not(statement, entry_point)
            else:
                call, expected, tolerance, compare = asserted
                names = {node.id for node in ast.walk(call) if isinstance(node, ast.Name)} & set_up.keys()
                shown = f"print(repr({ast.unparse(call)}))" if compare == "value" else f"print({ast.unparse(call)})"
                code = "\n".join([*(set_up[name] for name in sorted(names)), shown])
                if refusal(code, entry_point):
                    reason = "arguments that are not literals"
                else:
                    tests.append(
                        {"test_code": code, "expected_output": expected}
                        | ({"tolerance": tolerance} if tolerance is not None else {})
                        | ({"compare": "value"} if compare == "value" else {})
                    )
        if reason:
            conversion.drop_test(reason)
    return tests


def _why_not(statement: ast.Assert, entry_point: str) -> str:
    """Why an assert does not convert, in the words of the summary."""
    test = statement.test
    calls = [
        node
        for node in ast.walk(test)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point
    ]
    if not calls:
        return "asserts that call no function under test"
    if len(calls) > 1 and isinstance(test, ast.Compare):
        return "comparisons of one call with another"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        for side in (test.left, test.comparators[0]):
            try:
                value = literal_value(side)
            except (NotLiteral, RecursionError, MemoryError):
                continue
            if isinstance(value, (dict, set, frozenset)):
                return "dict or set results (their printed order varies)"
        if any(isinstance(node, ast.Name) and node.id != entry_point for node in ast.walk(test)):
            return "comparisons with values the test computes"
    return "asserts in another form"


def _human_eval(row: dict, index: int, conversion: Conversion) -> dict | None:
    entry_point = row["entry_point"]
    record = {
        "id": _problem_id(row["task_id"], index),
        "description": row["prompt"],
        "entry_point": entry_point,
        "solution": row["prompt"] + (row.get("canonical_solution") or ""),
    }
    try:
        module = ast.parse(row["test"])
    except (SyntaxError, ValueError):
        conversion.drop_problem(record["id"], "tests that do not parse")
        return None
    checks = [node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "check"]
    body = [_Renamed(entry_point).visit(statement) for statement in (checks[0].body if checks else [])]
    return _with_tests(record, _assert_tests(body, entry_point, {}, conversion), conversion)


def _mbpp(row: dict, index: int, conversion: Conversion) -> dict | None:
    problem_id = _problem_id(row.get("task_id"), index)
    code = (row.get("code") or "").replace("\r\n", "\n")
    asserts = [*(row.get("test_list") or []), *(row.get("challenge_test_list") or [])]
    statements = []
    for text in asserts:
        try:
            statements += ast.parse(text).body
        except (SyntaxError, ValueError):
            conversion.drop_test("tests that do not parse")
    entry_point = _called_function(statements, code)
    if entry_point is None:
        conversion.drop_problem(problem_id, "no function called by its asserts")
        return None
    set_up = _literal_set_up(row.get("test_setup_code") or "")
    if set_up is None:
        conversion.drop_problem(problem_id, "set-up code that is not literal assignments")
        return None
    first = next(filter(None, (asserted_value(statement, entry_point) for statement in statements)), None)
    example = f", for example `{ast.unparse(first[0])}`" if first else ""
    record = {
        "id": problem_id,
        "entry_point": entry_point,
        "solution": code or None,
        "description": f"{row['text'].strip()}\n\nWrite it as a function named `{entry_point}`{example}.",
    }
    return _with_tests(record, _assert_tests(statements, entry_point, set_up, conversion), conversion)


def _called_function(statements: list[ast.stmt], code: str) -> str | None:
    """The function the asserts call that the solution defines (else the one they call most)."""
    called = Counter(
        node.func.id
        for statement in statements
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    )
    try:
        defined = {node.name for node in ast.walk(ast.parse(code)) if isinstance(node, ast.FunctionDef)}
    except (SyntaxError, ValueError):
        defined = set()
    for name, _ in called.most_common():
        if name in defined:
            return name
    return next((name for name, _ in called.most_common() if not hasattr(builtins, name)), None)


def _literal_set_up(text: str) -> dict[str, str] | None:
    """Set-up code as ``{name: its line}`` when every statement is ``NAME = literal``; None otherwise."""
    try:
        statements = ast.parse(text.replace("\r\n", "\n")).body
    except (SyntaxError, ValueError):
        return None
    set_up = {}
    for statement in statements:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return None
        try:
            literal_value(statement.value)
        except (NotLiteral, RecursionError, MemoryError):
            return None
        set_up[statement.targets[0].id] = ast.unparse(statement)
    return set_up


# Standard input and output: APPS, TACO, CodeContests, LiveCodeBench.


def _text(value) -> str | None:
    """An input or output as text: a string, or a list of lines joined; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    return None


def _stdin_tests(inputs, outputs, conversion: Conversion) -> list[dict]:
    tests = []
    for given, expected in zip(inputs, outputs):
        given, expected = _text(given), _text(expected)
        if given is None or expected is None:
            conversion.drop_test("inputs or outputs that are not text")
            continue
        tests.append({"input": given, "expected_output": expected})
    return tests


def _json_field(row: dict, key: str):
    value = row.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else None
        except json.JSONDecodeError:
            return None
    return value


def _apps(row: dict, index: int, conversion: Conversion) -> dict | None:
    problem_id = _problem_id(row.get("problem_id"), index)
    pairs = _json_field(row, "input_output")
    solutions = _json_field(row, "solutions") or []
    record = {
        "id": problem_id,
        "description": row["question"],
        "solution": solutions[0] if solutions and isinstance(solutions[0], str) else None,
    }
    if row.get("difficulty") is not None:
        record["difficulty"] = str(row["difficulty"])
    if (
        not isinstance(pairs, dict)
        or not isinstance(pairs.get("inputs"), list)
        or not isinstance(pairs.get("outputs"), list)
    ):
        conversion.drop_problem(problem_id, "no input_output of inputs and outputs")
        return None
    inputs, outputs = pairs["inputs"], pairs["outputs"]
    if len(inputs) != len(outputs):
        conversion.drop_problem(problem_id, "inputs and outputs that differ in number")
        return None
    if pairs.get("fn_name"):
        return _call_based(record, pairs["fn_name"], row.get("starter_code") or "", inputs, outputs, conversion)
    return _with_tests(record, _stdin_tests(inputs, outputs, conversion), conversion)


def _call_based(
    record: dict, name: str, starter_code: str, inputs: list, outputs: list, conversion: Conversion
) -> dict | None:
    """An APPS/TACO problem that calls ``name`` with each input's arguments: printing tests of it."""
    if "class Solution" in starter_code or not str(name).isidentifier():
        conversion.drop_problem(record["id"], "functional tests of a class method (LeetCode)")
        return None
    tests = []
    for arguments, result in zip(inputs, outputs):
        if isinstance(result, list) and len(result) == 1:
            result = result[0]  # APPS wraps a function's result in a list
        if not isinstance(arguments, list):
            arguments = [arguments]
        assertion = f"assert {name}({', '.join(map(repr, arguments))}) == {result!r}"
        printing = printing_form(assertion, "", name)
        if printing is None or refusal(printing.test_code, name):
            conversion.drop_test("results or arguments that do not print as literals")
            continue
        tests.append(
            {"test_code": printing.test_code, "expected_output": printing.expected_output}
            | ({"tolerance": printing.tolerance} if printing.tolerance is not None else {})
            | ({"compare": printing.compare} if printing.compare != "text" else {})
        )
    return _with_tests(
        {
            **record,
            "entry_point": name,
            "description": record["description"] + (f"\n\n{starter_code}" if starter_code else ""),
        },
        tests,
        conversion,
    )


def _code_contests(row: dict, index: int, conversion: Conversion) -> dict | None:
    problem_id = _problem_id(row.get("name"), index)
    tests = []
    for key in ("public_tests", "private_tests", "generated_tests"):
        pairs = row.get(key) or {}
        if isinstance(pairs, dict):
            tests += _stdin_tests(pairs.get("input") or [], pairs.get("output") or [], conversion)
    solutions = row.get("solutions") or {}
    python = (
        [
            code
            for language, code in zip(solutions.get("language") or [], solutions.get("solution") or [])
            if language == PYTHON3
        ]
        if isinstance(solutions, dict)
        else []
    )
    record = {"id": problem_id, "description": row["description"], "solution": python[0] if python else None}
    if row.get("difficulty") is not None:
        record["difficulty"] = str(row["difficulty"])
    return _with_tests(record, tests, conversion)


class _Strings(pickle.Unpickler):
    """An unpickler of plain values only: any class or function a pickle names is refused, so reading one runs
    no code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain value")


def _test_cases(value) -> list | None:
    """LiveCodeBench's test cases: a JSON list, as text or as base64 of a zlib-compressed pickle of that text."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str) or not value.strip():
        return []
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        text = _Strings(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        return json.loads(text) if isinstance(text, (str, bytes)) else None
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError, TypeError):
        return None


def _live_code_bench(row: dict, index: int, conversion: Conversion) -> dict | None:
    problem_id = _problem_id(row.get("question_id"), index)
    cases = []
    for key in ("public_test_cases", "private_test_cases"):
        found = _test_cases(row.get(key))
        if found is None:
            conversion.drop_problem(problem_id, f"{key} that cannot be read")
            return None
        cases += found
    if any(isinstance(case, dict) and case.get("testtype") == "functional" for case in cases):
        conversion.drop_problem(problem_id, "functional tests of a class method (LeetCode)")
        return None
    cases = [case for case in cases if isinstance(case, dict)]
    record = {"id": problem_id, "description": row["question_content"]}
    if row.get("difficulty") is not None:
        record["difficulty"] = str(row["difficulty"])
    tests = _stdin_tests([case.get("input") for case in cases], [case.get("output") for case in cases], conversion)
    return _with_tests(record, tests, conversion)


CONVERTERS = {
    "HumanEval": _human_eval,
    "MBPP": _mbpp,
    "APPS/TACO": _apps,
    "CodeContests": _code_contests,
    "LiveCodeBench": _live_code_bench,
}
