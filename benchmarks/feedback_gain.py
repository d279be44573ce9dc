"""Does a feedback round help? Compares held-out pass@1 after the rounds with the first reply's, paired by problem.

    python benchmarks/feedback_gain.py RUN_DIR            # the run's last evaluation
    python benchmarks/feedback_gain.py RUN_DIR --step 0   # its evaluation at step 0

Reads one evaluation of RUN_DIR/logs/eval_results.json made with `--feedback_turns N` (training's or
`--eval_only`'s): each problem's record holds the first reply's pass count `c` of `n` samples and, under
`feedback`, the same samples' pass count once their rounds ran (training/evaluation.py). Both are judged on all the
problem's tests, so the difference per problem is what the rounds added. The verdict is benchmarks/learning_check.py's
paired bootstrap over problems (`--resamples`, seeded): the rounds helped when the 95% interval of the mean
difference, after the rounds minus first reply, lies above 0.

Exit code 0 when the interval's lower bound is above 0, 1 when it is not, 2 when the folder cannot be read or the
evaluation has no per-problem results after feedback rounds (one line on stderr).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning_check import CONFIDENCE, BadRun, paired_bootstrap, read_json  # noqa: E402


def evaluation(run: Path, step: int | None) -> dict:
    """The last evaluation, or the last at ``step``, checked to hold per-problem results after feedback rounds."""
    path = run / "logs" / "eval_results.json"
    if not path.exists():
        raise BadRun(f"{path}: missing; give the folder of a run or an --eval_only evaluation with --feedback_turns")
    evals = read_json(path.read_text(), str(path))
    if not isinstance(evals, list) or not all(isinstance(e, dict) for e in evals) or not evals:
        raise BadRun(f"{path}: expected a non-empty JSON list of evaluations; fix the file or move it away")
    chosen = [e for e in evals if step is None or e.get("step") == step]
    if not chosen:
        steps = ", ".join(str(e.get("step")) for e in evals)
        raise BadRun(f"{path}: no evaluation at step {step}; it has steps {steps}")
    entry = chosen[-1]
    problems = entry.get("problems")
    if not problems or not all(isinstance(p, dict) and isinstance(p.get("feedback"), dict) for p in problems):
        raise BadRun(
            f"{path}: the evaluation at step {entry.get('step')} has no per-problem results after feedback rounds; "
            "evaluate with --feedback_turns 1 or more"
        )
    return entry


def differences(entry: dict) -> list[tuple[float, float]]:
    """Per problem (by id): the first reply's pass rate and the rate after the rounds."""
    try:
        return [
            (p["c"] / p["n"], p["feedback"]["c"] / p["feedback"]["n"])
            for p in sorted(entry["problems"], key=lambda p: p["id"])
        ]
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise BadRun(f"a problem's record lacks its counts ({type(e).__name__}: {e})") from None


def check(run: Path, step: int | None, resamples: int, seed: int) -> bool:
    entry = evaluation(run, step)
    settings = entry.get("settings", {})
    rates = differences(entry)
    first = sum(a for a, _ in rates) / len(rates)
    after = sum(b for _, b in rates) / len(rates)
    print(
        f"evaluation at step {entry.get('step')}{' (--eval_only)' if entry.get('eval_only') else ''}: "
        f"{len(rates)} problems (split {settings.get('split')}), n={settings.get('n')} samples each, temperature "
        f"{settings.get('temperature')}, feedback turns per sample {entry['metrics'].get('feedback/turns', 0):.2f}"
    )
    print(f"pass@1: first reply {first:.3f}, after the feedback rounds {after:.3f}")
    gains = [b - a for a, b in rates]
    low, high = paired_bootstrap(gains, resamples, seed)
    up, down = sum(d > 0 for d in gains), sum(d < 0 for d in gains)
    print(
        f"after - first, per problem: mean {after - first:+.3f} ({up} up, {down} down, {len(gains) - up - down} "
        f"equal); paired bootstrap over {len(gains)} problems, {resamples} resamples: {CONFIDENCE:.0%} interval "
        f"[{low:+.3f}, {high:+.3f}]"
    )
    helped = low > 0
    print(
        "the feedback rounds helped: yes (the interval's lower bound is above 0)"
        if helped
        else "the feedback rounds helped: NO (the interval's lower bound is not above 0)"
    )
    return helped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="run folder (its logs/eval_results.json)")
    parser.add_argument("--step", type=int, default=None, help="the evaluation at this step (default: the last)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the problems")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.exit(2, "feedback_gain.py: error: --resamples must be at least 1\n")
    try:
        return 0 if check(args.run, args.step, args.resamples, args.seed) else 1
    except BadRun as e:
        print(f"feedback_gain.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
