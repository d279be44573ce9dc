"""A cgroup per judge slot, bounding one test's processes together: memory (tmpfs, memfd and shared memory pages
included) under ``--judge_memory_mb``, tasks under ``processes``, and CPU: at most one CPU's time per slot and equal
shares between slots, however many processes or sessions a test makes, each slot kept on a CPU of its own where the
host's cpuset controller allows it (``pins``). Past the memory bound the kernel's OOM killer picks inside the slot,
never the trainer.

RLIMIT_AS bounds one process's address space only: 32 processes may each take the limit, and pages written into
a memfd with ``write()`` count against no address space at all. A cgroup counts every page its processes charge.
Without a CPU bound the scheduler gives each session one share, so a test that forks 30 sessions takes the CPU
from the test beside it, which then times out: under GRPO that pays, because advantages are relative in a group.
The quota alone still let such a test run on the neighbour's CPU in bursts (its group's weight spread over every
CPU it ran on: the neighbour 1.1-1.3x slower on 2 cores); kept on a CPU of its own it cannot.

The judge's cgroups nest under its own (``/proc/self/cgroup``), so whatever limits and clean-up a scheduler (Slurm,
systemd, a container) applies to the trainer still apply to them. Cgroup v1 (``memory``, ``pids`` and ``cpu``
hierarchies, as on this machine) and v2 (one unified hierarchy, as on most GPU nodes) are both supported. Under v2
the judge usually runs in a leaf that its scheduler delegates to it (Slurm's task cgroup, a systemd service with
``Delegate=yes``, a container): a cgroup that holds processes cannot give controllers to children (the "no internal
processes" rule), so the judge moves the processes of its cgroup into a child leaf (``LEAF``), enables the
controllers beside it and makes its slots there; the last judge to close moves them back and removes the leaf.
Judges sharing a cgroup (trainer ranks) do this under a lock on that cgroup's folder. ``REWARDS_CGROUP_V2_ROOT``
points the v2 code at another hierarchy (a stand-in folder in the tests). Where no cgroup can be made,
``Cgroups.unavailable`` says which path and which permission or controller is missing, and the judge reports what
still bounds memory; where the CPU alone cannot be bounded, ``Cgroups.cpu_unavailable`` says why.

A process joins its slot's cgroup before it starts anything: a ``sh`` writes itself into each ``cgroup.procs``
and then execs the rest. A cold test joins before bubblewrap starts (``enter_command``); bubblewrap then gives it a
cgroup namespace rooted at the slot. A warm worker joins inside its sandbox, before the uid drop (``join_inside``:
bubblewrap's PID-namespace init then stays out of the slot), and takes its cgroup namespace with ``unshare`` once
joined: joining from inside a namespace rooted elsewhere is refused where cgroup2 is mounted ``nsdelegate`` (as
systemd mounts it). A ``preexec_fn`` would make ``subprocess`` fork a trainer holding tens of GB, not vfork it.
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
from contextlib import contextmanager
from pathlib import Path

from judging.policy import SCRATCH

logger = logging.getLogger(__name__)
V1_ROOT = Path("/sys/fs/cgroup")
V2_ROOT_ENV = "REWARDS_CGROUP_V2_ROOT"
PREFIX = "rewards-judge-"
# A judge's folder younger than this may not be locked by its judge yet (``_new_parent``): never taken for stale.
STALE_AFTER = 60.0
# Under v2, the child leaf that the processes of the judge's own cgroup move into (see the module's docstring).
LEAF = "rewards-leaf"
REQUIRED = ("memory", "pids")
# pids.max counts the sandbox's own processes too (bwrap, its init, setpriv, the warm worker) beside the test's.
SANDBOX_PROCESSES = 8
# Each slot may use one CPU's time per period (cpu.max, cpu.cfs_quota_us), and slots share equally below that.
# The judge's folder takes the highest weight the kernel allows: a folder's weight is spread over the CPUs its busy
# slots run on, so at a few slots' weight a slot whose neighbour spins kept half its weight, and the trainer's busy
# processes, pushed off the spinner's CPU, took the rest (an honest test 1.4-1.6x slower beside a spinner). At the
# top weight a test keeps its CPU whatever runs beside it; the quota still bounds each slot to one CPU's time, only
# while a test runs.
CPU_PERIOD_US = 100_000
CPU_QUOTA_US = CPU_PERIOD_US
V1_SHARES, V1_SHARES_MAX = 1024, 262144
V2_WEIGHT, V2_WEIGHT_MAX = 100, 10000
_OOM_KILL = re.compile(rb"^oom_kill (\d+)$", re.MULTILINE)
_JUDGE_FOLDER = re.compile(re.escape(PREFIX) + "[0-9a-f]{16}")  # what _new_parent makes


class CgroupUnavailable(Exception):
    """No slot cgroups can be made here; the message names the path and what is missing."""


class SlotCgroup:
    """One slot's cgroup (a folder per hierarchy: v1 memory, pids and cpu, or one v2 folder)."""

    def __init__(self, folders: list[Path], events: Path):
        self.folders = folders
        self._events = events
        self._events_fd: int | None = None  # opened on the first read, read again from its start each time

    def enter_command(self, command: list[str]) -> list[str]:
        """``command`` run from inside this cgroup (and every process it starts)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        return _joining(procs) + procs + command

    def join_inside(self) -> tuple[list[str], list[str]]:
        """For a warm worker's bwrap (started without a cgroup namespace): arguments binding this cgroup's
        ``cgroup.procs`` files into the sandbox, and the command prefix that joins them from inside (as root, before
        the uid drop), unmounts them (the worker's children see the mounts a cold test sees), takes a cgroup
        namespace rooted there and execs the rest.

        Joining inside keeps bwrap's own processes out: its PID namespace's init outlives bwrap's monitor and is
        reaped by the host's init, whenever that gets to it; counted in pids.max, those zombies would make a
        later test's fork fail."""
        # Under the worker's own /scratch, which each child covers with a tmpfs of its own.
        inside = [f"{SCRATCH}/.cgroup-{index}" for index in range(len(self.folders))]
        binds = [arg for folder, path in zip(self.folders, inside) for arg in ("--bind", str(folder / "cgroup.procs"),
                                                                                path)]
        return binds, _joining(inside, unmount=True) + inside + ["unshare", "--cgroup", "--"]

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


def warm_joining(cgroup: SlotCgroup | None) -> tuple[list[str], list[str]]:
    """A warm worker's bwrap arguments and command prefix: join ``cgroup`` inside (``join_inside``), or, without
    one, a cgroup namespace from bwrap."""
    return cgroup.join_inside() if cgroup else (["--unshare-cgroup-try"], [])


def _joining(procs: list[str], unmount: bool = False) -> list[str]:
    """A ``sh`` that writes itself into each of the ``procs`` files given as its first arguments (then, with
    ``unmount``, unmounts them), then execs the command after them."""
    arguments = [f'"${index + 1}"' for index in range(len(procs))]
    steps = [f"echo 0 > {argument}" for argument in arguments]
    if unmount:
        steps.append(f"umount {' '.join(arguments)}")
    return ["/bin/sh", "-c", f'{" && ".join(steps)} && shift {len(procs)} && exec "$@"', "sh"]


class Cgroups:
    """The judge's cgroups, one per slot key, each holding at most ``memory_bytes`` and ``processes`` tasks and,
    where the host's cpu controller can be used, at most one CPU's time.

    ``version`` is ``"v1"`` or ``"v2"``; where neither works, ``slots`` is empty and ``unavailable`` says why.
    ``cpu`` names the knobs that bound each slot's CPU, or is empty and ``cpu_unavailable`` says why.
    """

    def __init__(self, keys: list, memory_bytes: int, processes: int, pins: dict | None = None):
        self.version = ""
        self.unavailable = ""
        self.cpu = ""
        self.cpu_unavailable = ""
        self.pinned = False  # each slot kept on its CPU of ``pins`` (cpuset), where the host's cpuset allows it
        self._pins = pins or {}
        self.slots: dict = {}
        self._parents: list[Path] = []
        self._held: list[int] = []  # a locked descriptor of each of _parents, held while this judge lives
        self._own_v2: Path | None = None  # the v2 cgroup the judge enabled controllers in (released at close)
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
        except (OSError, CgroupUnavailable) as error:
            self.close()
            self.unavailable = f"cgroup {self.version}: {_explain(error)}"
            self.version = ""
            self.cpu = ""
            self.slots = {}

    def _make_v1(self, keys: list, memory_bytes: int, pids_max: int) -> None:
        memory, pids = (self._new_parent(_v1_own(kind)) for kind in ("memory", "pids"))
        cpu = self._v1_cpu(len(keys))
        cpuset = self._v1_cpuset(keys)
        for index, key in enumerate(keys):
            folders = [memory / f"slot-{index}", pids / f"slot-{index}"]
            for folder in folders:
                folder.mkdir()
            _write(folders[0] / "memory.limit_in_bytes", memory_bytes)
            _write_if_there(folders[0] / "memory.memsw.limit_in_bytes", memory_bytes)  # no escape into swap
            _write(folders[1] / "pids.max", pids_max)
            extra = cpu[index:index + 1] + cpuset[index:index + 1]
            self.slots[key] = SlotCgroup(folders + extra, folders[0] / "memory.oom_control")

    def _v1_cpu(self, count: int) -> list[Path]:
        """A folder per slot in the v1 ``cpu`` hierarchy; none where it cannot be used (``cpu_unavailable`` then
        says why: the memory and pids bounds do not depend on it)."""
        parent = None
        try:
            parent = self._new_parent(_v1_own("cpu"))
            _write(parent / "cpu.shares", V1_SHARES_MAX)
            folders = [parent / f"slot-{index}" for index in range(count)]
            for folder in folders:
                folder.mkdir()
                _write(folder / "cpu.shares", V1_SHARES)
                _write(folder / "cpu.cfs_period_us", CPU_PERIOD_US)
                _write(folder / "cpu.cfs_quota_us", CPU_QUOTA_US)
        except (OSError, CgroupUnavailable) as error:
            self.cpu_unavailable = f"cgroup v1: {_explain(error)}"
            if parent is not None:
                self._remove_parent(parent)
            return []
        self.cpu = "cpu.cfs_quota_us, cpu.shares"
        return folders

    def _v1_cpuset(self, keys: list) -> list[Path]:
        """A folder per slot in the v1 ``cpuset`` hierarchy keeping it on its CPU of ``pins``; none where there are
        no pins or the hierarchy cannot be used (the slots then float, bounded by their ``cpu`` folders alone)."""
        if not self._pins:
            return []
        parent = None
        try:
            own = _v1_own("cpuset")
            parent = self._new_parent(own)
            mems = _read(own / "cpuset.effective_mems").strip() if (own / "cpuset.effective_mems").exists() \
                else _read(own / "cpuset.mems").strip()
            _write(parent / "cpuset.cpus", _read(own / "cpuset.cpus").strip())
            _write(parent / "cpuset.mems", mems)
            folders = [parent / f"slot-{index}" for index in range(len(keys))]
            for folder, key in zip(folders, keys):
                folder.mkdir()
                _write(folder / "cpuset.cpus", self._pins[key])
                _write(folder / "cpuset.mems", mems)
        except (OSError, CgroupUnavailable, KeyError) as error:
            logger.info("slots not pinned to CPUs: %s", error)
            if parent is not None:
                self._remove_parent(parent)
            return []
        self.pinned = True
        return folders

    def _make_v2(self, keys: list, memory_bytes: int, pids_max: int) -> None:
        own = _v2_own()
        offered = _v2_offered(own)
        missing = [name for name in REQUIRED if name not in offered]
        if missing:
            raise CgroupUnavailable(
                f"{own} is not given the {' and '.join(missing)} controller{'s' if len(missing) > 1 else ''} "
                f"(its cgroup.controllers: {' '.join(sorted(offered)) or 'none'}): the cgroup above it must "
                f"delegate {'them' if len(missing) > 1 else 'it'} (+{' +'.join(missing)} in "
                f"{own.parent}/cgroup.subtree_control, as Slurm's cgroup plugin and systemd's Delegate=yes do)")
        controllers = [*REQUIRED, *(["cpu"] if "cpu" in offered else []),
                       *(["cpuset"] if "cpuset" in offered and self._pins else [])]
        if "cpu" not in offered:
            self.cpu_unavailable = (f"cgroup v2: {own} is not given the cpu controller (its cgroup.controllers: "
                                    f"{' '.join(sorted(offered))}): +cpu in {own.parent}/cgroup.subtree_control "
                                    f"would give it")
        with _locked(own):
            _enable(own, controllers)
            self._own_v2 = own
            parent = self._new_parent(own)
        _write(parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in controllers))
        if "cpu" in controllers:
            _write(parent / "cpu.weight", V2_WEIGHT_MAX)
        for index, key in enumerate(keys):
            folder = parent / f"slot-{index}"
            folder.mkdir()
            _write(folder / "memory.max", memory_bytes)
            _write_if_there(folder / "memory.swap.max", 0)
            _write(folder / "pids.max", pids_max)
            if "cpu" in controllers:
                _write(folder / "cpu.weight", V2_WEIGHT)
                _write(folder / "cpu.max", f"{CPU_QUOTA_US} {CPU_PERIOD_US}")
            self.slots[key] = SlotCgroup([folder], folder / "memory.events")
        if "cpu" in controllers:
            self.cpu = "cpu.max, cpu.weight"
        if "cpuset" in controllers:
            self.pinned = _pin_v2(parent, keys, self._pins)

    def _remove_parent(self, parent: Path) -> None:
        index = self._parents.index(parent)
        del self._parents[index]
        os.close(self._held.pop(index))
        _remove_cgroup(parent)

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

    def describe_cpu(self) -> str:
        """What bounds a slot's CPU, for the isolation line."""
        if self.cpu:
            pinned = ", each slot kept on a CPU of its own (cpuset)" if self.pinned else ""
            return (f"cpu: a cgroup {self.version} per slot, one CPU's time at most and equal shares between slots"
                    f"{pinned}, however many processes or sessions a test makes ({self.cpu})")
        why = self.cpu_unavailable or ("no cgroup per slot, as for memory" if self.unavailable else "no cgroups")
        return (f"cpu: NOT bounded per slot ({why}); a test that makes many processes or sessions takes CPU from "
                f"the tests beside it")

    def give_up(self, why: str) -> None:
        """Close them and make none per slot from now on; ``why`` goes in ``unavailable``."""
        self.close()
        self.slots = {}
        self.cpu = ""
        self.unavailable = why

    def close(self) -> None:
        """Kill what is left in the slots, remove the folders and, if no other judge uses the v2 cgroup this one
        enabled controllers in, give it back as it was; never raises."""
        for slot in self.slots.values():
            slot.kill_all()
            slot.close()
        for parent in self._parents:
            _remove_cgroup(parent)
        for held in self._held:
            os.close(held)
        self._parents, self._held = [], []
        if self._own_v2 is not None:
            own, self._own_v2 = self._own_v2, None
            try:
                with _locked(own):
                    _release(own)
            except OSError as error:
                logger.warning("cgroup %s not given back as it was: %s", own, error)


