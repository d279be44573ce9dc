"""The memory plan (training/memory_plan.py) on the five presets' Qwen2.5-Coder shapes (config/shapes/, no weights):
its figures against hand-worked values and DeepSpeed's own estimator, what it picks on 80 GB and 141 GB GPUs (79.6
and 140.4 GiB, as nvidia-smi's memory.total gives them) and why, and the one line it stops with. Everything here is arithmetic; what a GPU node must still confirm is in docs/clusters.md
("First run on a real cluster")."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from training import memory_plan
from training.arguments import parse_args
from training.memory_plan import (
    GIB,
    NO_OFFLOAD,
    OFFLOAD_ALL,
    OFFLOAD_OPTIMIZER,
    Choice,
    DoesNotFit,
    Hardware,
    Settings,
    model_shape,
    plan_launch,
    settings_from_flags,
)

ROOT = Path(__file__).resolve().parents[2]
SIZES = ["1.5b", "3b", "7b", "14b", "32b"]
# Parameters as published on the Qwen2.5-Coder model cards (embeddings included), in billions.
PUBLISHED = {"1.5b": 1.54, "3b": 3.09, "7b": 7.61, "14b": 14.7, "32b": 32.5}
H100, H200 = 79.6, 140.4  # GiB: nvidia-smi's memory.total of an H100 80GB (81559 MiB) and of an H200, / 1024


def plan(size, gpu_gib=H100, nodes=1, **choice):
    shape, source = model_shape(None, size)
    settings, _ = settings_from_flags(size, [])
    return plan_launch(shape, settings, Hardware(8, gpu_gib, nodes), Choice(max_model_len=8192, **choice), source)


@pytest.mark.parametrize("size", SIZES)
def test_shapes_count_the_published_parameters(size):
    params = model_shape(None, size)[0].params / 1e9
    assert params == pytest.approx(PUBLISHED[size], rel=0.01)


@pytest.mark.parametrize("size", ["1.5b", "7b", "32b"])
def test_shapes_count_what_transformers_builds(size):
    """The plan's parameter count and largest layer equal those of the real Qwen2 module built from the shape on
    the meta device (no memory), the largest layer as DeepSpeed's model_to_params finds it."""
    import torch
    import transformers
    from deepspeed.runtime.zero.stage3 import model_to_params

    config = json.loads((ROOT / "config" / "shapes" / f"{size}.json").read_text())
    config = {k: v for k, v in config.items() if not k.startswith("_") and k != "architectures"}
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    shape = model_shape(None, size)[0]
    assert shape.params == sum(p.numel() for p in set(model.parameters()))  # a tied embedding counts once
    assert shape.largest_layer_params == model_to_params(model)[1]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    "gpus, offload",
    [
        (7, NO_OFFLOAD),
        (6, OFFLOAD_ALL),
        (16, NO_OFFLOAD),
        (4, OFFLOAD_ALL),
        (6, OFFLOAD_OPTIMIZER),
        (16, OFFLOAD_OPTIMIZER),
    ],
)
def test_model_states_are_deepspeeds_estimate(size, gpus, offload):
    """Per GPU and per node of host RAM, as deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs
    computes them (its cpu figure with its default 1.5 margin): nothing offloaded, the optimizer (cpu_offload), or
    the optimizer and the parameters (cpu_offload_params too)."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    shape = model_shape(None, size)[0]
    cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
        shape.params,
        shape.largest_layer_params,
        num_gpus_per_node=gpus,
        num_nodes=1,
        cpu_offload=offload != NO_OFFLOAD,
        cpu_offload_params=offload == OFFLOAD_ALL,
        zero_init=True,
    )
    ours = memory_plan.training_plan(shape, Settings(), gpus, H100, 3, offload)
    assert abs(ours.states - gpu) <= 1
    if offload != NO_OFFLOAD:
        assert 1.5 * ours.host_ram == pytest.approx(cpu, rel=1e-9)


def test_32b_figures_worked_by_hand():
    """The issue's arithmetic: 32.8B parameters, 64 layers, 8 KV heads of 128, vocabulary 152064, hidden 5120."""
    shape = model_shape(None, "32b")[0]
    p = 32_763_876_352
    assert shape.params == p
    assert shape.kv_bytes_per_token() == 2 * 64 * 8 * 128 * 2 == 256 * 1024
    assert shape.kv_bytes_per_token(2) == 128 * 1024
    one = plan("32b", tensor_parallel_size=1, accelerate_config="config/zero3_offload.yaml")
    # one 80 GB GPU: 0.9 x 79.6 GiB - 61.0 GiB of bf16 weights - 4 GiB runtime = 6.6 GiB of KV cache
    assert one.weights_shard == 2 * p
    assert one.kv_cache / GIB == pytest.approx(0.9 * 79.6 - 2 * p / GIB - 4, abs=1e-6)
    assert one.kv_tokens == int(one.kv_cache) // (256 * 1024)
    assert one.concurrent == one.kv_tokens // 2560 == 10  # sequences of 512 + 2048 tokens at once
    assert one.waves == 6  # of the step's 56
    # ZeRO-3 states over 7 GPUs: 18 B x 32.76B / 7 + 4 B x the 152064 x 5120 embedding = 81.4 GiB, over 71.6
    zero3 = plan("32b", gpu_gib=H200)
    assert zero3.processes == 7
    assert zero3.states == 18 * p // 7 + 4 * 152064 * 5120
    assert zero3.states / GIB == pytest.approx(81.4, abs=0.05)
    # with the optimizer offloaded: 2 B x 32.76B / 6 + that embedding = 13.1 GiB
    optimizer = plan("32b")
    assert optimizer.offload == OFFLOAD_OPTIMIZER and optimizer.processes == 6
    assert optimizer.states == 2 * p // 6 + 4 * 152064 * 5120
    assert optimizer.host_ram == 16 * p  # fp32 master weights, gradients, two moments: 488 GiB
    # checkpoint: 14 B per parameter, 458.7 GB = 427 GiB (and 106.6 GB = 99 GiB at 7B)
    assert zero3.checkpoint / GIB == pytest.approx(427.2, abs=0.1)
    assert plan("7b").checkpoint / GIB == pytest.approx(99.3, abs=0.1)


