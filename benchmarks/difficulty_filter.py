"""Does --difficulty_filter help? The CPU demo's GRPO run with and without it, same seeds and budget.

    python benchmarks/difficulty_filter.py [--seeds 1 2 3] [--work final_outputs/difficulty_benchmark]

Builds the demo's tiny model and supervised warm start once (scripts/cpu_demo.sh steps 1-2), then for every
seed runs the demo's GRPO setting (step 3: 13 problems, 4 prompts x 8 completions a step, 60 steps) twice,
without and with `--difficulty_filter`, evaluating pass@1 every `--eval_steps` steps. Both runs of a seed start
from the same model with the same seed; only the filter differs.

Prints per run and averaged over seeds:
- zero-signal share: the mean over steps of TRL's `frac_reward_zero_std` (groups whose completions all earned
  the same reward, which teach nothing);
- pass@1 after equal steps (the last evaluation);
- pass@1 after equal wall time: training seconds exclude evaluation time; each run's pass@1 is interpolated
  linearly between its evaluations at the shorter run's training time;
- the training seconds, and the 1-minute load average before and after (the machine is shared).

`--data FILE --eval_split test` evaluate on a held-out split instead of the demo's training problems; `--model PATH`
starts from that model instead of the demo's warm start (the test suite runs `--seeds 1 --steps 1 --eval_steps 1
--repeat_eval_problems 1` from its warm tiny model).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# scripts/cpu_demo.sh step 3, less its run folder, step count and evaluation schedule (set below).
DEMO_GRPO = [
    "--language",
    "python",
    "--max_train_problems",
    "13",
    "--reward_funcs",
    "test_cases",
    "--learning_rate",
    "2e-4",
    "--beta",
    "0",
    "--generation_temp",
    "0.7",
    "--max_completion_length",
    "48",
    "--num_generations",
    "8",
    "--per_device_train_batch_size",
    "32",
    "--gradient_accumulation_steps",
    "1",
]


def run(command: list, log: Path) -> None:
    """Run one stage with its output in `log`; stop the benchmark with the log's tail if it fails."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as f:
        result = subprocess.run(
            [sys.executable, *map(str, command)], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env
        )
    if result.returncode != 0:
        sys.exit(
            f"{command[0]} failed (exit {result.returncode}); its output: {log}\n"
            + "".join(log.read_text().splitlines(keepends=True)[-15:])
        )


def prepare_model(work: Path) -> Path:
    warm = work / "warm_start"
    if not (warm / "config.json").exists():
        run(
            [ROOT / "scripts/make_tiny_model.py", work / "tiny_model", "--hidden_size", "128", "--layers", "4"],
            work / "tiny_model.log",
        )
        run(
            [
                ROOT / "scripts/sft_warm_start.py",
                work / "tiny_model",
                warm,
                "--problems",
                "warmup",
                "--epochs",
                "40",
                "--learning_rate",
                "1e-3",
            ],
            work / "warm_start.log",
        )
    return warm


def training_seconds(run_dir: Path) -> list[tuple[int, float]]:
    """(step, seconds of training up to the end of that step, evaluations excluded), step 0 included."""
    rows = [json.loads(line) for line in (run_dir / "logs/metrics.jsonl").read_text().splitlines()]
    evals = json.loads((run_dir / "logs/eval_results.json").read_text())
    eval_seconds = {e["step"]: e["seconds"] for e in evals}
    start = next(r["time"] for r in rows if r["step"] == 0)  # the evaluation at step 0 ends here
    points, spent_on_evals = [(0, 0.0)], 0.0
    for row in rows:
        if "reward" in row:
            points.append((row["step"], row["time"] - start - spent_on_evals))
        elif "eval_pass@1" in row and row["step"] > 0:
            spent_on_evals += eval_seconds[row["step"]]
    return points


