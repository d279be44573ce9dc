"""`python rl_trainer.py --help`: a description with examples, the project's flags in their groups with their real
defaults, TRL's and transformers' fields after them under their own heading; and nothing slow imported for it."""

import json
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from conftest import ROOT
from judging import JudgeArguments
from rewards import ScoringArguments
from training.arguments import (
    DataArguments,
    DifficultyFilterArguments,
    EvalArguments,
    LoggingArguments,
    ModelArguments,
    QGRPOConfig,
    RewardFunctionArguments,
)

GROUPS = [
    "model",
    "data",
    "rewards and judge",
    "training",
    "evaluation",
    "generation with vLLM",
    "logging",
    "presets and config",
    "TRL and transformers settings",
]
# The project's own flags: every field of its dataclasses, the GRPOConfig fields it redefines, --preset, --config.
PROJECT_FLAGS = (
    {
        f.name
        for dtype in (
            ModelArguments,
            DataArguments,
            RewardFunctionArguments,
            ScoringArguments,
            JudgeArguments,
            EvalArguments,
            DifficultyFilterArguments,
            LoggingArguments,
        )
        for f in fields(dtype)
        if f.init
    }
    | set(QGRPOConfig.__annotations__)
    | {"preset", "config"}
)


@pytest.fixture(scope="module")
def help_text() -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "rl_trainer.py"), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def sections(text: str) -> dict[str, str]:
    """Each group's text by its heading (a line ending with ':' at the margin)."""
    parts = re.split(r"^(\S[^\n]*):\n", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def flags_in(section: str) -> set[str]:
    return set(re.findall(r"^  --(\w+)", section, flags=re.M))


@pytest.mark.slow
def test_help_opens_with_a_description_and_examples(help_text):
    text = help_text
    head = text.splitlines()[:14]
    assert head[0].startswith("usage: python rl_trainer.py [flags]")
    assert any(line.startswith("GRPO training of code models") for line in head)
    examples = head.index("examples:")
    assert head[examples + 1].strip().startswith("python scripts/make_tiny_model.py tiny_model")
    assert any("--eval_only --model" in line for line in head[examples:])


def test_project_flags_are_grouped_before_trl_and_transformers_fields(help_text):
    text = help_text
    found = sections(text)
    assert [title for title in found if title in GROUPS] == GROUPS
    project = set().union(*(flags_in(found[title]) for title in GROUPS[:-1]))
    assert PROJECT_FLAGS <= project, PROJECT_FLAGS - project
    trl = flags_in(found["TRL and transformers settings"])
    assert not trl & PROJECT_FLAGS
    assert {"lr_scheduler_type", "beta", "warmup_steps"} <= trl
    assert flags_in(found["data"]) == {f.name for f in fields(DataArguments)}


def flag_help(text: str, flag: str) -> str:
    """A flag's help, joined onto one line."""
    match = re.search(rf"^  --{flag}\b(.*)\n((?: {{24}}.*\n)*)", text, flags=re.M)
    first = re.split(r"\s{2,}", match.group(1).strip(), maxsplit=1)[1:]  # a short flag's help starts on its line
    return " ".join(first + [line.strip() for line in match.group(2).splitlines()])


@pytest.mark.parametrize(
    "flag, shown",
    [
        ("language", "(default: q)"),
        ("learning_rate", "(default: 5e-06)"),
        ("num_generations", "(default: 8)"),
        ("max_completion_length", "(default: 2048)"),
        ("eval_steps", "(default: 25)"),
        ("resume_from_checkpoint", "latest (the run folder's newest checkpoint) or a checkpoint folder"),
        ("output_dir", "Default: final_outputs/<size>/<format>/"),
        ("eval_max_tokens", "Default: --max_completion_length"),
        ("bf16", "Default: on where CUDA supports it, off on CPU."),
    ],
)
def test_project_flags_show_their_real_defaults(help_text, flag, shown):
    text = help_text
    assert shown in flag_help(text, flag)


def test_no_project_flag_reads_default_none(help_text):
    text = help_text
    found = sections(text)
    for title in GROUPS[:-1]:
        assert "(default: None)" not in found[title], title


MODULES_AFTER_HELP = """
import contextlib, io, json, runpy, sys
sys.argv = ["rl_trainer.py", "--help"]
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.slow
def test_help_does_not_import_trls_trainer():
    """--help needs the settings' parser (TRL's GRPOConfig: the floor of its time); TRL's trainer, half a second
    more, is imported only when a run starts."""
    result = subprocess.run(
        [sys.executable, "-c", MODULES_AFTER_HELP], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = set(json.loads(result.stdout))
    assert "trl.trainer.grpo_config" in imported
    assert "training.trainer" not in imported and "trl.trainer.grpo_trainer" not in imported
