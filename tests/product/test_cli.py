"""The command line: the reference's flags, config.yaml round trip, and one-line errors with exit code 2."""

import importlib.util
import json

import pytest
import yaml

from trainer_runs import run_trainer
from training.arguments import UsageError, model_size, parse_args

# The reference sweeps' flags (exps.sh, 14B line), as users' scripts pass them.
REFERENCE_SWEEP = [
    "--model",
    "/ckpt/best/14b/checkpoint",
    "--use_vllm",
    "--output_dir",
    "final_outputs/14b/reasoning/",
    "--learning_rate",
    "2e-6",
    "--simple_eval_problems",
    "15",
    "--repeat_eval_problems",
    "4",
    "--eval_steps",
    "25",
    "--use_wandb",
    "--wandb_name",
    "14b_reasoning",
    "--generation_temp",
    ".8",
    "--use_reasoning",
]


def test_reference_sweep_flags_parse_to_intended_config():
    args = parse_args(REFERENCE_SWEEP)
    assert args.model.model == "/ckpt/best/14b/checkpoint"
    assert args.data.use_reasoning_format is True  # --use_reasoning is argparse's prefix of --use_reasoning_format
    assert args.grpo.use_vllm and args.grpo.vllm_mode == "server"
    assert args.grpo.learning_rate == 2e-6
    assert args.grpo.temperature == 0.8
    assert args.grpo.eval_steps == 25
    assert (args.eval.simple_eval_problems, args.eval.repeat_eval_problems) == (15, 4)
    assert args.grpo.report_to == ["wandb"] and args.grpo.run_name == "14b_reasoning"
    assert args.run_dir == "final_outputs/14b/reasoning/"
    assert args.grpo.output_dir == "final_outputs/14b/reasoning/checkpoints"


def test_reference_defaults():
    args = parse_args([])
    assert args.model.model == "Qwen/Qwen2-0.5B-Instruct"
    assert (args.data.max_train_problems, args.data.max_test_problems, args.scoring.max_tests_per_problem) == (
        540,
        40,
        5,
    )
    assert (args.grpo.learning_rate, args.grpo.num_generations, args.grpo.gradient_accumulation_steps) == (5e-6, 8, 8)
    assert (args.grpo.per_device_train_batch_size, args.grpo.seed, args.grpo.num_train_epochs) == (1, 42, 100)
    assert (args.grpo.max_completion_length, args.grpo.save_steps, args.grpo.logging_steps) == (2048, 50, 1)
    assert (args.model.lora_rank, args.model.lora_alpha, args.model.lora_dropout) == (16, 32, 0.1)
    assert args.run_dir == "final_outputs/0.5b/non_reasoning"


def test_all_reference_flags_are_accepted():
    args = parse_args(
        [
            "--model",
            "m",
            "--max_train_problems",
            "10",
            "--max_test_problems",
            "3",
            "--max_tests_per_problem",
            "2",
            "--perfect_bonus",
            "2",
            "--use_reasoning_format",
            "--eval_steps",
            "5",
            "--learning_rate",
            "1e-5",
            "--test_reward_function",
            "--eval_pass_at_k",
            "--eval_k",
            "1",
            "2",
            "--eval_problems",
            "7",
            "--eval_only",
            "--repeat_eval_problems",
            "2",
            "--simple_eval_problems",
            "3",
            "--seed",
            "1",
            "--num_generations",
            "4",
            "--gradient_accumulation_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--use_wandb",
            "--wandb_project",
            "p",
            "--wandb_name",
            "n",
            "--wandb_entity",
            "e",
            "--wandb_tags",
            "a",
            "b",
            "--use_lora",
            "--lora_rank",
            "8",
            "--lora_alpha",
            "16",
            "--lora_dropout",
            "0.05",
            "--generation_temp",
            "0.7",
            "--base_reward_weight",
            "0.5",
            "--perfect_reward_weight",
            "0.25",
            "--max_model_len",
            "8192",
            "--dummy_reward",
            "--data",
            "x.jsonl",
            "--language",
            "python",
            "--max_steps",
            "3",
        ]
    )
    assert (
        args.eval.eval_k == [1, 2] and args.eval.simple_eval_problems == 7
    )  # --eval_problems is the reference's name for it
    assert args.grpo.temperature == 0.7 and args.grpo.vllm_max_model_length == 8192
    assert args.rewards.reward_funcs == ["dummy", "format"]
    assert args.logging.wandb_tags == ["a", "b"] and args.grpo.max_steps == 3


def test_model_size_guess():
    assert model_size("Qwen/Qwen2.5-7B-Instruct") == "7b"
    assert model_size("/ckpt/q-1.5b-sft/checkpoint-300") == "1.5b"
    assert model_size("tiny_model") == "other"


