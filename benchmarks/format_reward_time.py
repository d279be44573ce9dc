"""Seconds the format reward and code extraction take on one adversarial completion, 64 KB to 1 MB.

    python benchmarks/format_reward_time.py [--sizes 64 128 256 512 1024] [--give_up 5]

Both run in the trainer's own process on whatever the policy writes, so their time must grow linearly with the
completion. For each input family and size (KB) it prints the seconds of the format reward (the slower of
reasoning and answer mode) and of `extract_code`, each the best of 5 runs, then the ratio of the largest size's
time to the smallest's (linear: about the size ratio, 16 for 1 MB / 64 KB, though times under a millisecond are
noisy on a loaded machine; quadratic: its square, 256). A family whose time passes `--give_up` seconds stops
growing (its remaining sizes print as skipped), so a quadratic build still finishes.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # run from a checkout (PYTHONPATH still wins)

from rewards.extract import extract_code  # noqa: E402
from rewards.reward_funcs import format_score  # noqa: E402

FAMILIES = {
    # the input the issue found: each `</reasoning>` restarted a search to the end
    "repeated closing tags": lambda n: "<reasoning>" + "</reasoning><answer></answer>x" * (n // 29),
    "repeated opening tags": lambda n: "<reasoning><answer>" * (n // 19),
    "unclosed fences": lambda n: "<reasoning>r</reasoning><answer>" + "```python\nx = 1\n" * (n // 17),
    "well formed, long": lambda n: (
        "<reasoning>"
        + "think " * (n // 12)
        + "</reasoning><answer>```python\n"
        + "x = 1\n" * (n // 12)
        + "```</answer>"
    ),
}


CALLS = {
    "format reward (both modes, the slower)": (
        lambda text: format_score(text, "python", True),
        lambda text: format_score(text, "python", False),
    ),
    "extract_code (the judged code, dedented)": (lambda text: extract_code(text, "python"),),
}


def seconds(calls, text: str, repeats: int = 5) -> float:
    """The slowest of ``calls`` on one completion, each the best of ``repeats`` runs."""
    return max(min(_timed(call, text) for _ in range(repeats)) for call in calls)


def _timed(call, text: str) -> float:
    start = time.perf_counter()
    call(text)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024], help="KB")
    parser.add_argument("--give_up", type=float, default=5.0, help="seconds after which a family stops growing")
    args = parser.parse_args()
    for title, calls in CALLS.items():
        print(f"{title}: seconds")
        print(f"{'input':24}" + "".join(f"{size:>9} KB" for size in args.sizes) + f"{'ratio':>9}")
        for name, make in FAMILIES.items():
            times = []
            for size in args.sizes:
                if times and times[-1] > args.give_up:
                    break
                times.append(seconds(calls, make(size * 1024)))
            cells = [f"{t:11.4f}s" for t in times] + [f"{'skipped':>12}"] * (len(args.sizes) - len(times))
            ratio = f"{times[-1] / max(times[0], 1e-9):9.1f}" if len(times) == len(args.sizes) else f"{'-':>9}"
            print(f"{name:24}" + "".join(cells) + ratio)


if __name__ == "__main__":
    main()
