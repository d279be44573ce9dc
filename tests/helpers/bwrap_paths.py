"""What the sandbox tests share: a judge on each bwrap path (warm workers, ``bwrap``, and a fresh interpreter per
test, ``bwrap-cold``), the check that no warm worker failed during a test, and helpers to run code and look for
what it left running. Import the fixtures by name into a test module to use them."""

import os
import time
from pathlib import Path

import pytest

from judging import Judge, Test

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["bwrap", "bwrap-cold"])
def sandbox(request):
    return request.param


@pytest.fixture(scope="module")
def judge(sandbox):
    with Judge(timeout=1.0, workers=2, sandbox=sandbox) as judge:
        if sandbox == "bwrap" and os.geteuid() == 0:
            assert judge.warm, f"the warm workers must start here: {judge.isolation}"
        yield judge


@pytest.fixture(autouse=True)
def warm_workers_handle_it_themselves(request):
    """A warm worker that fails has its test rerun cold, which would hide a warm-path hole: none may fail."""
    judge = request.getfixturevalue("judge") if "judge" in request.fixturenames else None
    failures = judge.setup.warm.failures if judge is not None and judge.warm else 0
    yield
    if judge is not None and judge.warm:
        assert judge.setup.warm.failures == failures, f"a warm worker failed: {judge.setup.warm.failure}"


def run(judge, code, expected="unused", timeout=None):
    """Run ``code`` as the test code (after the marker), so what it prints is what the judge compares."""
    return judge.run("", [Test(code, expected)], "python", timeout)


def slot_processes(judge):
    """Processes still owned by the judge's slot uids, or whose command line names a planted marker."""
    uids = set(judge.setup.slots.uids.uids) if judge.setup.slots.uids else set()
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        uid = int(text.split("\nUid:")[1].split()[0])
        if uid in uids:
            found.append(status.parent.name)
    return found


def command_lines():
    """Every process's command line; a process that ends while we read (this machine is shared) is skipped."""
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            yield path.read_bytes()
        except OSError:
            continue


def wait_until_gone(judge, seconds=3.0):
    """The PID namespace's init takes its descendants down asynchronously; give the kernel a moment."""
    deadline = time.monotonic() + seconds
    while slot_processes(judge) and time.monotonic() < deadline:
        time.sleep(0.05)
    return slot_processes(judge)
