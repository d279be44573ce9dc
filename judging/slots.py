"""The judge's parallel slots: each one an unprivileged uid (when the judge is root) and that uid's cgroup, handed out
one test at a time from a queue, plus the judge's folder on the host.

Slot uids are SLOT_UID_BASE + n. 2e9 lies outside every range that systemd and shadow hand out (systemd's
UIDS-GIDS.md): users up to 60000, homed 60001-60513, DynamicUser 61184-65519, nobody 65534, /etc/subuid ranges from
100000 in 65536-uid blocks, nspawn containers 524288-1879048191, the "foreign" range from 2147352576, and it stays
below 2^31 (tools that read uids as signed). JUDGE_SLOT_UID_BASE overrides it; uids or gids present in the user
database are skipped. A uid is claimed with an exclusive lock on a file in a root-only folder, so several trainer
processes on one machine (one per GPU) never share a uid.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import queue
import stat
import tempfile
import weakref
from pathlib import Path

from cli import UsageError
from judging import env_vars
from judging.cgroups import Cgroups
from judging.policy import Limits
from judging.scratch import remove_tree

SLOT_UID_BASE = 2_000_000_000
SLOT_UID_COUNT = 1000
# Fixed, root-only: every trainer process on the machine must see the same locks whatever its TMPDIR.
SLOT_LOCK_DIR = Path("/run/lock/judge-slot-uids")


class SandboxUnavailable(UsageError):
    """No isolation level that satisfies the request works on this host."""


def slot_uid_base() -> int:
    text = os.environ.get(env_vars.SLOT_UID_BASE)
    if text is None:
        return SLOT_UID_BASE
    if not text.isdigit() or not 65536 <= int(text) <= (1 << 31) - SLOT_UID_COUNT:
        raise SandboxUnavailable(
            f"{env_vars.SLOT_UID_BASE}={text!r} must be a whole number from 65536 to "
            f"{(1 << 31) - SLOT_UID_COUNT}; unset it to use {SLOT_UID_BASE}"
        )
    return int(text)


def cpu_pins(uids: list[int]) -> dict[int, int]:
    """The CPU each slot uid's cgroup keeps its processes on (judging/cgroups/pinning.py): this judge's slots on CPUs
    next to each other, taken round the CPUs this process may run on, so no two of its own slots share one. They
    start after the slots of the ranks before it (``LOCAL_RANK``, as accelerate sets it, times its slot count), so
    judges of several ranks use different CPUs while they have no more slots than CPUs between them; without a
    rank, at its first uid's number among the slot uids. None (no pins) where this judge alone has more slots than
    CPUs: the scheduler then balances them."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not uids or not allowed or len(uids) > len(allowed):
        return {}
    rank = os.environ.get("LOCAL_RANK", "")
    first = int(rank) * len(uids) if rank.isdigit() else min(uids) - slot_uid_base()
    return {uid: allowed[(first + index) % len(allowed)] for index, uid in enumerate(sorted(uids))}


def blocked_for_others(path: str) -> str | None:
    """Why a uid that owns nothing on the host (a slot uid) cannot execute (a file) or cross (a folder)
    ``path``, or None if it can."""
    target = Path(os.path.realpath(path))
    for folder in reversed(target.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            return f"{folder} is mode {stat.S_IMODE(mode):04o}"
    mode = target.stat().st_mode
    if not mode & stat.S_IXOTH:
        return f"{target} is mode {stat.S_IMODE(mode):04o}"
    return None


def _uid_is_assigned(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


class SlotUids:
    """Unprivileged uids claimed for this process's worker slots, each locked until ``release``."""

    def __init__(self, count: int):
        SLOT_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = SLOT_LOCK_DIR.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077:
            raise SandboxUnavailable(f"{SLOT_LOCK_DIR} must be a folder owned by root with mode 0700; remove it")
        base = slot_uid_base()
        self._locks: list[int] = []
        self.uids: list[int] = []
        for uid in range(base, base + SLOT_UID_COUNT):
            if len(self.uids) == count:
                break
            if _uid_is_assigned(uid):
                continue
            fd = os.open(SLOT_LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._locks.append(fd)
            self.uids.append(uid)
        if len(self.uids) < count:
            self.release()
            raise SandboxUnavailable(f"fewer than {count} free sandbox uids in {base}-{base + SLOT_UID_COUNT - 1}")

    def release(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()


class Slots:
    """The judge's parallel slots: a queue of free slot uids (None each when not root), their cgroups, and the
    judge's folder. A judge that is never closed still removes its folder and cgroups and frees its uids at exit.
    """

    def __init__(self, workers: int, limits: Limits):
        self.workers = workers
        self.uids = SlotUids(workers) if os.geteuid() == 0 else None
        # Last freed, first taken: run one at a time (the set-up's probes, the preflight), tests reuse the slot whose
        # warm worker is already up instead of starting one per slot.
        self.free: queue.Queue = queue.LifoQueue()
        for uid in self.uids.uids if self.uids else [None] * workers:
            self.free.put(uid)
        self.base = tempfile.mkdtemp(prefix="judge-")
        uids = self.uids.uids if self.uids else []
        pins = cpu_pins(uids)
        self.cgroups = Cgroups(uids, limits.memory_mb << 20, limits.processes, pins)
        # A slot's warm Python worker (judging/warm.py) lives in a cgroup of its own: a cold test of the slot (q's)
        # then settles when its own processes are gone, not when the idle worker is.
        self.warm_cgroups = Cgroups(uids, limits.memory_mb << 20, limits.processes, pins)
        self.close = weakref.finalize(self, _release, self.base, self.uids, self.cgroups, self.warm_cgroups)
        # Slot uids must cross it to reach their own scratch folders inside (unshare and rlimits levels).
        os.chmod(self.base, 0o711)

    def run_as_root(self) -> None:
        """Give the slot uids (and so the cgroups) back: judged code then runs as root (explicit rlimits only)."""
        self.uids.release()
        self.uids = None
        for cgroups in (self.cgroups, self.warm_cgroups):
            cgroups.give_up("judged code runs as root, which may leave any cgroup")
        self.free = queue.LifoQueue()
        for _ in range(self.workers):
            self.free.put(None)


def _release(base: str, slot_uids: SlotUids | None, *cgroups: Cgroups) -> None:
    for each in cgroups:
        each.close()
    if slot_uids:
        slot_uids.release()
    remove_tree(base)