def summarize(run_dir: Path) -> dict:
    rows = [json.loads(line) for line in (run_dir / "logs/metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "reward" in r]
    seconds = dict(training_seconds(run_dir))
    evals = json.loads((run_dir / "logs/eval_results.json").read_text())
    curve = [(seconds[e["step"]], e["metrics"]["pass@1"]) for e in evals]
    return {
        "zero_signal": sum(r["frac_reward_zero_std"] for r in train) / len(train),
        "settled_last": train[-1].get("difficulty/settled"),
        "pass@1_start": evals[0]["metrics"]["pass@1"],
        "pass@1_end": evals[-1]["metrics"]["pass@1"],
        "seconds": seconds[train[-1]["step"]],
        "curve": curve,
    }


def at_time(curve: list[tuple[float, float]], t: float) -> float:
    """pass@1 at training time t, linear between evaluations."""
    for (t0, p0), (t1, p1) in zip(curve, curve[1:]):
        if t0 <= t <= t1:
            return p0 + (p1 - p0) * (t - t0) / (t1 - t0) if t1 > t0 else p1
    return curve[-1][1]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=60, help="training steps of every run (the demo's 60)")
    parser.add_argument("--eval_steps", type=int, default=20)
    parser.add_argument("--repeat_eval_problems", type=int, default=8, help="samples per problem for pass@1")
    parser.add_argument("--work", type=Path, default=ROOT / "final_outputs" / "difficulty_benchmark")
    parser.add_argument(
        "--model", type=Path, help="start every run from this model instead of building the demo's warm start"
    )
    parser.add_argument("--data", help="problems file (default: the bundled Python problems, as the demo)")
    parser.add_argument(
        "--eval_split",
        default="train",
        choices=["train", "test"],
        help="train: the demo's 13 training problems; test: a held-out split of --data",
    )
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    model = args.model or prepare_model(args.work)
    evaluation = [
        "--eval_split",
        args.eval_split,
        "--eval_on_start",
        "--eval_steps",
        args.eval_steps,
        "--simple_eval_problems",
        "13",
        "--repeat_eval_problems",
        args.repeat_eval_problems,
        "--eval_k",
        "1",
    ]
    results = {}
    for seed in args.seeds:
        for arm in ("off", "on"):
            out = args.work / f"seed{seed}-filter_{arm}"
            command = [
                ROOT / "rl_trainer.py",
                "--model",
                model,
                "--output_dir",
                out,
                "--overwrite_output_dir",
                *DEMO_GRPO,
                "--max_steps",
                args.steps,
                "--save_steps",
                args.steps,
                "--seed",
                seed,
                *evaluation,
            ]
            command += ["--data", args.data] if args.data else []
            command += ["--difficulty_filter"] if arm == "on" else []
            started = time.time()
            run(command, args.work / f"seed{seed}-filter_{arm}.log")
            results[(seed, arm)] = {**summarize(out), "wall": time.time() - started}
            r = results[(seed, arm)]
            print(
                f"seed {seed} filter {arm:3}: zero-signal {r['zero_signal']:.3f}, pass@1 {r['pass@1_start']:.3f} "
                f"-> {r['pass@1_end']:.3f}, {r['seconds']:.0f} s training ({r['wall']:.0f} s with evaluations)",
                flush=True,
            )

    print(
        f"\n{len(args.seeds)} seeds x {args.steps} steps, pass@1 on {args.eval_split} problems "
        f"(n={args.repeat_eval_problems})"
    )
    print(
        f"{'seed':>4} {'filter':>6} {'zero-signal':>11} {'settled':>7} {'pass@1 equal steps':>18} "
        f"{'pass@1 equal time':>17} {'train s':>7}"
    )
    table = {"off": [], "on": []}
    for seed in args.seeds:
        budget = min(results[(seed, arm)]["seconds"] for arm in ("off", "on"))
        for arm in ("off", "on"):
            r = results[(seed, arm)]
            r["pass@1_equal_time"] = at_time(r["curve"], budget)
            table[arm].append(r)
            settled = "-" if r["settled_last"] is None else f"{r['settled_last']:.0f}"
            print(
                f"{seed:>4} {arm:>6} {r['zero_signal']:>11.3f} {settled:>7} {r['pass@1_end']:>18.3f} "
                f"{r['pass@1_equal_time']:>17.3f} {r['seconds']:>7.0f}"
            )
    for arm in ("off", "on"):
        rs = table[arm]
        print(
            f"{'mean':>4} {arm:>6} {mean([r['zero_signal'] for r in rs]):>11.3f} {'':>7} "
            f"{mean([r['pass@1_end'] for r in rs]):>18.3f} {mean([r['pass@1_equal_time'] for r in rs]):>17.3f} "
            f"{mean([r['seconds'] for r in rs]):>7.0f}"
        )
    print(f"load average (1 min): {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; cpus: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
