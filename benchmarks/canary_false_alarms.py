"""How often would a canary pass by chance? Measured on a run's real evaluation samples, without running anything.

    python benchmarks/canary_false_alarms.py final_outputs/demo

A canary must only fire on a hack. This reads every completion that training's evaluations judged (the output
each printed on each test, `logs/eval_samples/step-N.jsonl`) and asks which impossible variants of its problem
that output would have passed, comparing stripped outputs as the judge does:

- one-off: one value of one test's expected output changed (a yes/no value flipped, an integer plus one), the
  obvious way to make a test impossible. A completion "passes" such a variant when it printed exactly that wrong
  value, i.e. when it is wrong in exactly that place. Reported per family (the problem id's first word) as the
  chance that a completion passes a one-off variant drawn at random among its problem's, and over the completions
  a canary evaluation judges.
- token (training/canary.py): the original output followed by a 64-bit hex token. Counted: completions whose output
  on a test is that test's expected output followed by any 16 hex digits, and the run's canaries' completions
  that passed (`canary/passed` of each evaluation).

Exit code 0 when no completion would have passed a token canary, 1 otherwise, 2 when the run cannot be read.
"""

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data import load_problems  # noqa: E402

TOKEN_TAIL = re.compile(r" [0-9a-f]{16}")


def one_off_outputs(expected: str) -> list[str]:
    """Each output equal to ``expected`` but for one whitespace-separated value: a boolean flipped or an integer
    plus one (other values have no obvious neighbour and are left alone)."""
    values = expected.split()
    outputs = []
    for i, value in enumerate(values):
        if value in ("True", "False"):
            other = "False" if value == "True" else "True"
        elif re.fullmatch(r"-?\d+", value):
            other = str(int(value) + 1)
        else:
            continue
        outputs.append(" ".join(values[:i] + [other] + values[i + 1 :]))
    return outputs


def measure(run: Path) -> dict:
    results = json.loads((run / "logs" / "eval_results.json").read_text())
    config = yaml.safe_load((run / "config.yaml").read_text())
    problems = {p.id: p for p in load_problems(config["data"], config["language"])}
    one_off = defaultdict(lambda: [0.0, 0])  # family -> [sum of each completion's share of variants passed, count]
    token_like = completions = 0
    canary = {"completions": 0, "passed": 0, "per_evaluation": []}
    for entry in results:
        if entry.get("eval_only"):
            continue
        for line in (run / "logs" / entry["samples"]).read_text().splitlines():
            sample = json.loads(line)
            problem = problems[sample["id"]]
            completions += 1
            variants = passed = 0
            for test, result in zip(problem.tests, sample["tests"]):
                printed, expected = result["stdout"].strip(), test.expected_output.strip()
                outputs = one_off_outputs(expected)
                variants += len(outputs)
                passed += sum(printed == o for o in outputs)
                token_like += printed.startswith(expected) and bool(TOKEN_TAIL.fullmatch(printed[len(expected) :]))
            if variants:
                family = sample["id"].split("-")[0]
                one_off[family][0] += passed / variants
                one_off[family][1] += 1
        metrics = entry["metrics"]
        if "canary/completions" in metrics:
            canary["completions"] += metrics["canary/completions"]
            canary["passed"] += metrics["canary/passed"]
            canary["per_evaluation"].append(metrics["canary/completions"])
    return {
        "completions": completions,
        "one_off": {f: s / n for f, (s, n) in sorted(one_off.items())},
        "one_off_counts": {f: n for f, (_, n) in sorted(one_off.items())},
        "token_like": token_like,
        "canary": canary,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder with evaluations (--output_dir of rl_trainer.py)")
    args = parser.parse_args(argv)
    try:
        found = measure(args.run)
    except (OSError, ValueError, KeyError) as e:
        print(
            f"error: {args.run}: cannot read the run's evaluations ({e}); pass a finished run folder", file=sys.stderr
        )
        return 2
    per_evaluation = max(found["canary"]["per_evaluation"], default=0)
    print(f"{found['completions']} evaluation completions of {args.run}")
    print("one-off variants (one value changed): chance that a completion passes one drawn at random")
    for family, share in found["one_off"].items():
        evaluation = 1 - (1 - share) ** per_evaluation if per_evaluation else float("nan")
        print(
            f"  {family:10s} {share:.4f} per completion over {found['one_off_counts'][family]} completions; "
            f"{evaluation:.3f} per evaluation of {per_evaluation} canary completions all of this family"
        )
    print(
        f"token variants: {found['token_like']} completions printed an expected output followed by a 64-bit "
        f"token; the run's canaries: {found['canary']['passed']} of {found['canary']['completions']} passed"
    )
    return 0 if found["token_like"] == 0 and found["canary"]["passed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
