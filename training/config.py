"""The run's settings: the reference Q trainer's flags, ours, and every `GRPOConfig` field, each a flag.

`QArguments` holds what TRL does not know about (model path, data, judging, evaluation, LoRA, wandb names).
`QGRPOConfig` is TRL's `GRPOConfig` with the reference's defaults (learning rate 5e-6, 100 epochs, 8 generations,
batch 1 x 8 accumulation, completions up to 2048 tokens, checkpoint every 50 steps, log every step, vLLM in
server mode). `parse_args` turns argv (plus `--preset`/`--config` YAML files) into both and resolves the
settings that depend on each other.
"""

import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from trl import GRPOConfig, TrlParser

from rewards import REWARD_FUNCS

# TRL 1.16 still uses transformers' gradient_checkpointing names (field and methods), each use warning of the v6
# rename to activation_checkpointing: silence that one warning wherever the settings are built.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)

ROOT = Path(__file__).resolve().parent.parent
PRESET_DIR = ROOT / "config" / "models"


class UsageError(ValueError):
    """Bad settings: the trainer prints the one-line message and exits with code 2."""


# The test cases are the objective; the format reward only shapes the output, so it weighs less by default.
DEFAULT_REWARD_WEIGHTS = {"test_cases": 1.0, "format": 0.2, "dummy": 1.0}


@dataclass
class QArguments:
    """Settings of the Q trainer that are not `GRPOConfig` fields. Names follow the reference Q trainer."""

    model: str = field(
        default="Qwen/Qwen2-0.5B-Instruct",
        metadata={"help": "Model to train: a hub name, a local folder, or a checkpoint folder of a run."},
    )
    data: str | None = field(
        default=None,
        metadata={
            "help": "Problems: a JSONL/JSON file, a reference SFT_Data folder, a saved dataset, a parquet file or a "
            "dataset name. Default: the bundled set for --language."
        },
    )
    language: str = field(
        default="q", metadata={"help": "Language of the problems and completions.", "choices": ["q", "python"]}
    )
    test_fraction: float = field(
        default=0.2, metadata={"help": "Share of problems held out for evaluation when the data has no split."}
    )
    max_train_problems: int = field(default=540, metadata={"help": "At most this many training problems."})
    max_test_problems: int = field(default=40, metadata={"help": "At most this many held-out problems."})
    max_tests_per_problem: int = field(
        default=5, metadata={"help": "Training reward uses the first N tests of each problem."}
    )
    verify_data: bool = field(
        default=False,
        metadata={"help": "Run every problem's canonical solution through the judge before training; stop if any fails."},
    )
    prompt_style: str = field(
        default="plain",
        metadata={
            "help": "plain: the reference's 'Human: ... Assistant:' text; chat: messages through the model's chat "
            "template (instruct models).",
            "choices": ["plain", "chat"],
        },
    )
    use_reasoning_format: bool = field(
        default=False,
        metadata={"help": "Ask for <reasoning>...</reasoning> then <answer>...</answer>; only the answer runs."},
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["test_cases", "format"],
        metadata={
            "help": "Reward functions by name, optionally with a weight as name:weight (test_cases, format, dummy). "
            "Weights may also be given with --reward_weights; by default test_cases 1.0, format 0.2."
        },
    )
    perfect_bonus: float = field(default=1.0, metadata={"help": "Bonus when every test passes."})
    base_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the pass fraction."})
    perfect_reward_weight: float = field(default=1.0, metadata={"help": "Weight of the perfect-solution bonus."})
    dummy_reward: bool = field(
        default=False,
        metadata={
            "help": "Pipeline check only: replace the test-case reward by 'dummy', which runs no code and rewards "
            "any extractable code with 1.0. Never a training signal."
        },
    )
    test_reward_function: bool = field(
        default=False,
        metadata={"help": "Judge every problem's canonical solution with the training reward, print it, and exit."},
    )
    q_binary: str | None = field(
        default=None,
        metadata={"help": "The q executable. Default: $Q_INTERPRETER_PATH, $Q_EXECUTABLE_PATH, $QHOME/l64/q, PATH."},
    )
    sandbox: str = field(
        default="auto",
        metadata={
            "help": "auto: the strongest isolation available (logged; never root without namespaces); strict: refuse "
            "to run without namespaces; bwrap, unshare, rlimits: exactly that level or stop.",
            "choices": ["auto", "strict", "bwrap", "unshare", "rlimits"],
        },
    )
    judge_timeout: float = field(default=1.0, metadata={"help": "Seconds per test during training."})
    judge_workers: int | None = field(
        default=None, metadata={"help": "Parallel executions per process. Default: the cores shared among local ranks."}
    )
    judge_memory_mb: int = field(default=1024, metadata={"help": "Address-space limit of one execution, in MB."})
    eval_pass_at_k: bool = field(
        default=True, metadata={"help": "Evaluate pass@k on held-out problems every --eval_steps and at the end."}
    )
    eval_k: list[int] = field(
        default_factory=lambda: [1, 4], metadata={"help": "The k values of pass@k; each at most --repeat_eval_problems."}
    )
    simple_eval_problems: int = field(default=15, metadata={"help": "Held-out problems per evaluation."})
    eval_split: str = field(
        default="test",
        metadata={
            "help": "Problems to evaluate on: test (held out, the default) or train (to watch the policy fit the "
            "training problems, as the CPU demo does).",
            "choices": ["test", "train"],
        },
    )
    eval_problems: int | None = field(
        default=None, metadata={"help": "The reference's name for the number of evaluation problems; sets --simple_eval_problems."}
    )
    repeat_eval_problems: int = field(default=4, metadata={"help": "Samples per problem in evaluation (n of pass@k)."})
    eval_temperature: float = field(default=0.8, metadata={"help": "Sampling temperature in evaluation."})
    eval_max_tokens: int | None = field(
        default=None, metadata={"help": "Longest evaluation completion, in tokens. Default: --max_completion_length."}
    )
    eval_timeout: float = field(default=2.0, metadata={"help": "Seconds per test in evaluation."})
    eval_only: bool = field(default=False, metadata={"help": "Evaluate --model on the held-out problems; no training."})
    generation_temp: float | None = field(
        default=None, metadata={"help": "The reference's name for the sampling temperature; sets --temperature."}
    )
    max_model_len: int | None = field(
        default=None, metadata={"help": "vLLM context length; sets --vllm_max_model_length."}
    )
    use_lora: bool = field(default=False, metadata={"help": "Train LoRA adapters instead of the full model."})
    use_qlora: bool = field(default=False, metadata={"help": "LoRA on a 4-bit quantised base (needs CUDA and bitsandbytes)."})
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.1, metadata={"help": "LoRA dropout."})
    use_wandb: bool = field(default=False, metadata={"help": "Log to Weights & Biases."})
    wandb_project: str = field(default="q-language-training", metadata={"help": "wandb project."})
    wandb_name: str | None = field(default=None, metadata={"help": "wandb run name (also the run_name)."})
    wandb_entity: str | None = field(default=None, metadata={"help": "wandb entity (team or user)."})
    wandb_tags: list[str] | None = field(default=None, metadata={"help": "wandb tags."})
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Allow a new run into a folder that already holds a run's outputs."}
    )
    run_dir: str | None = field(
        default=None,
        metadata={"help": "Set by the trainer from --output_dir (the run folder; checkpoints go to its checkpoints/)."},
    )


