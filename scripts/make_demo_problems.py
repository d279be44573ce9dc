"""The CPU demo's problems: generated families of one-line Python tasks, split into disjoint train and held-out instances.

    python scripts/make_demo_problems.py RUN_DIR/problems.jsonl --seed 0 --tokenizer_corpus RUN_DIR/tokenizer_corpus

Every family is one task shape with a few slots (an operation or comparison, a constant, argument names, the
order of the arguments); an instance fills every slot. The instances of each family are shuffled with `--seed`
and a share `--held_out` of them becomes the `test` split. A held-out instance differs from every training
instance in at least one slot, so its description and its solution never occur in the training split. Its
computation does: with 20% held out, every held-out problem computes what some training problem computes under
other argument names (for the commutative operations only one argument order is generated, so a held-out
problem is never a training problem with its operands swapped). The held-out split therefore measures whether a
model writes the right program for a description it never saw, of a kind of task it trained on; not new tasks.

Records follow the design's problem record; each has one test that prints three to five calls on one line (one
sandboxed execution per completion keeps judging cheap on 2 cores), chosen so that no other generated computation
passes it, a hidden test of three other calls, which the reward never judges (the trainer's hidden-test watch judges
it for the completions that pass the first, training/hidden_tests.py), and a canonical `solution`. The tokenizer
corpus leaves the hidden tests out, as no prompt or completion shows them.

With `--examples` each description also shows one call and its result ("For example, solve(3) returns 8."), and
that call is a test of its own marked `"example": true`: what `--feedback_turns` runs a reply's code on
(training/feedback.py). Without a shown example the rounds only check that the code loads, and the demo's code
always loads. The example is judged too (the prompt already holds it); the other tests stay unshown.
"""

import argparse
import json
import random
import sys
from collections.abc import Iterator
from itertools import product
from pathlib import Path

NAMES = ("x", "n", "k", "a", "m", "v")
PAIRS = (("a", "b"), ("x", "y"), ("m", "n"), ("p", "q"), ("i", "j"), ("u", "v"))
CONSTANTS = tuple(range(2, 10))
ARITHMETIC = (("plus", "+"), ("minus", "-"), ("times", "*"))
COMPARISONS = (("greater than", ">"), ("less than", "<"), ("equal to", "=="))
INPUTS = (3, 10, -4)
HIDDEN_INPUTS = (0, 7, -11)
# A comparison's inputs around its constant: with fewer, `n == 4` would pass the test of `n < 5` (inputs 4, 5, 6).
AROUND = (-2, -1, 0, 1, 2)
# The hidden test's inputs for a comparison: well below and above its constant (then its negation).
HIDDEN_AROUND = (-5, 5)
PAIR_INPUTS = ((3, 10), (7, 2), (-4, 5))
HIDDEN_PAIR_INPUTS = ((0, 6), (9, -3), (-8, -2))
# The call a description shows under --examples: an input no other test uses; a comparison's at its constant, where
# `>` and `>=` part.
EXAMPLE_INPUT = 1
EXAMPLE_PAIR = (5, 3)


def record(
    family: str,
    slots: tuple,
    description: str,
    argument_list: str,
    expression: str,
    calls: tuple[str, ...],
    hidden_calls: tuple[str, ...],
    example_call: str | None = None,
) -> dict:
    """One problem: its canonical solution is evaluated here to give the expected output of its tests; with
    ``example_call``, the description shows that call and its result, and it is a test marked as an example."""
    solution = f"def solve({argument_list}):\n    return {expression}\n"
    scope: dict = {}
    exec(solution, scope)  # our own generated one-liner, to compute the expected output

    def test(calls: tuple[str, ...]) -> dict:
        return {
            "test_code": f"print({', '.join(calls)})",
            "expected_output": " ".join(str(eval(call, scope)) for call in calls),
        }

    tests = [test(calls), {**test(hidden_calls), "hidden": True}]
    if example_call is not None:
        shown = test((example_call,))
        description += f" For example, {example_call} returns {shown['expected_output']}."
        tests.insert(0, {**shown, "example": True})
    return {
        "id": "-".join([family, *(str(slot).replace(" ", "") for slot in slots)]),
        "language": "python",
        "description": f"Write a Python function `solve({argument_list})` {description}",
        "tests": tests,
        "solution": solution,
        "difficulty": "easy",
        "tags": ["demo", family],
    }


