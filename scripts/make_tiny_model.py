"""Build a tiny, randomly initialised `Qwen2ForCausalLM` with a tokenizer trained on the bundled problems.

No model hub is needed: the tokenizer is a byte-level BPE trained with `tokenizers` on the text of the bundled
problem sets (descriptions, solutions, test code) plus the prompt words, and the model is a small Qwen2 with
random weights. Tests and the CPU demo use it; `--model OUT` then loads it like any local checkpoint.

    python scripts/make_tiny_model.py tiny_model
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

from training.prompts import SYSTEM_PROMPTS, TASKS  # noqa: E402

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# vLLM's CPU attention takes head sizes 32, 64, 80, ... 512 (it refuses 16), so every head is 32 wide and
# --hidden_size sets the number of heads: 64 -> 2 query heads sharing 1 key/value head, 128 -> 4 sharing 2.
HEAD_DIM = 32

# ChatML, as Qwen instruct models use, so `--prompt_style chat` works on the tiny model too.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def corpus(data_dir: Path):
    """Every text a prompt or a completion can contain: problems, solutions, tests and the prompt wording."""
    yield from SYSTEM_PROMPTS.values()
    yield from TASKS.values()
    yield "Human: Problem:\nAssistant: <reasoning></reasoning> <answer></answer> ```python ```q ```"
    for path in sorted(data_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            yield record.get("description", "")
            yield record.get("solution") or ""
            for test in record.get("tests", []):
                yield f"{test.get('test_code', '')}\n{test.get('expected_output', '')}"


def build_tokenizer(data_dir: Path, vocab_size: int) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(data_dir), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )


def build_model(tokenizer: PreTrainedTokenizerFast, hidden_size: int, layers: int, seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=hidden_size // HEAD_DIM,
        num_key_value_heads=max(1, hidden_size // HEAD_DIM // 2),
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_model_of_shape(tokenizer: PreTrainedTokenizerFast, shape: Path, seed: int) -> Qwen2ForCausalLM:
    """A random model of a real size's shape (config/shapes/SIZE.json: layers, widths, heads, vocabulary), in bf16,
    built on the GPU where there is one; the tokenizer's ids are a small part of the shape's vocabulary."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        **{
            key: value
            for key, value in json.loads(shape.read_text()).items()
            if not key.startswith("_") and key not in ("architectures", "torch_dtype")
        },
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM._from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the model and tokenizer to")
    parser.add_argument("--data_dir", type=Path, default=ROOT / "data", help="folder of *.jsonl problem sets")
    parser.add_argument("--vocab_size", type=int, default=1024)
    parser.add_argument("--hidden_size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shape",
        type=Path,
        help="a real size's shape instead (config/shapes/1.5b.json): random bf16 weights of that size, "
        "for memory and speed checks; --hidden_size and --layers are then unused",
    )
    args = parser.parse_args(argv)
    if args.hidden_size < HEAD_DIM or args.hidden_size % HEAD_DIM:
        parser.exit(
            2,
            f"error: --hidden_size {args.hidden_size}: give a multiple of {HEAD_DIM} (the attention heads "
            f"are {HEAD_DIM} wide, the narrowest vLLM's CPU attention takes), e.g. 64 or 128\n",
        )
    if not any(args.data_dir.glob("*.jsonl")):
        parser.exit(2, f"error: no *.jsonl problem sets in {args.data_dir}: pass --data_dir with the bundled data/\n")

    tokenizer = build_tokenizer(args.data_dir, args.vocab_size)
    if args.shape:
        model = build_model_of_shape(tokenizer, args.shape, args.seed)
    else:
        model = build_model(tokenizer, args.hidden_size, args.layers, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(args.out)
    model.save_pretrained(args.out)
    n_params = sum(p.numel() for p in model.parameters())
    size = (
        f"{n_params / 1e9:.2f}B parameters of {args.shape}'s shape"
        if args.shape
        else f"{n_params / 1e3:.0f}K parameters"
    )
    print(f"{'model' if args.shape else 'tiny model'} ({size}, vocab {len(tokenizer)}) written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
