"""The kernel's pools and a uid's charges, from judged code, on both paths (warm workers, ``bwrap``, and a fresh
interpreter per test, ``bwrap-cold``): what one test holds must neither tell another test anything (a channel) nor
leave another test, or the host, without (starvation).

- Machine-wide pools: AIO events (``io_setup`` takes from /proc/sys/fs/aio-max-nr, 65536 here, for every process
  on the machine) and ptys (every devpts instance but the host's shares /proc/sys/kernel/pty/max less its reserve,
  3,072 here; /proc/sys/kernel/pty/nr counts them). Judged code may use neither: AIO is not on the seccomp
  allow-list (judging/seccomp.py) and a test's /dev/pts is an empty read-only folder (judging/sandbox.py), its
  /dev/ptmx leading nowhere; /proc/sys/kernel/pty is emptied (judging/policy.py).
- A uid's charges: SHM_LOCK pages count against the uid's RLIMIT_MEMLOCK and POSIX message queues' bytes against
  its RLIMIT_MSGQUEUE until the IPC namespace holding them is freed, which the kernel defers past the end of its
  last process: the slot's next warm test, forked within a millisecond, would find them charged. Judged code may
  use neither SysV IPC nor POSIX message queues (not on the allow-list).
"""

import ctypes
import json
import os
import secrets
import threading

import pytest

from bwrap_paths import sandbox  # noqa: F401 (fixture)
from judging import Judge, Test

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the bwrap sandbox with its namespaces needs root here"),
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="the call numbers below are x86-64's"),
]

# What a test reads of the pools: the two counters under /proc, the free AIO events (the largest io_setup that
# works, found by halving), and what opening a pty gives. Every `interval` seconds for `seconds`; prints each
# distinct reading once.
POOL_READER = r"""
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def text(path):
    try:
        return open(path).read().strip()
    except OSError as error:
        return errno.errorcode[error.errno]
def free_aio_events():
    low, high = 0, 1 << 17
    while low < high:
        middle = (low + high + 1) // 2
        context = ctypes.c_ulong(0)
        if libc.syscall(206, middle, ctypes.byref(context)) == 0:
            libc.syscall(207, context)
            low = middle
        else:
            if ctypes.get_errno() != errno.EAGAIN:
                return errno.errorcode[ctypes.get_errno()]
            high = middle - 1
    return low
def pty():
    try:
        os.close(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
        return 'opened'
    except OSError as error:
        return errno.errorcode[error.errno]
readings = []
end = time.time() + {seconds}
while time.time() < end:
    reading = [text('/proc/sys/kernel/pty/nr'), text('/proc/sys/fs/aio-nr'), free_aio_events(), pty()]
    if reading not in readings:
        readings.append(reading)
    time.sleep({interval})
print(json.dumps(readings))
"""
# Holds `events` AIO events and `ptys` ptys (in `processes` processes, `ptys` each) for `seconds`: a sender, whose
# amounts spell its message, or a hog that takes all it can.
POOL_HOLDER = r"""
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
held = []
wanted = {events}
while wanted >= 1:
    context = ctypes.c_ulong(0)
    if libc.syscall(206, wanted, ctypes.byref(context)) == 0:
        held.append(wanted)
        if not {take_all}:
            break
    else:
        wanted //= 2
def open_ptys():
    opened = []
    for _ in range({ptys}):
        try:
            opened.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
        except OSError:
            break
    return opened
children = []
for _ in range({processes} - 1):
    child = os.fork()
    if child == 0:
        open_ptys()
        time.sleep({seconds})
        os._exit(0)
    children.append(child)
opened = open_ptys()
time.sleep({seconds})
print(sum(held), len(opened))
"""


def reader(seconds, interval=0.05):
    return POOL_READER.replace("{seconds}", str(seconds)).replace("{interval}", str(interval))


