"""How many bits one judged test gets across to another running at the same time through /proc/loadavg.

A sender holds 12 threads in the time slots of its 1 bits and none in its 0 bits; a receiver, judged in the same
batch on the other slot, samples the thread count in /proc/loadavg (its 4th field, "running/total") every 10 ms
and reports its mean per 100 ms slot of the wall clock (shared by every test). The sender's slots start at the first
whole second after it starts; the receiver's means are decoded here, on the host, against the slots the sender
reports: the best any receiver synchronised with the sender could do, so an upper bound on what the channel carries. A bit is read
as 1 when its slot's mean thread count is above the median of all slots.

Prints, per path (warm workers and cold), the share of bits read right over all rounds and the channel's capacity
estimate n * (1 - H(p)) in bits per round (0 when p is 0.5, all of n when p is 1).

    python benchmarks/proc_channel.py [--bits 32] [--rounds 3]
"""

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judging import Judge, Test  # noqa: E402

SLOT = 0.1

SENDER = r"""
import json, threading, time
bits = {bits}
t0 = int(time.time()) + 1.0
for index, bit in enumerate(bits):
    start = t0 + index * {slot}
    time.sleep(max(0.0, start - time.time()))
    if bit:
        stop = threading.Event()
        threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(12)]
        for thread in threads:
            thread.start()
        time.sleep(max(0.0, start + {slot} - time.time()))
        stop.set()
        for thread in threads:
            thread.join()
print(json.dumps({{'t0': t0}}))
"""

RECEIVER = r"""
import json, time
slots = {{}}
end = time.time() + {seconds}
while time.time() < end:
    with open('/proc/loadavg') as file:
        total = int(file.read().split()[3].split('/')[1])
    moment = time.time()
    if 0.02 <= moment % {slot} < {slot} - 0.01:  # away from the slot's edges
        slots.setdefault(int(moment // {slot}), []).append(total)
    time.sleep(0.01)
print(json.dumps({{key: sum(values) / len(values) for key, values in slots.items()}}))
"""


def entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def decode(slots: dict, t0: float, count: int) -> list[int]:
    """The receiver's mean thread count per slot (keyed by the slot's number since the epoch) read as bits."""
    first = round(t0 / SLOT)
    means = [slots.get(str(first + index), 0.0) for index in range(count)]
    middle = statistics.median(means)
    return [int(mean > middle) for mean in means]


def measure(sandbox: str, bits: int, rounds: int, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    right = total = 0
    with Judge(timeout=bits * SLOT + 6.0, workers=2, sandbox=sandbox) as judge:
        for _ in range(rounds):
            sent = [rng.randint(0, 1) for _ in range(bits)]
            sender = SENDER.format(bits=sent, slot=SLOT)
            receiver = RECEIVER.format(seconds=bits * SLOT + 2.5, slot=SLOT)
            heard, said = judge.run_many([("", [Test(receiver, "")], "python"), ("", [Test(sender, "")], "python")])
            samples, t0 = json.loads(heard.tests[0].stdout), json.loads(said.tests[0].stdout)["t0"]
            got = decode(samples, t0, bits)
            right += sum(a == b for a, b in zip(sent, got))
            total += bits
    share = right / total
    return share, bits * (1 - entropy(share))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=32, help="bits per round (default 32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per path (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for sandbox in ("bwrap", "bwrap-cold"):
        share, capacity = measure(sandbox, args.bits, args.rounds, args.seed)
        print(
            f"{sandbox:10s} {share:6.1%} of {args.bits * args.rounds} bits read right; "
            f"capacity about {capacity:.1f} of {args.bits} bits per round"
        )


if __name__ == "__main__":
    main()
