"""The memory plan of a launch, on paper, before anything loads: does this size fit these GPUs?

From a model's config.json (no weights), the layout (GPUs per node, each GPU's memory, nodes, which GPUs serve vLLM
and which train) and the run's settings, it estimates per GPU, in GiB (2**30 bytes) throughout:

- training under accelerate / DeepSpeed: the model states by DeepSpeed's own estimator
  (`estimate_zero3_model_states_mem_needs`: 4 bytes per parameter of the largest layer, plus 18 bytes per parameter
  sharded over the training GPUs; 2 with the optimizer offloaded to the CPU; none with the parameters offloaded
  too), the layers ZeRO-3 gathers, the activations of a micro-batch of prompt + completion tokens (with or without
  gradient checkpointing), the logits of the completion and the CUDA/NCCL runtime;
- the vLLM server: the bf16 weights of one tensor-parallel shard, its runtime, and the KV cache left in
  `gpu_memory_utilization` of each of its GPUs; how many of a step's sequences the whole server holds at once, so
  how many waves a step's generation takes and roughly how long (decoding reads the weights and the KV cache once
  per token);
- the disk of a checkpoint (14 bytes per parameter: fp32 master weights and two Adam moments, and the bf16 model)
  and the host RAM offloading needs.

`plan_launch` picks what the caller leaves open: the smallest server tensor_parallel_size whose KV cache holds a
step in one wave, then the first accelerate config that fits of config/zero3.yaml, config/zero3_offload_optimizer.yaml
(the optimizer in host RAM, the parameters on the GPUs) and config/zero3_offload.yaml (both in host RAM: the
slowest), and says why it passed over the earlier ones. A layout that does not fit raises `DoesNotFit` with one
line naming the fix. The figures are estimates with stated constants (below); the first run on a node is what
confirms them (docs/clusters.md, "First run on a real cluster").

`python -m training.memory_plan --preset 32b` prints the plan. exps.sh and scripts/slurm/train.sbatch run it for
their dry runs and before they start anything, through one shell function (scripts/memory_plan.sh) that reads
back the layout it writes (`--layout-file`); rl_trainer.py checks its own processes (training/prerequisites.py).
Standard library and PyYAML only: no torch, so a launcher's dry run stays fast; the trainer's defaults are read
from the source that declares them (`declared_defaults`).
"""

import argparse
import ast
import functools
import importlib.util
import json
import math
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ROOT / "config" / "models"
SHAPES = ROOT / "config" / "shapes"
ZERO3 = "config/zero3.yaml"
ZERO3_OFFLOAD_OPTIMIZER = "config/zero3_offload_optimizer.yaml"
ZERO3_OFFLOAD = "config/zero3_offload.yaml"
# What DeepSpeed keeps in host RAM: its offload_optimizer_device, then also its offload_param_device, set to cpu.
NO_OFFLOAD, OFFLOAD_OPTIMIZER, OFFLOAD_ALL = "none", "optimizer", "optimizer and parameters"

GIB = 1024**3
# Share of a GPU the plan lets a process fill: vLLM's own default for the server, and on the training side the
# same margin for the allocator's fragmentation under ZeRO-3's gather/release churn.
GPU_FILL = 0.9
TRAINING_RUNTIME_GIB = 3.0  # CUDA context, NCCL buffers, cuBLAS workspaces of a training process
SERVER_RUNTIME_GIB = 4.0  # vLLM: its profile run's activations, sampler logits, CUDA graphs, NCCL
STATE_BYTES = 18  # per parameter under ZeRO: bf16 weight, fp32 gradient, fp32 master weight, two fp32 Adam moments
OPTIMIZER_BYTES = 16  # of those, what offloading the optimizer moves to host RAM: all but the bf16 weight
DDP_STATE_BYTES = 8  # without DeepSpeed: bf16 weights, gradients and AdamW's two moments, whole on every GPU
CHECKPOINT_BYTES = 14  # per parameter: fp32 master weights and two moments (12), the gathered bf16 model (2)
# TRL 1.16 does not cut prompts (it has no max_prompt_length): the plan assumes prompts up to this many tokens.
PROMPT_TOKENS = 512
MAX_NUM_SEQS = 256  # vLLM's default cap on sequences it decodes at once
DECODE_EFFICIENCY = 0.5  # share of the GPU's memory bandwidth a decode step achieves
ALIASES = {
    "activation_checkpointing": "gradient_checkpointing",
    "max_model_len": "vllm_max_model_length",
    "use_qlora": "use_lora",
}
# Where the trainer's settings are declared, most derived first: rl_trainer.py's QGRPOConfig and the classes it
# extends (its __mro__, which tests/training/test_memory_plan.py checks), then its model flags: (package, file, class).
DECLARED_IN = (
    ("training", "arguments.py", "QGRPOConfig"),
    ("trl", "trainer/grpo_config.py", "GRPOConfig"),
    ("trl", "trainer/base_config.py", "_BaseConfig"),
    ("transformers", "training_args.py", "TrainingArguments"),
    ("training", "arguments.py", "ModelArguments"),
)
# The server's gpu_memory_utilization: `trl vllm-serve`'s, which scripts/serve_vllm.sh keeps.
SERVER_DECLARED_IN = ("trl", "scripts/vllm_serve.py", "ScriptArguments")


