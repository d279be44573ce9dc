"""The packages form layers: each imports only the ones below it, so there is no cycle and no arrow upward.

    cli  <  judging  <  rewards  <  data  <  training, commands  <  rl_trainer.py

`rewards/__main__.py` is the one exception by design: `python -m rewards score` is a command, implemented in
`commands/score.py` (it loads problems with `data`), and the shim only forwards to it.

`judging/worker/` is below them all: the warm worker runs it in an isolated interpreter inside the sandbox, where
nothing but the standard library and that folder is in view; the judge imports only its `protocol`.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BELOW = {
    "cli": set(),
    "judging": {"cli"},
    "rewards": {"cli", "judging"},
    "data": {"cli", "judging", "rewards"},
    "training": {"cli", "judging", "rewards", "data"},
    "commands": {"cli", "judging", "rewards", "data"},
}
ENTRY_SHIMS = {"rewards/__main__.py": {"commands"}}
HEAVY = {"torch", "transformers", "trl", "accelerate", "deepspeed", "datasets", "peft"}


def imported(path: Path, top_level_only: bool = False) -> set[str]:
    """The top-level names of every module ``path`` imports (anywhere in it, or only at module level)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(BELOW))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        allowed = BELOW[package] | {package} | ENTRY_SHIMS.get(relative, set())
        upward = (imported(path) & set(BELOW)) - allowed
        if upward:
            wrong[relative] = sorted(upward)
    assert not wrong, f"imports from a layer above or beside: {wrong}"


# data/'s rooms, each importing only those before it (and itself), never a private name of another.
DATA_ROOMS = ["loading", "q", "quality", "generation"]


def test_data_rooms_import_only_the_rooms_before_them_and_no_private_name():
    wrong = {}
    for index, room in enumerate(DATA_ROOMS):
        allowed = set(DATA_ROOMS[: index + 1])
        for path in sorted((ROOT / "data" / room).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("data.")):
                    continue
                other = node.module.split(".")[1]
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                if other not in allowed or (private and other != room):
                    wrong[path.relative_to(ROOT).as_posix()] = (node.module, private)
    assert not wrong, f"data/ rooms importing a later room or another room's private name: {wrong}"
    assert not sorted((ROOT / "data").glob("*.py")) or {p.name for p in (ROOT / "data").glob("*.py")} == {
        "__init__.py",
        "__main__.py",
    }, "data/'s modules belong in its rooms"


WORKER = ROOT / "judging" / "worker"


def test_the_worker_imports_only_the_standard_library_and_its_own_folder():
    own = {path.stem for path in WORKER.glob("*.py")}
    wrong = {}
    for path in sorted(WORKER.glob("*.py")):
        tree = ast.parse(path.read_text())
        relative = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        outside = {name for name in imported(path) if name not in sys.stdlib_module_names and name not in own}
        if outside or relative:
            wrong[path.name] = sorted(outside) + [f".{name}" for name in relative]
    assert not wrong, f"judging/worker/ imports from outside the standard library and its folder: {wrong}"
    assert {"protocol", "isolation", "ending", "finalization", "loop", "main"} <= own


def test_the_judge_and_the_worker_import_the_same_protocol():
    """The contract is written once: judging/warm.py packs and reads what the worker's loop reads and writes."""
    assert "judging.worker" in {
        node.module
        for node in ast.walk(ast.parse((ROOT / "judging" / "warm.py").read_text()))
        if isinstance(node, ast.ImportFrom) and any(a.name == "protocol" for a in node.names)
    }
    assert "protocol" in imported(WORKER / "loop.py")
    worker_outside = {path.name for path in (ROOT / "judging").glob("*.py") if "worker" in path.stem}
    assert not worker_outside, f"worker code outside judging/worker/: {worker_outside}"


@pytest.mark.parametrize("package", ["cli", "judging", "rewards"])
def test_the_lower_layers_import_nothing_heavy_at_module_level(package):
    heavy = {
        path.name: sorted(imported(path, top_level_only=True) & HEAVY)
        for path in (ROOT / package).glob("*.py")
        if imported(path, top_level_only=True) & HEAVY
    }
    assert not heavy


@pytest.mark.parametrize(
    "command",
    [
        ["-c", "import rewards, judging, cli"],
        ["-m", "rewards", "score", "--help"],
        ["-m", "data", "check", "--help"],
    ],
)
def test_the_light_commands_start_without_torch_or_transformers(command):
    probe = (
        "import runpy, sys, atexit\n"
        "atexit.register(lambda: print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{sorted(HEAVY)!r})))\n"
    )
    if command[0] == "-c":
        code = probe + command[1]
    else:
        code = (
            probe + f"sys.argv = {[command[1], *command[2:]]!r}\nrunpy.run_module({command[1]!r}, run_name='__main__')"
        )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
