"""What licence-only egress costs per q execution, measured with STAND-INS (no kdb+ here).

Judges one q test N times, one execution at a time, under four settings:

- fresh netns: tests/helpers/fake_q/q (a stand-in that contacts nothing) with ``q_licence_hosts="none"``: bwrap
  makes a new network namespace per execution (today's sandbox);
- slot netns: the same stand-in with the proxy on, so each execution enters its slot's kept namespace
  (``nsenter --net``) instead: the sandbox cost of egress when q contacts nothing;
- licence, none: tests/helpers/fake_q/licensed_q without a kc.lic (contacts nothing), fresh namespace;
- licence via proxy: licensed_q with kc.lic, reaching the loopback licence-server stand-in through the
  proxy on every start (connect, CONNECT, one licence line and answer): the whole per-execution cost.

Then the proxy alone, without sandboxes: one licence exchange (connect, one line, the answer) made directly
to the stand-in server, against the same made from a slot namespace through the proxy (plus CONNECT).

    python benchmarks/licence_egress_cost.py [--runs 200]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)
sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # the licence stand-ins live beside the tests

from licence_stand_ins import LoopbackService  # noqa: E402
from judging import Judge, Test  # noqa: E402
from judging.licence_proxy import PROXY_PORT, LicenceProxy  # noqa: E402

TEST = [Test('-1 "6";', "6")]


def exchange(address: tuple[str, int], connect_to: str | None) -> None:
    """One licence exchange with the stand-in server, through the proxy when ``connect_to`` is set."""
    with socket.create_connection(address, timeout=5) as sock:
        reader = sock.makefile("rb")
        if connect_to:
            sock.sendall(f"CONNECT {connect_to} HTTP/1.1\r\n\r\n".encode())
            while reader.readline() not in (b"\r\n", b""):
                pass
        sock.sendall(b"LICENCE kc.lic\n")
        if reader.readline() != b"GRANTED\n":
            raise SystemExit("the licence stand-in did not answer")


def proxy_alone(server: LoopbackService, runs: int) -> None:
    proxy = LicenceProxy([0], allowed=(("127.0.0.1", server.port),))
    times: dict[str, list[float]] = {"direct": [], "via proxy": []}

    def in_slot_namespace() -> None:  # setns moves only this thread
        if ctypes.CDLL(None, use_errno=True).setns(proxy.netns[0], 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        for _ in range(runs):
            start = time.perf_counter()
            exchange(("127.0.0.1", PROXY_PORT), server.address)
            times["via proxy"].append((time.perf_counter() - start) * 1000)

    for _ in range(runs):
        start = time.perf_counter()
        exchange(("127.0.0.1", server.port), None)
        times["direct"].append((time.perf_counter() - start) * 1000)
    thread = threading.Thread(target=in_slot_namespace)
    thread.start()
    thread.join()
    proxy.close()
    for name, spent in times.items():
        print(
            f"licence exchange {name:31s} median {statistics.median(spent):6.2f} ms  "
            f"mean {statistics.fmean(spent):6.2f} ms  ({runs} runs)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    server = LoopbackService()
    unlicensed, licensed_home = tempfile.mkdtemp(prefix="licence-bench-"), tempfile.mkdtemp(prefix="licence-bench-")
    for folder in (unlicensed, licensed_home):
        os.chmod(folder, 0o755)
    Path(licensed_home, "kc.lic").write_text(server.address + "\n")
    plain, licensed = str(ROOT / "tests/helpers/fake_q/q"), str(ROOT / "tests/helpers/fake_q/licensed_q")
    settings = [
        ("fresh netns (q contacts nothing, none)", plain, "none", unlicensed),
        ("slot netns (q contacts nothing, proxy on)", plain, server.address, unlicensed),
        ("licensed stand-in, no kc.lic, none", licensed, "none", unlicensed),
        ("licensed stand-in via proxy to licence server", licensed, server.address, licensed_home),
    ]
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
        print(
            f"{name:48s} median {statistics.median(spent):6.1f} ms  mean {statistics.fmean(spent):6.1f} ms  "
            f"p90 {statistics.quantiles(spent, n=10)[-1]:6.1f} ms  ({args.runs} runs)"
        )
        judge.close()
    proxy_alone(server, args.runs)
    server.close()


if __name__ == "__main__":
    main()
