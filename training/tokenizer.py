"""The model's tokenizer, loaded with the model's other checks before any weights."""

import json
from pathlib import Path

from transformers import AutoTokenizer

from cli import UsageError


def load_tokenizer(model: str, prompt_style: str):
    """The tokenizer of ``model`` (a LoRA adapter folder without one: its base model's), padding with its end
    token when it has no pad token; UsageError when it cannot be loaded or `--prompt_style chat` finds no chat
    template."""
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
        raise UsageError(
            f"--prompt_style chat: the tokenizer of {model} has no chat template; use --prompt_style plain"
        )
    return tokenizer
