"""Checks of the trainer's flags taken together, each a one-line UsageError that names the flags a user types.

TRL and transformers check their own settings, but in their own terms (`generation_batch_size (3) must be divisible
by num_generations (4)`), too late (a vLLM setting without `--use_vllm` is ignored for the whole run) or not at all
(a mistyped flag gets no suggestion). These run while the flags are parsed, before anything loads.
"""

import math
import os

from cli import UsageError

HELP = "see `python rl_trainer.py --help`"
# Settings that only mean something when vLLM generates; vllm_max_model_length is left out: the presets set it for
# the server that scripts/serve_vllm.sh starts.
NOT_VLLM = ("vllm_max_model_length",)


def typed_flags(argv: list[str]) -> set[str]:
    """The settings named on the command line, by field name (`--vllm-mode=x` -> vllm_mode)."""
    return {word[2:].partition("=")[0].replace("-", "_") for word in argv if word.startswith("--")}


def check_vllm_settings(grpo, defaults: dict, typed: set[str]) -> None:
    """A vLLM setting (mode, tensor-parallel size, server address, ...) given without --use_vllm would be ignored
    for the whole run: say so before it starts. Given means typed, or set by a --config/--preset to other than the
    default."""
    if grpo.use_vllm:
        return
    given = [
        name
        for name in defaults
        if name.startswith("vllm_")
        and name not in NOT_VLLM
        and (name in typed or getattr(grpo, name) != defaults[name])
    ]
    if not given:
        return
    settings = ", ".join(f"--{name} {getattr(grpo, name)}" for name in given)
    flags = " ".join(f"--{name}" for name in given)
    what = "is a vLLM setting" if len(given) == 1 else "are vLLM settings"
    raise UsageError(f"{settings} {what}, but vLLM is off: add --use_vllm to generate with vLLM, or drop {flags}")


def check_async_generation(grpo) -> None:
    """--async_generation has a vLLM server generate the next batch while the trainers train on this one, and trains
    each batch on weights a step newer than the ones that sampled it."""
    if not grpo.async_generation:
        return
    if not grpo.use_vllm:
        raise UsageError(
            "--async_generation overlaps a vLLM server's generation with training, but vLLM is off: add "
            "--use_vllm (server mode), or drop --async_generation"
        )
    if grpo.vllm_mode != "server":
        raise UsageError(
            f"--async_generation needs --vllm_mode server, not {grpo.vllm_mode}: colocated vLLM "
            "generates on the training devices, so there is nothing to overlap; drop --async_generation "
            "or serve the model (scripts/serve_vllm.sh)"
        )
    if not grpo.vllm_importance_sampling_correction:
        raise UsageError(
            "--async_generation trains on completions sampled by the previous step's weights, which "
            "--vllm_importance_sampling_correction corrects for: keep it on, or drop --async_generation"
        )


def check_feedback_turns(grpo) -> None:
    """--feedback_turns generates each batch turn by turn, each turn's prompts known only once the last is judged."""
    if grpo.feedback_turns < 0:
        raise UsageError(f"--feedback_turns {grpo.feedback_turns}: give 0 (one reply) or a positive number of rounds")
    if grpo.feedback_turns and grpo.async_generation:
        raise UsageError(
            "--feedback_turns cannot run with --async_generation: each feedback round's prompts are "
            "known only once the last round is judged, so no batch can be requested a step ahead; "
            "drop one of them"
        )


def check_generation_batch(
    per_device: int,
    accumulation: int,
    generations: int | None,
    steps_per_generation: int | None = None,
    generation_batch_size: int | None = None,
    processes: int | None = None,
) -> None:
    """TRL's rule, in the flags a user types: the completions generated together (per-device batch x processes x
    accumulation steps, or --steps_per_generation, or --generation_batch_size) are whole groups of
    --num_generations. `processes` defaults to the launch's WORLD_SIZE, as transformers counts them."""
    if not generations:
        return
    processes = processes or int(os.environ.get("WORLD_SIZE", "1"))
    batch = per_device * processes
    of = f"--num_generations {generations}"
    if generation_batch_size is not None and steps_per_generation is None:
        whole = math.lcm(batch, generations)
        if generation_batch_size % whole:
            fix = math.ceil(generation_batch_size / whole) * whole
            raise UsageError(
                f"--generation_batch_size {generation_batch_size} must be whole groups of {of} and whole batches of "
                f"--per_device_train_batch_size {per_device} x {_processes(processes)}; e.g. "
                f"--generation_batch_size {fix}"
            )
        return
    flag, steps = (
        ("--steps_per_generation", steps_per_generation)
        if steps_per_generation is not None
        else ("--gradient_accumulation_steps", accumulation)
    )
    completions = batch * steps
    if completions % generations:
        step = generations // math.gcd(batch, generations)  # the steps that make whole groups are its multiples
        raise UsageError(
            f"--per_device_train_batch_size {per_device} x {_processes(processes)} x {flag} {steps} = {completions} "
            f"completions generated together, not whole groups of {of}; make the product a multiple of "
            f"{generations}, e.g. {flag} {math.ceil(steps / step) * step}"
        )


def _processes(n: int) -> str:
    return "1 process" if n == 1 else f"{n} processes"


def check_evaluation_only(eval_only: bool, typed: set[str]) -> None:
    """--eval_only trains nothing, so --resume_from_checkpoint has nothing to continue."""
    if eval_only and "resume_from_checkpoint" in typed:
        raise UsageError(
            "--eval_only and --resume_from_checkpoint conflict: an evaluation trains nothing, so "
            "there is nothing to resume; drop --resume_from_checkpoint (to evaluate a checkpoint, give "
            "it as --model)"
        )
