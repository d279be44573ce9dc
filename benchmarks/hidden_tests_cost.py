"""The hidden-test watch's cost and value on the CPU demo: its GRPO phase with the watch and without, side by side.

    python benchmarks/hidden_tests_cost.py [RUN_DIR] [--runs N] [--steps N] [--model M] [--problems P]

RUN_DIR is a CPU demo's folder (`bash scripts/cpu_demo.sh RUN_DIR`; default final_outputs/demo): its problems.jsonl
(every problem with one hidden test) and its warm start (`--problems`, `--model`: others). Each run is the demo's
own GRPO command, read from scripts/cpu_demo.sh, for `--steps` steps without evaluation, into a folder of its own,
with `--hidden_tests_action warn` (the watch) or `off`; the two alternate, each a fresh process, with the demo's
seed. Judging draws nothing from the random state and hidden tests never enter the reward, so both sides sample the
same completions and train alike (checked: the rewards of every step must match, else it names the step where a
pair parts and the steps with a verdict the load can decide, timeout or sandbox_error, and exits 1), and what
differs is the judging of the hidden tests of the completions that passed the judged one.

Printed per side, as medians over the runs: the reward's seconds per step (TRL's `_calculate_rewards` span, where
the judging happens, timed by benchmarks/step_overhead.py's hooks), the whole step's (the trainer's step_time;
step 1 of each run left out as warm-up), CPU seconds per step (the run's process and every process it waited for,
the sandboxed tests and the warm workers included, over the whole run divided by its steps: start-up included, the
same on both sides), and the watch's counts per step (completions checked on hidden tests, the share that failed).
The ratios with the watch over without come with their spread over the pairs. On a shared machine the wall clock
follows the other jobs: read the load printed with it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
DEMO_SCRIPT = ROOT / "scripts" / "cpu_demo.sh"
SIDES = {"watch": "warn", "without": "off"}


def demo_command(run_dir: Path, seed: int) -> list[str]:
    """The demo's `python rl_trainer.py ...` command (its continued lines joined), its variables filled in."""
    text = DEMO_SCRIPT.read_text()
    match = re.search(r"^python rl_trainer\.py (.*?[^\\])$", text.replace("\\\n", " "), flags=re.M)
    if match is None:
        raise SystemExit(f"{DEMO_SCRIPT}: no `python rl_trainer.py` command found")
    values = {"RUN_DIR": str(run_dir), "ALL": re.search(r"^ALL=(\d+)", text, flags=re.M).group(1), "SEED": str(seed)}
    line = re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: values[m.group(1) or m.group(2)], match.group(1))
    return shlex.split(line)


