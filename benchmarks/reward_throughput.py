"""Reward throughput: this judge versus the reference trainer's way of running tests.

Two batches, each judged by both sides in the same run:

- mixed: six kinds of Python completions (correct, wrong, syntax error, runtime error, infinite
  loop, memory hog). The judge runs no test of a syntax error and stops a completion's tests after a
  timeout, so part of its lead here is early stopping; the executions each side actually ran are
  printed per kind.
- no early stop: correct, wrong and runtime error only, where both sides run every test, so the
  speed-up is parallelism plus lean interpreter start-up alone.

The headline figure is completions' tests judged per second: (completions x tests) / wall seconds,
the rate at which rewards become available. The reference's approach runs one subprocess per test,
one after another, with a 1 s timeout and no limits; this judge runs with every isolation in force.

    python benchmarks/reward_throughput.py [--completions-per-kind 17] [--tests 5] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rewards import Judge  # noqa: E402

KINDS = {
    "correct": "def solve(n):\n    return sum(range(n + 1))\n",
    "wrong": "def solve(n):\n    return n * n\n",
    "syntax_error": "def solve(n)\n    return n\n",
    "runtime_error": "def solve(n):\n    return [0][n + 5]\n",
    "infinite_loop": "def solve(n):\n    while True:\n        n += 1\n",
    # Grows to 2 GB then stops, so the unlimited reference side cannot hurt the machine.
    "memory_hog": "def solve(n):\n    blocks = [bytearray(1 << 30) for _ in range(2)]\n    return len(blocks)\n",
}


def make_tests(count: int) -> list[dict]:
    return [{"test_code": f"print(solve({n}))", "expected_output": str(sum(range(n + 1)))} for n in range(count)]


def reference_run(code: str, tests: list[dict], timeout: float = 1.0) -> list[str]:
    """The reference trainer's judging, for Python: a fresh folder and subprocess per test, in turn."""
    statuses = []
    for test in tests:
        folder = tempfile.mkdtemp(prefix="reference-", dir=".")
        try:
            script = Path(folder, "script.py")
            script.write_text(f"{code}\n\n{test['test_code']}\n")
            try:
                done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                statuses.append("timeout")
                continue
            ok = done.returncode == 0 and "error" not in done.stderr.lower()
            statuses.append("passed" if ok and done.stdout.strip() == test["expected_output"].strip() else "failed")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statuses


NO_EARLY_STOP = ("correct", "wrong", "runtime_error")


def judge_batch(judge: Judge, batch: list[tuple[str, str]], tests: list[dict]) -> tuple[float, Counter, Counter]:
    """Seconds, executions actually run per kind (a test skipped by the judge has 0.0 seconds), statuses."""
    start = time.perf_counter()
    judgements = judge.run_many([(KINDS[kind], tests, "python") for kind, _ in batch])
    seconds = time.perf_counter() - start
    ran = Counter()
    for (kind, _), judgement in zip(batch, judgements):
        ran[kind] += sum(test.seconds > 0 for test in judgement.tests)
    return seconds, ran, Counter(j.status for j in judgements)


def reference_batch(batch: list[tuple[str, str]], tests: list[dict]) -> tuple[float, Counter, Counter]:
    with tempfile.TemporaryDirectory() as work:
        here = os.getcwd()
        os.chdir(work)
        try:
            start = time.perf_counter()
            statuses = [reference_run(KINDS[kind], tests) for kind, _ in batch]
            seconds = time.perf_counter() - start
        finally:
            os.chdir(here)
    ran = Counter()
    for kind, _ in batch:
        ran[kind] += len(tests)
    return seconds, ran, Counter("passed" if set(s) == {"passed"} else "failed" for s in statuses)


def report(name: str, batch: list, tests: list[dict], judge: Judge) -> None:
    judged = len(batch) * len(tests)
    kinds = list(dict.fromkeys(kind for kind, _ in batch))
    print(f"\n{name}: {len(batch)} completions x {len(tests)} tests = {judged} completions' tests "
          f"({len(batch) // len(kinds)} each of {', '.join(kinds)})")
    ours, our_ran, our_statuses = judge_batch(judge, batch, tests)
    theirs, their_ran, their_statuses = reference_batch(batch, tests)
    print("  executions actually run, judge / reference: "
          + ", ".join(f"{kind} {our_ran[kind]}/{their_ran[kind]}" for kind in kinds)
          + f"; total {sum(our_ran.values())}/{sum(their_ran.values())}")
    print(f"  judge:     {ours:6.1f} s, {judged / ours:6.1f} completions' tests judged/s, "
          f"{sum(our_ran.values()) / ours:6.1f} executions/s; statuses {dict(our_statuses)}")
    print(f"  reference: {theirs:6.1f} s, {judged / theirs:6.1f} completions' tests judged/s, "
          f"{sum(their_ran.values()) / theirs:6.1f} executions/s; completions {dict(their_statuses)}")
    print(f"  speed-up (completions' tests judged/s): {theirs / ours:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completions-per-kind", type=int, default=17)
    parser.add_argument("--tests", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()

    tests = make_tests(args.tests)
    mixed = [(kind, n) for kind in KINDS for n in range(args.completions_per_kind)]
    no_early_stop = [(kind, n) for kind in NO_EARLY_STOP for n in range(args.completions_per_kind)]
    with Judge(timeout=1.0, workers=args.workers) as judge:
        judge.preflight("python")
        print(f"judge: {judge.workers} workers on {os.cpu_count()} cores; {judge.isolation}")
        print("reference: one subprocess per test, sequential, 1 s timeout, no limits")
        report("mixed batch", mixed, tests, judge)
        report("no-early-stop batch (both sides run every test)", no_early_stop, tests, judge)


if __name__ == "__main__":
    main()
