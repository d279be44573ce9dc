"""Checks that run before any model weights load, so a bad setting costs seconds, not a GPU allocation."""

import importlib.util
import json
import os
from pathlib import Path

import requests
from transformers import AutoConfig, AutoTokenizer

from data.loaders import looks_like_path
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
            raise UsageError(f"--model {model}: no such folder; give a model folder or a hub name "
                             "(scripts/make_tiny_model.py builds a tiny local one)")
        if (path / "adapter_config.json").exists():
            return json.loads((path / "adapter_config.json").read_text())
        if not (path / "config.json").exists():
            raise UsageError(f"--model {model}: no config.json in the folder; point at a saved model or checkpoint")
    try:
        return AutoConfig.from_pretrained(model).to_dict()
    except (OSError, ValueError) as e:
        raise UsageError(f"--model {model}: cannot load its config ({str(e).splitlines()[0][:160]}); "
                         "give a local folder or a reachable hub name") from None


def load_tokenizer(model: str, prompt_style: str):
    adapter = Path(model) / "adapter_config.json"
    source = model
    if adapter.exists() and not (Path(model) / "tokenizer_config.json").exists():
        source = json.loads(adapter.read_text())["base_model_name_or_path"]
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model {model}: cannot load its tokenizer ({str(e).splitlines()[0][:160]})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if prompt_style == "chat" and not tokenizer.chat_template:
        raise UsageError(f"--prompt_style chat: the tokenizer of {model} has no chat template; use --prompt_style plain")
    return tokenizer


def vllm_server_url(config) -> str:
    return config.vllm_server_base_url or f"http://{config.vllm_server_host}:{config.vllm_server_port}"


def check_vllm_server_device() -> None:
    """Server mode sends the trainer's weights to the server over NCCL, which TRL 1.16 and vLLM 0.30 run only on
    CUDA: without a GPU, say so now rather than in a traceback after the model has loaded."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError("--vllm_mode server needs a CUDA GPU: TRL 1.16 sends the weights to the vLLM server over "
                         "NCCL (vLLM 0.30's weight transfer), which runs only on CUDA; on a CPU use "
                         "--vllm_mode colocate")


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
        raise UsageError("--use_wandb: wandb is not logged in; run `wandb login`, set WANDB_API_KEY, "
                         "or set WANDB_MODE=offline to log locally and `wandb sync` later")


def _wandb_netrc_key() -> bool:
    """`wandb login` stores the key in ~/.netrc under the API host."""
    import netrc

    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False
