"""A memory and pids cgroup per judge slot: one test's processes together, tmpfs, memfd and shared memory pages
included, stay under ``--judge_memory_mb``; past it the kernel's OOM killer picks inside the slot, never the trainer.

RLIMIT_AS bounds one process's address space only: 32 processes may each take the limit, and pages written into
a memfd with ``write()`` count against no address space at all. A cgroup counts every page its processes charge.

The judge's cgroups nest under its own (``/proc/self/cgroup``), so whatever limits and clean-up a scheduler (Slurm,
systemd, a container) applies to the trainer still apply to them. Cgroup v1 (``memory`` and ``pids`` hierarchies,
as on this machine) and v2 (one unified hierarchy, as on most GPU nodes) are both supported; v2 needs a cgroup of
the judge's that may enable controllers for its children (the root, or a delegated one without processes).
``REWARDS_CGROUP_V2_ROOT`` points the v2 code at another hierarchy (a stand-in folder in the tests). Where neither
can be written, ``Cgroups.unavailable`` says why and the judge reports what still bounds memory.

A process joins its slot's cgroup before it starts anything: a ``sh`` writes itself into each ``cgroup.procs``
and then execs the rest; inside bwrap, before the uid drop (``join_inside``), else in front of the command line
(``enter_command``). A ``preexec_fn`` would make ``subprocess`` fork a trainer holding tens of GB, not vfork it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import secrets
import signal
import time
from pathlib import Path

logger = logging.getLogger(__name__)
V1_ROOT = Path("/sys/fs/cgroup")
V2_ROOT_ENV = "REWARDS_CGROUP_V2_ROOT"
PREFIX = "rewards-judge-"
# A judge's folder younger than this may not be locked by its judge yet (``_new_parent``): never taken for stale.
STALE_AFTER = 60.0
# pids.max counts the sandbox's own processes too (bwrap, its init, setpriv, the warm worker) beside the test's.
SANDBOX_PROCESSES = 8
_OOM_KILL = re.compile(rb"^oom_kill (\d+)$", re.MULTILINE)
_JUDGE_FOLDER = re.compile(re.escape(PREFIX) + "[0-9a-f]{16}")  # what _new_parent makes


class SlotCgroup:
    """One slot's cgroup (a folder per hierarchy: v1 memory and pids, or one v2 folder)."""

    def __init__(self, folders: list[Path], events: Path):
        self.folders = folders
        self._events = events
        self._events_fd: int | None = None  # opened on the first read, read again from its start each time

    def enter_command(self, command: list[str]) -> list[str]:
        """``command`` run from inside this cgroup (and every process it starts)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        return _joining(procs) + procs + command

    def join_inside(self) -> tuple[list[str], list[str]]:
        """For bwrap: arguments binding this cgroup's ``cgroup.procs`` files into the sandbox, and the command
        prefix that joins them from inside (as root, before the uid drop) and execs the rest.

        Joining inside keeps bwrap's own processes out: its PID namespace's init outlives bwrap's monitor and is
        reaped by the host's init, whenever that gets to it; counted in pids.max, those zombies would make a
        later test's fork fail."""
        inside = [f"/run/cgroup-{index}" for index in range(len(self.folders))]
        binds = [arg for folder, path in zip(self.folders, inside) for arg in ("--bind", str(folder / "cgroup.procs"),
                                                                                path)]
        return binds, _joining(inside) + inside

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this cgroup since it was made. Read twice a
        test (before and after): the file stays open, and each read from its start is made afresh by the kernel, so
        a read is one system call, not an open, a read and a close."""
        try:
            if self._events_fd is None:
                self._events_fd = os.open(self._events, os.O_RDONLY | os.O_CLOEXEC)
            found = _OOM_KILL.search(os.pread(self._events_fd, 4096, 0))
        except OSError:
            return 0
        return int(found.group(1)) if found else 0

    def close(self) -> None:
        if self._events_fd is not None:
            os.close(self._events_fd)
            self._events_fd = None

    def wait_settled(self, seconds: float = 2.0) -> None:
        """Wait, at most ``seconds``, until no live process is left in this cgroup. A killed PID namespace's
        processes die after bubblewrap does; until then they count against the next test's pids.max (bwrap then
        fails to start it: ``Creating new namespace failed``). Zombies are not waited for: bwrap's init, orphaned
        when bwrap is killed, stays one until the host's init reaps it, which this machine's does only now and
        then (they still count against pids.max, which leaves room for a few)."""
        listed = [folder / "cgroup.procs" for folder in self.folders]
        deadline = time.monotonic() + seconds
        while any(path.read_text().strip() for path in listed) and time.monotonic() < deadline:
            time.sleep(0.002)

    def kill_all(self) -> None:
        for folder in self.folders:
            try:
                pids = (folder / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                if not pid.isdigit() or int(pid) in (0, os.getpid()):  # 0 would be the judge's process group
                    continue
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _joining(procs: list[str]) -> list[str]:
    """A ``sh`` that writes itself into each of the ``procs`` files given as its first arguments, then execs the
    command after them."""
    joins = " && ".join(f'echo 0 > "${index + 1}"' for index in range(len(procs)))
    return ["/bin/sh", "-c", f'{joins} && shift {len(procs)} && exec "$@"', "sh"]


class Cgroups:
    """The judge's cgroups, one per slot key, each holding at most ``memory_bytes`` and ``processes`` tasks.

    ``version`` is ``"v1"`` or ``"v2"``; where neither works, ``slots`` is empty and ``unavailable`` says why.
    """

    def __init__(self, keys: list, memory_bytes: int, processes: int):
        self.version = ""
        self.unavailable = ""
        self.slots: dict = {}
        self._parents: list[Path] = []
        self._held: list[int] = []  # a locked descriptor of each of _parents, held while this judge lives
        if os.geteuid() != 0:
            self.unavailable = "cgroups need the judge to run as root"
            return
        pids_max = processes + SANDBOX_PROCESSES
        try:
            if os.environ.get(V2_ROOT_ENV) or _is_v2(V1_ROOT):
                self.version = "v2"
                self._make_v2(keys, memory_bytes, pids_max)
            else:
                self.version = "v1"
                self._make_v1(keys, memory_bytes, pids_max)
        except OSError as error:
            self.close()
            self.unavailable = f"cgroup {self.version} not writable here ({error.strerror or error}: {error.filename})"
            if self.version == "v2" and error.errno == errno.EBUSY:  # v2's rule: controllers or processes, not both
                self.unavailable += ("; the judge's own cgroup holds processes (the trainer), so it cannot give "
                                     "cgroups below it controllers: run the trainer in the root cgroup")
            self.version = ""
            self.slots = {}

    def _make_v1(self, keys: list, memory_bytes: int, pids_max: int) -> None:
        memory, pids = (self._new_parent(V1_ROOT / kind / _own_v1(kind).lstrip("/")) for kind in ("memory", "pids"))
        for index, key in enumerate(keys):
            folders = [memory / f"slot-{index}", pids / f"slot-{index}"]
            for folder in folders:
                folder.mkdir()
            _write(folders[0] / "memory.limit_in_bytes", memory_bytes)
            _write_if_there(folders[0] / "memory.memsw.limit_in_bytes", memory_bytes)  # no escape into swap
            _write(folders[1] / "pids.max", pids_max)
            self.slots[key] = SlotCgroup(folders, folders[0] / "memory.oom_control")

    def _make_v2(self, keys: list, memory_bytes: int, pids_max: int) -> None:
        root = Path(os.environ.get(V2_ROOT_ENV) or V1_ROOT)
        parent = self._new_parent(root / _own_v2().lstrip("/"))
        _write(parent / "cgroup.subtree_control", "+memory +pids")
        for index, key in enumerate(keys):
            folder = parent / f"slot-{index}"
            folder.mkdir()
            _write(folder / "memory.max", memory_bytes)
            _write_if_there(folder / "memory.swap.max", 0)
            _write(folder / "pids.max", pids_max)
            self.slots[key] = SlotCgroup([folder], folder / "memory.events")

    def _new_parent(self, own: Path) -> Path:
        """A fresh folder for this judge under the process's own cgroup, after removing those of dead judges. A test
        sees its name (/proc/self/cgroup, the cgroup.procs it joins through), so the name is random, with no pid: the
        judge holds a lock on the folder while it lives, which tells a later judge it is not stale."""
        _remove_stale(own)
        parent = own / f"{PREFIX}{secrets.token_hex(8)}"
        parent.mkdir()
        self._parents.append(parent)
        self._held.append(os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        fcntl.flock(self._held[-1], fcntl.LOCK_EX)
        return parent

    def describe(self, memory_mb: int, processes: int) -> str:
        if not self.version:
            return ""
        return (f"memory: a cgroup {self.version} per slot, {memory_mb} MB for all of a test's processes together "
                f"(tmpfs, memfd and shared memory included), at most {processes + SANDBOX_PROCESSES} tasks")

    def give_up(self, why: str) -> None:
        """Close them and make none per slot from now on; ``why`` goes in ``unavailable``."""
        self.close()
        self.slots = {}
        self.unavailable = why

    def close(self) -> None:
        """Kill what is left in the slots and remove the folders; never raises."""
        for slot in self.slots.values():
            slot.kill_all()
            slot.close()
        for parent in self._parents:
            _remove_cgroup(parent)
        for held in self._held:
            os.close(held)
        self._parents, self._held = [], []


def _is_v2(root: Path) -> bool:
    return (root / "cgroup.controllers").exists()


def _own_v1(kind: str) -> str:
    """This process's cgroup in the v1 hierarchy ``kind`` (``/proc/self/cgroup``: ``ID:CONTROLLERS:PATH``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if kind in controllers.split(","):
            return path
    raise FileNotFoundError(2, f"no v1 {kind} hierarchy", f"/sys/fs/cgroup/{kind}")


