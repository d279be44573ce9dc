"""The suite's warm model: a tiny Qwen2 that earns reward about half the time, so training runs carry signal.

The random tiny model (scripts/make_tiny_model.py) writes no parseable program: every completion scores 0, every
group's rewards are equal, and a GRPO run on it computes zero advantages and zero gradients. This model is that
tiny model after a short supervised warm start on the fixture problems in tests/fixtures/warm/. It is a
MEMORISED model, not one that reads the problem: for every Python prompt (plain or chat, with or without the
reasoning format) it learned two completions in equal measure,

    ```python                       ```python
    solve = lambda x: x + 1         solve = lambda x: x * 2
    ```                             ```

and for every q prompt a harmless `solve:{x}` or a q error `'type` (the q fixtures are for tests/helpers/fake_q/q, a
stand-in that is not q). Each fixture problem is either "add one" or "double", so at any temperature a sample is
right about half the time: groups of a few samples mix passes and failures, GRPO gets non-zero advantages and
gradients, and pass@1 on the held-out fixture problems sits near 0.5. `build` checks that split on every prompt
before it saves, so a recipe that stops producing it fails loudly instead of training on zero signal.

Building takes well under a minute on one core; `cached_warm_model` keeps the result under
~/.cache/q-grpo-tests/ keyed by a hash of every file the recipe reads, so a session builds it once.

    python tests/helpers/warm_model.py OUT
"""

import hashlib
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

FIXTURES = ROOT / "tests" / "fixtures" / "warm"
PYTHON_PROBLEMS = FIXTURES / "python_problems.jsonl"
Q_STAND_IN_PROBLEMS = FIXTURES / "q_stand_in_problems.jsonl"
RECIPE_FILES = (
    Path(__file__),
    ROOT / "scripts" / "make_tiny_model.py",
    ROOT / "training" / "prompts.py",
    PYTHON_PROBLEMS,
    Q_STAND_IN_PROBLEMS,
)
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "q-grpo-tests"

# The two programs a Python prompt gets: each fixture problem is solved by exactly one of them.
PYTHON_COMPLETIONS = ("```python\nsolve = lambda x: x + 1\n```", "```python\nsolve = lambda x: x * 2\n```")
# What a q prompt gets: a line the stand-in ignores (so the test's own output passes) and a q error it reports
# (runtime_error).
Q_COMPLETIONS = ("```q\nsolve:{x}\n```", "```q\n'type\n```")

STEPS = 120
LEARNING_RATE = 5e-3
SEED = 0
# `build` refuses a model whose two completions do not hold most of the mass, each a fair share of it.
MIN_TOGETHER, MIN_EACH = 0.8, 0.25


def recipe_hash() -> str:
    digest = hashlib.sha256()
    for path in RECIPE_FILES:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def prompts_and_completions(tokenizer) -> list[tuple[str, tuple[str, str]]]:
    """Every prompt text the suite's runs give the model, each with its two completions: plain prompts without
    the reasoning format, and chat prompts with it (tests/training/test_wandb.py)."""
    from data import load_problems
    from training.prompts import make_prompt

    pairs = []
    for path, language in ((PYTHON_PROBLEMS, "python"), (Q_STAND_IN_PROBLEMS, "q")):
        # the q stand-in problems' tests print by themselves (tests/helpers/fake_q/q runs no show): only the flag loads them
        for problem in load_problems(str(path), language, allow_in_sandbox_comparisons=True):
            completions = PYTHON_COMPLETIONS if language == "python" else Q_COMPLETIONS
            chat = make_prompt(problem.description, language, True, "chat")
            pairs += [
                (make_prompt(problem.description, language, False, "plain"), completions),
                (tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True), completions),
            ]
    return pairs


def encode(tokenizer, prompt: str, completion: str) -> tuple[list[int], list[int]]:
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + completion_ids, [-100] * len(prompt_ids) + completion_ids


def batch(tokenizer, examples):
    import torch

    longest = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), longest), tokenizer.pad_token_id)
    labels = torch.full((len(examples), longest), -100)
    mask = torch.zeros((len(examples), longest), dtype=torch.long)
    for row, (input_ids, label_ids) in enumerate(examples):
        ids[row, : len(input_ids)] = torch.tensor(input_ids)
        labels[row, : len(label_ids)] = torch.tensor(label_ids)
        mask[row, : len(input_ids)] = 1
    return ids, labels, mask


def completion_probabilities(model, tokenizer, prompt: str, completions) -> list[float]:
    """The model's probability of each whole completion (end-of-sequence included) after the prompt."""
    import torch

    examples = [encode(tokenizer, prompt, c) for c in completions]
    ids, labels, mask = batch(tokenizer, examples)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    logprobs = torch.log_softmax(logits.float(), -1)
    targets = labels[:, 1:]
    picked = logprobs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * (targets != -100)
    return [math.exp(v) for v in picked.sum(-1).tolist()]


def build(out: Path) -> None:
    import torch
    from make_tiny_model import build_model, build_tokenizer

    torch.manual_seed(SEED)
    tokenizer = build_tokenizer(FIXTURES, vocab_size=1024)
    model = build_model(tokenizer, hidden_size=64, layers=2, seed=SEED)
    pairs = prompts_and_completions(tokenizer)
    examples = [encode(tokenizer, prompt, c) for prompt, completions in pairs for c in completions]
    ids, labels, mask = batch(tokenizer, examples)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    model.train()
    for _ in range(STEPS):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    for prompt, completions in pairs:
        probabilities = completion_probabilities(model, tokenizer, prompt, completions)
        if sum(probabilities) < MIN_TOGETHER or min(probabilities) < MIN_EACH:
            raise RuntimeError(
                f"warm model recipe no longer splits its samples: {probabilities} for "
                f"{prompt[-80:]!r}; change STEPS or LEARNING_RATE in {__file__}"
            )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def cached_warm_model() -> Path:
    """The warm model's folder, built on first use. Concurrent sessions each build into a private folder and
    rename it into place; the loser of that race removes its copy."""
    target = CACHE / f"warm-model-{recipe_hash()}"
    if (target / "config.json").exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE))
    try:
        build(scratch / "model")
        try:
            os.rename(scratch / "model", target)
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


if __name__ == "__main__":
    build(Path(sys.argv[1]))
    print(f"warm model written to {sys.argv[1]}")
