"""Supervised warm start: teach a model the answer format and some canonical solutions before GRPO.

A randomly initialised tiny model almost never writes code that passes a test, so GRPO has nothing to reinforce
(every completion in a group earns 0). A short run of TRL's `SFTTrainer` on the bundled canonical solutions of
the training problems gives it a policy that is right sometimes and wrong sometimes; GRPO can then raise the
share of right answers. The warm start is deliberately short: a policy that already solves every problem leaves
no variance within a group and nothing for GRPO to show.

    python scripts/sft_warm_start.py tiny_model tiny_model_sft --problems easy --epochs 6

Each example is the trainer's own prompt (`training.prompts.make_prompt`, plain style, no reasoning format) with
the completion "```python\\n<solution>\\n```" and the end-of-sequence token; loss is on the completion only.
Only problems of the training split are used, so held-out problems stay unseen.

`--feedback_examples N` adds, for each chosen problem with examples (tests the model was shown,
`training.feedback.example_tests`), up to N examples of a second reply: the prompt is what evaluation and training
under `--feedback_turns` give the model after a wrong first reply (`FeedbackRounds.next_context`, plain style): the
trainer's prompt, a fenced wrong variant of the solution (one small change: `data.quality.wrong_programs.mutants`),
the end-of-sequence token, then the judge's message on that code's run on the examples (`rewards.feedback.verdict`
of a real sandboxed run); the completion is the right solution. A variant is used only when that run fails, so
every message says what a wrong reply would be told. Without them the model never sees a message in training and
its reply after one is noise.
"""

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

from data import DataError, Problem, load_problems, split_problems  # noqa: E402
from judging.languages import language as language_named  # noqa: E402
from training.arguments import bf16_supported  # noqa: E402
from training.prompts import make_prompt  # noqa: E402

LANGUAGE = "python"


def select(problems: list[Problem], which: str, limit: int | None) -> list[Problem]:
    """Training-split problems with a canonical solution: warmup (tagged warm-up), easy (warm-up or easy), train."""
    train, _ = split_problems(problems, test_fraction=0.2)
    chosen = [p for p in train if p.solution]
    if which == "warmup":
        chosen = [p for p in chosen if "warmup" in (p.extra.get("tags") or [])]
    elif which == "easy":
        chosen = [p for p in chosen if "warmup" in (p.extra.get("tags") or []) or p.extra.get("difficulty") == "easy"]
    return chosen[:limit]


def fenced(code: str, language: str) -> str:
    """A reply as the prompt asks for it: the code in one fenced block."""
    return f"```{language_named(language).fence}\n{code.strip(chr(10))}\n```"


def example(problem: Problem) -> dict:
    return {
        "prompt": make_prompt(problem.description, problem.language, False, "plain"),
        "completion": fenced(problem.solution, problem.language),
    }


def feedback_examples(problems: list[Problem], tokenizer, judge, per_problem: int, seed: int) -> list[dict]:
    """Up to ``per_problem`` second-reply examples for each of ``problems`` that has examples (module docstring):
    wrong variants of its solution drawn with ``seed``, each judged on the examples exactly as the feedback rounds
    judge a reply (its code read from the fenced reply by `make_turn`), kept only where the run fails with a
    message."""
    from data.quality.wrong_programs import mutants
    from rewards.feedback import make_turn, verdict
    from training.feedback import FeedbackRounds, example_tests

    rounds = FeedbackRounds(1, judge, {}, tokenizer, chat=False)
    rng = random.Random(seed)
    drawn = []  # (problem, wrong reply, its code); a few more than asked for, as some variants pass the examples
    for problem in problems:
        if not example_tests(problem):
            continue
        wrong = [probe.program for probe in mutants(problem.solution)]
        for program in rng.sample(wrong, min(len(wrong), 4 * per_problem)):
            reply = fenced(program, problem.language)
            drawn.append((problem, reply, make_turn(reply, True, problem.language).code))
    judgements = judge.run_many([(code, rounds.tests(problem), problem.language) for problem, _, code in drawn])
    kept: dict[str, list[dict]] = {}
    for (problem, reply, _), judgement in zip(drawn, judgements):
        said = verdict(problem, rounds.tests(problem), judgement)
        if said.passed or said.message is None or len(kept.setdefault(problem.id, [])) >= per_problem:
            continue
        first = example(problem)
        prompt = rounds.next_context(first["prompt"], [reply], [said.message], None)
        kept[problem.id].append({"prompt": prompt, "completion": first["completion"]})
    return [e for examples in kept.values() for e in examples]


