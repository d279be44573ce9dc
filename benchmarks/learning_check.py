"""Did the CPU demo learn? Reads a finished run folder (or runs the demo first) and compares start and end.

    python benchmarks/learning_check.py final_outputs/demo     # a finished run (scripts/cpu_demo.sh runs it too)

Prints the mean total reward of the first and last `--window` training steps (from logs/metrics.jsonl) and
every pass@k of the first and last evaluation (from logs/eval_results.json). Exit code 0 when the reward rose
and pass@1 improved, 1 when either did not, 2 when the run folder cannot be read. pass@k for larger k is
printed but not required to rise: GRPO sharpens the policy, which can trade sample diversity for pass@1.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_RUN = ROOT / "final_outputs" / "demo"


class BadRun(Exception):
    """The run folder lacks what the check reads; the message names the file and the fix."""


def step_rewards(run: Path) -> list[float]:
    path = run / "logs" / "metrics.jsonl"
    if not path.exists():
        raise BadRun(f"{path}: missing; give the folder of a finished training run")
    rows = [read_json(line, f"{path}:{number}") for number, line in enumerate(path.read_text().splitlines(), 1)
            if line.strip()]
    return [row["reward"] for row in rows if "reward" in row]


def evaluations(run: Path) -> list[dict]:
    path = run / "logs" / "eval_results.json"
    if not path.exists():
        raise BadRun(f"{path}: missing; train with --eval_pass_at_k (the default) and --eval_on_start")
    return read_json(path.read_text(), str(path))


def read_json(text: str, where: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise BadRun(f"{where}: not valid JSON ({e})") from None


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def check(run: Path, window: int) -> bool:
    rewards = step_rewards(run)
    if len(rewards) < 2 * window:
        raise BadRun(f"{run}: {len(rewards)} logged training steps, need at least {2 * window}; lower --window")
    evals = evaluations(run)
    if len(evals) < 2 or evals[0]["step"] == evals[-1]["step"]:
        raise BadRun(f"{run}/logs/eval_results.json: needs an evaluation before and after training; "
                     "train with --eval_on_start")
    first, last = mean(rewards[:window]), mean(rewards[-window:])
    reward_rose = last > first
    print(f"total reward, mean of the first {window} steps: {first:.3f}; of the last {window}: {last:.3f} "
          f"({'rose' if reward_rose else 'did not rise'}; {len(rewards)} steps)")
    before, after = evals[0], evals[-1]
    settings = after["settings"]
    print(f"pass@k on {settings['problems']} {settings['split']} problems, n={settings['n']} samples each, "
          f"temperature {settings['temperature']}: step {before['step']} -> step {after['step']}")
    for key in sorted((k for k in after["metrics"] if k.startswith("pass@")), key=lambda k: int(k[5:])):
        print(f"  {key}: {before['metrics'][key]:.3f} -> {after['metrics'][key]:.3f}")
    print(f"  mean reward: {before['metrics']['mean_reward']:.3f} -> {after['metrics']['mean_reward']:.3f}")
    pass_rose = after["metrics"]["pass@1"] > before["metrics"]["pass@1"]
    print("learned: yes" if reward_rose and pass_rose else
          "learned: NO (" + ", ".join(what for what, ok in (("reward did not rise", reward_rose),
                                                             ("pass@1 did not improve", pass_rose)) if not ok) + ")")
    return reward_rose and pass_rose


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, nargs="?", default=DEMO_RUN, help=f"run folder (default {DEMO_RUN})")
    parser.add_argument("--window", type=int, default=5, help="training steps averaged at the start and the end")
    args = parser.parse_args(argv)
    try:
        return 0 if check(args.run, args.window) else 1
    except BadRun as e:
        print(f"learning_check.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
