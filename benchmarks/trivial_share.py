"""How much of the test-case reward a program that ignores its input earns, on the bundled sets before and after
their tests were balanced, and under each `--partial_credit` mode.

    python benchmarks/trivial_share.py [--before REF] [--workers N]

For each bundled set, as of git commit REF (the sets before the fix) and as in the working tree, it runs the
trivial programs of data/trivial.py through the judge (the warm path for Python) and prints: problems, tests,
problems above `--max_trivial_share` 0.34, the mean and largest trivial share over all tests and over the first
`--max_tests_per_problem` (5, the training reward's), and the seconds the measurement took.

Then, per set and mode, the training reward (first 5 tests, default weights: best 2.0) that each problem's best
trivial program (the one `python -m data verify` names) earns, judged again through `rewards.score`: the mean over
problems, the largest, and how many problems pay it at least half the base reward.

q runs where a q binary is found; elsewhere its rows say why they are skipped.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

from data import DEFAULT_MAX_TRIVIAL_SHARE, bundled_path, load_problems, measure_trivial_shares  # noqa: E402
from data.trivial import PROBES  # noqa: E402
from judging import Judge, JudgeUnavailable  # noqa: E402
from rewards import ScoringArguments, score  # noqa: E402
from rewards.arguments import PARTIAL_CREDIT  # noqa: E402

BEFORE = "9b13411"  # main just before the bundled sets were balanced


def sets(before: str, scratch: Path) -> list[tuple[str, str, Path]]:
    """(language, "before"/"after", file) for each bundled set."""
    found = []
    for language in ("python", "q"):
        path = bundled_path(language)
        old = scratch / f"{language}-{before}.jsonl"
        shown = subprocess.run(["git", "show", f"{before}:{path.relative_to(ROOT)}"], cwd=ROOT, capture_output=True,
                               text=True)
        if shown.returncode != 0:
            sys.exit(f"git show {before}:{path.relative_to(ROOT)} failed ({shown.stderr.strip()}); "
                     "run inside the repository or pass --before REF")
        old.write_text(shown.stdout)
        found += [(language, "before", old), (language, "after", path)]
    return found


def best_programs(problems, shares) -> list[str]:
    """Each problem's best trivial program, as data/trivial.py names it."""
    return [next(p.program for p in PROBES[problem["language"]] if p.name == share.probe)
            for problem, share in zip(problems, shares)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="git commit of the sets before the fix (default %(default)s)")
    parser.add_argument("--workers", type=int, default=None, help="judge workers (default: the cores)")
    args = parser.parse_args()
    training_tests = ScoringArguments().max_tests_per_problem
    limit = DEFAULT_MAX_TRIVIAL_SHARE
    with tempfile.TemporaryDirectory() as scratch, Judge(timeout=2.0, workers=args.workers) as judge:
        print(f"judge: {judge.isolation}")
        print(f"{'set':<16} {'problems':>8} {'tests':>6} {'above ' + str(limit):>10} {'mean':>6} {'max':>6} "
              f"{'mean@5':>7} {'max@5':>6} {'seconds':>8}")
        measured = []
        for language, version, path in sets(args.before, Path(scratch)):
            name = f"{language} {version}"
            problems = load_problems(path, language)
            try:
                judge.preflight(language)
            except JudgeUnavailable as error:
                print(f"{name:<16} skipped: {error}")
                continue
            started = time.perf_counter()
            shares = measure_trivial_shares(problems, judge)
            seconds = time.perf_counter() - started
            at5 = [s.by_tests[min(training_tests, s.total) - 1] for s in shares]
            print(f"{name:<16} {len(problems):>8} {sum(s.total for s in shares):>6} "
                  f"{sum(s.share > limit for s in shares):>10} {sum(s.share for s in shares) / len(shares):>6.3f} "
                  f"{max(s.share for s in shares):>6.3f} {sum(at5) / len(at5):>7.3f} {max(at5):>6.3f} {seconds:>8.1f}")
            measured.append((name, problems, shares))
        print(f"\nreward of each problem's best trivial program, training reward (first {training_tests} tests, "
              f"best {ScoringArguments().best:g}): mean / max / problems paid >= 0.5 of the base reward")
        print(f"{'set':<16} " + " ".join(f"{mode:>24}" for mode in PARTIAL_CREDIT))
        for name, problems, shares in measured:
            with_shares = [{**p, "trivial_shares": s.by_tests} for p, s in zip(problems, shares)]
            cells = []
            for mode in PARTIAL_CREDIT:
                scoring = ScoringArguments(partial_credit=mode)
                rewards = [s.reward for s in score(judge, with_shares, best_programs(problems, shares), scoring,
                                                   extract=False)]
                paid = sum(r >= 0.5 * scoring.base_reward_weight for r in rewards)
                cells.append(f"{sum(rewards) / len(rewards):.3f} / {max(rewards):.2f} / {paid:>3}")
            print(f"{name:<16} " + " ".join(f"{cell:>24}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
