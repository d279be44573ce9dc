"""Flags whose package, device or tool is missing stop the trainer before any weights load, with one line that
names the fix (exit 2): --use_qlora without CUDA, --use_wandb without wandb, an explicit --sandbox bwrap without
bubblewrap, which is refused, never replaced by a weaker sandbox."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from judging import Judge, JudgeUnavailable
from trainer_runs import run_trainer
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

# Python with a package made uninstalled as Python itself sees a blocked import (sys.modules[name] = None:
# importlib.util.find_spec answers None, `import` raises), then rl_trainer.py as a user runs it.
WITHOUT_PACKAGE = (
    "import runpy, sys; sys.modules[sys.argv[1]] = None; sys.argv = sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def trainer_args(model, run):
    return [
        "--model",
        model,
        "--data",
        WARM_PYTHON_DATA,
        "--language",
        "python",
        "--output_dir",
        run,
        "--max_steps",
        "1",
    ]


def assert_stopped_early(result, run, *words):
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rl_trainer.py: error: ") and all(word in last for word in words), last
    assert "Traceback" not in result.stderr and "Loading weights" not in result.stderr
    assert not run.exists()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_qlora_without_cuda_names_lora_instead(tiny_model, tmp_path):
    run = tmp_path / "run"
    result = run_trainer(*trainer_args(tiny_model, run), "--use_qlora")
    assert_stopped_early(result, run, "--use_qlora needs a CUDA GPU and bitsandbytes", "--use_lora")


@pytest.mark.slow
def test_wandb_not_installed_names_the_install(tiny_model, tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "offline"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_PACKAGE,
            "wandb",
            str(ROOT / "rl_trainer.py"),
            *map(str, trainer_args(tiny_model, run)),
            "--use_wandb",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_stopped_early(result, run, "--use_wandb needs wandb, which is not installed here", "pip install wandb")


@pytest.fixture()
def path_without_bwrap(tmp_path):
    """A PATH holding the tools the weaker levels use (prlimit, setpriv, kill, unshare), and no bwrap."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("prlimit", "setpriv", "kill", "unshare"):
        if shutil.which(tool):
            (tools / tool).symlink_to(shutil.which(tool))
    return str(tools)


@pytest.mark.parametrize("level", ["bwrap", "bwrap-cold"])
def test_an_explicit_bwrap_without_bubblewrap_is_refused_not_weakened(level, path_without_bwrap, monkeypatch):
    monkeypatch.setenv("PATH", path_without_bwrap)
    with pytest.raises(JudgeUnavailable, match=r"bwrap not installed\): install bubblewrap"):
        Judge(sandbox=level, workers=1)


@pytest.mark.slow
def test_the_trainer_refuses_an_explicit_bwrap_without_bubblewrap(tiny_model, tmp_path, path_without_bwrap):
    run = tmp_path / "run"
    result = run_trainer(
        *trainer_args(tiny_model, run), "--sandbox", "bwrap", env={**os.environ, "PATH": path_without_bwrap}
    )
    assert_stopped_early(result, run, "sandbox='bwrap' does not work here", "install bubblewrap")