def holder(events, ptys, seconds, processes=1, take_all=False):
    return (
        POOL_HOLDER.replace("{events}", str(events))
        .replace("{ptys}", str(ptys))
        .replace("{seconds}", str(seconds))
        .replace("{processes}", str(processes))
        .replace("{take_all}", str(take_all))
    )


def readings(judgement) -> list:
    test = judgement.tests[0]
    assert test.stderr == "", test.stderr
    return json.loads(test.stdout)


@pytest.fixture(scope="module")
def judge(sandbox):
    with Judge(timeout=10.0, workers=3, sandbox=sandbox) as judge:
        assert judge.warm == (sandbox == "bwrap"), judge.isolation
        yield judge


def test_no_pool_carries_a_concurrent_tests_message(judge):
    """A sender holds a number of AIO events and ptys that spells its message while a receiver, judged at the same
    time on another slot, reads the pools: what it reads must be what it reads alone (0 bits). Checked failing
    before the allow-list and the empty /dev/pts: the receiver read the sender's pty count in
    /proc/sys/kernel/pty/nr, and its AIO events as the free events fell."""
    alone = readings(judge.run("", [Test(reader(0.3), "")], "python"))
    message = secrets.randbelow(40) + 10
    heard, said = judge.run_many(
        [("", [Test(reader(2.0), "")], "python"), ("", [Test(holder(message * 64, message, 2.5), "")], "python")]
    )
    assert said.tests[0].stderr == "", said.tests[0].stderr
    assert len(alone) == 1 and readings(heard) == alone, (alone, readings(heard), said.tests[0].stdout)
    assert alone[0][:2] == ["ENOENT", "ENOENT"], f"kernel-wide pool counters readable from inside: {alone}"
    if judge.warm:
        assert judge.setup.warm.failures == 0, judge.setup.warm.failure


def test_a_test_holding_the_pools_starves_no_one(judge):
    """Two tests take every AIO event and pty they can (3,072 ptys is the pool of every sandbox on the machine;
    65,536 events the machine's) while a third test opens a pty and sets up AIO, and the host sets up AIO: the
    third reads what it reads alone and the host never fails. Checked failing before the allow-list and the empty
    /dev/pts: the host's io_setup failed, and so did the third test's openpty (ENOSPC)."""
    alone = readings(judge.run("", [Test(reader(0.3), "")], "python"))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    host_failures, done = [], threading.Event()

    def host():
        while not done.wait(0.05):
            context = ctypes.c_ulong(0)
            if libc.syscall(206, 1, ctypes.byref(context)) == 0:
                libc.syscall(207, context)
            else:
                host_failures.append(os.strerror(ctypes.get_errno()))

    hog = holder(1 << 16, 60, 3.0, processes=28, take_all=True)
    watcher = threading.Thread(target=host)
    watcher.start()
    try:
        first, second, third = judge.run_many(
            [
                ("", [Test(hog, "")], "python"),
                ("", [Test(hog, "")], "python"),
                ("", [Test("import time\ntime.sleep(1.5)\n" + reader(1.0), "")], "python"),
            ]
        )
    finally:
        done.set()
        watcher.join()
    for hogged in (first, second):
        assert hogged.tests[0].stderr == "", hogged.tests[0].stderr
    assert readings(third) == alone, (alone, readings(third), first.tests[0].stdout, second.tests[0].stdout)
    assert not host_failures, f"the host's io_setup failed {len(host_failures)} times: {host_failures[:3]}"


# Charges a uid keeps: SHM_LOCK pages (against RLIMIT_MEMLOCK) and POSIX message-queue bytes (RLIMIT_MSGQUEUE). The
# sender leaves `pages` locked and a queue of `bytes` per message (10 messages), in its IPC namespace, at its end;
# the reader finds how many pages it can lock and how many queue bytes it can have.
CHARGE_SENDER = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
said = []
segment = libc.syscall(29, 0, {pages} * 4096, 0o1600)  # shmget(IPC_PRIVATE)
said.append('shm ' + ('locked' if segment >= 0 and libc.syscall(31, segment, 11, 0) == 0  # SHM_LOCK
                      else errno.errorcode[ctypes.get_errno()]))
