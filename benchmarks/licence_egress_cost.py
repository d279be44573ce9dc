"""What licence-only egress costs per q execution, measured with STAND-INS (no kdb+ here).

Judges one q test N times, one execution at a time, under four settings:

- fresh netns: tests/fake_q/q (a stand-in that contacts nothing) with ``q_licence_hosts="none"``: bwrap
  makes a new network namespace per execution (today's sandbox);
- slot netns: the same stand-in with the proxy on, so each execution enters its slot's kept namespace
  (``nsenter --net``) instead: the sandbox cost of egress when q contacts nothing;
- licence, none: tests/fake_q/licensed_q without a kc.lic (contacts nothing), fresh namespace;
- licence via proxy: licensed_q with kc.lic, reaching the loopback licence-server stand-in through the
  proxy on every start (connect, CONNECT, one licence line and answer): the whole per-execution cost.

    python benchmarks/licence_egress_cost.py [--runs 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from licence_stand_ins import LoopbackService  # noqa: E402
from rewards import Judge  # noqa: E402

TEST = [{"test_code": '-1 "6";', "expected_output": "6"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    server = LoopbackService()
    unlicensed, licensed_home = tempfile.mkdtemp(prefix="licence-bench-"), tempfile.mkdtemp(prefix="licence-bench-")
    for folder in (unlicensed, licensed_home):
        os.chmod(folder, 0o755)
    Path(licensed_home, "kc.lic").write_text(server.address + "\n")
    plain, licensed = str(ROOT / "tests/fake_q/q"), str(ROOT / "tests/fake_q/licensed_q")
    settings = [("fresh netns (q contacts nothing, none)", plain, "none", unlicensed),
                ("slot netns (q contacts nothing, proxy on)", plain, server.address, unlicensed),
                ("licensed stand-in, no kc.lic, none", licensed, "none", unlicensed),
                ("licensed stand-in via proxy to licence server", licensed, server.address, licensed_home)]
    judges = []
    for _, binary, hosts, home in settings:
        os.environ.update(QHOME=home, QLIC=home)  # read when the judge first builds its q runner
        judges.append(Judge(timeout=5.0, workers=1, q_binary=binary, q_licence_hosts=hosts))
        judges[-1].preflight("q")
    times: list[list[float]] = [[] for _ in settings]
    for _ in range(args.runs):  # interleaved, so load from elsewhere on the machine hits every setting alike
        for judge, spent in zip(judges, times):
            start = time.perf_counter()
            status = judge.run("solve:{6}", TEST, "q").status
            spent.append((time.perf_counter() - start) * 1000)
            if status != "passed":
                raise SystemExit(f"{judge.isolation}: {status}")
    for (name, *_), spent, judge in zip(settings, times, judges):
        print(f"{name:48s} median {statistics.median(spent):6.1f} ms  mean {statistics.fmean(spent):6.1f} ms  "
              f"p90 {statistics.quantiles(spent, n=10)[-1]:6.1f} ms  ({args.runs} runs)")
        judge.close()
    print(f"licence server connections: {server.connections}")
    server.close()


if __name__ == "__main__":
    main()