@dataclass
class QGRPOConfig(GRPOConfig):
    """`GRPOConfig` with the reference Q trainer's defaults."""

    output_dir: str | None = field(
        default=None,
        metadata={"help": "Run folder. Default: final_outputs/<size>/<format>/ from the model name and format."},
    )
    learning_rate: float = field(default=5e-6, metadata={"help": "Initial AdamW learning rate."})
    num_train_epochs: float = field(default=100.0, metadata={"help": "Passes over the training problems."})
    per_device_train_batch_size: int = field(default=1, metadata={"help": "Completions per device per step."})
    gradient_accumulation_steps: int = field(default=8, metadata={"help": "Micro-batches per optimizer step."})
    num_generations: int | None = field(default=8, metadata={"help": "Completions sampled per prompt (the group)."})
    max_completion_length: int | None = field(default=2048, metadata={"help": "Longest completion, in tokens."})
    save_steps: float = field(default=50, metadata={"help": "Checkpoint every N steps."})
    logging_steps: float = field(default=1, metadata={"help": "Log every N steps."})
    eval_steps: float | None = field(default=25, metadata={"help": "pass@k evaluation every N steps (0: only at the end)."})
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision. Default: on where CUDA supports it, off on CPU."}
    )
    vllm_mode: str = field(
        default="server",
        metadata={"help": "With --use_vllm: server (a `trl vllm-serve` process, as the reference) or colocate."},
    )

    def __post_init__(self):
        # TRL's evaluation loop (an eval loss) is not used: pass@k runs in a callback (training/evaluation.py),
        # on the schedule of eval_steps / eval_on_start.
        self.eval_strategy = "no"
        # transformers fills a missing output_dir with "trainer_output"; remember that none was given so the
        # run folder can default to final_outputs/<size>/<format>/ instead.
        self.output_dir_given = self.output_dir is not None
        if self.bf16 is None:
            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        super().__post_init__()


SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def model_size(model: str) -> str:
    """The size folder for a model name: 'Qwen2.5-7B-Instruct' -> '7b', '/ckpt/q-1.5b-sft/checkpoint-9' -> '1.5b'."""
    match = SIZE_IN_NAME.search(Path(model.rstrip("/")).name) or SIZE_IN_NAME.search(model)
    return f"{match.group(1)}b" if match else "other"


def default_run_dir(q_args: QArguments) -> str:
    fmt = "reasoning" if q_args.use_reasoning_format else "non_reasoning"
    return str(Path("final_outputs") / model_size(q_args.model) / fmt)


def make_parser() -> TrlParser:
    return TrlParser((QArguments, QGRPOConfig), prog="rl_trainer.py")


