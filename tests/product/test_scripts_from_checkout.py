"""Every script in scripts/ and benchmarks/ runs from a checkout after `pip install -r requirements.txt` alone.

Each runs from a copy of this tree, from another folder, without PYTHONPATH, and with the editable install that
this machine has (of some checkout, not necessarily this one) taken out of the import system, as on a machine where
`pip install -e .` never ran. The project modules a script names are then imported from the copy, or the test
fails naming the script.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SCRIPTS = sorted(
    str(path.relative_to(ROOT)) for folder in ("scripts", "benchmarks") for path in (ROOT / folder).glob("*.py")
)
PROJECT_IMPORT = re.compile(r"^\s*(?:from|import) (cli|commands|data|judging|rewards|training|rl_trainer)\b", re.M)
# Runs each "SCRIPT ARG..." given as `python SCRIPT ARG...` would, without the editable install, and prints where the
# project modules its source names were imported from. One interpreter runs them all (the third-party imports are
# shared, which saves minutes); before each, the project's modules and the script's changes to sys.path are undone.
RUNNER = """
import importlib, json, os, re, runpy, shlex, sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
project = re.compile(sys.argv[1], re.M)
path = list(sys.path)
for command in sys.argv[2:]:
    script, *args = shlex.split(command)
    for name in [name for name in sys.modules if project.match("import " + name.split(".")[0])]:
        del sys.modules[name]
    sys.path[:] = [os.path.dirname(script), *path[1:]]
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    names = sorted(set(project.findall(open(script).read())))
    print("imported:", json.dumps([script, {name: importlib.import_module(name).__file__ for name in names}]))
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of this working tree's files (what git tracks or would track), as a fresh clone would hold them."""
    copy = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes(source.read_bytes())
            (copy / name).chmod(source.stat().st_mode)
    return copy


def run_from(checkout: Path, *commands: str) -> dict[str, dict[str, str]]:
    """Each command ("SCRIPT ARG...", SCRIPT relative to the checkout) run from `checkout`: by script, the file each
    project module it names was imported from."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    commands = [f"{checkout}/{command}" for command in commands]
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, PROJECT_IMPORT.pattern, *commands],
        cwd=checkout.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    reports = [
        json.loads(line.removeprefix("imported: "))
        for line in result.stdout.splitlines()
        if line.startswith("imported: ")
    ]
    return {str(Path(script).relative_to(checkout)): imported for script, imported in reports}


@pytest.mark.slow
def test_every_script_runs_from_a_checkout_that_is_not_installed(checkout):
    imported = run_from(checkout, *(f"{script} --help" for script in SCRIPTS))
    assert sorted(imported) == SCRIPTS
    outside = {
        script: {name: path for name, path in modules.items() if not Path(path).is_relative_to(checkout)}
        for script, modules in imported.items()
    }
    assert not any(outside.values()), f"imported from outside the checkout they ran from: {outside}"
    assert set(imported["scripts/plot_run.py"]) == {"cli", "training"}


def test_plot_run_draws_a_run_from_a_checkout(checkout, tmp_path):
    """The README's `python scripts/plot_run.py RUN`, on the recorded run, as the issue found it failing."""
    imported = run_from(checkout, f"scripts/plot_run.py {checkout}/tests/fixtures/recorded_run --out {tmp_path}/plots")
    assert Path(imported["scripts/plot_run.py"]["cli"]).is_relative_to(checkout)
    assert (tmp_path / "plots" / "rewards.png").stat().st_size > 0
