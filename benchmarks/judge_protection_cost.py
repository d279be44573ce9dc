"""What the judge's per-test protections cost: milliseconds per empty Python test, side by side in one run.

Variants, each on the warm path (``--sandbox bwrap``) and the cold path (``--sandbox bwrap-cold``), one slot:

- ``all``: every protection on (as shipped).
- ``no cgroup``: without the slot's memory+pids cgroup (the ``sh`` that joins it before bwrap).
- ``no hidden site-packages``: without the empty tmpfs over the interpreter's site-packages.
- ``before`` (with ``--baseline REV``): the judge as it was at git revision REV, i.e. before all of them (host
  folder as /scratch, no cgroup, site-packages shown, rmtree). Its ``judging`` and ``cli`` are extracted with
  ``git archive`` into a temporary folder; nothing in the repository changes.

Each measurement runs in its own process: build a judge, 5 warm-up tests, then ``--runs`` tests of ``pass``
one after another; the median is printed. Variants alternate for ``--rounds`` rounds and the median of the
round medians is compared with ``all``. Needs root (slot uids, cgroups) and bubblewrap.

    python benchmarks/judge_protection_cost.py --runs 100 [--rounds 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
VARIANTS = ("all", "no cgroup", "no hidden site-packages")
PATHS = ("bwrap", "bwrap-cold")


def measure(variant: str, sandbox: str, runs: int) -> float:
    """Median milliseconds per empty test (run in a child process, with ``variant``'s protection switched off)."""
    if variant == "no cgroup":
        import judging.slots

        class NoCgroups(judging.slots.Cgroups):
            def __init__(self, keys, memory_bytes, processes, *rest, **named):
                super().__init__([], memory_bytes, processes, *rest, **named)
                self.unavailable = "switched off by the benchmark"

        judging.slots.Cgroups = NoCgroups
    if variant == "no hidden site-packages":
        import judging.executors

        judging.executors.site_packages_in_view = lambda read_only: []
    from judging import Judge, Test

    empty = [Test("pass", "")]
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        if sandbox == "bwrap" and not judge.warm:
            raise SystemExit(f"warm workers did not start: {judge.isolation}")
        for _ in range(5):
            judge.run("", empty, "python")
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            status = judge.run("", empty, "python").status
            times.append(time.perf_counter() - start)
            if status != "passed":
                raise SystemExit(f"an empty test did not pass ({status}) under {variant}, {sandbox}")
    return statistics.median(times) * 1000


def child(variant: str, sandbox: str, runs: int, pythonpath: str) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    done = subprocess.run(
        [sys.executable, __file__, "--child", variant, sandbox, "--runs", str(runs)],
        env=env,
        capture_output=True,
        text=True,
        cwd=pythonpath,
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} on {sandbox} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="a git revision to time as 'before' (a commit, tag or branch)")
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "SANDBOX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], args.runs)))
        return
    if os.geteuid() != 0:
        raise SystemExit("run as root: slot uids and cgroups need it")
    variants = {variant: str(ROOT) for variant in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="judge-baseline-") as old:
        if args.baseline:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "judging", "cli"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
            variants["before"] = old
        results = {(variant, sandbox): [] for variant in variants for sandbox in PATHS}
        for _ in range(args.rounds):
            for sandbox in PATHS:
                for variant, pythonpath in variants.items():
                    results[variant, sandbox].append(child(variant, sandbox, args.runs, pythonpath))
    print(
        f"ms per empty Python test, median of {args.rounds} rounds of {args.runs} tests, one slot "
        f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"
    )
    print("each cell: median ms (the rounds' lowest-highest median) and the ratio to 'all' on that path")
    print(f"{'variant':<26}" + "".join(f"{sandbox:>34}" for sandbox in PATHS))
    for variant in variants:
        cells = []
        for sandbox in PATHS:
            rounds = results[variant, sandbox]
            ms = statistics.median(rounds)
            base = statistics.median(results["all", sandbox])
            cells.append(f"{ms:6.2f} ms ({min(rounds):.1f}-{max(rounds):.1f}) {ms / base:4.2f}x")
        print(f"{variant:<26}" + "".join(f"{cell:>34}" for cell in cells))


if __name__ == "__main__":
    main()