def _read_yaml(path: str, flag: str) -> dict:
    try:
        with open(path) as f:
            values = yaml.safe_load(f) or {}
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read it ({e.strerror}); give an existing YAML file") from None
    except yaml.YAMLError as e:
        raise UsageError(f"{flag} {path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise UsageError(f"{flag} {path}: must hold a mapping of setting: value")
    return values


def _pop_option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value")
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def file_defaults(argv: list[str]) -> dict:
    """Settings from `--preset NAME` then `--config FILE` (later wins); removes both options from argv."""
    values = {}
    preset = _pop_option(argv, "--preset")
    if preset is not None:
        path = PRESET_DIR / f"{preset}.yaml"
        if not path.exists():
            names = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
            raise UsageError(f"--preset {preset}: no such preset; choose one of {names}")
        values.update(_read_yaml(str(path), "--preset"))
    config = _pop_option(argv, "--config")
    if config is not None:
        values.update(_read_yaml(config, "--config"))
    for name, value in (values.pop("env", None) or {}).items():  # as TRL's own --config: environment variables
        os.environ[name] = str(value)
    return values


def cpu_launch_defaults() -> dict:
    """What a multi-process `accelerate launch` needs on a machine without CUDA (the CPU tests, a laptop).

    accelerate does not pass a config's `use_cpu` on to its processes, so transformers would set each rank up as
    a lone process: batch sizes then disagree with the real world size. DeepSpeed ranks need the gloo backend
    named; plain data-parallel ranks need accelerate's CPU mode.
    """
    if torch.cuda.is_available() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return {}
    if os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true":
        return {"ddp_backend": "gloo"}
    os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    return {}


def parse_args(argv: list[str] | None = None) -> tuple[QArguments, QGRPOConfig]:
    """Parse argv into resolved settings. Raises UsageError (exit 2) on anything a user must fix."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    defaults = {**cpu_launch_defaults(), **file_defaults(argv)}
    unknown = parser.set_defaults_with_config(**defaults)
    if unknown:
        raise UsageError(f"unknown setting in --preset/--config: {unknown[0].lstrip('-')}; remove it or fix its name")
    try:
        q_args, config = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    resolve(q_args, config)
    return q_args, config


def resolve(q_args: QArguments, config: QGRPOConfig) -> None:
    """Map the reference's flag names onto TRL's settings and check what depends on several flags."""
    if q_args.generation_temp is not None:
        config.temperature = q_args.generation_temp
    if q_args.max_model_len is not None:
        config.vllm_max_model_length = q_args.max_model_len
    if q_args.eval_problems is not None:
        q_args.simple_eval_problems = q_args.eval_problems
    if q_args.eval_max_tokens is None:
        q_args.eval_max_tokens = config.max_completion_length
    if q_args.dummy_reward:
        q_args.reward_funcs = ["dummy" if name.split(":")[0] == "test_cases" else name for name in q_args.reward_funcs]

    names, weights = [], []
    for item in q_args.reward_funcs:
        name, _, weight = item.partition(":")
        names.append(name)
        if weight:
            try:
                weights.append(float(weight))
            except ValueError:
                raise UsageError(f"--reward_funcs {item}: the weight after ':' must be a number") from None
    if weights and len(weights) != len(names):
        raise UsageError("--reward_funcs: give a weight to every function or to none (name:weight)")
    unknown = [name for name in names if name not in REWARD_FUNCS]
    if unknown:
        raise UsageError(f"--reward_funcs {unknown[0]}: no such reward function; choose from {', '.join(REWARD_FUNCS)}")
    q_args.reward_funcs = names
    if weights:
        config.reward_weights = weights
    elif config.reward_weights is None:
        config.reward_weights = [DEFAULT_REWARD_WEIGHTS[name] for name in names]
    if config.reward_weights is not None and len(config.reward_weights) != len(names):
        raise UsageError(
            f"--reward_weights has {len(config.reward_weights)} values for {len(names)} reward functions"
        )

    if q_args.repeat_eval_problems < 1:
        raise UsageError("--repeat_eval_problems must be at least 1")
    too_big = [k for k in q_args.eval_k if k > q_args.repeat_eval_problems or k < 1]
    if too_big:
        raise UsageError(
            f"--eval_k {too_big[0]}: pass@k needs 1 <= k <= --repeat_eval_problems ({q_args.repeat_eval_problems}); "
            f"lower k or raise --repeat_eval_problems"
        )
    if q_args.use_qlora and not torch.cuda.is_available():
        raise UsageError("--use_qlora needs a CUDA GPU and bitsandbytes; use --use_lora on this machine")
    if q_args.use_lora or q_args.use_qlora:
        q_args.use_lora = True

    q_args.run_dir = config.output_dir if config.output_dir_given else default_run_dir(q_args)
    config.output_dir = str(Path(q_args.run_dir) / "checkpoints")

    if q_args.use_wandb:
        config.report_to = ["wandb"]
        os.environ.setdefault("WANDB_PROJECT", q_args.wandb_project)
        if q_args.wandb_entity:
            os.environ.setdefault("WANDB_ENTITY", q_args.wandb_entity)
        if q_args.wandb_tags:
            os.environ.setdefault("WANDB_TAGS", ",".join(q_args.wandb_tags))
    if q_args.wandb_name:
        config.run_name = q_args.wandb_name
