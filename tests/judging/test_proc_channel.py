"""Tests judged at the same time share one machine: any machine-wide counter that judged code can read is a channel
between them: a sender holding threads in time slots would move /proc/loadavg's thread count, and a receiver could
read about 9 bits a second from it, 93-100% right, on both paths, if that file were the host's.

The property: during a batch in which a sender busies every machine-wide counter it can move (threads, processes,
open files, memory, disk, pipes; ptys and AIO events, which judged code may not take), nothing a concurrent receiver
can read under /proc, nor the load, process count and free memory that ``sysinfo()`` returns (refused for Python:
judging/seccomp.py), changes, apart from the files whose every read is fresh randomness. Per-process and
per-namespace views (/proc/self, /proc/<pid>, /proc/net, /proc/sysvipc) are the test's own and are not walked. Both
paths: warm workers (``bwrap``) and cold (``bwrap-cold``).
"""

import json
import os

import pytest

from judging import Judge, Test

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the bwrap sandbox with its namespaces needs root here")

# Every read is new randomness, whatever any other test does: carries nothing.
FRESH_RANDOM = {"/proc/sys/kernel/random/uuid"}

RECEIVER = r"""
import ctypes, json, os, time
PRIVATE = {'self', 'thread-self', 'net', 'sysvipc'}
libc = ctypes.CDLL(None, use_errno=True)
def counters():
    # struct sysinfo: uptime, loads[3], totalram, freeram, sharedram, bufferram, totalswap, freeswap, procs, ...
    info = (ctypes.c_long * 16)()
    if libc.sysinfo(info) != 0:
        return ('refused', ctypes.get_errno())
    return tuple(info[1:4]), tuple(info[5:8]), info[10] & 0xFFFF
def snapshot():
    seen = {'sysinfo()': repr(counters()).encode()}
    for root, folders, files in os.walk('/proc'):
        if root == '/proc':
            folders[:] = [name for name in folders if not name.isdigit() and name not in PRIVATE]
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, 'rb') as file:
                    seen[path] = file.read(1 << 16)
            except OSError:
                pass
    return seen
start = time.time()
first = snapshot()
changed = set()
while time.time() - start < 1.5:
    time.sleep(0.1)
    changed |= {path for path, content in snapshot().items() if first.get(path, content) != content}
print(json.dumps({'start': start, 'end': time.time(), 'read': len(first), 'changed': sorted(changed)}))
"""

SENDER = r"""
import ctypes, json, os, tempfile, threading, time
start = time.time()
stop = threading.Event()
threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(12)]
for thread in threads:
    thread.start()
files = [open('/dev/null') for _ in range(30)]
pipes = [os.pipe() for _ in range(10)]
ptys = []
for _ in range(8):  # machine-wide: /proc/sys/kernel/pty/nr counts every sandbox's
    try:
        ptys.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
    except OSError:
        break
events = ctypes.c_ulong(0)
ctypes.CDLL(None).syscall(206, 512, ctypes.byref(events))  # io_setup: machine-wide AIO events
memory = bytearray(64 << 20)
for index in range(0, len(memory), 4096):
    memory[index] = 1
with tempfile.NamedTemporaryFile(dir='/tmp') as scratch:
    scratch.write(os.urandom(8 << 20))
    scratch.flush()
    os.fsync(scratch.fileno())
    while time.time() - start < 1.5:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        sum(range(200000))
stop.set()
print(json.dumps({'start': start, 'end': time.time()}))
"""


@pytest.fixture(scope="module", params=["bwrap", "bwrap-cold"])
def judge(request):
    with Judge(timeout=10.0, workers=2, sandbox=request.param) as judge:
        if request.param == "bwrap":
            assert judge.warm, judge.isolation
        yield judge


def test_nothing_under_proc_carries_a_concurrent_tests_activity(judge):
    receiver, sender = judge.run_many([("", [Test(RECEIVER, "")], "python"), ("", [Test(SENDER, "")], "python")])
    for judgement in (receiver, sender):
        assert judgement.tests[0].status == "failed", judgement.tests[0]  # ran to the end; printed a report
    heard, said = json.loads(receiver.tests[0].stdout), json.loads(sender.tests[0].stdout)
    assert heard["start"] < said["end"] and said["start"] < heard["end"], "the two tests did not run side by side"
    assert heard["read"] > 20, f"the receiver read only {heard['read']} files under /proc"
    moving = sorted(set(heard["changed"]) - FRESH_RANDOM)
    assert not moving, f"machine-wide /proc files a concurrent test can read and move: {moving}"