def arithmetic(examples: bool = False) -> Iterator[dict]:
    """`solve(n)` returns n plus/minus/times a constant."""
    for (word, op), constant, name in product(ARITHMETIC, CONSTANTS, NAMES):
        yield record(
            "arith",
            (word, constant, name),
            f"that takes an integer `{name}` and returns {name} {word} {constant}.",
            name,
            f"{name} {op} {constant}",
            tuple(f"solve({i})" for i in INPUTS),
            tuple(f"solve({i})" for i in HIDDEN_INPUTS),
            f"solve({EXAMPLE_INPUT})" if examples else None,
        )


def comparison(examples: bool = False) -> Iterator[dict]:
    """`solve(n)` returns whether n is greater than / less than / equal to a constant."""
    for (word, op), constant, name in product(COMPARISONS, CONSTANTS, NAMES):
        yield record(
            "compare",
            (word, constant, name),
            f"that takes an integer `{name}` and returns True when {name} is {word} {constant}, else False.",
            name,
            f"{name} {op} {constant}",
            tuple(f"solve({constant + d})" for d in AROUND),
            tuple(f"solve({i})" for i in (*(constant + d for d in HIDDEN_AROUND), -constant)),
            f"solve({constant})" if examples else None,
        )


def pair(examples: bool = False) -> Iterator[dict]:
    """`solve(a, b)` combines its two arguments; subtraction in both orders, the commutative ones in one."""
    for (word, op), (first, second) in product(ARITHMETIC, PAIRS):
        orders = [(first, second), (second, first)] if op == "-" else [(first, second)]
        for left, right in orders:
            yield record(
                "pair",
                (word, left, right),
                f"that takes two integers `{first}` and `{second}` and returns {left} {word} {right}.",
                f"{first}, {second}",
                f"{left} {op} {right}",
                tuple(f"solve({i}, {j})" for i, j in PAIR_INPUTS),
                tuple(f"solve({i}, {j})" for i, j in HIDDEN_PAIR_INPUTS),
                "solve({}, {})".format(*EXAMPLE_PAIR) if examples else None,
            )


FAMILIES = {"arith": arithmetic, "compare": comparison, "pair": pair}


def generate(seed: int, held_out: float, examples: bool = False) -> list[dict]:
    """Every instance of every family, each with its split; per family a seeded share is held out. ``examples``
    changes the descriptions, not which instances are held out."""
    if not 0 < held_out < 1:
        raise ValueError(f"held_out must be between 0 and 1, got {held_out}")
    rng = random.Random(seed)
    problems = []
    for make in FAMILIES.values():
        instances = list(make(examples))
        rng.shuffle(instances)
        cut = max(1, round(len(instances) * held_out))
        problems += [{**p, "split": "test"} for p in instances[:cut]]
        problems += [{**p, "split": "train"} for p in instances[cut:]]
    rng.shuffle(problems)
    return problems


def write_jsonl(path: Path, problems: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="JSONL file to write every problem to, train and held-out")
    parser.add_argument("--seed", type=int, default=0, help="which instances are held out, and the file order")
    parser.add_argument("--held_out", type=float, default=0.2, help="share of each family's instances held out")
    parser.add_argument(
        "--tokenizer_corpus",
        type=Path,
        help="also write the training split alone to DIR/train.jsonl, for make_tiny_model.py "
        "--data_dir, so the tokenizer never reads a held-out problem",
    )
    parser.add_argument(
        "--examples",
        action="store_true",
        help="each description shows one call and its result, a test marked as an example (for --feedback_turns)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.held_out < 1:
        parser.exit(2, f"make_demo_problems.py: error: --held_out {args.held_out}: give a share between 0 and 1\n")

    problems = generate(args.seed, args.held_out, args.examples)
    write_jsonl(args.out, problems)
    train = [p for p in problems if p["split"] == "train"]
    if args.tokenizer_corpus:
        shown = [{**p, "tests": [t for t in p["tests"] if not t.get("hidden")]} for p in train]
        write_jsonl(args.tokenizer_corpus / "train.jsonl", shown)
    print(
        f"{len(problems)} problems ({len(train)} train, {len(problems) - len(train)} held out; families "
        f"{', '.join(FAMILIES)}; seed {args.seed}) written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
