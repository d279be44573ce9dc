"""A problem that names its function, seen as the checks of a problem's tests see every problem: a function `solve`.

The cheap and wrong programs (data/quality/trivial.py, data/quality/wrong_programs.py) define ``solve``, and the tests the checks
write (data/quality/adequacy.py, data/generation/strengthen.py) call it. A problem whose ``entry_point`` is another name (HumanEval's
``has_close_elements``) is checked through its view: its tests call ``solve`` where they called the entry point, and
its solution ends ``solve = <entry point>``, so the solution, its mutants and every cheap program answer the same
calls. ``named_back`` turns what strengthening wrote for the view into tests of the problem itself.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from judging.records import Problem

CHECKED_NAME = "solve"


def as_solve(problem: Problem) -> Problem:
    """``problem`` with its tests calling ``solve`` and its solution defining it; itself when it is already so."""
    if problem.entry_point == CHECKED_NAME or problem.reads_input:
        return problem
    solution = None if problem.solution is None else f"{problem.solution}\n{CHECKED_NAME} = {problem.entry_point}\n"
    tests = tuple(
        replace(test, test_code=renamed(test.test_code, problem.entry_point, CHECKED_NAME)) for test in problem.tests
    )
    pool = tuple(
        replace(test, test_code=renamed(test.test_code, problem.entry_point, CHECKED_NAME)) for test in problem.pool
    )
    return replace(problem, tests=tests, solution=solution, entry_point=CHECKED_NAME, pool=pool)


def named_back(original: Problem, view: Problem) -> Problem:
    """The problem ``view`` (of ``original``, through ``as_solve``) describes: its tests calling the entry point again
    (the original's own tests kept as they were written), the original's solution and name."""
    if original.entry_point == CHECKED_NAME or original.reads_input:
        return view
    own = {renamed(test.test_code, original.entry_point, CHECKED_NAME): test for test in original.tests}
    tests = tuple(
        own.get(test.test_code) or replace(test, test_code=renamed(test.test_code, CHECKED_NAME, original.entry_point))
        for test in view.tests
    )
    return replace(view, tests=tests, solution=original.solution, entry_point=original.entry_point, pool=original.pool)


def renamed(test_code: str, old: str, new: str) -> str:
    """``test_code`` with every name ``old`` read as ``new``; as it is when it does not parse."""
    try:
        tree = ast.parse(test_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return test_code
    found = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id, found = new, True
    return ast.unparse(tree) if found else test_code