def test_reward_funcs_with_weights():
    args = parse_args(["--reward_funcs", "test_cases:1.0", "format:0.2"])
    assert args.rewards.reward_funcs == ["test_cases", "format"] and args.grpo.reward_weights == [1.0, 0.2]
    with pytest.raises(UsageError, match="every function or to none"):
        parse_args(["--reward_funcs", "test_cases:1.0", "format"])


def test_eval_k_above_n_fails_at_startup():
    with pytest.raises(UsageError, match="--eval_k 8"):
        parse_args(["--eval_k", "1", "8", "--repeat_eval_problems", "4"])


def test_default_eval_k_fits_the_samples_but_a_given_k_must():
    assert parse_args(["--repeat_eval_problems", "2"]).eval.eval_k == [1, 2]
    assert parse_args(["--repeat_eval_problems", "1"]).eval.eval_k == [1]
    assert parse_args([]).eval.eval_k == [1, 4]
    with pytest.raises(UsageError, match="--eval_k 4: pass@k needs 1 <= k <= --repeat_eval_problems \\(2\\)"):
        parse_args(["--repeat_eval_problems", "2", "--eval_k", "1", "4"])


def test_vllm_request_timeout_must_be_positive():
    assert parse_args([]).grpo.vllm_request_timeout == 900
    with pytest.raises(UsageError, match="--vllm_request_timeout must be a positive number of seconds"):
        parse_args(["--vllm_request_timeout", "0"])


def test_config_yaml_round_trips(tmp_path):
    args = parse_args(REFERENCE_SWEEP + ["--reward_funcs", "test_cases:1", "format:0.3"])
    settings = args.settings()
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    args2 = parse_args(["--config", str(path)])
    # The parsed settings themselves, not only settings() again: a field settings() left out would come back as
    # its default on both sides of a settings() comparison.
    for part in ("model", "data", "rewards", "scoring", "judge", "eval", "difficulty", "logging"):
        # rewards.weights holds only weights given as name:weight; the file gives them as reward_weights (grpo).
        assert {k: v for k, v in vars(getattr(args2, part)).items() if k != "weights"} == {
            k: v for k, v in vars(getattr(args, part)).items() if k != "weights"
        }, part
    assert args2.run_dir == args.run_dir
    assert args2.grpo.to_dict() == args.grpo.to_dict()
    assert (args2.model.model, args2.grpo.learning_rate, args2.grpo.temperature, args2.grpo.reward_weights) == (
        "/ckpt/best/14b/checkpoint",
        2e-6,
        0.8,
        [1.0, 0.3],
    )  # the sweep's values, none a default
    assert args2.settings() == settings
    args3 = parse_args(["--config", str(path), "--learning_rate", "3e-6"])  # flags override the file
    assert args3.grpo.learning_rate == 3e-6 and args3.data.use_reasoning_format


def _error_line(result):
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    return lines[-1]


@pytest.mark.slow
def test_bad_flag_exits_2():
    result = run_trainer("--no_such_flag", "1")
    assert result.returncode == 2
    assert "--no_such_flag" in result.stderr


