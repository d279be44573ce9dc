"""How much of the test-case reward cheap wrong programs earn on the bundled sets, before and after their tests were
strengthened, and how many wrong programs their judged tests reject.

    python benchmarks/trivial_share.py [--before REF] [--workers N] [--problems N]

For each bundled set as in the working tree, and as of git revision REF when given (the sets before), through the
judge (the warm path for Python):

1. problems, tests, problems with fewer than 5 tests, the trivial share (data/quality/trivial.py: the most of a problem's
   tests a constant, an echo, printing nothing or a battery program passes, `copying the description's examples`
   included): problems above `--max_trivial_share` 0.34, mean and largest over all tests and over the first
   `--max_tests_per_problem` (5, the training reward's); then the mutation score over those first 5 tests
   (data/quality/adequacy.py: the share of wrong programs, mutants and battery, that the judged tests reject): its mean,
   lowest, and the problems with a wrong program that passes them all (weak);
2. the training reward (first 5 tests, default weights: best 2.0) of each problem's best wrong cheap program (the
   probes and the battery, less those that agree with the solution), per `--partial_credit` mode: the mean over
   problems, the largest, and how many problems pay one the perfect bonus.

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
from data.quality.adequacy import check_adequacy  # noqa: E402
from data.quality.trivial import cheap_programs  # noqa: E402
from judging import Judge, JudgeUnavailable  # noqa: E402
from rewards import ScoringArguments, score  # noqa: E402
from rewards.arguments import PARTIAL_CREDIT  # noqa: E402


def sets(before: str | None, scratch: Path) -> list[tuple[str, str, Path]]:
    """(language, "before"/"after", file) for each bundled set; "before" only when a git revision is given."""
    found = []
    for language in ("python", "q"):
        path = bundled_path(language)
        if before is None:
            found.append((language, "after", path))
            continue
        old = scratch / f"{language}-{before}.jsonl"
        shown = subprocess.run(
            ["git", "show", f"{before}:{path.relative_to(ROOT)}"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode != 0:
            sys.exit(
                f"git show {before}:{path.relative_to(ROOT)} failed ({shown.stderr.strip()}); "
                "run inside the repository, with REF in its history"
            )
        old.write_text(shown.stdout)
        found += [(language, "before", old), (language, "after", path)]
    return found


def wrong_cheap_rewards(problems, shares, adequacy, judge, training_tests):
    """Per mode, each problem's best reward of a wrong cheap program, and how many problems pay one the bonus.

    A cheap program is wrong unless it passes every judged test and adequacy found it equivalent to the solution
    (``max(x)`` on the maximum of a list); one that passes them all and is a survivor is wrong."""
    runs = [(index, program) for index, problem in enumerate(problems) for program in cheap_programs(problem)]
    judged = score(
        judge,
        [problems[index] for index, _ in runs],
        [program.program for _, program in runs],
        ScoringArguments(),
        extract=False,
    )
    survivors = [{s.source for s in a.survivors} for a in adequacy]
    best = {mode: [0.0] * len(problems) for mode in PARTIAL_CREDIT}
    for (index, program), result in zip(runs, judged):
        j = result.judgement
        if j.passed == j.total and program.program not in survivors[index]:
            continue  # the answer, or as good as it on every input tried
        trivial = shares[index].by_tests[j.total - 1]
        for mode in PARTIAL_CREDIT:
            reward = ScoringArguments(partial_credit=mode).of(j.passed, j.total, trivial)
            best[mode][index] = max(best[mode][index], reward)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before",
        help="a git revision whose bundled sets are measured too, as 'before' (default: the working tree's only)",
    )
    parser.add_argument("--workers", type=int, default=None, help="judge workers (default: the cores)")
    parser.add_argument("--problems", type=int, default=None, help="the first N problems of each set (default: all)")
    args = parser.parse_args()
    scoring = ScoringArguments()
    training_tests = scoring.max_tests_per_problem
    limit = DEFAULT_MAX_TRIVIAL_SHARE
    with tempfile.TemporaryDirectory() as scratch, Judge(timeout=2.0, workers=args.workers) as judge:
        print(f"judge: {judge.isolation}")
        print(
            f"{'set':<16} {'problems':>8} {'tests':>6} {'<5 tests':>8} {'above ' + str(limit):>10} {'mean':>6} "
            f"{'max':>6} {'mean@5':>7} {'max@5':>6} {'mutation':>9} {'min':>5} {'weak':>5} {'seconds':>8}"
        )
        measured = []
        for language, version, path in sets(args.before, Path(scratch)):
            name = f"{language} {version}"
            problems = load_problems(path, language)[: args.problems]
            try:
                judge.preflight(language)
            except JudgeUnavailable as error:
                print(f"{name:<16} skipped: {error}")
                continue
            started = time.perf_counter()
            shares = measure_trivial_shares(problems, judge)
            adequacy = check_adequacy(problems, judge, training_tests)
            seconds = time.perf_counter() - started
            at5 = [s.by_tests[min(training_tests, s.total) - 1] for s in shares]
            checked = [a for a in adequacy if a.skipped is None]
            mutation = (
                f"{sum(a.score for a in checked) / len(checked):>9.3f} {min(a.score for a in checked):>5.2f} "
                f"{sum(bool(a.survivors) for a in checked):>5}"
                if checked
                else f"{'-':>9} {'-':>5} {'-':>5}"
            )
            print(
                f"{name:<16} {len(problems):>8} {sum(s.total for s in shares):>6} "
                f"{sum(s.total < training_tests for s in shares):>8} {sum(s.share > limit for s in shares):>10} "
                f"{sum(s.share for s in shares) / len(shares):>6.3f} {max(s.share for s in shares):>6.3f} "
                f"{sum(at5) / len(at5):>7.3f} {max(at5):>6.3f} {mutation} {seconds:>8.1f}"
            )
            measured.append((name, problems, shares, adequacy))
        print(
            f"\nreward of each problem's best wrong cheap program (a constant, an echo, printing nothing, a battery "
            f"program), training reward (first {training_tests} tests, best {scoring.best:g}): "
            f"mean / max / problems paying it the perfect bonus"
        )
        print(f"{'set':<16} " + " ".join(f"{mode:>24}" for mode in PARTIAL_CREDIT))
        for name, problems, shares, adequacy in measured:
            best = wrong_cheap_rewards(problems, shares, adequacy, judge, training_tests)
            cells = []
            for mode in PARTIAL_CREDIT:
                rewards = best[mode]
                bonus = sum(r >= ScoringArguments(partial_credit=mode).best for r in rewards)
                cells.append(f"{sum(rewards) / len(rewards):.3f} / {max(rewards):.2f} / {bonus:>3}")
            print(f"{name:<16} " + " ".join(f"{cell:>24}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
