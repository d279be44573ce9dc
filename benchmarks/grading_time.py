"""Seconds the judge takes to grade one test's output (judging/grading.py: ``grade``), 1 KB to 1 MiB, on the outputs
that are worst for it.

    python benchmarks/grading_time.py [--sizes 1 4 16 64 256 1024] [--give_up 1] [--checkout PATH ...]

Grading runs in the judge's worker threads on whatever a program printed (up to the 1 MiB output cap), holding the
GIL while it reads: its time must grow linearly with the output, and stay far under a test's timeout at the cap.
For each rule (text compared exactly; a tolerance of 1e-6; standard input, whose line ends and trailing spaces do
not count, exactly and with the tolerance) and each output family it prints the seconds at each size (KB), the best
of 3 runs (one run where that one took over a tenth of ``--give_up``), and the verdict at the largest size graded.
A family whose time passes ``--give_up`` seconds stops growing (its remaining sizes print as skipped), so a
quadratic checkout still finishes. With ``--checkout`` (repeatable) each checkout is measured in a process of its
own, in turn, so a commit and the one before are compared on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
MARKER = "c0ffee" * 5 + "42"  # a marker line as the judge makes one: 32 hex digits
TOLERANCE = 1e-6
RULES = {  # name: (the marker, or None for a test giving standard input; the tolerance)
    "exact": (MARKER, None),
    "tolerance 1e-6": (MARKER, TOLERANCE),
    "standard input": (None, None),
    "standard input, tolerance 1e-6": (None, TOLERANCE),
}


def six(n: int) -> str:
    """The expected output of most families: a short answer, whatever the size."""
    return "6"


# Output families: what the program printed at ``n`` characters, and the test's expected output at that size.
FAMILIES = {
    # a number pattern that backtracks tries every split of the digit run: seconds at 12 KB
    "digit run, then x": (lambda n: "1" * (n - 1) + "x", six),
    "one long integer": (lambda n: "1" * n, lambda n: "1" * (n - 1) + "2"),
    "run of '.'": (lambda n: "." * n, six),
    "run of 'e'": (lambda n: "e" * n, six),
    "run of '-'": (lambda n: "-" * n, six),
    "1e1e1e...": (lambda n: "1e" * (n // 2), six),
    "1e-1e-1e-...": (lambda n: "1e-" * (n // 3), six),
    "mixed 1.e-+. -.1e": (lambda n: "1.e-+. -.1e" * (n // 11), six),
    "numbers '1 1 1 ...'": (lambda n: "1 " * (n // 2), six),
    "lines '1 \\n'": (lambda n: "1 \n" * (n // 3), six),
    "spaces, then a line": (lambda n: " " * (n - 2) + "\n6", six),
    # printed before the marker line (then 6 after it): what the judge searches for the marker
    "marker near-misses, then it": (lambda n: (MARKER[:-1] + "x\n") * (n // 33), six),
    # an expected output of many numbers: the printed text is read whole
    "run of '-', 4096 numbers expected": (lambda n: "-" * n, lambda n: "1 " * 4096),
    # both long: every number is read and compared (a long expected output is a problem's, not the program's)
    "'1.0 ' for '1 ', both long": (lambda n: "1.0 " * (n // 4), lambda n: "1 " * (n // 4)),
}


def graded(printed: str, expected: str, marker: str | None, tolerance: float | None) -> tuple[float, str]:
    """Seconds of one ``grade`` of ``printed`` (after the marker line, where the test has one), and its status."""
    from judging.executors import RAN
    from judging.grading import grade
    from judging.running import RunResult

    if marker is None:
        stdout = printed
    elif printed.startswith(MARKER[:-1]):  # the near-misses go before the marker line
        stdout = f"{printed}{marker}\n6\n"
    else:
        stdout = f"noise\n{marker}\n{printed}"
    result = RunResult(0, stdout, "", 0.1, False, False)
    start = time.perf_counter()
    status = grade(result, RAN, False, marker, expected, tolerance).status
    return time.perf_counter() - start, status


def measure_here(sizes: list[int], give_up: float) -> dict:
    """For each rule and family: the seconds at each size (None once given up) and the verdict at the largest."""
    out = {}
    for rule, (marker, tolerance) in RULES.items():
        out[rule] = {}
        for family, (make, make_expected) in FAMILIES.items():
            times, verdict = [], None
            for size in sizes:
                if times and (times[-1] is None or times[-1] > give_up):
                    times.append(None)
                    continue
                printed, expected = make(size * 1024), make_expected(size * 1024)
                first, verdict = graded(printed, expected, marker, tolerance)
                runs = [first] + (
                    [graded(printed, expected, marker, tolerance)[0] for _ in range(2)] if first < give_up / 10 else []
                )
                times.append(min(runs))
            out[rule][family] = {"times": times, "verdict": verdict}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024], help="KB")
    parser.add_argument("--give_up", type=float, default=1.0, help="seconds after which a family stops growing")
    parser.add_argument(
        "--checkout",
        action="append",
        type=Path,
        help="a checkout whose grading to measure (repeatable; default: this one)",
    )
    parser.add_argument("--one-checkout", action="store_true", help=argparse.SUPPRESS)  # measure in this process
    args = parser.parse_args()
    if args.one_checkout:
        print(json.dumps(measure_here(args.sizes, args.give_up)))
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    for checkout in [path.resolve() for path in args.checkout or [ROOT]]:
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one-checkout",
                "--give_up",
                str(args.give_up),
                "--sizes",
                *map(str, args.sizes),
            ],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
        print(f"{checkout}: seconds to grade one test's output")
        for rule, families in json.loads(done.stdout).items():
            print(f"  rule: {rule}")
            print(f"  {'output':34}" + "".join(f"{size:>8} KB" for size in args.sizes) + "  verdict")
            for family, figures in families.items():
                cells = "".join(f"{'skipped':>11}" if t is None else f"{t:10.4f}s" for t in figures["times"])
                print(f"  {family:34}{cells}  {figures['verdict']}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
