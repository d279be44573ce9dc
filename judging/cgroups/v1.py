"""Slot cgroups on cgroup v1: a folder per slot in each of the ``memory``, ``pids``, ``cpu`` and (with pins)
``cpuset`` hierarchies, each under this process's own cgroup there. Only memory and pids are required; the cpu
and cpuset hierarchies add what they can."""

from pathlib import Path

from judging.cgroups.files import CgroupUnavailable, explain, read, write, write_if_there
from judging.cgroups.folders import JudgeFolders
from judging.cgroups.limits import CPU_PERIOD_US, CPU_QUOTA_US, V1_SHARES, V1_SHARES_MAX
from judging.cgroups.pinning import not_pinned, pin
from judging.cgroups.slot import SlotCgroup

V1_ROOT = Path("/sys/fs/cgroup")  # one folder per hierarchy under it


class V1Hierarchies:
    """The judge's folders in the v1 hierarchies. After ``make``: ``cpu`` names the knobs that bound each slot's
    CPU, or is empty and ``cpu_unavailable`` says why; ``pinned`` is whether each slot keeps to its CPU."""

    version = "v1"

    def __init__(self, folders: JudgeFolders):
        self.folders = folders
        self.cpu = ""
        self.cpu_unavailable = ""
        self.pinned = False

    def make(self, keys: list, memory_bytes: int, pids_max: int, pins: dict) -> dict:
        """A ``SlotCgroup`` per key."""
        memory, pids = (self.folders.new(own(kind)) for kind in ("memory", "pids"))
        cpu = self._cpu(len(keys))
        cpuset = self._cpuset(keys, pins) if pins else []
        slots = {}
        for index, key in enumerate(keys):
            folders = [memory / f"slot-{index}", pids / f"slot-{index}"]
            for folder in folders:
                folder.mkdir()
            write(folders[0] / "memory.limit_in_bytes", memory_bytes)
            write_if_there(folders[0] / "memory.memsw.limit_in_bytes", memory_bytes)  # no escape into swap
            write(folders[1] / "pids.max", pids_max)
            extra = cpu[index : index + 1] + cpuset[index : index + 1]
            slots[key] = SlotCgroup(folders + extra, folders[0] / "memory.oom_control")
        return slots

    def _cpu(self, count: int) -> list[Path]:
        """A folder per slot in the ``cpu`` hierarchy; none where it cannot be used (``cpu_unavailable`` then says
        why: the memory and pids bounds do not depend on it)."""
        parent = None
        try:
            parent = self.folders.new(own("cpu"))
            write(parent / "cpu.shares", V1_SHARES_MAX)
            folders = [parent / f"slot-{index}" for index in range(count)]
            for folder in folders:
                folder.mkdir()
                write(folder / "cpu.shares", V1_SHARES)
                write(folder / "cpu.cfs_period_us", CPU_PERIOD_US)
                write(folder / "cpu.cfs_quota_us", CPU_QUOTA_US)
        except (OSError, CgroupUnavailable) as error:
            self.cpu_unavailable = f"cgroup v1: {explain(error)}"
            if parent is not None:
                self.folders.remove(parent)
            return []
        self.cpu = "cpu.cfs_quota_us, cpu.shares"
        return folders

    def _cpuset(self, keys: list, pins: dict) -> list[Path]:
        """A folder per slot in the ``cpuset`` hierarchy, keeping it on its CPU of ``pins``; none where the
        hierarchy cannot be used or a pin is refused (the slots then float, bounded by their ``cpu`` folders
        alone). A v1 cpuset takes tasks only once it has CPUs and memory nodes, its parent's first."""
        parent = None
        try:
            cpuset = own("cpuset")
            parent = self.folders.new(cpuset)
            mems = (
                read(cpuset / "cpuset.effective_mems").strip()
                if (cpuset / "cpuset.effective_mems").exists()
                else read(cpuset / "cpuset.mems").strip()
            )
            write(parent / "cpuset.cpus", read(cpuset / "cpuset.cpus").strip())
            write(parent / "cpuset.mems", mems)
            folders = [parent / f"slot-{index}" for index in range(len(keys))]
            for folder in folders:
                folder.mkdir()
                write(folder / "cpuset.mems", mems)
        except (OSError, CgroupUnavailable) as error:
            not_pinned(error)
        else:
            if pin(folders, keys, pins):
                self.pinned = True
                return folders
        if parent is not None:
            self.folders.remove(parent)
        return []

    def close(self) -> None:
        """Nothing to give back: the judge's folders are all it made (``folders`` removes them)."""


def own(kind: str) -> Path:
    """This process's cgroup folder in the v1 hierarchy ``kind`` (``/proc/self/cgroup``: ``ID:CONTROLLERS:PATH``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if kind in controllers.split(","):
            return V1_ROOT / kind / path.lstrip("/")
    raise CgroupUnavailable(f"no v1 {kind} hierarchy is mounted (/proc/self/cgroup names none)")
