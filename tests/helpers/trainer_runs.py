"""Launching `python rl_trainer.py ARGS` as a user does, for the tests that run the trainer."""

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def run_trainer(*args, cwd=ROOT, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`python rl_trainer.py ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "rl_trainer.py"), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def finished_run(model, run: Path, *settings) -> subprocess.CompletedProcess:
    """A training run of `model` into `run` that must finish (exit 0); its output, for the tests to read."""
    result = run_trainer("--model", model, "--output_dir", run, *settings)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
