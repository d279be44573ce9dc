"""What a run needs from outside its flags, checked before any model weights load, so that a bad setting costs
seconds, not a GPU allocation: the model's config, the memory plan, the optional packages, the vLLM server, wandb."""

import importlib.util
import json
import os
from pathlib import Path

import requests
from transformers import AutoConfig

from data.loading.loaders import looks_like_path
from cli import UsageError

GPU_REQUIREMENTS = "pip install -r requirements-gpu.txt"


def check_packages(args) -> None:
    """Every optional package a flag needs is importable: found now, not as a traceback after the model loads."""
    needed = []
    if args.grpo.use_vllm:
        needed.append(("vllm", "--use_vllm", GPU_REQUIREMENTS))
    if args.model.use_qlora:
        needed.append(("bitsandbytes", "--use_qlora", GPU_REQUIREMENTS))
    if args.logging.use_wandb:
        needed.append(("wandb", "--use_wandb", "pip install wandb"))
    for package, flag, fix in needed:
        if importlib.util.find_spec(package) is None:
            raise UsageError(f"{flag} needs {package}, which is not installed here; `{fix}` or drop {flag}")


def check_model(model: str) -> dict:
    """The model's config (or LoRA adapter config) without loading weights; UsageError if it cannot be had."""
    path = Path(model).expanduser()
    if looks_like_path(model):
        if not path.is_dir():
            raise UsageError(
                f"--model {model}: no such folder; give a model folder or a hub name "
                "(scripts/make_tiny_model.py builds a tiny local one)"
            )
        if (path / "adapter_config.json").exists():
            return json.loads((path / "adapter_config.json").read_text())
        if not (path / "config.json").exists():
            raise UsageError(f"--model {model}: no config.json in the folder; point at a saved model or checkpoint")
    try:
        return AutoConfig.from_pretrained(model).to_dict()
    except (OSError, ValueError) as e:
        raise UsageError(
            f"--model {model}: cannot load its config ({str(e).splitlines()[0][:160]}); "
            "give a local folder or a reachable hub name"
        ) from None


def check_memory(args, config: dict, launch: dict | None = None) -> str | None:
    """On GPUs, this launch's training memory plan (training/memory_plan.py) from the model's config.json alone,
    before any weights load: UsageError naming the fix when it does not fit; else the plan's training line.

    `launch` describes the launch (processes, gpu_gib, zero_stage, offload as memory_plan.offload_of reads it); by default it is read from this
    process: WORLD_SIZE, the first GPU's memory and the DeepSpeed settings `accelerate launch` passes on. Without
    CUDA (a CPU run) or for a LoRA adapter folder there is nothing to check: None."""
    from training import memory_plan

    launch = launch or _this_launch()
    if launch is None or "num_hidden_layers" not in config.get("text_config", config):
        return None
    shape = memory_plan.Shape.from_config(config)
    if args.eval.eval_only:
        from training.evaluation import GENERATION_BATCH

        sequences = GENERATION_BATCH * args.eval.repeat_eval_problems
        fix = memory_plan.evaluation_only_fix(
            shape, launch["gpu_gib"], sequences, memory_plan.PROMPT_TOKENS + args.eval.eval_max_tokens
        )
        if fix:
            raise UsageError(f"memory plan: {fix}")
        return None
    g = args.grpo
    settings = memory_plan.Settings.from_values(
        {
            "per_device_train_batch_size": g.per_device_train_batch_size,
            "gradient_accumulation_steps": g.gradient_accumulation_steps,
            "num_generations": g.num_generations,
            "max_completion_length": g.max_completion_length,
            "gradient_checkpointing": g.gradient_checkpointing,
            "beta": g.beta,
            "vllm_request_timeout": g.vllm_request_timeout,
            "save_total_limit": g.save_total_limit,
            "use_lora": args.model.use_lora,
            "vllm_max_model_length": g.vllm_max_model_length,
        }
    )
    plan = memory_plan.training_plan(shape, settings, **launch)
    fix = memory_plan.training_fix(plan)
    if fix:
        raise UsageError(f"memory plan: {fix}")
    return next(line for line in plan.lines() if line.startswith("training:"))


def _this_launch() -> dict | None:
    import torch

    if not torch.cuda.is_available():
        return None
    from training.memory_plan import offload_of

    stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    offload = offload_of(
        os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"),
        os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"),
    )
    return {
        "processes": int(os.environ.get("WORLD_SIZE", "1")),
        "zero_stage": int(stage) if stage else None,
        "gpu_gib": torch.cuda.get_device_properties(0).total_memory / 1024**3,
        "offload": offload,
    }


def vllm_server_url(config) -> str:
    return config.vllm_server_base_url or f"http://{config.vllm_server_host}:{config.vllm_server_port}"


def check_vllm_server_device() -> None:
    """Server mode sends the trainer's weights to the server over NCCL, which TRL 1.16 and vLLM 0.30 run only on
    CUDA: without a GPU, say so now rather than in a traceback after the model has loaded."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            "--vllm_mode server needs a CUDA GPU: TRL 1.16 sends the weights to the vLLM server over "
            "NCCL (vLLM 0.30's weight transfer), which runs only on CUDA; on a CPU use "
            "--vllm_mode colocate"
        )


def check_vllm_server(config, model: str) -> None:
    """In server mode the trainer needs a running vLLM server; say how to start it if none answers."""
    url = vllm_server_url(config)
    try:
        ok = requests.get(f"{url}/health", timeout=3).status_code == 200
    except requests.RequestException:
        ok = False
    if not ok:
        length = f" --max_model_len {config.vllm_max_model_length}" if config.vllm_max_model_length else ""
        raise UsageError(
            f"--use_vllm: no vLLM server answers at {url}; start one first with "
            f"`scripts/serve_vllm.sh {model}{length}` (on GPU 0; with --dry-run it prints the `vllm serve` command), "
            "or use --vllm_mode colocate"
        )


def check_wandb() -> None:
    """`--use_wandb` must be able to log from the first step: logged in unless offline."""
    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        return
    if not (os.environ.get("WANDB_API_KEY") or _wandb_netrc_key()):
        raise UsageError(
            "--use_wandb: wandb is not logged in; run `wandb login`, set WANDB_API_KEY, "
            "or set WANDB_MODE=offline to log locally and `wandb sync` later"
        )


def _wandb_netrc_key() -> bool:
    """`wandb login` stores the key in ~/.netrc under the API host."""
    import netrc

    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False