def test_activations_and_logits_worked_by_hand():
    """14b, one completion of 512 + 2048 tokens per GPU with checkpointing: each of 48 layers keeps its bf16 input
    (2560 x 5120 x 2 B), one layer is recomputed whole; logits of the 2048 completion tokens over 152064."""
    p = plan("14b")
    tokens, hidden, layers, vocab = 2560, 5120, 48, 152064
    per_token = 22 * hidden + 6 * 8 * 128 + 8 * 13824
    assert p.activations == layers * tokens * hidden * 2 + tokens * per_token
    assert p.logits == 2048 * vocab * 2 * 3 + 2048 * vocab * 4 * 2
    no_checkpointing = plan("1.5b")  # 4 completions, every layer's activations kept
    shape = no_checkpointing.shape
    assert no_checkpointing.activations == 28 * 4 * tokens * shape.activation_bytes_per_token()


def test_generation_time_is_the_decode_reads_over_the_bandwidth():
    """One wave of 2048 decode steps, each reading the shard's weights and the wave's KV cache (prompt + half the
    completion on average) at half of the H100's 3.35 TB/s."""
    p = plan("7b")
    assert p.waves == 1
    read = p.weights_shard + 56 * (512 + 1024) * p.shape.kv_bytes_per_token()
    assert p.generation_seconds == pytest.approx(2048 * read / (3.35e12 * 0.5))


# server GPUs, training processes, accelerate config, per size: what the plan picks on one 8-GPU node
PICKS = {
    H100: {
        "1.5b": ((0,), 7, "config/zero3.yaml"),
        "3b": ((0,), 7, "config/zero3.yaml"),
        "7b": ((0,), 7, "config/zero3.yaml"),
        "14b": ((0,), 7, "config/zero3.yaml"),
        "32b": ((0, 1), 6, "config/zero3_offload_optimizer.yaml"),
    },
    H200: {size: ((0,), 7, "config/zero3.yaml") for size in SIZES},
}


@pytest.mark.parametrize("gpu_gib", sorted(PICKS))
@pytest.mark.parametrize("size", SIZES)
def test_every_preset_fits_one_node(size, gpu_gib):
    picked = plan(size, gpu_gib)
    assert (picked.vllm_gpus, picked.processes, picked.accelerate_config) == PICKS[gpu_gib][size]
    assert picked.training_gpu <= picked.gpu_budget
    assert picked.waves == 1, "the server holds the whole step"
    assert picked.step_sequences % picked.settings.num_generations == 0
    assert picked.generation_seconds < picked.settings.vllm_request_timeout / 2
    assert not picked.warnings(), "every preset keeps two checkpoints and fits its timeout"


