"""What one warm test costs: minor page faults and CPU per test, of the warm worker and of the program's process.

After each fork, every page the worker or the program's process writes is copied first (a copy-on-write fault,
1.5-1.9 us here), so a page written by Python code the worker runs for every test costs a fault every test (a
reference count taken is a write). judging/worker/ keeps the worker's pages still with a few tricks (plain ints,
``_socket.socketpair``, names bound at start, ``gc.freeze``, preloaded modules, a mount plan made once); this
benchmark measures the figure they exist for, and ``FAULT_BOUNDS`` is the bound tests/judging/test_warm_test_cost.py holds
the worker to.

Read from the worker's own /proc/<pid>/stat over a run of tests on one slot: its minor faults and CPU (the loop:
receive, fork the next test's process, poll, reap, reply) and its reaped children's (each test's program process,
from its fork through its set-up, the program and its exit). Per program in ``PROGRAMS``, ``--tests`` tests a round,
``--rounds`` rounds; with ``--checkout`` (repeatable) each round runs every checkout's judge in a process of its own,
alternating, so two commits are compared side by side on the same load. Needs root (warm workers).

    python benchmarks/warm_test_cost.py [--tests 200] [--rounds 3] [--checkout PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
# The programs measured: an empty one (the floor every test pays) and a HumanEval-like one (``typing``, a function,
# its check, one line printed).
PROGRAMS = {
    "empty": ("", "pass", ""),
    "humaneval-like": (
        "from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n"
        "    balance = 0\n    for op in operations:\n        balance += op\n"
        "        if balance < 0:\n            return True\n    return False\n",
        "assert below_zero([1, -2]) and not below_zero([1, 2])\nprint('checked')",
        "checked",
    ),
}
# Minor faults a test may cost at most, per program, in the worker (its loop) and in the program's process.
# Measured on this project's development machine (Debian, kernel 6.18, CPython 3.11, 2 cores): the worker 93-94 a
# test for either program, the program's process 384-393 empty and 469-483 HumanEval-like (the spread is where
# objects happen to lie in memory: any edit of the worker moves it by a few). Undoing a trick, measured there:
# ``socket.socketpair`` for ``_socket.socketpair`` 104 in the worker; no ``gc.freeze`` ~910 and ~960 in the program's
# process; no preloaded modules ~910 HumanEval-like.
FAULT_BOUNDS = {"worker": 100, "program": {"empty": 420, "humaneval-like": 520}}
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def counters(pid: int) -> dict[str, float]:
    """The worker's own and its reaped children's minor faults and CPU seconds (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    minflt, cminflt, utime, stime, cutime, cstime = (int(fields[index]) for index in (7, 8, 11, 12, 13, 14))
    return {
        "worker_faults": minflt,
        "program_faults": cminflt,
        "worker_cpu": (utime + stime) / CLOCK_TICK,
        "program_cpu": (cutime + cstime) / CLOCK_TICK,
    }


def worker_pid(judge) -> int:
    """The host pid of the one slot's worker: the descendant of its bubblewrap that runs the interpreter."""
    (worker,) = judge.setup.warm.workers.values()
    interpreter = judge.setup.warm.interpreter.encode()
    pending = [worker.process.pid]
    while pending:
        pid = pending.pop()
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == interpreter:
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            pending += [int(child) for child in (task / "children").read_text().split()]
    raise RuntimeError("no worker process under bubblewrap")


def judge_test(test_code: str, expected: str):
    """The test as the measured checkout's judge takes it: a ``Test`` record, or a dict in a checkout from before
    judging/records.py (``--checkout`` compares commits)."""
    try:
        from judging import Test
    except ImportError:
        return {"test_code": test_code, "expected_output": expected}
    return Test(test_code, expected)


def measure(judge, program: str, tests: int) -> dict[str, float]:
    """Per test, over ``tests`` runs of ``program`` (a name in PROGRAMS) on ``judge`` (one warm slot): the worker's
    and the program's process's minor faults and CPU ms, and the judge's own CPU ms (this process)."""
    solution, test_code, expected = PROGRAMS[program]
    test = [judge_test(test_code, expected)]
    for _ in range(5):  # the worker's caches and the interpreter's specialised code settle
        assert judge.run(solution, test, "python").status == "passed"
    pid = worker_pid(judge)
    before, judge_before = counters(pid), os.times()
    for _ in range(tests):
        judgement = judge.run(solution, test, "python")
        assert judgement.status == "passed", judgement.tests[0].stderr
    after, judge_after = counters(pid), os.times()
    if worker_pid(judge) != pid or judge.setup.warm.failures:
        raise RuntimeError(f"the worker was replaced mid-run: {judge.setup.warm.failure}")
    per_test = {key: (after[key] - before[key]) / tests for key in before}
    for key in ("worker_cpu", "program_cpu"):
        per_test[key] *= 1000
    per_test["judge_cpu"] = (
        1000 * (judge_after.user + judge_after.system - judge_before.user - judge_before.system) / tests
    )
    return per_test


def measure_here(tests: int) -> dict[str, dict[str, float]]:
    """Every program's figures on a one-slot warm judge of the checkout this process imports."""
    from judging import Judge

    with Judge(timeout=2.0, workers=1) as judge:
        if not judge.warm:
            raise SystemExit(f"warm_test_cost.py: no warm worker here ({judge.isolation})")
        return {program: measure(judge, program, tests) for program in PROGRAMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=200, help="tests per program per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--checkout",
        action="append",
        type=Path,
        help="a checkout whose judge to measure (repeatable; default: this one)",
    )
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)  # a round in this process
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("warm_test_cost.py: warm workers need root; run it as root")
    if args.one_round:
        print(json.dumps(measure_here(args.tests)))
        return
    checkouts = [path.resolve() for path in args.checkout or [ROOT]]
    results = {checkout: [] for checkout in checkouts}
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores; "
        f"{args.tests} tests per program per round, {args.rounds} rounds, checkouts alternating"
    )
    for _ in range(args.rounds):
        for checkout in checkouts:
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            done = subprocess.run(
                [sys.executable, __file__, "--one-round", "--tests", str(args.tests)],
                env=env,
                cwd=checkout,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
            results[checkout].append(json.loads(done.stdout))
    keys = ("worker_faults", "program_faults", "worker_cpu", "program_cpu", "judge_cpu")
    print(f"per test, median of {args.rounds} rounds (rounds' range): minor faults; CPU ms")
    for checkout, rounds in results.items():
        print(checkout)
        for program in PROGRAMS:
            cells = []
            for key in keys:
                values = [one[program][key] for one in rounds]
                digits = 0 if key.endswith("faults") else 2
                cells.append(
                    f"{key} {statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
                )
            print(f"  {program:15} " + ", ".join(cells))
    print(
        f"bounds (tests/judging/test_warm_test_cost.py): worker {FAULT_BOUNDS['worker']}, program "
        + ", ".join(f"{program} {bound}" for program, bound in FAULT_BOUNDS["program"].items())
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