@functools.cache
def declared_defaults() -> dict:
    """The trainer's settings' literal defaults, and the server's gpu_memory_utilization (under the plan's name,
    vllm_gpu_memory_utilization), read from the source of the classes that declare them: importing those pulls in
    torch, seconds for each launcher call, where reading them takes milliseconds."""
    found = {}
    for package, path, name in DECLARED_IN:
        for key, value in _class_defaults(_source(package, path), name).items():
            found.setdefault(key, value)
    package, path, name = SERVER_DECLARED_IN
    found["vllm_gpu_memory_utilization"] = _class_defaults(_source(package, path), name)["gpu_memory_utilization"]
    return found


def _source(package: str, path: str) -> Path:
    spec = importlib.util.find_spec(package)  # a top-level package is found without being imported
    if spec is None or not spec.submodule_search_locations:
        raise DoesNotFit(
            f"{package} is not installed here, and the plan reads the trainer's defaults from it; "
            "pip install -r requirements.txt"
        )
    file = Path(spec.submodule_search_locations[0]) / path
    if not file.is_file():
        raise DoesNotFit(f"{file}: no such file, and the plan reads the trainer's defaults from it")
    return file


def _class_defaults(path: Path, name: str) -> dict:
    """Class `name`'s fields whose default is a literal: `x: int = 1` and `x: int = field(default=1, ...)`."""
    tree = ast.parse(path.read_text(), str(path))
    body = next(node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)
    found = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            try:
                found[node.target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return found


def _declared(name: str):
    return field(default_factory=lambda: declared_defaults()[name])


class DoesNotFit(Exception):
    """A layout that does not fit; `str()` is the one line to show, naming the fix."""


@dataclass(frozen=True)
class Shape:
    """What the plan needs of a decoder-only model's config.json (Qwen2 / Llama layout: q, k, v, o, gate, up, down
    projections; q, k and v with biases as Qwen2's)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    max_positions: int
    biases: bool = True

    @classmethod
    def from_config(cls, config: dict) -> "Shape":
        text = config.get("text_config", config)
        return cls(
            layers=text["num_hidden_layers"],
            hidden=text["hidden_size"],
            intermediate=text["intermediate_size"],
            heads=text["num_attention_heads"],
            kv_heads=text.get("num_key_value_heads") or text["num_attention_heads"],
            vocab=text["vocab_size"],
            tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
            max_positions=text.get("max_position_embeddings", 32768),
            biases=text.get("model_type", config.get("model_type")) in ("qwen2", None),
        )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        kv = self.kv_heads * self.head_dim
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        if self.biases:
            attention += self.hidden + 2 * kv
        return attention + 3 * self.hidden * self.intermediate + 2 * self.hidden  # and two RMSNorm weights

    @property
    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * self.layer_params + embeddings + self.hidden

    @property
    def largest_layer_params(self) -> int:
        """DeepSpeed's `largest_layer_params`: the most parameters one module holds itself (the embedding here)."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    def kv_bytes_per_token(self, tensor_parallel_size: int = 1) -> int:
        """bf16 keys and values of one token, on one GPU of a server of `tensor_parallel_size` shards (vLLM
        replicates KV heads when there are fewer than shards)."""
        return 2 * self.layers * max(1, self.kv_heads // tensor_parallel_size) * self.head_dim * 2

    def activation_bytes_per_token(self) -> int:
        """What one decoder layer keeps for its backward pass per token, counted from Qwen2's forward in
        transformers (bf16 tensors, RMSNorm's fp32 input): two norms 6h each, q and o 2h each, k and v, rotated q
        and k, attention output 2h, gate, up, their activation and product 2i each, down's output 2h."""
        kv = self.kv_heads * self.head_dim
        return 22 * self.hidden + 6 * kv + 8 * self.intermediate

    def tensor_parallel_sizes(self, limit: int) -> list[int]:
        """Sizes vLLM accepts for this model (heads split evenly, KV heads split or replicated), up to `limit`."""
        sizes = []
        for tp in (1, 2, 4, 8, 16):
            if tp <= limit and self.heads % tp == 0 and (self.kv_heads % tp == 0 or tp % self.kv_heads == 0):
                sizes.append(tp)
        return sizes


@dataclass(frozen=True)
class Settings:
    """The run's settings the plan reads, by rl_trainer.py's flag names (vllm_gpu_memory_utilization is the
    server's), each defaulting to where it is declared (`declared_defaults`)."""

    per_device_train_batch_size: int = _declared("per_device_train_batch_size")
    gradient_accumulation_steps: int = _declared("gradient_accumulation_steps")
    num_generations: int = _declared("num_generations")
    max_completion_length: int = _declared("max_completion_length")
    gradient_checkpointing: bool = _declared("gradient_checkpointing")
    beta: float = _declared("beta")
    vllm_request_timeout: float = _declared("vllm_request_timeout")
    save_total_limit: int | None = _declared("save_total_limit")
    use_lora: bool = _declared("use_lora")
    vllm_max_model_length: int | None = _declared("vllm_max_model_length")
    vllm_gpu_memory_utilization: float = _declared("vllm_gpu_memory_utilization")

    @classmethod
    def from_values(cls, values: dict) -> "Settings":
        known = {f for f in cls.__dataclass_fields__}
        picked = {}
        for key, value in values.items():
            key = ALIASES.get(key, key)
            if key in known and value is not None:
                picked[key] = value
        return cls(**_typed(picked))


def _typed(values: dict) -> dict:
    out = {}
    for key, value in values.items():
        default = declared_defaults()[key]
        if isinstance(value, str):
            if key in ("gradient_checkpointing", "use_lora"):
                value = value.lower() in ("1", "true", "yes", "t", "y")
            elif isinstance(default, float):
                value = float(value)
            else:
                value = int(float(value))
        out[key] = value
    return out


def settings_from_flags(preset: str | None, flags: list[str]) -> tuple[Settings, list[str]]:
    """The settings a launch of `rl_trainer.py --preset PRESET FLAGS` would read, without importing the trainer:
    the preset, then any --config file, then the flags (`--name value`, `--name=value`, a bare boolean flag); and
    notes on what could not be read (a --config file not on this machine, e.g. in a dry run)."""
    notes = []
    values = {}
    if preset:
        values.update(_yaml(PRESETS / f"{preset}.yaml"))
    flags = list(flags)
    i = 0
    parsed = {}
    while i < len(flags):
        word = flags[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, has_value, value = word[2:].partition("=")
        if not has_value:
            if i < len(flags) and not flags[i].startswith("--"):
                value = flags[i]
                i += 1
            else:
                value = "true"
        parsed[name] = value
    if "config" in parsed:
        config = Path(parsed.pop("config"))
        if config.is_file():
            values.update(_yaml(config))
        else:
            notes.append(f"--config {config} is not here; the plan leaves it out")
    values.update(parsed)
    return Settings.from_values(values), notes


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


@dataclass(frozen=True)
class Hardware:
    gpus_per_node: int = 8
    # Each GPU's memory in GiB, as nvidia-smi's memory.total (MiB) / 1024 or torch's total_memory / 2**30: an H100
    # 80GB's 81559 MiB are 79.6 GiB (its "80 GB" are 80 GiB of HBM, a little of it kept by the driver).
    gpu_gib: float = 79.6
    nodes: int = 1

    @property
    def bandwidth(self) -> float:
        """HBM bytes per second: H100 SXM (80 GB) 3.35 TB/s, H200 (141 GB) 4.8 TB/s."""
        return 4.8e12 if self.gpu_gib >= 120 else 3.35e12

    def describe(self) -> str:
        nodes = f"{self.nodes} nodes" if self.nodes > 1 else "1 node"
        return f"{nodes} of {self.gpus_per_node} x {self.gpu_gib:g} GiB GPUs"


@dataclass(frozen=True)
class Choice:
    """What the user fixed; None leaves it to the plan."""

    tensor_parallel_size: int | None = None
    vllm_gpus: tuple[int, ...] | None = None
    train_gpus: tuple[int, ...] | None = None
    accelerate_config: str | None = None
    max_model_len: int | None = None


@dataclass
class Plan:
    shape: Shape
    settings: Settings
    hardware: Hardware
    tensor_parallel_size: int
    vllm_gpus: tuple[int, ...]
    train_gpus: tuple[int, ...]  # on each training node
    processes: int
    accelerate_config: str
    zero_stage: int | None
    offload: str  # NO_OFFLOAD, OFFLOAD_OPTIMIZER or OFFLOAD_ALL
    max_model_len: int
    source: str = ""
    notes: list[str] = field(default_factory=list)
    picked: list[str] = field(default_factory=list)  # why plan_launch passed over a smaller server or a config

    # training, bytes per GPU
    @property
    def states(self) -> int:
        """DeepSpeed's estimate of the model states on one GPU (its estimator's `gpu_mem`)."""
        p, largest, n = self.shape.params, self.shape.largest_layer_params, self.processes
        if self.zero_stage == 3:
            sharded = {NO_OFFLOAD: STATE_BYTES, OFFLOAD_OPTIMIZER: STATE_BYTES - OPTIMIZER_BYTES, OFFLOAD_ALL: 0}
            return 4 * largest + sharded[self.offload] * p // n
        if self.zero_stage == 2:  # whole bf16 weights and gradients, the rest sharded
            return 4 * p + (0 if self.offload != NO_OFFLOAD else (STATE_BYTES - 4) * p // n)
        return DDP_STATE_BYTES * p

    @property
    def reference(self) -> int:
        """A KL term (beta > 0) keeps a reference model: bf16, sharded like the policy under ZeRO-3."""
        if self.settings.beta <= 0 or self.settings.use_lora:
            return 0
        return 2 * self.shape.params // (self.processes if self.zero_stage == 3 else 1)

    @property
    def gathered(self) -> int:
        """ZeRO-3 gathers a layer's bf16 weights to run it, with the next one prefetched."""
        return 2 * 2 * self.shape.layer_params if self.zero_stage == 3 else 0

    @property
    def sequence_tokens(self) -> int:
        return min(PROMPT_TOKENS + self.settings.max_completion_length, self.max_model_len)

    @property
    def activations(self) -> int:
        tokens = self.settings.per_device_train_batch_size * self.sequence_tokens
        layer = tokens * self.shape.activation_bytes_per_token()
        if self.settings.gradient_checkpointing:  # each layer's input kept; one layer recomputed at a time
            return self.shape.layers * tokens * self.shape.hidden * 2 + layer
        return self.shape.layers * layer

    @property
    def logits(self) -> int:
        """TRL computes logits for the completion only: bf16 logits, their temperature-scaled copy and gradient,
        and one sequence's fp32 log-softmax and its gradient at a time."""
        completion = self.settings.max_completion_length
        return (
            self.settings.per_device_train_batch_size * completion * self.shape.vocab * 2 * 3
            + completion * self.shape.vocab * 4 * 2
        )

    @property
    def training_gpu(self) -> int:
        return (
            self.states
            + self.reference
            + self.gathered
            + self.activations
            + self.logits
            + int(TRAINING_RUNTIME_GIB * GIB)
        )

    @property
    def gpu_budget(self) -> float:
        return GPU_FILL * self.hardware.gpu_gib * GIB

    @property
    def host_ram(self) -> int:
        """Offloaded states per training node (16 bytes per parameter for the optimizer, 18 with the parameters,
        over the training nodes), without DeepSpeed's 1.5 margin."""
        if self.offload == NO_OFFLOAD:
            return 0
        nodes = max(1, self.hardware.nodes - (1 if self.hardware.nodes > 1 else 0))
        return (OPTIMIZER_BYTES if self.offload == OFFLOAD_OPTIMIZER else STATE_BYTES) * self.shape.params // nodes

    # the vLLM server, bytes per GPU
    @property
    def weights_shard(self) -> int:
        return 2 * self.shape.params // self.tensor_parallel_size

    @property
    def server_budget(self) -> float:
        return self.settings.vllm_gpu_memory_utilization * self.hardware.gpu_gib * GIB

    @property
    def kv_cache(self) -> int:
        return int(self.server_budget - self.weights_shard - SERVER_RUNTIME_GIB * GIB)

    # the vLLM server as a whole: each of its GPUs holds its shard of every token's keys and values
    @property
    def kv_tokens(self) -> int:
        return max(0, self.kv_cache) // self.shape.kv_bytes_per_token(self.tensor_parallel_size)

    @property
    def step_sequences(self) -> int:
        """Completions TRL generates in one request: per-device batch x processes x accumulation steps."""
        s = self.settings
        return s.per_device_train_batch_size * self.processes * s.gradient_accumulation_steps

    @property
    def concurrent(self) -> int:
        return min(MAX_NUM_SEQS, self.kv_tokens // self.sequence_tokens)

    @property
    def waves(self) -> int:
        return math.ceil(self.step_sequences / self.concurrent) if self.concurrent else 0

    @property
    def generation_seconds(self) -> float:
        """A step's generation, decoding-bound: every token of every wave reads the shard's weights and the
        wave's KV cache (half the completion on average) once."""
        if not self.concurrent:
            return math.inf
        per_token = self.shape.kv_bytes_per_token(self.tensor_parallel_size)
        seconds, left = 0.0, self.step_sequences
        completion = self.settings.max_completion_length
        while left > 0:
            wave = min(left, self.concurrent)
            read = self.weights_shard + wave * (PROMPT_TOKENS + completion / 2) * per_token
            seconds += completion * read / (self.hardware.bandwidth * DECODE_EFFICIENCY)
            left -= wave
        return seconds

    @property
    def checkpoint(self) -> int:
        if self.settings.use_lora:
            return 0
        return CHECKPOINT_BYTES * self.shape.params

    # verdicts
    def server_problem(self) -> str | None:
        if self.kv_cache <= 0 or self.kv_tokens < self.max_model_len:
            return (
                f"the vLLM server's KV cache ({max(0, self.kv_cache) / GIB:.1f} GiB per GPU at "
                f"tensor_parallel_size {self.tensor_parallel_size}) cannot hold one sequence of max_model_len "
                f"{self.max_model_len}, so vLLM refuses to start"
            )
        return None

    def training_problem(self) -> str | None:
        if self.training_gpu > self.gpu_budget:
            return (
                f"training needs {self.training_gpu / GIB:.1f} GiB per GPU of {self.gpu_budget / GIB:.1f} "
                f"({GPU_FILL:g} x {self.hardware.gpu_gib:g}) under {self.accelerate_config}"
            )
        return None

    def step_problem(self) -> str | None:
        if self.step_sequences % self.settings.num_generations:
            return (
                f"a step of {self.settings.per_device_train_batch_size} x {self.processes} processes x "
                f"{self.settings.gradient_accumulation_steps} = {self.step_sequences} completions is not whole "
                f"groups of {self.settings.num_generations}"
            )
        return None

    def warnings(self) -> list[str]:
        found = []
        if self.waves > 1:
            found.append(
                f"the server holds {self.concurrent} of the step's {self.step_sequences} sequences at once: "
                f"{self.waves} waves per step; a larger tensor_parallel_size holds more"
            )
        timeout = self.settings.vllm_request_timeout
        if self.generation_seconds > timeout / 2:
            found.append(
                f"a step's generation is estimated at {self.generation_seconds:.0f} s, over half of "
                f"--vllm_request_timeout {timeout:g}; raise it to {_round_up(3 * self.generation_seconds)}"
            )
        if self.settings.save_total_limit is None and self.checkpoint:
            found.append(f"no save_total_limit: every checkpoint ({self.checkpoint / GIB:.0f} GiB) stays on disk")
        return found

    def lines(self) -> list[str]:
        """The plan as the launchers print it, every size in GiB: per GPU for the server's and the training's
        memory, per server for what the server's KV cache holds."""
        s, shape, tp = self.settings, self.shape, self.tensor_parallel_size
        out = [f"memory plan: {shape.params / 1e9:.2f}B parameters ({self.source}), {self.hardware.describe()}"]
        server_gpus = ",".join(map(str, self.vllm_gpus))
        where = "node 0's GPUs" if self.hardware.nodes > 1 else "GPUs"
        fill = f"{s.vllm_gpu_memory_utilization:g} x {self.hardware.gpu_gib:g}"
        out.append(
            f"server: {where} {server_gpus}, tensor_parallel_size {tp}, max_model_len {self.max_model_len}; "
            f"per GPU {self.weights_shard / GIB:.1f} GiB of weights + {SERVER_RUNTIME_GIB:.1f} runtime + "
            f"{self.kv_cache / GIB:.1f} KV cache = {self.server_budget / GIB:.1f} ({fill})"
        )
        per_server = f"{tp} x {self.kv_cache / GIB:.1f} GiB" if tp > 1 else f"{self.kv_cache / GIB:.1f} GiB"
        out.append(
            f"  KV cache per server ({per_server}): {self.kv_tokens} tokens = "
            f"{self.kv_tokens // self.sequence_tokens} sequences of {self.sequence_tokens} (prompt "
            f"{PROMPT_TOKENS} + completion {s.max_completion_length}); a step's {self.step_sequences} in "
            f"{self.waves} wave{'s' if self.waves != 1 else ''}, generation ~{self.generation_seconds:.0f} s "
            f"(--vllm_request_timeout {s.vllm_request_timeout:g})"
        )
        out += [f"  picked {why}" for why in self.picked if why.startswith("tensor_parallel_size")]
        gpus = ",".join(map(str, self.train_gpus))
        nodes = f" on each of {self.hardware.nodes - 1} nodes" if self.hardware.nodes > 1 else ""
        checkpointing = "with" if s.gradient_checkpointing else "without"
        offloaded = {
            NO_OFFLOAD: "",
            OFFLOAD_OPTIMIZER: " (optimizer offloaded)",
            OFFLOAD_ALL: " (optimizer and parameters offloaded)",
        }[self.offload]
        out.append(
            f"training: {self.processes} processes (GPUs {gpus}{nodes}), {self.accelerate_config}; per GPU "
            f"{self.training_gpu / GIB:.1f} GiB of {self.gpu_budget / GIB:.1f} ({GPU_FILL:g} x "
            f"{self.hardware.gpu_gib:g}) = states {self.states / GIB:.1f}{offloaded}"
            f"{f' + reference {self.reference / GIB:.1f}' if self.reference else ''} + gathered layers "
            f"{self.gathered / GIB:.1f} + activations {self.activations / GIB:.1f} ({s.per_device_train_batch_size}"
            f" x {self.sequence_tokens} tokens, {checkpointing} checkpointing) + logits {self.logits / GIB:.1f} "
            f"+ runtime {TRAINING_RUNTIME_GIB:.1f}"
        )
        out += [f"  picked {why}" for why in self.picked if not why.startswith("tensor_parallel_size")]
        if self.offload != NO_OFFLOAD:
            what = "optimizer states" if self.offload == OFFLOAD_OPTIMIZER else "states"
            out.append(
                f"  host RAM for the offloaded {what}: {self.host_ram / GIB:.0f} GiB per training node "
                f"(DeepSpeed's estimate with its 1.5 margin: {1.5 * self.host_ram / GIB:.0f} GiB)"
            )
        out.append(
            f"step: {s.per_device_train_batch_size} x {self.processes} x {s.gradient_accumulation_steps} = "
            f"{self.step_sequences} completions = {self.step_sequences // s.num_generations} prompts x "
            f"{s.num_generations}"
        )
        if self.checkpoint:
            kept = s.save_total_limit
            total = (
                f", {kept} kept: {(kept * self.checkpoint + 2 * shape.params) / GIB:.0f} GiB with the final model"
                if kept
                else ""
            )
            out.append(f"checkpoints: {self.checkpoint / GIB:.0f} GiB each{total}")
        out += [f"note: {note}" for note in self.notes]
        out += [f"warning: {warning}" for warning in self.warnings()]
        return out


def _round_up(seconds: float) -> int:
    return int(math.ceil(seconds / 300) * 300)


def offload_of(optimizer_device: str | None, param_device: str | None) -> str:
    """What a DeepSpeed config keeps in host RAM, from its offload_optimizer_device and offload_param_device."""
    if str(param_device) == "cpu":
        return OFFLOAD_ALL
    return OFFLOAD_OPTIMIZER if str(optimizer_device) == "cpu" else NO_OFFLOAD


def read_accelerate_config(path: str) -> tuple[int | None, str]:
    """The ZeRO stage (None: no DeepSpeed) and what goes to the CPU (`offload_of`)."""
    file = ROOT / path if not Path(path).is_absolute() and (ROOT / path).exists() else Path(path)
    if not file.is_file():
        raise DoesNotFit(f"--accelerate-config {path}: no such file; see config/*.yaml")
    config = _yaml(file)
    deepspeed = config.get("deepspeed_config") or {}
    if config.get("distributed_type") != "DEEPSPEED":
        return None, NO_OFFLOAD
    offload = offload_of(deepspeed.get("offload_optimizer_device"), deepspeed.get("offload_param_device"))
    return int(deepspeed.get("zero_stage", 3)), offload


def model_shape(model: str | None, preset: str | None) -> tuple[Shape, str]:
    """The shape from the model's own config.json when it is a local folder, else from the preset's
    config/shapes/<size>.json (the Qwen2.5-Coder model of that size)."""
    if model:
        config = Path(model).expanduser() / "config.json"
        if config.is_file():
            return Shape.from_config(json.loads(config.read_text())), str(config)
    if preset and (SHAPES / f"{preset}.json").is_file():
        path = SHAPES / f"{preset}.json"
        config = json.loads(path.read_text())
        return Shape.from_config(config), f"{config.get('_name_or_path', preset)}'s shape"
    where = f"no config/shapes/{preset}.json for --preset {preset}" if preset else "no --preset to take a shape from"
    raise DoesNotFit(f"no config.json in {model} here (a hub name, or a folder on other nodes) and {where}")


def _layout(hardware: Hardware, choice: Choice, tp: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Server GPUs, training GPUs (per training node) and training processes for a server of `tp` shards."""
    node = tuple(range(hardware.gpus_per_node))
    server = choice.vllm_gpus or tuple(g for g in node if g not in (choice.train_gpus or ()))[:tp]
    if len(server) != tp:
        raise DoesNotFit(
            f"a server of tensor_parallel_size {tp} needs {tp} GPUs, VLLM_GPU names "
            f"{','.join(map(str, server))}; give it {tp} GPUs or set VLLM_TENSOR_PARALLEL_SIZE="
            f"{len(server)}"
        )
    if hardware.nodes > 1:
        return server, node, hardware.gpus_per_node * (hardware.nodes - 1)
    train = choice.train_gpus or tuple(g for g in node if g not in server)
    shared = sorted(set(train) & set(server))
    if shared:
        rest = ",".join(str(g) for g in train if g not in server)
        raise DoesNotFit(
            f"TRAIN_GPUS={','.join(map(str, train))} includes GPU {','.join(map(str, shared))} of the "
            f"vLLM server (VLLM_GPU={','.join(map(str, server))}); leave it out: TRAIN_GPUS={rest}"
        )
    if not train:
        raise DoesNotFit(
            f"GPUS_PER_NODE={hardware.gpus_per_node} leaves no GPU to train on beside the server's "
            f"{','.join(map(str, server))}"
        )
    return server, train, len(train)


def plan_launch(
    shape: Shape, settings: Settings, hardware: Hardware, choice: Choice = Choice(), source: str = ""
) -> Plan:
    """The launch's plan, with what `choice` leaves open picked and why in `Plan.picked`; raises DoesNotFit with
    the fix."""
    max_model_len = choice.max_model_len or settings.vllm_max_model_length or shape.max_positions
    server_limit = hardware.gpus_per_node - (1 if hardware.nodes == 1 else 0)
    if server_limit < 1:
        raise DoesNotFit(f"GPUS_PER_NODE={hardware.gpus_per_node} leaves no GPU to train on beside the server")
    if choice.tensor_parallel_size:
        sizes = [choice.tensor_parallel_size]
    elif choice.vllm_gpus:
        sizes = [len(choice.vllm_gpus)]
    else:
        sizes = shape.tensor_parallel_sizes(server_limit)
    configs = (
        [choice.accelerate_config] if choice.accelerate_config else [ZERO3, ZERO3_OFFLOAD_OPTIMIZER, ZERO3_OFFLOAD]
    )
    candidates = []
    for tp in sizes:
        server, train, processes = _layout(hardware, choice, tp)
        for config in configs:
            stage, offload = read_accelerate_config(config)
            candidates.append(
                Plan(
                    shape,
                    settings,
                    hardware,
                    tp,
                    server,
                    train,
                    processes,
                    config,
                    stage,
                    offload,
                    max_model_len,
                    source,
                )
            )

    def fits(plan):
        return not (plan.server_problem() or plan.training_problem() or plan.step_problem())

    fitting = [p for p in candidates if fits(p)]
    one_wave = [p for p in fitting if p.waves == 1]
    if not fitting:
        raise DoesNotFit(_fix(candidates, shape, settings, hardware, choice))
    picked = (one_wave or fitting)[0]
    picked.picked = _why(picked, candidates)
    return picked


def _why(picked: Plan, candidates: list[Plan]) -> list[str]:
    """Why the plan passed over the next smaller server, and over the configs before the one it picked."""
    found = []
    smaller = [c for c in candidates if c.tensor_parallel_size < picked.tensor_parallel_size]
    if smaller:
        last = smaller[-1]
        shards = "one GPU" if last.tensor_parallel_size == 1 else f"{last.tensor_parallel_size} GPUs"
        problem = last.server_problem()
        found.append(
            f"tensor_parallel_size {picked.tensor_parallel_size}: a server on {shards} "
            + (
                f"{problem.partition(') ')[2]}"
                if problem
                else f"holds {last.concurrent} of a step's {last.step_sequences} sequences at once ({last.waves} waves)"
            )
        )
    passed_over = [
        c
        for c in candidates
        if c.tensor_parallel_size == picked.tensor_parallel_size
        and _comes_before(c.accelerate_config, picked.accelerate_config)
    ]
    if passed_over:
        first, *rest = passed_over
        why = (
            f"{picked.accelerate_config}: {first.accelerate_config} needs {first.training_gpu / GIB:.1f} GiB per "
            f"training GPU"
            + "".join(f", {c.accelerate_config} {c.training_gpu / GIB:.1f}" for c in rest)
            + f", over its {picked.gpu_budget / GIB:.1f}"
        )
        if picked.offload == OFFLOAD_OPTIMIZER:
            why += (
                f"; with the optimizer in host RAM {picked.training_gpu / GIB:.1f} fit, so the parameters stay "
                f"on the GPUs ({ZERO3_OFFLOAD} would move them too, and every layer over PCIe at each pass)"
            )
        found.append(why)
    return found


def _comes_before(config: str, picked: str) -> bool:
    order = [ZERO3, ZERO3_OFFLOAD_OPTIMIZER, ZERO3_OFFLOAD]
    return config in order and picked in order and order.index(config) < order.index(picked)


def _fix(candidates: list[Plan], shape, settings, hardware, choice) -> str:
    """The one line for a layout that does not fit: what fails, and the change that would make it fit."""
    first = candidates[0]
    problem = first.server_problem() or first.step_problem() or first.training_problem()
    if first.server_problem():
        for tp in shape.tensor_parallel_sizes(hardware.gpus_per_node - (hardware.nodes == 1)):
            if tp > first.tensor_parallel_size:
                return f"{problem}; fix: a larger server, VLLM_TENSOR_PARALLEL_SIZE={tp}, or a lower MAX_MODEL_LEN"
        return f"{problem}; fix: a lower MAX_MODEL_LEN, or GPUs with more memory"
    if first.step_problem():
        return f"{problem}; fix: a --gradient_accumulation_steps or --per_device_train_batch_size that makes it so"
    if first.zero_stage == 3 and first.offload != OFFLOAD_ALL and choice.accelerate_config:
        for config, offload in ((ZERO3_OFFLOAD_OPTIMIZER, OFFLOAD_OPTIMIZER), (ZERO3_OFFLOAD, OFFLOAD_ALL)):
            if (
                offload != first.offload
                and not replace(first, accelerate_config=config, offload=offload).training_problem()
            ):
                return f"{problem}; fix: {_offloading(config)}, ACCELERATE_CONFIG={config}"
    nodes = hardware.nodes
    for more in range(max(2, nodes + 1), 65):
        bigger = replace(
            first,
            hardware=replace(hardware, nodes=more),
            processes=hardware.gpus_per_node * (more - 1),
            accelerate_config=ZERO3,
            zero_stage=3,
            offload=NO_OFFLOAD,
        )
        if not bigger.training_problem():
            return (
                f"{problem}; fix: more nodes, a Slurm job of {more} (./exps.sh --slurm --nodes {more}), or "
                f"--per_device_train_batch_size 1 with gradient checkpointing"
            )
    return f"{problem}; fix: GPUs with more memory"


def _offloading(config: str) -> str:
    return {
        ZERO3_OFFLOAD_OPTIMIZER: "the optimizer in host RAM",
        ZERO3_OFFLOAD: "the optimizer and parameters in host RAM",
    }[config]


def training_plan(
    shape: Shape,
    settings: Settings,
    processes: int,
    gpu_gib: float,
    zero_stage: int | None,
    offload: str,
    accelerate_config: str = "this launch's config",
) -> Plan:
    """The training side alone, for a launch already under way (the trainer's own check: its processes, its GPU,
    the DeepSpeed settings accelerate passed it, `offload` as `offload_of` reads them); the server's fields
    describe a one-GPU server and go unused."""
    hardware = Hardware(gpus_per_node=processes, gpu_gib=gpu_gib)
    return Plan(
        shape,
        settings,
        hardware,
        1,
        (0,),
        tuple(range(processes)),
        processes,
        accelerate_config,
        zero_stage,
        offload,
        settings.vllm_max_model_length or shape.max_positions,
    )


def training_fix(plan: Plan) -> str | None:
    """None when the plan's training fits; else its one line with the fix."""
    problem = plan.training_problem()
    if problem is None:
        return None
    if plan.zero_stage == 3:
        for config, offload in ((ZERO3_OFFLOAD_OPTIMIZER, OFFLOAD_OPTIMIZER), (ZERO3_OFFLOAD, OFFLOAD_ALL)):
            if plan.offload == NO_OFFLOAD or (plan.offload == OFFLOAD_OPTIMIZER and offload == OFFLOAD_ALL):
                if not replace(plan, offload=offload).training_problem():
                    return f"{problem}; fix: {_offloading(config)}, accelerate launch --config-file {config}"
    return (
        f"{problem}; fix: more GPUs (a Slurm job on more nodes), or a smaller --per_device_train_batch_size with "
        "--activation_checkpointing true"
    )


def evaluation_only_fix(shape: Shape, gpu_gib: float, sequences: int, tokens: int) -> str | None:
    """`--eval_only` samples with transformers' `generate` on one GPU: the whole bf16 model, the KV cache of the
    sequences sampled together, the runtime. None when that fits; else its one line with the fix."""
    need = 2 * shape.params + sequences * tokens * shape.kv_bytes_per_token() + TRAINING_RUNTIME_GIB * GIB
    budget = GPU_FILL * gpu_gib * GIB
    if need <= budget:
        return None
    return (
        f"--eval_only holds the whole bf16 model and {sequences} sequences of {tokens} tokens on one GPU: "
        f"{need / GIB:.1f} GiB of {budget / GIB:.1f}; fix: a lower --repeat_eval_problems or --eval_max_tokens, "
        "a GPU with more memory, or pass@k during training (--eval_steps, generated by the vLLM server)"
    )


def _gpus(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    return tuple(int(g) for g in text.split(","))


def write_layout(path: str, values: dict) -> None:
    """The layout the launchers use, as shell assignments (`plan_tensor_parallel_size=2`) for them to source."""
    Path(path).write_text("".join(f"plan_{key}={shlex.quote(str(value))}\n" for key, value in values.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training.memory_plan",
        description="Print the memory plan of a launch, in GiB; exit 2 with one line naming the fix when it does "
        "not fit.",
    )
    parser.add_argument("--preset", help="size preset, config/models/SIZE.yaml (its shape: config/shapes/SIZE.json)")
    parser.add_argument("--model", help="model folder: its config.json gives the shape (no weights are read)")
    parser.add_argument("--gpus-per-node", type=int, default=Hardware.gpus_per_node)
    parser.add_argument(
        "--gpu-memory",
        type=float,
        default=Hardware.gpu_gib,
        help="GiB per GPU: nvidia-smi's memory.total / 1024 (an H100 80GB's: 79.6)",
    )
    parser.add_argument("--nodes", type=int, default=Hardware.nodes, help="2 or more: node 0 serves, the others train")
    parser.add_argument("--vllm-gpus", help="the server's GPUs, e.g. 0,1 (default: the first tensor_parallel_size)")
    parser.add_argument("--train-gpus", help="one node's training GPUs (default: every GPU the server leaves)")
    parser.add_argument(
        "--tensor-parallel-size",
        type=int,
        help="the server's tensor-parallel size, vLLM's --tensor-parallel-size (default: picked)",
    )
    parser.add_argument(
        "--accelerate-config", help="accelerate config (default: picked, zero3, zero3_offload_optimizer, zero3_offload)"
    )
    parser.add_argument("--max-model-len", type=int, help="the server's context (default: preset, else model's)")
    parser.add_argument(
        "--layout-file",
        metavar="PATH",
        help="write the layout the launchers use to PATH, as shell assignments to source",
    )
    parser.add_argument("flags", nargs="*", help="after --: the trainer flags of the run")
    args = parser.parse_args(argv)
    hardware = Hardware(args.gpus_per_node, args.gpu_memory, args.nodes)
    choice = Choice(
        args.tensor_parallel_size or None,
        _gpus(args.vllm_gpus),
        _gpus(args.train_gpus),
        args.accelerate_config or None,
        args.max_model_len or None,
    )
    size = f"{args.preset}: " if args.preset else ""
    try:
        settings, notes = settings_from_flags(args.preset, args.flags)
        try:
            shape, source = model_shape(args.model, args.preset)
        except DoesNotFit as e:  # nothing to check against: say so, and lay out what was asked or the defaults
            lines = [f"memory plan: not checked: {e}"]
            tp = choice.tensor_parallel_size or len(choice.vllm_gpus or ()) or 1
            server, train, processes = _layout(hardware, choice, tp)
            config, length = choice.accelerate_config or ZERO3, choice.max_model_len or ""
        else:
            plan = plan_launch(shape, settings, hardware, choice, source)
            plan.notes += notes
            lines = plan.lines()
            tp, server, train, processes = plan.tensor_parallel_size, plan.vllm_gpus, plan.train_gpus, plan.processes
            config, length = plan.accelerate_config, plan.max_model_len
    except DoesNotFit as e:
        print(f"{size}on {hardware.describe()}: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    if args.layout_file:
        write_layout(
            args.layout_file,
            {
                "accelerate_config": config,
                "tensor_parallel_size": tp,
                "vllm_gpus": ",".join(map(str, server)),
                "train_gpus": ",".join(map(str, train)),
                "processes": processes,
                "max_model_len": length,
                "gpu_memory_gib": f"{hardware.gpu_gib:g}",
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
