"""What judging a pool sample costs a training step, on the CPU demo: its GRPO phase with the reward's pool sample
(`--pool_tests_per_problem 50`, the default) and without (`0`: the given tests only), side by side.

    python benchmarks/pool_cost.py [RUN_DIR] [--runs N] [--steps N] [--pool-tests N] [--model M] [--problems P]

RUN_DIR is a CPU demo's folder (`bash scripts/cpu_demo.sh RUN_DIR`; default final_outputs/demo): its
problems_pooled.jsonl (every problem with its pool, `python -m data pool`) and its warm start (`--problems`,
`--model`: others). Each run is the demo's own GRPO command, read from scripts/cpu_demo.sh (benchmarks/
hidden_tests_cost.py reads it the same way), for `--steps` steps without evaluation, into a folder of its own; the
two sides alternate, each a fresh process, with the demo's seed. The pool sample changes the rewards, so the two
sides train apart after step 1; what is compared is the time a step takes.

Printed per side, as medians over the runs: the reward's seconds per step (TRL's `_calculate_rewards` span, where the
judging happens), the whole step's (the trainer's step_time; step 1 left out as warm-up), CPU seconds per step (the
run's process and every process it waited for, sandboxed tests included, over the whole run divided by its steps),
and the tests judged per completion. The ratios with the sample over without come with their spread over the pairs.
On a shared machine the wall clock follows the other jobs: read the load printed with it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
_spec = importlib.util.spec_from_file_location("hidden_tests_cost", ROOT / "benchmarks" / "hidden_tests_cost.py")
hidden_tests_cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hidden_tests_cost)
demo_command, replaced = hidden_tests_cost.demo_command, hidden_tests_cost.replaced


def run(command: list[str], out: Path, steps: int, pool_tests: int) -> dict:
    steps_logged, spans, cpu = hidden_tests_cost.run_demo(
        command, out, steps, {"--pool_tests_per_problem": str(pool_tests)}
    )
    rewards = [wall for name, wall, _ in spans if name == "_calculate_rewards"]
    return {
        "reward_time": statistics.median(rewards[1:]),
        "step_time": statistics.median(row["step_time"] for row in steps_logged[1:]),
        "cpu_per_step": cpu / len(steps_logged),
        "reward": statistics.mean(row["reward"] for row in steps_logged),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "run_dir",
        nargs="?",
        type=Path,
        default=ROOT / "final_outputs" / "demo",
        help="a CPU demo's folder (problems_pooled.jsonl, warm_start/)",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per side (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (default %(default)s)")
    parser.add_argument("--pool-tests", type=int, default=50, help="the sample's side (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the demo's DEMO_SEED (default %(default)s)")
    parser.add_argument("--model", type=Path, help="the model to train (default RUN_DIR/warm_start)")
    parser.add_argument("--problems", type=Path, help="the problems (default RUN_DIR/problems_pooled.jsonl)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.steps < 2 or args.pool_tests < 1:
        parser.exit(
            2, "pool_cost.py: --runs and --pool-tests must be at least 1 and --steps at least 2 (step 1 is warm-up)\n"
        )
    model = args.model or args.run_dir / "warm_start"
    problems = args.problems or args.run_dir / "problems_pooled.jsonl"
    for needed in (problems, model / "config.json"):
        if not needed.exists():
            parser.exit(
                2,
                f"pool_cost.py: {needed} is missing; run `bash scripts/cpu_demo.sh {args.run_dir}` "
                f"first, or give --model and --problems\n",
            )
    pools = [len(json.loads(line).get("pool", [])) for line in problems.read_text().splitlines()]
    if not any(pools):
        parser.exit(2, f"pool_cost.py: no problem of {problems} has a pool; build them with python -m data pool\n")
    command = replaced(replaced(demo_command(args.run_dir, args.seed), "--model", str(model)), "--data", str(problems))
    sides = {"sample": args.pool_tests, "without": 0}
    print(
        f"load average at start: {os.getloadavg()[0]:.2f}; {args.runs} runs per side of {args.steps} steps, "
        f"alternating; pools of {min(pools)} to {max(pools)} tests on {sum(map(bool, pools))} of {len(pools)} "
        f"problems"
    )
    results: dict[str, list[dict]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="pool-cost-") as work:
        for index in range(args.runs):
            for side, pool_tests in sides.items():
                measured = run(command, Path(work) / f"{side}-{index}", args.steps, pool_tests)
                results[side].append(measured)
                print(
                    f"  run {index + 1} {side:8s} reward {measured['reward_time']:.3f} s/step, "
                    f"step {measured['step_time']:.2f} s/step, {measured['cpu_per_step']:.2f} CPU s/step, "
                    f"mean reward {measured['reward']:.3f}",
                    flush=True,
                )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print(f"{'side':10s} {'pool tests':>10s} {'reward s/step':>14s} {'step s/step':>12s} {'CPU s/step':>11s}")
    for side, pool_tests in sides.items():
        runs = results[side]
        print(
            f"{side:10s} {pool_tests:10d} {statistics.median(r['reward_time'] for r in runs):14.3f} "
            f"{statistics.median(r['step_time'] for r in runs):12.2f} "
            f"{statistics.median(r['cpu_per_step'] for r in runs):11.2f}"
        )
    for key, name in (("reward_time", "reward s/step"), ("step_time", "step s/step"), ("cpu_per_step", "CPU s/step")):
        ratios = [s[key] / o[key] for s, o in zip(results["sample"], results["without"])]
        print(
            f"sample / without, {name}: {statistics.median(ratios):.3f} (pairs {min(ratios):.3f} to {max(ratios):.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
