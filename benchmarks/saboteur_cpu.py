"""Whether a test can take CPU from the test beside it: an honest program judged alone, then beside a saboteur in
the judge's other slot, on the warm (``bwrap``) and cold (``bwrap-cold``) paths, with the ratio of its times.

The saboteur is a correct program that also forks ``--sessions`` processes, each in a session of its own
(``setsid``), spinning for 0.8 s while it waits for them: it passes its own test (1 s timeout). Without a CPU
bound per slot each of its sessions is one more scheduling entity beside the honest program's one, so the honest
program, which needs about ``--work`` seconds of CPU, gets a share of a core and times out. Under GRPO the
saboteur then earns more than the honest solvers in its group.

Each variant runs in a process of its own: a judge with 2 slots and a 1 s timeout, 3 warm-up tests, then
``--runs`` pairs (the honest program alone; the honest program and the saboteur submitted together). Variants:
``after`` is this checkout's judge; ``before`` (with ``--baseline REV``) the judge at git revision REV, extracted
with ``git archive`` into a temporary folder (nothing in the repository changes). Needs root and bubblewrap.

By default ``--host_load 2`` busy processes run beside the judges, standing for the trainer's CPU work: the load
users have, under which a judge's slots compete with the trainer's processes as well as with each other (on a quiet
machine the figure is kinder). ``--shield`` runs the judges in a cgroup v1 ``cpu`` folder weighted as 256
processes, so that other work takes little of their CPU: the figures then compare the two slots with each other, as
on a node given over to judging (say so when quoting them).

    python benchmarks/saboteur_cpu.py --runs 20 --baseline main
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
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
PATHS = ("bwrap", "bwrap-cold")
SOLVE = "def solve(n):\n    total = 0\n    for i in range(n):\n        total += i * i % 7\n    return total\n"


def test(code: str, expected: str):
    """One test as this process's judge takes it (a revision before ``judging.Test`` took dicts)."""
    try:
        from judging import Test
    except ImportError:
        return {"test_code": code, "expected_output": expected}
    return Test(code, expected)


def honest(n: int) -> tuple[str, list]:
    return SOLVE, [test(f"print(solve({n}))", str(sum(i * i % 7 for i in range(n))))]


def saboteur(sessions: int) -> tuple[str, list]:
    code = (
        "import os, time\n"
        "children = []\n"
        f"for _ in range({sessions}):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.setsid()\n"
        "        end = time.monotonic() + 0.8\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "for pid in children:\n"
        "    os.waitpid(pid, 0)\n" + SOLVE
    )
    return code, [test("print(solve(10))", str(sum(i * i % 7 for i in range(10))))]


def iterations_for(seconds: float) -> int:
    """How many loop iterations of ``solve`` take about ``seconds`` of CPU in this interpreter (the sandbox's is the
    same one)."""
    n = 200_000
    start = time.process_time()
    sum(i * i % 7 for i in range(n))
    return max(1000, int(n * seconds / max(time.process_time() - start, 1e-3)))


def measure(sandbox: str, runs: int, n: int, sessions: int) -> dict:
    from judging import Judge

    alone, beside, sabotage = [], [], []
    good, evil = honest(n), saboteur(sessions)
    with Judge(timeout=1.0, workers=2, sandbox=sandbox) as judge:
        if sandbox == "bwrap" and not judge.warm:
            raise SystemExit(f"warm workers did not start: {judge.isolation}")
        for _ in range(3):
            judge.run_many([(*good, "python")])
        for _ in range(runs):
            [only] = judge.run_many([(*good, "python")])
            alone.append(only)
            bad, mine = judge.run_many([(*evil, "python"), (*good, "python")])
            beside.append(mine)
            sabotage.append(bad)
        isolation = judge.isolation
    return {
        "alone": [(j.status, j.tests[0].seconds) for j in alone],
        "beside": [(j.status, j.tests[0].seconds) for j in beside],
        "saboteur": [j.status for j in sabotage],
        "cpu": next((part for part in isolation.split("; ") if part.startswith("cpu")), "no cpu bound"),
    }