def _pin_v2(parent: Path, keys: list, pins: dict) -> bool:
    """Keep each slot on its CPU of ``pins`` (``cpuset.cpus``); False, and none pinned, where one is refused (a
    CPU outside the cgroup's own cpuset)."""
    folders = [parent / f"slot-{index}" for index in range(len(keys))]
    try:
        for folder, key in zip(folders, keys):
            _write(folder / "cpuset.cpus", pins[key])
    except (OSError, KeyError) as error:
        logger.info("slots not pinned to CPUs: %s", error)
        for folder in folders:
            try:
                _write(folder / "cpuset.cpus", "")
            except OSError:
                pass
        return False
    return True


def _is_v2(root: Path) -> bool:
    return (root / "cgroup.controllers").exists()


def _v1_own(kind: str) -> Path:
    """This process's cgroup folder in the v1 hierarchy ``kind`` (``/proc/self/cgroup``: ``ID:CONTROLLERS:PATH``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if kind in controllers.split(","):
            return V1_ROOT / kind / path.lstrip("/")
    raise CgroupUnavailable(f"no v1 {kind} hierarchy is mounted (/proc/self/cgroup names none)")


def _v2_own() -> Path:
    """This process's cgroup folder in the v2 hierarchy (``0::PATH`` in ``/proc/self/cgroup``), or the stand-in."""
    if os.environ.get(V2_ROOT_ENV):
        return Path(os.environ[V2_ROOT_ENV])
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            own = V1_ROOT / line[3:].lstrip("/")
            if own.name == LEAF:  # moved there by a judge of this process or another: the cgroup is its parent
                own = own.parent
            if not own.is_dir():
                raise CgroupUnavailable(f"this process's cgroup {line[3:]} is not under {V1_ROOT} (a container "
                                        f"without a cgroup namespace of its own?)")
            return own
    return V1_ROOT


