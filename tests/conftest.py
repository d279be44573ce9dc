"""Shared fixtures: the tiny offline model (built once per session) and the repository root."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random Qwen2 with a tokenizer trained on the bundled problems, as the README's demo builds it."""
    out = tmp_path_factory.mktemp("tiny_model")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True,
                   capture_output=True, text=True)
    return out


def run_trainer(*args, cwd=ROOT, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`python rl_trainer.py ARGS` as a user runs it."""
    return subprocess.run([sys.executable, str(ROOT / "rl_trainer.py"), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