def test_32b_on_80_gb_needs_two_server_shards_and_the_optimizer_offloaded():
    """One server GPU cannot hold a step (6 waves); ZeRO-3 without offload needs more than the GPU, and with the
    optimizer offloaded the parameters fit: full offload is left unused."""
    assert plan("32b", tensor_parallel_size=1, accelerate_config="config/zero3_offload.yaml").waves == 6
    assert plan("32b", tensor_parallel_size=2, accelerate_config="config/zero3_offload.yaml").waves == 1
    with pytest.raises(
        DoesNotFit,
        match=r"^training needs 92\.6 GiB per GPU of 71\.6 .*; fix: the optimizer in host "
        r"RAM, ACCELERATE_CONFIG=config/zero3_offload_optimizer\.yaml$",
    ):
        plan("32b", accelerate_config="config/zero3.yaml", tensor_parallel_size=1)


def test_32b_on_80_gb_says_what_it_picked_and_why():
    lines = plan("32b").lines()
    assert lines[0] == ("memory plan: 32.76B parameters (Qwen/Qwen2.5-Coder-32B's shape), 1 node of 8 x 79.6 GiB GPUs")
    assert lines[1] == (
        "server: GPUs 0,1, tensor_parallel_size 2, max_model_len 8192; per GPU 30.5 GiB of weights "
        "+ 4.0 runtime + 37.1 KV cache = 71.6 (0.9 x 79.6)"
    )
    assert lines[2].startswith("  KV cache per server (2 x 37.1 GiB): 304138 tokens = 118 sequences of 2560 ")
    assert lines[3] == (
        "  picked tensor_parallel_size 2: a server on one GPU holds 10 of a step's 56 sequences at once (6 waves)"
    )
    assert lines[4].startswith(
        "training: 6 processes (GPUs 2,3,4,5,6,7), config/zero3_offload_optimizer.yaml; per "
        "GPU 24.3 GiB of 71.6 (0.9 x 79.6) = states 13.1 (optimizer offloaded) + "
    )
    assert lines[5] == (
        "  picked config/zero3_offload_optimizer.yaml: config/zero3.yaml needs 105.7 GiB per "
        "training GPU, over its 71.6; with the optimizer in host RAM 24.3 fit, so the parameters stay "
        "on the GPUs (config/zero3_offload.yaml would move them too, and every layer over PCIe at "
        "each pass)"
    )
    assert lines[6] == (
        "  host RAM for the offloaded optimizer states: 488 GiB per training node (DeepSpeed's "
        "estimate with its 1.5 margin: 732 GiB)"
    )
    assert " GB" not in "\n".join(lines), "one unit: GiB"