def _v2_offered(own: Path) -> set[str]:
    """The controllers ``own``'s parent gives it (all of them in a stand-in hierarchy that does not say)."""
    listed = own / "cgroup.controllers"
    if not listed.exists() and os.environ.get(V2_ROOT_ENV):
        return {*REQUIRED, "cpu"}
    return set(listed.read_text().split())


@contextmanager
def _locked(own: Path):
    """An exclusive lock on the cgroup folder ``own``, shared by every judge (and trainer rank) in it."""
    fd = os.open(own, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _enable(own: Path, controllers: list[str]) -> None:
    """Enable ``controllers`` for the children of ``own`` (the lock held). v2 refuses that (EBUSY) while ``own``
    holds processes, except in the root cgroup: they then move into the child ``LEAF`` first. A process forked
    meanwhile lands in ``own`` again, so this tries until nothing is left to move."""
    subtree = own / "cgroup.subtree_control"
    wanted = [name for name in controllers if name not in _read(subtree).split()]
    for attempt in range(100):
        if not wanted:
            return
        try:
            _write(subtree, " ".join(f"+{name}" for name in wanted))
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
        _move_processes(own, own / LEAF)
        if attempt:
            time.sleep(0.001 * min(attempt, 20))
    left = _read(own / "cgroup.procs").split()
    raise CgroupUnavailable(f"{own} keeps holding processes ({' '.join(left[:5])}) that cannot be moved into "
                            f"{own / LEAF}, so it cannot give controllers to the judge's slots")


def _move_processes(source: Path, target: Path) -> None:
    target.mkdir(exist_ok=True)
    for pid in _read(source / "cgroup.procs").split():
        try:
            _write(target / "cgroup.procs", pid)
        except OSError as error:
            if error.errno != errno.ESRCH:  # gone meanwhile
                raise


def _release(own: Path) -> None:
    """If no judge is left in ``own`` and its processes were moved into ``LEAF``: switch its controllers off, move
    them back and remove the leaf (the lock held), so the cgroup is as the scheduler made it."""
    leaf = own / LEAF
    _remove_stale(own)
    if not leaf.is_dir() or any(entry.name.startswith(PREFIX) for entry in os.scandir(own) if entry.is_dir()):
        return
    enabled = _read(own / "cgroup.subtree_control").split()
    if enabled:
        _write(own / "cgroup.subtree_control", " ".join(f"-{name}" for name in enabled))
    for attempt in range(100):
        _move_processes(leaf, own)
        try:
            leaf.rmdir()
            return
        except OSError as error:
            if error.errno != errno.EBUSY:  # EBUSY: a process forked in the leaf meanwhile
                raise
        time.sleep(0.001 * min(attempt + 1, 20))
    logger.warning("cgroup %s left behind: processes keep appearing in it", leaf)


def _explain(error: Exception) -> str:
    """``error`` as the isolation line says it: the path, and the permission or controller that is missing."""
    if isinstance(error, CgroupUnavailable):
        return str(error)
    path = error.filename or "?"
    if error.errno == errno.EROFS:
        return f"{path} is on a read-only cgroup file system (mount it read-write, or delegate a writable subtree)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write {path} ({error.strerror}): the cgroup is not delegated to this user"
    return f"{path}: {error.strerror or error}"


def _read(path: Path) -> str:
    return path.read_text()


def _write(path: Path, value) -> None:
    """Write ``value`` to the cgroup file ``path``; an error names the path (the kernel's errors from ``write``
    have none)."""
    try:
        path.write_text(str(value))
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None


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
