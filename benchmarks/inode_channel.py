"""How many bits one judged test leaves for the next test of its slot in the kernel's inode counter.

Pipes and sockets take their inode numbers from one counter the whole machine shares, handed to each CPU in
batches of 1024 (``get_next_ino``): a number's low 10 bits are how many inodes that CPU has given out since its batch
began, and they stay as the last test left them until something else on that CPU makes a pipe or a socket. The
sender, on every CPU it may run on (``sched_setaffinity``), makes and closes pipes until the top ``--bits`` of those
10 bits spell its message (the rest at the middle of their range, room for the judge's own pipes in between); the
receiver, the slot's next test, makes one pipe on each CPU and reads its number. Its guess is the value most CPUs
agree on: the best a receiver without any other knowledge could do, so an upper bound on what the counter carries
from one test to the next (the judge's own pipes and everything else the machine does in between are the noise).

Prints, per path (warm workers and cold), the share of messages and of bits read right and the channel's capacity
estimate n * (1 - H(p)) in bits per test (0 when p is 0.5, all of n when p is 1).

    python benchmarks/inode_channel.py [--bits 4] [--rounds 16]
"""

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judging import Judge, Test  # noqa: E402

SENDER = r"""
import os
message, bits = {message}, {bits}
target = message << (10 - bits) | 1 << (9 - bits)  # the message, then the middle of the bits below it
done = []
for cpu in sorted(os.sched_getaffinity(0)):
    try:
        os.sched_setaffinity(0, {{cpu}})
    except OSError:
        continue
    for _ in range(1100):
        read, write = os.pipe()
        number = os.fstat(read).st_ino
        os.close(read)
        os.close(write)
        if number % 1024 == target:
            done.append(cpu)
            break
print(len(done))
"""

RECEIVER = r"""
import collections, os
bits = {bits}
votes = collections.Counter()
for cpu in sorted(os.sched_getaffinity(0)):
    try:
        os.sched_setaffinity(0, {{cpu}})
    except OSError:
        continue
    read, write = os.pipe()
    votes[os.fstat(read).st_ino % 1024 >> (10 - bits)] += 1
    os.close(read)
    os.close(write)
print(votes.most_common(1)[0][0] if votes else -1)
"""


def entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def measure(sandbox: str, bits: int, rounds: int, seed: int) -> tuple[float, float]:
    """The share of messages and of bits the receiver read right over ``rounds`` sender-receiver pairs."""
    rng = random.Random(seed)
    messages = bits_right = 0
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        for _ in range(rounds):
            sent = rng.randrange(1 << bits)
            said, heard = judge.run_many(
                [
                    (
                        "",
                        [Test(SENDER.format(message=sent, bits=bits), ""), Test(RECEIVER.format(bits=bits), "")],
                        "python",
                    )
                ]
            )[0].tests
            got = int(heard.stdout.strip() or -1)
            messages += got == sent
            bits_right += sum(((got >> bit) & 1) == ((sent >> bit) & 1) for bit in range(bits)) if got >= 0 else 0
    return messages / rounds, bits_right / (rounds * bits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=4, help="bits a message (1 to 9; default 4)")
    parser.add_argument("--rounds", type=int, default=16, help="messages per path (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not 1 <= args.bits <= 9:
        parser.error("--bits must be 1 to 9")
    for sandbox in ("bwrap", "bwrap-cold"):
        messages, share = measure(sandbox, args.bits, args.rounds, args.seed)
        print(
            f"{sandbox:10s} {messages:6.1%} of {args.rounds} messages and {share:6.1%} of their bits read right; "
            f"capacity about {args.bits * (1 - entropy(share)):.1f} of {args.bits} bits a test"
        )


if __name__ == "__main__":
    main()