def test_the_32b_plan_in_the_docs_is_what_the_command_prints():
    text = (ROOT / "docs" / "clusters.md").read_text()
    section = text[text.index("`python -m training.memory_plan --preset 32b`;") :]
    block = section[section.index("```text\n") + len("```text\n") :]
    result = subprocess.run(
        [sys.executable, "-m", "training.memory_plan", "--preset", "32b"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == block[: block.index("```")]


def test_full_offload_is_picked_only_where_the_optimizer_alone_is_not_enough():
    """A node of 3 GPUs (one serves, two train), 8 sequences per GPU: 32b's bf16 weights over two GPUs (30.5 GiB
    each) do not fit beside 8 sequences' activations and logits; with the parameters offloaded too, they do."""
    settings = settings_from_flags("32b", ["--per_device_train_batch_size", "8"])[0]
    shape, source = model_shape(None, "32b")
    one_gpu_server = Choice(tensor_parallel_size=1, max_model_len=8192)
    picked = plan_launch(shape, settings, Hardware(3, H100, 1), one_gpu_server, source)
    assert picked.offload == OFFLOAD_ALL and picked.accelerate_config == "config/zero3_offload.yaml"
    [why] = [line for line in picked.lines() if line.startswith("  picked config")]
    assert why.startswith("  picked config/zero3_offload.yaml: config/zero3.yaml needs ")
    assert " GiB per training GPU, config/zero3_offload_optimizer.yaml " in why and why.endswith(", over its 71.6")
    four = plan_launch(shape, settings, Hardware(5, H100, 1), one_gpu_server, source)
    assert four.offload == OFFLOAD_OPTIMIZER, "four training GPUs hold their shards of the weights"


def test_32b_on_three_nodes_shards_the_server_and_needs_no_offload():
    three = plan("32b", nodes=3)
    assert three.processes == 16 and three.step_sequences == 128
    assert three.tensor_parallel_size == 4 and three.waves == 1  # two shards hold 118 of 128
    assert three.accelerate_config == "config/zero3.yaml"


def test_a_server_that_cannot_hold_one_sequence_names_a_larger_tensor_parallel_size():
    """32b's own context (32768 tokens, 8 GiB of KV cache) does not fit beside its weights on one 80 GB GPU."""
    shape, settings = model_shape(None, "32b")[0], settings_from_flags("32b", [])[0]
    with pytest.raises(
        DoesNotFit,
        match="cannot hold one sequence of max_model_len 32768.*fix: a larger server, "
        "VLLM_TENSOR_PARALLEL_SIZE=2, or a lower MAX_MODEL_LEN$",
    ):
        plan_launch(shape, settings, Hardware(8, H100, 1), Choice(tensor_parallel_size=1, max_model_len=32768))


def test_training_gpus_never_include_a_server_gpu():
    two = plan("7b", vllm_gpus=(0, 1))
    assert two.tensor_parallel_size == 2 and two.train_gpus == (2, 3, 4, 5, 6, 7)
    with pytest.raises(
        DoesNotFit,
        match=r"TRAIN_GPUS=1,2,3 includes GPU 1 of the vLLM server \(VLLM_GPU=0,1\); "
        r"leave it out: TRAIN_GPUS=2,3$",
    ):
        plan("7b", vllm_gpus=(0, 1), train_gpus=(1, 2, 3))


def test_the_plan_reads_settings_as_the_trainer_does(tmp_path):
    """settings_from_flags (no torch) against the trainer's own parser, for presets, --config files and flags."""
    config = tmp_path / "mine.yaml"
    config.write_text("per_device_train_batch_size: 4\nmax_completion_length: 1024\n")
    cases = [
        ["--preset", "1.5b"],
        ["--preset", "32b", "--activation_checkpointing", "false"],
        ["--preset", "7b", "--config", str(config), "--gradient_accumulation_steps=2"],
        ["--beta", "0.04", "--max_model_len", "4096", "--save_total_limit", "3", "--use_lora"],
        [],
    ]
    for flags in cases:
        preset = flags[1] if flags[:1] == ["--preset"] else None
        ours, notes = settings_from_flags(preset, flags[2:] if preset else flags)
        assert not notes
        args = parse_args(["--model", "x", *flags])
        g = args.grpo
        theirs = Settings(
            g.per_device_train_batch_size,
            g.gradient_accumulation_steps,
            g.num_generations,
            g.max_completion_length,
            g.gradient_checkpointing,
            g.beta,
            g.vllm_request_timeout,
            g.save_total_limit,
            args.model.use_lora,
            g.vllm_max_model_length,
            Settings().vllm_gpu_memory_utilization,
        )
        assert ours == theirs, flags


def test_the_plan_needs_no_torch():
    """Launchers call it for every size of a dry run: it must stay fast, the trainer's defaults included."""
    code = (
        "import sys; from training import memory_plan as m; shape, _ = m.model_shape(None, '7b'); "
        "m.plan_launch(shape, m.Settings(), m.Hardware()); sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


def test_the_plan_reads_the_defaults_where_they_are_declared():
    """No copy of TRL's or the trainer's defaults: each is read from the class that declares it, the first of
    QGRPOConfig's own classes (most derived first) that holds it, and the server's from `trl vllm-serve`."""
    from dataclasses import fields, is_dataclass

    from trl.scripts.vllm_serve import ScriptArguments

    from training.arguments import ModelArguments, QGRPOConfig

    chain = [c for c in QGRPOConfig.__mro__ if is_dataclass(c) and "__dataclass_fields__" in vars(c)]
    declared = [(package, path, name) for package, path, name in memory_plan.DECLARED_IN]
    assert [name for _, _, name in declared] == [c.__name__ for c in chain] + ["ModelArguments"]
    for (package, path, _), cls in zip(declared, chain + [ModelArguments]):
        assert cls.__module__ == f"{package}.{path.removesuffix('.py').replace('/', '.')}"
    defaults = memory_plan.declared_defaults()
    for f in fields(Settings):
        if f.name == "vllm_gpu_memory_utilization":
            assert defaults[f.name] == ScriptArguments.__dataclass_fields__["gpu_memory_utilization"].default
        else:
            owner = QGRPOConfig if f.name in QGRPOConfig.__dataclass_fields__ else ModelArguments
            assert defaults[f.name] == owner.__dataclass_fields__[f.name].default, f.name
    assert Settings().max_completion_length == 2048 and Settings().per_device_train_batch_size == 1


def test_the_command_stops_with_one_line_naming_the_fix():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "training.memory_plan",
            "--preset",
            "32b",
            "--max-model-len",
            "8192",
            "--accelerate-config",
            "config/zero3.yaml",
            "--tensor-parallel-size",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "32b: on 1 node of 8 x 79.6 GiB GPUs: training needs 105.7 GiB per GPU of 71.6 (0.9 x 79.6) under "
        "config/zero3.yaml; fix: the optimizer in host RAM, ACCELERATE_CONFIG=config/zero3_offload_optimizer.yaml"
    ]


def test_a_model_folder_gives_its_own_shape(tmp_path):
    config = json.loads((ROOT / "config" / "shapes" / "7b.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 14}))
    shape, source = model_shape(str(tmp_path), "32b")
    assert shape.layers == 14 and source == str(tmp_path / "config.json")


def test_the_trainer_stops_before_loading_a_model_that_does_not_fit(tmp_path):
    """The preflight reads only config.json (this folder has no weights) and this launch's processes, GPU and
    DeepSpeed settings: 32b on 7 x 80 GB GPUs without offloading stops with one line naming the optimizer offload
    config."""
    from cli import UsageError
    from training.prerequisites import check_memory, check_model

    (tmp_path / "config.json").write_text((ROOT / "config" / "shapes" / "32b.json").read_text())
    args = parse_args(["--preset", "32b", "--model", str(tmp_path)])
    config = check_model(str(tmp_path))
    with pytest.raises(UsageError) as stopped:
        check_memory(args, config, {"processes": 7, "gpu_gib": H100, "zero_stage": 3, "offload": NO_OFFLOAD})
    assert str(stopped.value) == (
        "memory plan: training needs 92.6 GiB per GPU of 71.6 (0.9 x 79.6) under this launch's config; fix: the "
        "optimizer in host RAM, accelerate launch --config-file config/zero3_offload_optimizer.yaml"
    )
    fits = check_memory(args, config, {"processes": 7, "gpu_gib": H100, "zero_stage": 3, "offload": OFFLOAD_OPTIMIZER})
    assert fits.startswith("training: 7 processes") and "(optimizer offloaded)" in fits
    assert check_memory(args, config, {"processes": 7, "gpu_gib": H200, "zero_stage": 3, "offload": NO_OFFLOAD})
    assert check_memory(args, config) is None, "no CUDA here: a CPU run has nothing to check"


def test_an_evaluation_of_32b_on_one_80_gb_gpu_stops_before_loading(tmp_path):
    """--eval_only samples with transformers on one GPU: 61 GiB of weights and the KV cache of 8 prompts x 4."""
    from cli import UsageError
    from training.prerequisites import check_memory, check_model

    (tmp_path / "config.json").write_text((ROOT / "config" / "shapes" / "32b.json").read_text())
    args = parse_args(["--preset", "32b", "--model", str(tmp_path), "--eval_only"])
    config = check_model(str(tmp_path))
    launch = {"processes": 1, "gpu_gib": H100, "zero_stage": None, "offload": NO_OFFLOAD}
    with pytest.raises(
        UsageError,
        match=r"^memory plan: --eval_only holds the whole bf16 model and 32 sequences of "
        r"2560 tokens on one GPU: 84\.0 GiB of 71\.6; fix: ",
    ):
        check_memory(args, config, launch)
    assert check_memory(args, config, {**launch, "gpu_gib": H200}) is None
