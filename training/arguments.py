"""The run's settings, one dataclass per consumer, parsed together by TRL's `TrlParser` as TRL's grpo.py does.

Every field is a flag; `--preset 7b` and `--config FILE.yaml` give defaults that flags override. Flag names and
defaults follow docs/training.md, "Settings"; the alias names (`--generation_temp`, `--max_model_len`, `--eval_problems`)
are mapped onto the settings they stand for in `__post_init__`, as TRL maps its deprecated names. Settings that
depend on several dataclasses are resolved once, in `parse_args`, so the `config.yaml` a run writes is exactly what
the trainer uses.
"""

import argparse
import logging
import os
import re
import sys
import warnings
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import torch
import yaml
from trl import GRPOConfig, TrlParser

from cli import UsageError, positive
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE
from data.loading.validate import ALLOW_COMPARISONS_HELP
from judging import JudgeArguments
from rewards import REWARD_FUNCS, ScoringArguments
from judging.languages import LANGUAGES
from judging.policy import DEFAULT_EVAL_TIMEOUT
from cli.flags import unknown_flag
from training.flag_checks import (
    HELP,
    check_async_generation,
    check_evaluation_only,
    check_feedback_turns,
    check_generation_batch,
    check_vllm_settings,
    typed_flags,
)
from training.help import HelpFormatter, regroup
from training.hidden_tests import ACTIONS as HIDDEN_TESTS_ACTIONS, DEFAULT_THRESHOLD as DEFAULT_HIDDEN_TESTS_THRESHOLD
from training.run_folder import run_of_model

