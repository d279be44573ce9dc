"""Shared fixtures: the tiny offline models (the random one built once per session, the warm one cached across
sessions) and the repository root. Launching the trainer is in trainer_runs.py, the checks of a trained run in
trained_run_checks.py."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The helpers (trainer_runs, warm_model, bwrap_paths, ...) are imported by name from tests in every folder.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random Qwen2 with a tokenizer trained on the bundled problems, as the README's demo builds it."""
    out = tmp_path_factory.mktemp("tiny_model")
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


@pytest.fixture(scope="session")
def warm_model() -> Path:
    """The tiny model warm-started to pass about half its samples on the fixture problems (tests/helpers/warm_model.py):
    training tests start from it so their groups carry reward signal."""
    from warm_model import cached_warm_model

    return cached_warm_model()


@pytest.fixture()
def qhome(tmp_path, monkeypatch):
    """QHOME and QLIC folders the sandbox uid can read (for tests/helpers/fake_q/q or a licensed stand-in); QLIC holds no
    licence until a test writes one; licence retries wait 0.01 s."""
    import judging.execution

    home = tmp_path / "qhome"
    home.mkdir()
    home.chmod(0o755)
    monkeypatch.setenv("QHOME", str(home))
    monkeypatch.setenv("QLIC", str(home))
    monkeypatch.delenv("KX_ACCT", raising=False)
    monkeypatch.setattr(judging.execution, "LICENCE_RETRY_DELAYS", (0.01, 0.01, 0.01))
    return home
