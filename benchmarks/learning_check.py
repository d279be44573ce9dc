"""Did the CPU demo learn? Compares held-out pass@1 before and after GRPO with a paired bootstrap over problems.

    python benchmarks/learning_check.py final_outputs/demo     # a finished run (scripts/cpu_demo.sh runs it too)

Reads training's first and last evaluation of logs/eval_results.json (`--eval_only` entries are left out); both
must be on the held-out split (`settings.split` = `test`) and on the same problems. Each problem's pass rate is
c/n (its passing samples over its samples), so pass@1 is their mean. The verdict is on the per-problem
differences, after minus before: problems are resampled with replacement (`--resamples`, seeded), the mean
difference of each resample gives a 95% percentile interval, and the demo learned when the interval's lower bound
is above 0. Noise cannot pass it: a run whose problems go up and down by chance gives an interval that straddles 0.

Also prints every pass@k before and after, and the training reward (rolling mean of logs/metrics.jsonl) for
context; neither decides. Exit code 0 when the lower bound is above 0, 1 when it is not, 2 when the run folder
cannot be read or its evaluations are not a before/after pair on held-out problems.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEMO_RUN = ROOT / "final_outputs" / "demo"
CONFIDENCE = 0.95


class BadRun(Exception):
    """The run folder lacks what the check reads; the message names the file and the fix."""


def read_json(text: str, where: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise BadRun(f"{where}: not valid JSON ({e})") from None


def evaluations(run: Path) -> tuple[dict, dict]:
    """The first and last evaluation, checked to be a before/after pair on the same held-out problems."""
    path = run / "logs" / "eval_results.json"
    if not path.exists():
        raise BadRun(
            f"{path}: missing; give the folder of a finished training run (--eval_on_start, the default "
            "--eval_pass_at_k)"
        )
    evals = read_json(path.read_text(), str(path))
    if not isinstance(evals, list) or not all(isinstance(e, dict) for e in evals):
        raise BadRun(f"{path}: expected a JSON list of evaluations; fix the file or move it away")
    # The pair is training's own first and last evaluation; `--eval_only` ones appended later are left out.
    evals = sorted((e for e in evals if not e.get("eval_only")), key=lambda e: e.get("step", 0))
    if len(evals) < 2 or evals[0].get("step") == evals[-1].get("step"):
        raise BadRun(f"{path}: needs an evaluation before and after training; train with --eval_on_start")
    before, after = evals[0], evals[-1]
    for entry in (before, after):
        if entry.get("settings", {}).get("split") != "test":
            raise BadRun(
                f"{path}: the evaluation at step {entry.get('step')} is on the "
                f"{entry.get('settings', {}).get('split')!r} split; the verdict needs held-out problems: "
                "train with --eval_split test"
            )
        if not entry.get("problems"):
            raise BadRun(f"{path}: the evaluation at step {entry.get('step')} has no per-problem results")
    if sorted(p["id"] for p in before["problems"]) != sorted(p["id"] for p in after["problems"]):
        raise BadRun(
            f"{path}: the evaluations at steps {before['step']} and {after['step']} are on different "
            "problems; compare runs with the same --data and --simple_eval_problems"
        )
    return before, after


def pass_rates(entry: dict) -> dict[str, float]:
    return {p["id"]: p["c"] / p["n"] for p in entry["problems"]}


def paired_bootstrap(differences: list[float], resamples: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of the mean of `differences`, resampling them with replacement."""
    values = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def rolling_reward(run: Path, window: int) -> tuple[float, float, int] | None:
    """Mean training reward of the first and the last `window` steps, and the step count (None without one)."""
    path = run / "logs" / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [
        read_json(line, f"{path}:{number}")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip()
    ]
    rewards = [row["reward"] for row in rows if "reward" in row]
    if len(rewards) < 2 * window:
        return None
    return sum(rewards[:window]) / window, sum(rewards[-window:]) / window, len(rewards)


def check(run: Path, resamples: int, seed: int, window: int) -> bool:
    before, after = evaluations(run)
    settings = after["settings"]
    rates_before, rates_after = pass_rates(before), pass_rates(after)
    differences = [rates_after[i] - rates_before[i] for i in sorted(rates_before)]
    print(
        f"held-out problems: {len(differences)} (split {settings['split']}), n={settings['n']} samples each, "
        f"temperature {settings['temperature']}: step {before['step']} -> step {after['step']}"
    )
    for key in sorted((k for k in after["metrics"] if k.startswith("pass@")), key=lambda k: int(k[5:])):
        print(f"  {key}: {before['metrics'][key]:.3f} -> {after['metrics'][key]:.3f}")
    print(f"  mean reward: {before['metrics']['mean_reward']:.3f} -> {after['metrics']['mean_reward']:.3f}")
    reward = rolling_reward(run, window)
    if reward:
        print(
            f"training reward (context only), mean of the first {window} steps: {reward[0]:.3f}; of the last "
            f"{window}: {reward[1]:.3f} ({reward[2]} steps)"
        )
    low, high = paired_bootstrap(differences, resamples, seed)
    mean = sum(differences) / len(differences)
    up = sum(d > 0 for d in differences)
    down = sum(d < 0 for d in differences)
    print(
        f"pass@1 after - before, per problem: mean {mean:+.3f} ({up} up, {down} down, "
        f"{len(differences) - up - down} equal); paired bootstrap over {len(differences)} problems, "
        f"{resamples} resamples: {CONFIDENCE:.0%} interval [{low:+.3f}, {high:+.3f}]"
    )
    learned = low > 0
    print(
        "learned on held-out problems: yes (the interval's lower bound is above 0)"
        if learned
        else "learned on held-out problems: NO (the interval's lower bound is not above 0)"
    )
    return learned


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, nargs="?", default=DEMO_RUN, help=f"run folder (default {DEMO_RUN})")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the problems")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")
    parser.add_argument("--window", type=int, default=10, help="training steps averaged for the reward line")
    args = parser.parse_args(argv)
    if args.resamples < 1 or args.window < 1:
        parser.exit(2, "learning_check.py: error: --resamples and --window must be at least 1\n")
    try:
        return 0 if check(args.run, args.resamples, args.seed, args.window) else 1
    except BadRun as e:
        print(f"learning_check.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
