"""How many bits a second one judged test passes to the test judged beside it through CPU time.

The sender, a test in one slot, spins through the windows of a shared schedule whose bit is 1 and sleeps through
those whose bit is 0 (windows of ``--window`` seconds counted on the wall clock both tests read). The receiver, the
test submitted with it in the judge's other slot, spins through every window and counts how many loop turns it got
in each: where the sender's spinning takes CPU from it, the count drops. Its guess for a window is 1 where its count
is below the median of its counts. The share of bits read right over ``--rounds`` pairs gives the channel's capacity
estimate ``(1 - H(p)) / window`` in bits a second (0 when p is 0.5).

By default ``--host_load 2`` busy processes run beside the judges, standing for the trainer's CPU work (the load
users have: on a quiet machine the figure differs). ``--baseline REV`` also times the judge at git revision REV,
extracted with ``git archive`` into a temporary folder, side by side in the same run. Needs root and bubblewrap.

    python benchmarks/cpu_timing_channel.py [--rounds 8] [--window 0.3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
from saboteur_cpu import host_load, test  # noqa: E402  (beside this file)

PATHS = ("bwrap", "bwrap-cold")
SECONDS = 4.5  # of windows a round; the judge's timeout leaves room for start-up

SCHEDULE = r"""
import math, time
window, bits = {window}, {bits!r}
start = time.time()
first = math.ceil((start + 0.05) / window)
end = start + {seconds}
"""

SENDER = (
    SCHEDULE
    + r"""
k = first
while (k + 1) * window <= end:
    while time.time() < k * window:
        pass
    if bits[k % len(bits)] == "1":
        stop = (k + 1) * window
        while time.time() < stop:
            pass
    else:
        time.sleep(max(0.0, (k + 1) * window - time.time()))
    k += 1
print("sent")
"""
)

RECEIVER = (
    SCHEDULE
    + r"""
counts = []
k = first
while time.time() < k * window:
    pass
while (k + 1) * window <= end:
    stop, turns = (k + 1) * window, 0
    while time.time() < stop:
        turns += 1
    counts.append((k, turns))
    k += 1
print(" ".join(f"{{k}}:{{turns}}" for k, turns in counts))
"""
)


def entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def decoded(heard: str, bits: str) -> tuple[int, int]:
    """Bits read right and bits read, from the receiver's ``window:count`` pairs."""
    pairs = [tuple(map(int, pair.split(":"))) for pair in heard.split()]
    if not pairs:
        return 0, 0
    median = sorted(turns for _, turns in pairs)[len(pairs) // 2]
    right = sum((turns < median) == (bits[k % len(bits)] == "1") for k, turns in pairs)
    return right, len(pairs)


def measure(sandbox: str, rounds: int, window: float, seed: int) -> dict:
    from judging import Judge

    rng = random.Random(seed)
    right = read = 0
    with Judge(timeout=SECONDS + 2.0, workers=2, sandbox=sandbox) as judge:
        if sandbox == "bwrap" and not judge.warm:
            raise SystemExit(f"warm workers did not start: {judge.isolation}")
        for _ in range(rounds):
            bits = "".join(rng.choice("01") for _ in range(64))
            fill = {"window": window, "bits": bits, "seconds": SECONDS}
            said, heard = judge.run_many(
                [
                    ("", [test(SENDER.format(**fill), "sent")], "python"),
                    ("", [test(RECEIVER.format(**fill), "")], "python"),
                ]
            )
            got, of = decoded(heard.tests[0].stdout, bits)
            right, read = right + got, read + of
        isolation = judge.isolation
    return {
        "right": right,
        "read": read,
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
            "--rounds",
            str(args.rounds),
            "--window",
            str(args.window),
            "--seed",
            str(args.seed),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=pythonpath,
    )
    if done.returncode != 0:
        raise SystemExit(f"{sandbox} with {pythonpath} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="sender-receiver pairs per path (default 8)")
    parser.add_argument("--window", type=float, default=0.3, help="seconds a bit (default 0.3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--host_load",
        type=int,
        default=2,
        help="busy processes beside the judge, standing for the trainer's CPU work (0: none)",
    )
    parser.add_argument("--baseline", help="a git revision to measure as 'before' (e.g. main)")
    parser.add_argument("--child", metavar="SANDBOX", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.rounds, args.window, args.seed)))
        return
    if os.geteuid() != 0:
        raise SystemExit("run as root: slot uids and cgroups need it")
    variants = {"after": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="judge-baseline-") as old, host_load(args.host_load) as load_line:
        if args.baseline:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "judging", "cli"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
            variants = {"before": old, **variants}
        load = os.getloadavg()[0]
        results = {
            (variant, sandbox): child(sandbox, args, pythonpath)
            for sandbox in PATHS
            for variant, pythonpath in variants.items()
        }
    print(
        f"a sender spinning or sleeping through {args.window} s windows beside a receiver counting its loop turns, "
        f"{args.rounds} pairs each, 2 slots ({os.cpu_count()} cores, load {load:.1f} at the start; {load_line})"
    )
    for (variant, sandbox), result in results.items():
        share = result["right"] / max(result["read"], 1)
        print(
            f"{variant:<7} {sandbox:<11} {share:6.1%} of {result['read']} bits read right: about "
            f"{(1 - entropy(share)) / args.window:.2f} bits a second"
        )
        print(f"{'':<19} {result['cpu']}")


if __name__ == "__main__":
    main()
