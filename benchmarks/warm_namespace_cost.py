"""What the warm path's per-test PID and network namespaces cost, side by side in one run (root only).

Each variant does, per test, what a warm worker does around a program that runs nothing, with the worker's own
functions and constants (judging/worker/isolation.py):

- ``before``: fork a child that enters a mount and IPC namespace (the warm path before the new namespaces);
- ``+net``: that child also enters a fresh network namespace and brings its loopback interface up;
- ``+pid``: the child is pid 1 of a fresh PID namespace, mounts a fresh /proc and forks the program's
  process, which it reaps;
- ``+pid+net``: both. Today's warm path does less: the program's own process is pid 1, with no init and no second
  fork, and shares its slot's network namespace while no test left a socket there (docs/judge.md).

Variants alternate in rounds so load drifts hit them alike. Printed per test, each with its difference from
``before``: wall-clock ms; the CPU ms of the test's own processes (user + system, from their rusage); and the
machine's CPU ms (every core's busy time from /proc/stat: it counts the kernel's deferred network-namespace
teardown, which runs in kernel threads, but also whatever else the machine runs meanwhile).

    python benchmarks/warm_namespace_cost.py --tests 200 --rounds 5
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

# The worker's folder, as the worker itself imports it (judging/worker/main.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "judging" / "worker"))

import isolation  # noqa: E402  (the worker's own functions, run here as root)

VARIANTS = ("before", "+net", "+pid", "+pid+net")
OWN_PID_NAMESPACE = os.open("/proc/self/ns/pid", os.O_RDONLY)


def machine_busy_seconds() -> float:
    """Busy CPU time of every core since boot (user, nice, system, irq, softirq, steal)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child(variant: str) -> None:
    """What the forked child does before the program would run; never returns."""
    flags = isolation.CLONE_NEWNS | isolation.CLONE_NEWIPC
    if "net" in variant:
        flags |= isolation.CLONE_NEWNET
    isolation.check(isolation.UNSHARE(flags), "unshare")
    if "net" in variant:
        isolation.loopback_up()
    mounts = [isolation.mount_call(None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)]
    if "pid" in variant:
        mounts.append(isolation.mount_call("proc", "/proc", "proc", isolation.MS_NOSUID | isolation.MS_NODEV))
    for call, args, what in mounts:
        isolation.check(call(*args), what)
    if "pid" in variant:
        program = os.fork()
        if program == 0:
            os._exit(0)
        os.waitpid(program, 0)
    os._exit(0)


def fork_in_own_pid_namespace() -> int:
    """fork(), the child as pid 1 of a new PID namespace, as the worker's loop forks (judging/worker/loop.py)."""
    isolation.check(isolation.UNSHARE(isolation.CLONE_NEWPID), "unshare pid")
    pid = os.fork()
    if pid != 0:
        isolation.check(isolation.SETNS(OWN_PID_NAMESPACE, isolation.CLONE_NEWPID), "setns pid")
    return pid


def one_test(variant: str) -> None:
    pid = fork_in_own_pid_namespace() if "pid" in variant else os.fork()
    if pid == 0:
        try:
            child(variant)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"{variant}: the child failed (wait status {status})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=200, help="tests per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("warm_namespace_cost.py: namespaces need root; run it as root")
    if args.tests < 1 or args.rounds < 1:
        raise SystemExit("warm_namespace_cost.py: --tests and --rounds must be at least 1")
    totals = {variant: [0.0, 0.0, 0.0] for variant in VARIANTS}  # wall, own CPU, machine CPU
    for _ in range(args.rounds):
        for variant in VARIANTS:
            start, start_own, start_busy = time.perf_counter(), children_cpu_seconds(), machine_busy_seconds()
            for _ in range(args.tests):
                one_test(variant)
            time.sleep(0.2)  # let deferred teardown finish inside this variant's window
            totals[variant][0] += time.perf_counter() - start - 0.2
            totals[variant][1] += children_cpu_seconds() - start_own
            totals[variant][2] += machine_busy_seconds() - start_busy
    count = args.tests * args.rounds
    print(f"{count} tests per variant, load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    print(f"{'variant':10} {'wall ms':>8} {'+ms':>6} {'own CPU ms':>10} {'+ms':>6} {'machine CPU ms':>14} {'+ms':>6}")
    for variant in VARIANTS:
        row = [1000 * value / count for value in totals[variant]]
        extra = [value - 1000 * base / count for value, base in zip(row, totals["before"])]
        print(
            f"{variant:10} {row[0]:8.2f} {extra[0]:+6.2f} {row[1]:10.2f} {extra[1]:+6.2f} {row[2]:14.2f} "
            f"{extra[2]:+6.2f}"
        )


if __name__ == "__main__":
    main()