attributes = (ctypes.c_long * 8)(0, 10, {bytes}, 0)
queue = libc.syscall(240, b'left-for-later', 0o102, 0o600, attributes)  # mq_open(O_CREAT | O_RDWR)
said.append('mq ' + ('left' if queue >= 0 else errno.errorcode[ctypes.get_errno()]))
print(*said)
"""
CHARGE_READER = r"""
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def lockable(pages):
    segment = libc.syscall(29, 0, pages * 4096, 0o1600)
    if segment < 0:
        return errno.errorcode[ctypes.get_errno()]
    locked = libc.syscall(31, segment, 11, 0) == 0
    libc.syscall(31, segment, 0, 0)  # IPC_RMID
    return locked
def most(works, high):
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        result = works(middle)
        if not isinstance(result, bool):
            return result
        low, high = (middle, high) if result else (low, middle - 1)
    return low
queues = []
def queue(size, name):
    descriptor = libc.syscall(240, name, 0o302, 0o600, (ctypes.c_long * 8)(0, 10, size, 0))  # O_EXCL too
    if descriptor < 0:
        return errno.errorcode[ctypes.get_errno()] if ctypes.get_errno() != errno.EMFILE else False
    queues.append((descriptor, name))
    return True
def queue_bytes():
    full = 0
    while True:
        result = queue(8192, b'full-%d' % full)
        if result is not True:
            break
        full += 1
    if not isinstance(result, bool):
        return result
    def one_more(size):
        result = queue(size, b'probe')
        if result is True:
            descriptor, name = queues.pop()
            libc.syscall(3, descriptor)
            libc.syscall(241, name)
        return result
    return full * 81920 + 10 * most(one_more, 8192)
reading = [most(lockable, 4096), queue_bytes()]
for descriptor, name in queues:
    libc.syscall(3, descriptor)
    libc.syscall(241, name)
print(json.dumps(reading))
"""


@pytest.fixture(scope="module")
def one_slot(sandbox):
    """A one-slot judge: consecutive tests run on the same slot (and, warm, in the same worker)."""
    with Judge(timeout=5.0, workers=1, sandbox=sandbox) as judge:
        assert judge.warm == (sandbox == "bwrap"), judge.isolation
        yield judge


def test_nothing_charged_to_the_slot_uid_reaches_the_next_test(one_slot):
    """A test leaves SHM_LOCK pages and message-queue bytes charged to its uid; the slot's next test reads how much
    it may lock and queue: the same after any sender as after a quiet test (0 bits). Checked failing before the
    allow-list on the warm path: the next test read the sender's page count exactly (11 bits) and its queue bytes;
    cold, nothing."""

    def after(code):
        said = one_slot.run("", [Test(code, "")], "python").tests[0]
        assert said.stderr == "", said.stderr
        heard = one_slot.run("", [Test(CHARGE_READER, "")], "python").tests[0]
        assert heard.stderr == "", heard.stderr
        return said.stdout.strip(), json.loads(heard.stdout)

    _, quiet = after("pass")
    for _ in range(3):
        pages, size = secrets.randbelow(1500) + 100, secrets.randbelow(7000) + 1000
        said, heard = after(CHARGE_SENDER.replace("{pages}", str(pages)).replace("{bytes}", str(size)))
        assert heard == quiet, f"sent {pages} pages and {size}-byte messages ({said}); read {heard}, quiet {quiet}"
    assert quiet == ["EPERM", "EPERM"], f"judged code may lock shared memory or open message queues: {quiet}"
    if one_slot.warm:
        assert one_slot.setup.warm.failures == 0, one_slot.setup.warm.failure