def child(sandbox: str, args, pythonpath: str) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            sandbox,
            "--runs",
            str(args.runs),
            "--n",
            str(args.n),
            "--sessions",
            str(args.sessions),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=pythonpath,
    )
    if done.returncode != 0:
        raise SystemExit(f"{sandbox} with {pythonpath} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(result: dict) -> str:
    def share(pairs):
        return sum(status == "passed" for status, _ in pairs) / len(pairs)

    alone = statistics.median(seconds for _, seconds in result["alone"])
    beside = statistics.median(seconds for _, seconds in result["beside"])
    saboteur = sum(status == "passed" for status in result["saboteur"]) / len(result["saboteur"])
    return (
        f"honest alone {share(result['alone']):4.0%} passed {alone:.2f} s | beside the saboteur "
        f"{share(result['beside']):4.0%} passed {beside:.2f} s, {beside / alone:.2f}x | saboteur "
        f"{saboteur:.0%} passed"
    )


@contextmanager
def host_load(processes: int):
    """``processes`` busy processes beside the judges, in this process's own cgroups, as a trainer's CPU work is
    (its data loading, tokenising, vLLM's scheduler): the load users have, and what a quiet machine hides."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield f"{processes} busy host processes beside the judge" if processes else "no host load"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


@contextmanager
def shielded(on: bool):
    """With ``on``, this process (and the judges it starts) in a v1 cpu cgroup weighted as 256 processes."""
    own = next(
        (
            line.split(":", 2)[2]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if "cpu" in line.split(":")[1].split(",")
        ),
        None,
    )
    if not on:
        yield "not shielded"
        return
    if own is None:
        raise SystemExit("--shield needs a cgroup v1 cpu hierarchy (/sys/fs/cgroup/cpu)")
    parent = Path("/sys/fs/cgroup/cpu") / own.lstrip("/")
    folder = parent / f"saboteur-benchmark-{os.getpid()}"
    folder.mkdir()
    try:
        (folder / "cpu.shares").write_text(str(256 * 1024))
        (folder / "cgroup.procs").write_text(str(os.getpid()))
        yield f"shielded: {folder} (cpu.shares {256 * 1024})"
    finally:
        (parent / "cgroup.procs").write_text(str(os.getpid()))
        folder.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--work", type=float, default=0.35, help="the honest program's CPU seconds alone")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--baseline", help="a git revision to time as 'before' (e.g. main)")
    parser.add_argument(
        "--host_load",
        type=int,
        default=2,
        help="busy processes beside the judge, standing for the trainer's CPU work (0: none)",
    )
    parser.add_argument("--shield", action="store_true", help="run the judges in a heavily weighted cpu cgroup")
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", metavar="SANDBOX", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.runs, args.n, args.sessions)))
        return
    if os.geteuid() != 0:
        raise SystemExit("run as root: slot uids and cgroups need it")
    args.n = iterations_for(args.work)
    variants = {"after": str(ROOT)}
    load = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory(prefix="judge-baseline-") as old,
        host_load(args.host_load) as load_line,
        shielded(args.shield) as shield,
    ):
        if args.baseline:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "judging", "cli"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
            variants = {"before": old, **variants}
        results = {
            (variant, sandbox): child(sandbox, args, pythonpath)
            for sandbox in PATHS
            for variant, pythonpath in variants.items()
        }
    print(
        f"the honest program (~{args.work} s of CPU) alone and beside a saboteur of {args.sessions} sessions, "
        f"{args.runs} pairs each, 2 slots, 1 s timeout ({os.cpu_count()} cores, load {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; {load_line}; {shield})"
    )
    for (variant, sandbox), result in results.items():
        print(f"{variant:<7} {sandbox:<11} {summary(result)}")
        print(f"{'':<19} {result['cpu']}")


if __name__ == "__main__":
    main()