@pytest.mark.slow
def test_bad_config_key_exits_2(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("learning_rat: 1e-5\n")
    result = run_trainer("--config", path)
    assert result.returncode == 2
    assert "unknown setting in --preset/--config: learning_rat" in _error_line(result)


@pytest.mark.slow
def test_missing_model_folder_exits_2(tmp_path):
    result = run_trainer("--model", tmp_path / "nope", "--language", "python", "--output_dir", tmp_path / "run")
    assert result.returncode == 2
    assert "no such folder" in _error_line(result)


@pytest.mark.slow
def test_invalid_data_file_exits_2_with_file_and_line(tmp_path, tiny_model):
    data = tmp_path / "bad.jsonl"
    good = {"id": "a", "description": "d", "tests": [{"test_code": "print(1)", "expected_output": "1"}]}
    data.write_text(json.dumps(good) + "\n" + json.dumps({"id": "b", "description": "d", "tests": []}) + "\n")
    result = run_trainer("--model", tiny_model, "--data", data, "--language", "python", "--output_dir", tmp_path / "r")
    assert result.returncode == 2
    assert _error_line(result).startswith(f"rl_trainer.py: error: {data}:2:")


@pytest.mark.slow
def test_unwritable_output_dir_exits_2(tmp_path, tiny_model):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_trainer("--model", tiny_model, "--language", "python", "--output_dir", blocker / "run")
    assert result.returncode == 2
    assert "cannot write there" in _error_line(result)


@pytest.mark.slow
def test_finished_run_is_not_overwritten(tmp_path, tiny_model):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 1\n")
    result = run_trainer("--model", tiny_model, "--language", "python", "--output_dir", run)
    assert result.returncode == 2
    assert "already holds a run's outputs" in _error_line(result)
    assert (run / "config.yaml").read_text() == "seed: 1\n"


def test_unknown_reward_function_is_a_usage_error():
    with pytest.raises(UsageError, match="--reward_funcs speed: no such reward function"):
        parse_args(["--reward_funcs", "speed"])


def test_dummy_reward_says_what_it_is():
    args = parse_args(["--dummy_reward"])
    assert args.rewards.reward_funcs == ["dummy", "format"]


VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
SERVER_NEEDS_CUDA = (
    "rl_trainer.py: error: --vllm_mode server needs a CUDA GPU: TRL 1.16 sends the weights to the "
    "vLLM server over NCCL (vLLM 0.30's weight transfer), which runs only on CUDA; on a CPU use "
    "--vllm_mode colocate"
)


def test_server_mode_without_cuda_is_refused_naming_colocate():
    import torch

    from training.prerequisites import check_vllm_server_device

    if torch.cuda.is_available():
        check_vllm_server_device()
        return
    with pytest.raises(UsageError) as raised:
        check_vllm_server_device()
    assert f"rl_trainer.py: error: {raised.value}" == SERVER_NEEDS_CUDA


@pytest.mark.slow
@pytest.mark.skipif(
    not VLLM_INSTALLED, reason="vLLM is not installed here: that is said first (tests/product/test_first_errors.py)"
)
def test_vllm_server_mode_on_a_cpu_stops_before_loading_anything(tmp_path, tiny_model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: server mode goes on to look for its server")
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--output_dir",
        tmp_path / "run",
        "--use_vllm",
        "--vllm_server_port",
        "1",
    )
    assert result.returncode == 2
    assert _error_line(result) == SERVER_NEEDS_CUDA
    assert "Loading weights" not in result.stderr and not (tmp_path / "run").exists()


@pytest.mark.skipif(
    not VLLM_INSTALLED, reason="vLLM is not installed here: that is said first (tests/product/test_first_errors.py)"
)
def test_vllm_server_mode_without_a_server_says_how_to_start_one(tmp_path, tiny_model):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA here: server mode is refused before the server is looked for (the test above)")
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--output_dir",
        tmp_path / "run",
        "--use_vllm",
        "--vllm_server_host",
        "127.0.0.1",
        "--vllm_server_port",
        port,
    )
    assert result.returncode == 2
    line = _error_line(result)
    assert f"no vLLM server answers at http://127.0.0.1:{port}" in line
    assert f"scripts/serve_vllm.sh {tiny_model}" in line and "--vllm_mode colocate" in line
    assert "Loading weights" not in result.stderr


@pytest.mark.skipif(VLLM_INSTALLED, reason="vLLM is installed here")
def test_vllm_colocate_without_vllm_is_one_line_and_writes_nothing(tmp_path, tiny_model):
    run = tmp_path / "run"
    result = run_trainer(
        "--model", tiny_model, "--language", "python", "--output_dir", run, "--use_vllm", "--vllm_mode", "colocate"
    )
    assert result.returncode == 2
    assert _error_line(result) == (
        "rl_trainer.py: error: --use_vllm needs vllm, which is not installed here; "
        "`pip install -r requirements-gpu.txt` or drop --use_vllm"
    )
    assert "Traceback" not in result.stderr and not run.exists()


def test_default_reward_weights_favour_the_tests():
    args = parse_args([])
    assert args.rewards.reward_funcs == ["test_cases", "format"] and args.grpo.reward_weights == [1.0, 0.2]
    args = parse_args(["--reward_funcs", "test_cases"])
    assert args.grpo.reward_weights == [1.0]


def test_every_command_that_trains_nothing_judges_with_the_evaluation_timeout_of_the_policy():
    """The evaluation's time per test is declared once (judging/policy.py): the trainer's --eval_timeout and the
    judge timeout of `rewards score` and `data verify|strengthen` all read it, and training keeps its own."""
    from commands.score import build_parser
    from data.__main__ import _parser
    from judging import policy

    assert policy.DEFAULT_EVAL_TIMEOUT != policy.DEFAULT_TIMEOUT
    args = parse_args(["--model", "m"])
    assert args.eval.eval_timeout == policy.DEFAULT_EVAL_TIMEOUT
    assert args.judge.judge_timeout == policy.DEFAULT_TIMEOUT
    score = build_parser().parse_args(["score", "--problems", "p", "--completions", "c", "--out", "o"])
    assert score.judge_timeout == policy.DEFAULT_EVAL_TIMEOUT
    for command in ("verify", "strengthen"):
        words = [command, "p.jsonl"] + (["out.jsonl"] if command == "strengthen" else [])
        assert _parser().parse_args(words).judge_timeout == policy.DEFAULT_EVAL_TIMEOUT
