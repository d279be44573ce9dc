"""README.md's "First run" section, run as a user copies it: every command, in order, from a fresh folder."""

import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def first_run_commands() -> list[str]:
    """The lines of the section's first bash block (each line one command, its comment included)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## First run\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_section_is_near_the_top_and_says_what_each_command_costs():
    headings = re.findall(r"^## (.+)$", (ROOT / "README.md").read_text(), flags=re.M)
    assert headings.index("First run") <= 3
    commands = first_run_commands()
    assert [c.split()[:2] for c in commands if c.startswith("python")] == [
        ["python", "scripts/make_tiny_model.py"],
        ["python", "rl_trainer.py"],
        ["python", "rl_trainer.py"],
        ["python", "rl_trainer.py"],
    ]
    for command in commands:
        if command.startswith("python"):
            assert re.search(r"# about \d+ s", command), command
    assert "--language python" in commands[1]


def test_the_first_run_commands_work_as_written(tmp_path):
    # A folder of the user's own with the repository's entry points, so that what the commands write lands here.
    for name in ("scripts", "rl_trainer.py"):
        (tmp_path / name).symlink_to(ROOT / name)
    outputs = []
    for command in first_run_commands():
        result = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=900, env=os.environ
        )
        assert result.returncode == 0, (command, result.stderr[-3000:])
        outputs.append(result.stdout)
    run = tmp_path / "runs/first"
    listing = outputs[2]
    assert {"config.yaml", "final_model", "checkpoint-2", "training_log.txt", "eval_results.json"} <= set(
        listing.split()
    )
    assert "step 3/3 |" in outputs[3]
    evaluations = json.loads((run / "logs/eval_results.json").read_text())
    assert [(e["step"], e["eval_only"]) for e in evaluations if e["eval_only"]] == [(2, True)]
    # Training's own: before the first step and after the last, once each although the run resumed in between.
    assert [e["step"] for e in evaluations if not e["eval_only"]] == [0, 3]
    log = (run / "logs/training_log.txt").read_text()
    assert "--- resumed from checkpoint-2 at " in log and log.count("finished at step 3/3") == 1