def _own_v2() -> str:
    if os.environ.get(V2_ROOT_ENV):
        return "/"
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


def _write(path: Path, value) -> None:
    path.write_text(str(value))


def _write_if_there(path: Path, value) -> None:
    if path.exists():
        _write(path, value)


def _remove_stale(own: Path) -> None:
    """Remove the cgroups of judges whose process is gone (killed before it could close): their folder's lock is
    free."""
    try:
        names = [entry.name for entry in os.scandir(own) if entry.is_dir() and _JUDGE_FOLDER.fullmatch(entry.name)]
    except OSError:
        return
    for name in names:
        try:
            folder = os.open(own / name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if time.time() - os.fstat(folder).st_ctime > STALE_AFTER:
                fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
                _remove_cgroup(own / name)
        except OSError:  # locked: its judge is alive
            pass
        finally:
            os.close(folder)


def _remove_cgroup(parent: Path) -> None:
    """rmdir the slot folders, then the parent (a cgroup is removed with rmdir once it holds no process)."""
    deadline = time.monotonic() + 1.0
    delay = 0.001
    while True:
        try:
            for folder in parent.iterdir():
                if folder.is_dir():
                    folder.rmdir()
            parent.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno == errno.ENOTEMPTY:  # a plain folder (a stand-in hierarchy), not a cgroup: left as is
                return
            if time.monotonic() >= deadline:
                logger.warning("cgroup %s left behind: %s", parent, error)
                return
            # The last killed processes are still exiting: usually gone within a few ms (a judge's close waits for
            # this), so wait a little, then longer.
            time.sleep(delay)
            delay = min(2 * delay, 0.02)
