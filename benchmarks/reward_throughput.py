"""Executions per second: this judge versus the reference trainer's way of running tests.

The batch mixes six kinds of Python completions (correct, wrong, syntax error, runtime error,
infinite loop, memory hog), each judged on the same tests. The reference's approach runs one
subprocess per test, one after another, with a 1 s timeout and no limits; this judge runs with every
isolation in force. Both sides count the same number of test executions.

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completions-per-kind", type=int, default=17)
    parser.add_argument("--tests", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()

    tests = make_tests(args.tests)
    batch = [(kind, code) for kind, code in KINDS.items() for _ in range(args.completions_per_kind)]
    executions = len(batch) * len(tests)
    print(f"batch: {len(batch)} completions x {len(tests)} tests = {executions} executions "
          f"({args.completions_per_kind} each of {', '.join(KINDS)}); {os.cpu_count()} cores")

    with Judge(timeout=1.0, workers=args.workers) as judge:
        judge.preflight("python")
        start = time.perf_counter()
        judgements = judge.run_many([(code, tests, "python") for _, code in batch])
        ours = time.perf_counter() - start
        isolation, workers = judge.isolation, judge.workers
    print(f"judge ({workers} workers; {isolation}):")
    print(f"  {ours:.1f} s, {executions / ours:.1f} executions/s, statuses {dict(Counter(j.status for j in judgements))}")

    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        start = time.perf_counter()
        reference = [reference_run(code, tests) for _, code in batch]
        theirs = time.perf_counter() - start
    passed = Counter("passed" if set(s) == {"passed"} else "failed" for s in reference)
    print("reference (one subprocess per test, sequential, 1 s timeout, no limits):")
    print(f"  {theirs:.1f} s, {executions / theirs:.1f} executions/s, completions {dict(passed)}")
    print(f"speed-up: {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