class StopAtSkill:
    """Stops the warm start once greedy decoding reproduces a share of its own training solutions exactly.

    A tiny model learns to copy a problem's constant into its code abruptly, and the step where that happens
    moves with the seed and the machine; stopping at a measured skill instead of a fixed step count gives GRPO
    the same kind of partly trained policy everywhere. Only training examples are decoded: held-out problems stay
    unseen.
    """

    def __init__(self, tokenizer, examples: list[dict], target: float, every: int):
        self.tokenizer = tokenizer
        self.examples = examples
        self.target = target
        self.every = every
        self.history: list[tuple[int, float]] = []

    def share(self, model) -> float:
        import torch

        tok = self.tokenizer
        side, tok.padding_side = tok.padding_side, "left"
        was_training = model.training
        model.eval()
        batch = tok(
            [e["prompt"] for e in self.examples], return_tensors="pt", padding=True, add_special_tokens=False
        ).to(model.device)
        longest = max(len(tok(e["completion"], add_special_tokens=False)["input_ids"]) for e in self.examples)
        with torch.no_grad():
            out = model.generate(**batch, do_sample=False, max_new_tokens=longest + 2, pad_token_id=tok.pad_token_id)
        texts = tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        tok.padding_side = side
        model.train(was_training)
        return sum(t.strip() == e["completion"].strip() for t, e in zip(texts, self.examples)) / len(self.examples)

    def callback(self):
        from transformers import TrainerCallback

        stopper = self

        class Callback(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if state.global_step % stopper.every == 0:
                    share = stopper.share(model)
                    stopper.history.append((state.global_step, share))
                    if share >= stopper.target:
                        control.should_training_stop = True

        return Callback()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model folder (or hub name) to start from")
    parser.add_argument("out", type=Path, help="folder to write the warm-started model and tokenizer to")
    parser.add_argument("--data", default=str(ROOT / "data" / "python_problems.jsonl"), help="problem set (JSONL)")
    parser.add_argument(
        "--problems",
        choices=["warmup", "easy", "train"],
        default="easy",
        help="which training problems to learn from (default: easy, the warm-up and easy ones)",
    )
    parser.add_argument("--max_problems", type=int, default=None, help="at most this many of them, in file order")
    parser.add_argument("--epochs", type=float, default=6.0, help="passes over the examples (few on purpose)")
    parser.add_argument("--max_steps", type=int, default=-1, help="stop after this many optimizer steps")
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stop_at_exact",
        type=float,
        default=None,
        help="stop once greedy decoding reproduces this share of the checked training solutions "
        "exactly (default: train for --epochs / --max_steps)",
    )
    parser.add_argument("--check_every", type=int, default=25, help="optimizer steps between two such checks")
    parser.add_argument("--check_problems", type=int, default=64, help="training problems decoded in each check")
    parser.add_argument(
        "--feedback_examples",
        type=int,
        default=0,
        help="per problem with examples, up to this many more examples of the right reply after a wrong one and "
        "the judge's message on it, as --feedback_turns shows them (default 0: first replies only)",
    )
    args = parser.parse_args(argv)
    if args.feedback_examples < 0:
        parser.exit(2, f"sft_warm_start.py: error: --feedback_examples {args.feedback_examples}: give 0 or more\n")

    try:
        problems = select(load_problems(args.data, LANGUAGE), args.problems, args.max_problems)
    except DataError as e:
        parser.exit(2, f"sft_warm_start.py: error: {e}\n")
    if not problems:
        parser.exit(
            2,
            f"sft_warm_start.py: error: --data {args.data}: no training problems with a solution for "
            f"--problems {args.problems}; choose another --problems or data with solutions\n",
        )

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    config = SFTConfig(
        output_dir=str(args.out / "checkpoints"),
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=2,
        per_device_train_batch_size=args.batch_size,
        completion_only_loss=True,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        bf16=bf16_supported(),
        disable_tqdm=True,
    )
    examples = [example(p) for p in problems]
    stopper = None
    if args.stop_at_exact is not None:  # the skill checked is the first reply's
        stopper = StopAtSkill(tokenizer, examples[: args.check_problems], args.stop_at_exact, args.check_every)
    second = []
    if args.feedback_examples:
        from judging import Judge

        with Judge() as judge:
            second = feedback_examples(problems, tokenizer, judge, args.feedback_examples, args.seed)
        print(f"feedback examples: {len(second)} (a wrong reply and the judge's message, then the right one)")
    trainer = SFTTrainer(
        model=args.model,
        args=config,
        train_dataset=Dataset.from_list(examples + second),
        processing_class=tokenizer,
        callbacks=[stopper.callback()] if stopper else None,
    )
    result = trainer.train()
    trainer.save_model(str(args.out))
    tokenizer.save_pretrained(args.out)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    if stopper:
        checks = ", ".join(f"{share:.2f}" for _, share in stopper.history)
        print(
            f"greedy exact match on {len(stopper.examples)} training problems every {args.check_every} steps: "
            f"{checks} (target {args.stop_at_exact})"
        )
    print(
        f"warm start: {len(problems)} problems, {result.global_step} steps, loss {losses[0]:.3f} -> "
        f"{losses[-1]:.3f}; model written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