def replaced(argv: list[str], flag: str, value: str | None) -> list[str]:
    """``argv`` with ``flag``'s value set to ``value`` (added when absent; removed, with its value, when None)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag:
            i += 1 if i + 1 < len(argv) and argv[i + 1].startswith("--") else 2
            continue
        out.append(argv[i])
        i += 1
    return out + ([flag, value] if value is not None else [])


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child(record_path: str, argv: list[str]) -> int:
    """rl_trainer.py with TRL's profiling spans recorded (benchmarks/step_overhead.py's hooks)."""
    spec = importlib.util.spec_from_file_location("step_overhead", ROOT / "benchmarks" / "step_overhead.py")
    step_overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(step_overhead)
    record = {"marks": {}, "spans": [], "step_begin": [], "lengths": []}
    step_overhead.install_clocks(record)
    try:
        import rl_trainer

        return rl_trainer.main(argv)
    finally:
        Path(record_path).write_text(json.dumps(record))


def run_demo(command: list[str], out: Path, steps: int, flags: dict[str, str | None]) -> tuple[list[dict], list, float]:
    """The demo's GRPO ``command`` for ``steps`` steps into ``out``, without evaluation, with ``flags`` set: its logged
    steps, TRL's profiling spans and the CPU seconds of it and every process it waited for."""
    argv = replaced(command, "--output_dir", str(out))
    for flag, value in {
        "--max_steps": str(steps),
        "--eval_pass_at_k": "false",
        "--eval_on_start": None,
        **flags,
    }.items():
        argv = replaced(argv, flag, value)
    record = out.with_suffix(".spans.json")
    started = cpu_seconds()
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(record), "--", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "TOKENIZERS_PARALLELISM": "false",
        },
    )
    cpu = cpu_seconds() - started
    if result.returncode != 0:
        shown = " ".join(f"{flag} {value}" for flag, value in flags.items())
        raise SystemExit(f"rl_trainer.py {shown} exited {result.returncode}:\n{result.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "step_time" in row], json.loads(record.read_text())["spans"], cpu


def run(command: list[str], out: Path, steps: int, action: str) -> dict:
    steps_logged, spans, cpu = run_demo(command, out, steps, {"--hidden_tests_action": action})
    rewards = [wall for name, wall, _ in spans if name == "_calculate_rewards"]
    return {
        "reward_time": statistics.median(rewards[1:]),
        "step_time": statistics.median(row["step_time"] for row in steps_logged[1:]),
        "cpu_per_step": cpu / len(steps_logged),
        "checked": sum(row.get("hidden_tests/checked", 0) for row in steps_logged) / len(steps_logged),
        "failed": sum(row.get("hidden_tests/failed", 0) for row in steps_logged),
        "checked_total": sum(row.get("hidden_tests/checked", 0) for row in steps_logged),
        "reward": [round(row["reward"], 6) for row in steps_logged],
        # Verdicts that follow the machine's load, not the completions: where two runs' rewards part.
        "load_bound": [
            any(row.get(f"status/{status}", 0) for status in ("timeout", "sandbox_error")) for row in steps_logged
        ],
    }


def _steps(flags: list[bool]) -> str:
    return ", ".join(str(step) for step, flag in enumerate(flags, 1) if flag) or "none"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "run_dir",
        nargs="?",
        type=Path,
        default=ROOT / "final_outputs" / "demo",
        help="a CPU demo's folder (problems.jsonl, warm_start/)",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per side (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the demo's DEMO_SEED (default %(default)s)")
    parser.add_argument("--model", type=Path, help="the model to train (default RUN_DIR/warm_start)")
    parser.add_argument("--problems", type=Path, help="the problems (default RUN_DIR/problems.jsonl)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[3:])
    args = parser.parse_args(argv)
    if args.runs < 1 or args.steps < 2:
        parser.exit(2, "hidden_tests_cost.py: --runs must be at least 1 and --steps at least 2 (step 1 is warm-up)\n")
    model, problems = args.model or args.run_dir / "warm_start", args.problems or args.run_dir / "problems.jsonl"
    for needed in (problems, model / "config.json"):
        if not needed.exists():
            parser.exit(
                2,
                f"hidden_tests_cost.py: {needed} is missing; run `bash scripts/cpu_demo.sh "
                f"{args.run_dir}` first, or give --model and --problems\n",
            )
    command = replaced(replaced(demo_command(args.run_dir, args.seed), "--model", str(model)), "--data", str(problems))
    print(
        f"load average at start: {os.getloadavg()[0]:.2f}; {args.runs} runs per side of {args.steps} steps, alternating"
    )
    results: dict[str, list[dict]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="hidden-tests-cost-") as work:
        for index in range(args.runs):
            for side, action in SIDES.items():
                measured = run(command, Path(work) / f"{side}-{index}", args.steps, action)
                results[side].append(measured)
                print(
                    f"  run {index + 1} {side:8s} reward {measured['reward_time']:.3f} s/step, "
                    f"step {measured['step_time']:.2f} s/step, "
                    f"{measured['cpu_per_step']:.2f} CPU s/step, {measured['checked']:.1f} checked/step, "
                    f"{measured['failed']:g} failed",
                    flush=True,
                )
    same = all(w["reward"] == o["reward"] for w, o in zip(results["watch"], results["without"]))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print(
        f"{'side':10s} {'reward s/step':>14s} {'step s/step':>12s} {'CPU s/step':>11s} {'checked/step':>13s} "
        f"{'failed share':>13s}"
    )
    for side in SIDES:
        runs = results[side]
        checked = sum(r["checked_total"] for r in runs)
        share = f"{sum(r['failed'] for r in runs) / checked:.4f}" if checked else "-"
        print(
            f"{side:10s} {statistics.median(r['reward_time'] for r in runs):14.3f} "
            f"{statistics.median(r['step_time'] for r in runs):12.2f} "
            f"{statistics.median(r['cpu_per_step'] for r in runs):11.2f} "
            f"{statistics.median(r['checked'] for r in runs):13.1f} {share:>13s}"
        )
    for key, name in (("reward_time", "reward s/step"), ("step_time", "step s/step"), ("cpu_per_step", "CPU s/step")):
        ratios = [w[key] / o[key] for w, o in zip(results["watch"], results["without"])]
        print(
            f"watch / without, {name}: {statistics.median(ratios):.3f} (pairs {min(ratios):.3f} to {max(ratios):.3f})"
        )
    for index, (watch, without) in enumerate(zip(results["watch"], results["without"])):
        parted = [step for step, (w, o) in enumerate(zip(watch["reward"], without["reward"]), 1) if w != o]
        if parted:
            print(
                f"  pair {index + 1}: rewards part at step {parted[0]}; steps with a timeout or sandbox_error "
                f"verdict: watch {_steps(watch['load_bound'])}, without {_steps(without['load_bound'])}"
            )
    print("same rewards on both sides at every step: " + ("yes" if same else "NO (the watch changed training)"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