# TRL 1.16 still uses transformers' gradient_checkpointing names (field and methods), each use warning of the v6
# rename to activation_checkpointing: silence that one warning wherever the settings are built.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)
# DeepSpeed's ZeRO-3 calls torch.distributed's collectives under their deprecated names, and each call warns: dozens
# of lines a run that say nothing to the user.
warnings.filterwarnings(
    "ignore",
    message=r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` is "
    "deprecated",
    category=FutureWarning,
)

logger = logging.getLogger(__name__)
PRESET_DIR = Path(__file__).resolve().parent.parent / "config" / "models"
# The test cases are the objective; the format reward only shapes the output, so it weighs less by default.
DEFAULT_REWARD_WEIGHTS = {"test_cases": 1.0, "format": 0.2, "dummy": 1.0}
DEFAULT_EVAL_K = (1, 4)


def bf16_supported() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


@dataclass
class ModelArguments:
    model: str = field(
        default="Qwen/Qwen2-0.5B-Instruct",
        metadata={"help": "Model to train: a hub name, a local folder, or a checkpoint folder of a run."},
    )
    use_lora: bool = field(default=False, metadata={"help": "Train LoRA adapters instead of the full model."})
    use_qlora: bool = field(
        default=False, metadata={"help": "LoRA on a 4-bit quantised base (needs CUDA and bitsandbytes)."}
    )
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.1, metadata={"help": "LoRA dropout."})

    def __post_init__(self):
        if self.use_qlora and not torch.cuda.is_available():
            raise UsageError("--use_qlora needs a CUDA GPU and bitsandbytes; use --use_lora on this machine")
        self.use_lora = self.use_lora or self.use_qlora

    def peft_config(self):
        if not self.use_lora:
            return None
        from peft import LoraConfig

        return LoraConfig(
            r=self.lora_rank,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )


@dataclass
class DataArguments:
    data: str | None = field(
        default=None,
        metadata={
            "help": "Problems: a JSONL/JSON file, a reference SFT_Data folder, a saved dataset, a parquet file or a "
            "dataset name. Default: the bundled set for --language."
        },
    )
    language: str = field(
        default="q", metadata={"help": "Language of problems that do not name one.", "choices": list(LANGUAGES)}
    )
    test_fraction: float = field(
        default=0.2, metadata={"help": "Share of problems held out for evaluation when the data has no split."}
    )
    max_train_problems: int = field(default=540, metadata={"help": "At most this many training problems."})
    max_test_problems: int = field(default=40, metadata={"help": "At most this many held-out problems."})
    verify_data: bool = field(
        default=False,
        metadata={
            "help": "Run every problem's canonical solution, a no-op, the trivial programs and the wrong "
            "programs (mutants of the solution, cheap guesses) through the judge before training; stop if a "
            "solution fails, the no-op passes, a problem is guessable (--max_trivial_share), or a wrong program "
            "passes the first --max_tests_per_problem tests."
        },
    )
    allow_in_sandbox_comparisons: bool = field(default=False, metadata={"help": ALLOW_COMPARISONS_HELP})
    max_trivial_share: float = field(
        default=DEFAULT_MAX_TRIVIAL_SHARE,
        metadata={
            "help": "With --verify_data: a problem is guessable when a trivial program (a constant, echoing the "
            "input, printing nothing, a cheap guess such as the first element or True then False) passes more "
            "than this fraction of its tests."
        },
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

    def __post_init__(self):
        if not 0 <= self.max_trivial_share <= 1:
            raise UsageError(f"--max_trivial_share {self.max_trivial_share}: must be a fraction between 0 and 1")


@dataclass
class RewardFunctionArguments:
    reward_funcs: list[str] = field(
        default_factory=lambda: ["test_cases", "format"],
        metadata={
            "help": "Reward functions by name, optionally with a weight as name:weight (test_cases, format, dummy). "
            "Weights may also be given with --reward_weights; by default test_cases 1.0, format 0.2."
        },
    )
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
    hidden_tests_action: str = field(
        default="warn",
        metadata={
            "help": "The hidden-test watch: each completion that passes every judged test is also judged on "
            "its problem's hidden tests (those beyond --max_tests_per_problem and those marked hidden), which "
            "never enter the reward. When more than --hidden_tests_threshold of a step's such completions fail "
            "one: warn (log it and go on), stop (save that step's checkpoint, print one line, exit code 4), "
            "or off (judge no hidden test).",
            "choices": list(HIDDEN_TESTS_ACTIONS),
        },
    )
    hidden_tests_threshold: float = field(
        default=DEFAULT_HIDDEN_TESTS_THRESHOLD,
        metadata={
            "help": "The share of a step's completions passing every judged test that may fail a hidden "
            "test before the watch sounds (--hidden_tests_action), in [0, 1)."
        },
    )

    def __post_init__(self):
        if self.hidden_tests_action not in HIDDEN_TESTS_ACTIONS:
            raise UsageError(
                f"--hidden_tests_action {self.hidden_tests_action}: choose one of {', '.join(HIDDEN_TESTS_ACTIONS)}"
            )
        if not 0 <= self.hidden_tests_threshold < 1:
            raise UsageError(f"--hidden_tests_threshold {self.hidden_tests_threshold}: must be a share in [0, 1)")
        names, weights = [], []
        for item in self.reward_funcs:
            name, _, weight = item.partition(":")
            name = "dummy" if self.dummy_reward and name == "test_cases" else name
            if name not in REWARD_FUNCS:
                raise UsageError(
                    f"--reward_funcs {name}: no such reward function; choose from {', '.join(REWARD_FUNCS)}"
                )
            names.append(name)
            if weight:
                try:
                    weights.append(float(weight))
                except ValueError:
                    raise UsageError(f"--reward_funcs {item}: the weight after ':' must be a number") from None
        if weights and len(weights) != len(names):
            raise UsageError("--reward_funcs: give a weight to every function or to none (name:weight)")
        self.reward_funcs = names
        self.weights = weights or None  # name:weight given here; GRPOConfig.reward_weights is set from them


@dataclass
class EvalArguments:
    eval_pass_at_k: bool = field(
        default=True, metadata={"help": "Evaluate pass@k on held-out problems every --eval_steps and at the end."}
    )
    eval_k: list[int] | None = field(
        default=None,
        metadata={
            "help": "The k values of pass@k, each at most --repeat_eval_problems. Default: 1 4, with a k "
            "above --repeat_eval_problems replaced by it."
        },
    )
    simple_eval_problems: int = field(default=15, metadata={"help": "Held-out problems per evaluation."})
    eval_problems: int | None = field(
        default=None,
        metadata={"help": "The reference's name for the number of evaluation problems; sets --simple_eval_problems."},
    )
    eval_split: str = field(
        default="test",
        metadata={
            "help": "Problems to evaluate on: test (held out, the default) or train (to watch the policy fit "
            "the training problems).",
            "choices": ["test", "train"],
        },
    )
    repeat_eval_problems: int = field(default=4, metadata={"help": "Samples per problem in evaluation (n of pass@k)."})
    eval_temperature: float = field(default=0.8, metadata={"help": "Sampling temperature in evaluation."})
    eval_max_tokens: int | None = field(
        default=None, metadata={"help": "Longest evaluation completion, in tokens. Default: --max_completion_length."}
    )
    eval_timeout: float = field(default=DEFAULT_EVAL_TIMEOUT, metadata={"help": "Seconds per test in evaluation."})
    eval_only: bool = field(default=False, metadata={"help": "Evaluate --model on the held-out problems; no training."})
    canary_problems: int = field(
        default=8,
        metadata={
            "help": "Canaries: copies of held-out problems made impossible (one test's expected output changed "
            "or contradicted; each checked against the problem's solution), sampled and judged at every "
            "evaluation; a pass means the judge or the tests can be gamed. 0: off."
        },
    )
    canary_share: float = field(
        default=0.25,
        metadata={
            "help": "The canaries' generations per evaluation, at most this share of the evaluation's own "
            "(problems x samples); the canaries take turns."
        },
    )
    canary_action: str = field(
        default="stop",
        metadata={
            "help": "When a completion passes a canary: stop (save a checkpoint, print one line, exit code 3) "
            "or warn (log it and go on).",
            "choices": ["stop", "warn"],
        },
    )

    def __post_init__(self):
        if self.eval_problems is not None:
            self.simple_eval_problems = self.eval_problems
        if self.repeat_eval_problems < 1:
            raise UsageError("--repeat_eval_problems must be at least 1")
        if self.canary_problems < 0:
            raise UsageError(f"--canary_problems {self.canary_problems}: must be 0 (off) or more")
        if not 0 < self.canary_share <= 1:
            raise UsageError(f"--canary_share {self.canary_share}: must be a share of the evaluation, in (0, 1]")
        if self.eval_k is None:
            # The default k values above the sample count give way to n itself: pass@n is the most n samples tell.
            self.eval_k = sorted({min(k, self.repeat_eval_problems) for k in DEFAULT_EVAL_K})
            if max(DEFAULT_EVAL_K) > self.repeat_eval_problems:
                logger.info(
                    "pass@k: default k above --repeat_eval_problems %d dropped; reporting pass@%s",
                    self.repeat_eval_problems,
                    ", pass@".join(map(str, self.eval_k)),
                )
        wrong = [k for k in self.eval_k if not 1 <= k <= self.repeat_eval_problems]
        if wrong:
            raise UsageError(
                f"--eval_k {wrong[0]}: pass@k needs 1 <= k <= --repeat_eval_problems ({self.repeat_eval_problems}); "
                f"lower k or raise --repeat_eval_problems"
            )


@dataclass
class DifficultyFilterArguments:
    """The online difficulty filter (training/difficulty.py): a group whose completions all earn the same reward
    has no advantage and teaches nothing, so problems that keep producing such groups get fewer turns."""

    difficulty_filter: bool = field(
        default=False,
        metadata={
            "help": "Give fewer turns to settled problems (see --difficulty_window), re-checking them now and "
            "then (--difficulty_recheck); their slots go to unsettled problems. Off by default."
        },
    )
    difficulty_window: int = field(
        default=2,
        metadata={
            "help": "A problem is settled when its last N groups were zero-signal (every completion earned "
            "the same reward: all passed, or all failed alike)."
        },
    )
    difficulty_recheck: float = field(
        default=0.25,
        metadata={
            "help": "Chance that a settled problem keeps its turn in the normal order, so it is re-checked "
            "and nothing is dropped for good; otherwise an unsettled problem takes its slot. In (0, 1]."
        },
    )

    def __post_init__(self):
        if self.difficulty_window < 1:
            raise UsageError(f"--difficulty_window {self.difficulty_window}: must be at least 1 group")
        if not 0 < self.difficulty_recheck <= 1:
            raise UsageError(
                f"--difficulty_recheck {self.difficulty_recheck}: must be in (0, 1]; 0 would drop "
                "settled problems for good"
            )


@dataclass
class LoggingArguments:
    use_wandb: bool = field(default=False, metadata={"help": "Log to Weights & Biases."})
    wandb_project: str = field(default="q-language-training", metadata={"help": "wandb project."})
    wandb_name: str | None = field(default=None, metadata={"help": "wandb run name (also the run_name)."})
    wandb_entity: str | None = field(default=None, metadata={"help": "wandb entity (team or user)."})
    wandb_tags: list[str] | None = field(default=None, metadata={"help": "wandb tags."})


@dataclass
class QGRPOConfig(GRPOConfig):
    """`GRPOConfig` with this trainer's defaults (docs/training.md, "Settings") and its alias flags."""

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
    eval_steps: float | None = field(
        default=25, metadata={"help": "pass@k evaluation every N steps (0: only at the end)."}
    )
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision. Default: on where CUDA supports it, off on CPU."}
    )
    vllm_mode: str = field(
        default="server",
        metadata={
            "help": "With --use_vllm: server (a vLLM server, scripts/serve_vllm.sh, as the reference) or colocate."
        },
    )
    vllm_request_timeout: float = field(
        default=900.0,
        metadata={
            "help": "Seconds the vLLM server has to answer each request; past it the run stops with the "
            "server's name and how to check it (checkpoints stay intact)."
        },
    )
    async_generation: bool = field(
        default=False,
        metadata={
            "help": "Server mode: the vLLM server generates the next batch while this one trains, so each "
            "batch is sampled one step off-policy (TRL's importance-sampling correction stays on)."
        },
    )
    feedback_turns: int = field(
        default=0,
        metadata={
            "help": "After each reply holding code, run it on the problem's examples and give the model what "
            "the interpreter showed, for up to N more replies; the reward judges the last complete code on "
            "the judged tests (0: one reply, no feedback)."
        },
    )
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Allow a new run into a folder that already holds a run's outputs."}
    )
    generation_temp: float | None = field(
        default=None, metadata={"help": "The reference's name for the sampling temperature; sets --temperature."}
    )
    max_model_len: int | None = field(
        default=None, metadata={"help": "vLLM context length; sets --vllm_max_model_length."}
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "latest (the run folder's newest checkpoint) or a checkpoint folder: continue that run's "
            "steps, optimizer, schedule and logs. Default: start a new run."
        },
    )

    def __post_init__(self):
        positive("--vllm_request_timeout", self.vllm_request_timeout, "number of seconds")
        if self.generation_temp is not None:
            self.temperature = self.generation_temp
        if self.max_model_len is not None:
            self.vllm_max_model_length = self.max_model_len
        # TRL's evaluation loop (an eval loss) is not used: pass@k runs as the trainer's `evaluate`
        # (training/evaluation.py), on the schedule of eval_steps / eval_on_start.
        self.eval_strategy = "no"
        # transformers fills a missing output_dir with "trainer_output"; the run folder defaults to
        # final_outputs/<size>/<format>/ instead (parse_args).
        self.output_dir_given = self.output_dir is not None
        if self.bf16 is None:
            self.bf16 = bf16_supported()
        check_generation_batch(
            self.per_device_train_batch_size,
            self.gradient_accumulation_steps,
            self.num_generations,
            self.steps_per_generation,
            self.generation_batch_size,
        )
        super().__post_init__()


GRPO_DEFAULTS = {f.name: f.default for f in fields(QGRPOConfig) if f.default is not MISSING}


@dataclass
class Arguments:
    """Everything one run reads, by consumer; `run_dir` is the run folder (checkpoints go to its checkpoints/)."""

    model: ModelArguments
    data: DataArguments
    rewards: RewardFunctionArguments
    scoring: ScoringArguments
    judge: JudgeArguments
    eval: EvalArguments
    difficulty: DifficultyFilterArguments
    logging: LoggingArguments
    grpo: QGRPOConfig
    run_dir: str

    def settings(self) -> dict:
        """Every setting as `--config` accepts it back (output_dir is the run folder)."""
        settings = {}
        for part in (
            self.model,
            self.data,
            self.rewards,
            self.scoring,
            self.judge,
            self.eval,
            self.difficulty,
            self.logging,
        ):
            settings.update(asdict(part))
        settings.update(self.grpo.to_dict())
        settings["output_dir"] = self.run_dir
        # TRL derives generation_batch_size from steps_per_generation and refuses both at once when read back.
        settings.pop("generation_batch_size")
        return settings


SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def model_size(model: str) -> str:
    """The size folder for a model name: 'Qwen2.5-7B-Instruct' -> '7b', '/ckpt/q-1.5b-sft/checkpoint-9' -> '1.5b'."""
    match = SIZE_IN_NAME.search(Path(model.rstrip("/")).name) or SIZE_IN_NAME.search(model)
    return f"{match.group(1)}b" if match else "other"


DESCRIPTION = """\
GRPO training of code models on problems with test cases (Q or Python): TRL's GRPOTrainer, each completion judged
by running it against its problem's tests in a sandbox, held-out pass@k along the way. See README.md.

examples:
  python scripts/make_tiny_model.py tiny_model          # a tiny local model, to try things on a CPU
  python rl_trainer.py --model tiny_model --language python --max_steps 3 --output_dir runs/first
  python rl_trainer.py --config runs/first/config.yaml --resume_from_checkpoint latest
  python rl_trainer.py --eval_only --model runs/first/checkpoints/checkpoint-3
  accelerate launch --config_file config/zero3.yaml rl_trainer.py --preset 7b --model /ckpts/q-7b-sft --use_vllm
"""
USAGE = "python rl_trainer.py [flags]  (or: accelerate launch [launcher flags] rl_trainer.py [flags])"


def _fields(*dataclass_types) -> tuple[str, ...]:
    return tuple(f.name for dtype in dataclass_types for f in fields(dtype) if f.init)


# --help's groups, in order (training/help.py); every project flag is in one, TRL's and transformers' fields follow.
HELP_GROUPS = {
    "model": _fields(ModelArguments),
    "data": _fields(DataArguments),
    "rewards and judge": _fields(RewardFunctionArguments, ScoringArguments, JudgeArguments),
    "training": (
        "output_dir",
        "overwrite_output_dir",
        "resume_from_checkpoint",
        "max_steps",
        "num_train_epochs",
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "num_generations",
        "max_completion_length",
        "feedback_turns",
        "generation_temp",
        "save_steps",
        "seed",
        "bf16",
        *_fields(DifficultyFilterArguments),
    ),
    "evaluation": (*_fields(EvalArguments), "eval_steps", "eval_on_start"),
    "generation with vLLM": (
        "use_vllm",
        "vllm_mode",
        "async_generation",
        "vllm_request_timeout",
        "max_model_len",
        "vllm_server_host",
        "vllm_server_port",
        "vllm_gpu_memory_utilization",
    ),
    "logging": (*_fields(LoggingArguments), "logging_steps"),
    "presets and config": ("preset", "config"),
}


class Parser(TrlParser):
    """TRL's parser with --help laid out for this trainer, and errors (a bad value, an unknown choice) on one line,
    without the usage block."""

    def __init__(self):
        super().__init__(
            (
                ModelArguments,
                DataArguments,
                RewardFunctionArguments,
                ScoringArguments,
                JudgeArguments,
                EvalArguments,
                DifficultyFilterArguments,
                LoggingArguments,
                QGRPOConfig,
            ),
            prog="rl_trainer.py",
            usage=USAGE,
            description=DESCRIPTION,
            formatter_class=HelpFormatter,
        )
        # Read from argv before parsing (file_defaults); here for --help only.
        self.add_argument(
            "--preset",
            metavar="SIZE",
            default=argparse.SUPPRESS,
            help="Defaults from config/models/SIZE.yaml (1.5b, 7b, 14b, 32b, ...); flags win over them.",
        )
        self.add_argument(
            "--config",
            metavar="FILE.yaml",
            default=argparse.SUPPRESS,
            help="Defaults from a YAML of setting: value, e.g. a run's config.yaml; over --preset, under flags.",
        )
        regroup(
            self,
            HELP_GROUPS,
            "TRL and transformers settings",
            "Every other GRPOConfig / TrainingArguments field, as TRL and transformers define it.",
        )

    def error(self, message: str):
        raise UsageError(f"{message}; see `python rl_trainer.py --help`")


def make_parser() -> Parser:
    return Parser()


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


def name_cpu_accelerator() -> None:
    """Without CUDA, DeepSpeed (which transformers loads) picks its CPU accelerator and warns on every run that it
    did ("Setting accelerator to CPU"); naming that same choice up front leaves out the warning."""
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


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


def parse_args(argv: list[str] | None = None) -> Arguments:
    """Parse argv into resolved settings. Raises UsageError (exit 2) on anything a user must fix.

    `--eval_only` of a run's checkpoint or final model takes that run's config.yaml as its first defaults (under
    --preset, --config and flags), so it evaluates as the run did and records into the run's logs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name_cpu_accelerator()
    defaults = {**cpu_launch_defaults(), **file_defaults(argv)}
    args = _parse(argv, defaults)
    if args.eval.eval_only and (run := run_of_model(args.model.model)) is not None:
        args = _parse(argv, {**run_settings(run), **defaults})
    typed = typed_flags(argv)
    check_evaluation_only(args.eval.eval_only, typed)
    if args.eval.eval_only:
        args.grpo.resume_from_checkpoint = None  # a --config's (a run's config.yaml): an evaluation resumes nothing
    else:
        check_vllm_settings(args.grpo, GRPO_DEFAULTS, typed)
        check_async_generation(args.grpo)
        check_feedback_turns(args.grpo)
    resolve(args)
    return args


# Settings of a training session that an evaluation of its model does not repeat: where it writes is the run's own
# folder, and the evaluation generates without vLLM and logs nothing to wandb.
NOT_INHERITED = (
    "model",
    "output_dir",
    "eval_only",
    "resume_from_checkpoint",
    "overwrite_output_dir",
    "use_vllm",
    "async_generation",
    "use_wandb",
    "report_to",
    "log_completions",
    "verify_data",
    "test_reward_function",
)


def run_settings(run: Path) -> dict:
    """The settings a run folder's config.yaml holds, as defaults for evaluating one of its models."""
    settings = _read_yaml(str(run / "config.yaml"), "--eval_only: the run's config.yaml")
    return {**{k: v for k, v in settings.items() if k not in NOT_INHERITED}, "output_dir": str(run)}


def _parse(argv: list[str], defaults: dict) -> Arguments:
    parser = make_parser()
    unknown = parser.set_defaults_with_config(**defaults)
    if unknown:
        raise UsageError(f"unknown setting in --preset/--config: {unknown[0].lstrip('-')}; remove it or fix its name")
    _, remaining = parser.parse_known_args(argv)  # before any dataclass checks its values: a typo comes first
    if remaining:
        raise UsageError(unknown_flag(list(parser._option_string_actions), remaining, HELP))
    try:
        parts = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    model, data, rewards, scoring, judge, evaluation, difficulty, logs, grpo = parts
    fmt = "reasoning" if data.use_reasoning_format else "non_reasoning"
    # An evaluation of a model outside any run gets a folder of its own that says what it holds.
    kind = ["eval_only"] if evaluation.eval_only else []
    default_dir = Path("final_outputs", *kind, model_size(model.model), fmt)
    run_dir = grpo.output_dir if grpo.output_dir_given else str(default_dir)
    return Arguments(model, data, rewards, scoring, judge, evaluation, difficulty, logs, grpo, run_dir)


def resolve(args: Arguments) -> None:
    """The settings that depend on more than one dataclass, each set once, before config.yaml is written."""
    grpo = args.grpo
    names = args.rewards.reward_funcs
    if args.rewards.weights:
        grpo.reward_weights = args.rewards.weights
    elif grpo.reward_weights is None:
        grpo.reward_weights = [DEFAULT_REWARD_WEIGHTS[name] for name in names]
    if len(grpo.reward_weights) != len(names):
        raise UsageError(f"--reward_weights has {len(grpo.reward_weights)} values for {len(names)} reward functions")
    if args.eval.eval_max_tokens is None:
        args.eval.eval_max_tokens = grpo.max_completion_length
    grpo.output_dir = str(Path(args.run_dir) / "checkpoints")
    if args.model.use_qlora:
        # QLoRA's base model: 4-bit NF4 weights, bf16 compute; a dict, so config.yaml can hold it.
        quantization = {"load_in_4bit": True, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_type": "nf4"}
        grpo.model_init_kwargs = {**(grpo.model_init_kwargs or {}), "quantization_config": quantization}
    logs = args.logging
    if logs.use_wandb:
        grpo.report_to = ["wandb"]
        grpo.log_completions = True  # TRL's wandb table of sampled completions, with status and tests passed
        os.environ.setdefault("WANDB_PROJECT", logs.wandb_project)
        if logs.wandb_entity:
            os.environ.setdefault("WANDB_ENTITY", logs.wandb_entity)
        if logs.wandb_tags:
            os.environ.setdefault("WANDB_TAGS", ",".join(logs.wandb_tags))
    if logs.wandb_name:
        grpo.run_name = logs.wandb_name
