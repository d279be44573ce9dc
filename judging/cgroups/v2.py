"""Slot cgroups on cgroup v2: one folder per slot in the unified hierarchy, under this process's own cgroup, which
its scheduler usually delegates to the judge (delegation.py). ``JUDGE_CGROUP_V2_ROOT`` points this at another
folder (a stand-in hierarchy in the tests)."""

import logging
import os
from pathlib import Path

from judging import env_vars
from judging.cgroups.delegation import LEAF, enable, locked, release
from judging.cgroups.files import CgroupUnavailable, write, write_if_there
from judging.cgroups.folders import JudgeFolders
from judging.cgroups.limits import CPU_PERIOD_US, CPU_QUOTA_US, V2_WEIGHT, V2_WEIGHT_MAX
from judging.cgroups.pinning import pin
from judging.cgroups.slot import SlotCgroup

logger = logging.getLogger(__name__)
V2_ROOT = Path("/sys/fs/cgroup")  # where the unified hierarchy is mounted
REQUIRED = ("memory", "pids")


def in_use() -> bool:
    """Whether the judge's cgroups are v2 ones: the host mounts the unified hierarchy, or a stand-in is given."""
    return bool(os.environ.get(env_vars.CGROUP_V2_ROOT)) or (V2_ROOT / "cgroup.controllers").exists()


class V2Hierarchy:
    """The judge's folder in the unified hierarchy, and the cgroup it enabled controllers in (``own``, given back
    at ``close``). After ``make``: ``cpu`` names the knobs that bound each slot's CPU, or is empty and
    ``cpu_unavailable`` says why; ``pinned`` is whether each slot keeps to its CPU."""

    version = "v2"

    def __init__(self, folders: JudgeFolders):
        self.folders = folders
        self.cpu = ""
        self.cpu_unavailable = ""
        self.pinned = False
        self.own: Path | None = None

    def make(self, keys: list, memory_bytes: int, pids_max: int, pins: dict) -> dict:
        """A ``SlotCgroup`` per key."""
        own = _own()
        offered = _offered(own)
        missing = [name for name in REQUIRED if name not in offered]
        if missing:
            raise CgroupUnavailable(
                f"{own} is not given the {' and '.join(missing)} controller{'s' if len(missing) > 1 else ''} "
                f"(its cgroup.controllers: {' '.join(sorted(offered)) or 'none'}): the cgroup above it must "
                f"delegate {'them' if len(missing) > 1 else 'it'} (+{' +'.join(missing)} in "
                f"{own.parent}/cgroup.subtree_control, as Slurm's cgroup plugin and systemd's Delegate=yes do)"
            )
        controllers = [
            *REQUIRED,
            *(["cpu"] if "cpu" in offered else []),
            *(["cpuset"] if "cpuset" in offered and pins else []),
        ]
        if "cpu" not in offered:
            self.cpu_unavailable = (
                f"cgroup v2: {own} is not given the cpu controller (its cgroup.controllers: "
                f"{' '.join(sorted(offered))}): +cpu in {own.parent}/cgroup.subtree_control "
                f"would give it"
            )
        with locked(own):
            enable(own, controllers)
            self.own = own
            parent = self.folders.new(own)
        write(parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in controllers))
        if "cpu" in controllers:
            write(parent / "cpu.weight", V2_WEIGHT_MAX)
        slots = {}
        for index, key in enumerate(keys):
            folder = parent / f"slot-{index}"
            folder.mkdir()
            write(folder / "memory.max", memory_bytes)
            write_if_there(folder / "memory.swap.max", 0)
            write(folder / "pids.max", pids_max)
            if "cpu" in controllers:
                write(folder / "cpu.weight", V2_WEIGHT)
                write(folder / "cpu.max", f"{CPU_QUOTA_US} {CPU_PERIOD_US}")
            slots[key] = SlotCgroup([folder], folder / "memory.events")
        if "cpu" in controllers:
            self.cpu = "cpu.max, cpu.weight"
        if "cpuset" in controllers:
            self.pinned = pin([slot.folders[0] for slot in slots.values()], list(slots), pins)
        return slots

    def close(self) -> None:
        """Give the cgroup the judge enabled controllers in back as it was, if no other judge uses it (the judge's
        folders removed first); never raises."""
        if self.own is None:
            return
        own, self.own = self.own, None
        try:
            with locked(own):
                release(own)
        except OSError as error:
            logger.warning("cgroup %s not given back as it was: %s", own, error)


def _own() -> Path:
    """This process's cgroup folder in the v2 hierarchy (``0::PATH`` in ``/proc/self/cgroup``), or the stand-in."""
    if os.environ.get(env_vars.CGROUP_V2_ROOT):
        return Path(os.environ[env_vars.CGROUP_V2_ROOT])
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            own = V2_ROOT / line[3:].lstrip("/")
            if own.name == LEAF:  # moved there by a judge of this process or another: the cgroup is its parent
                own = own.parent
            if not own.is_dir():
                raise CgroupUnavailable(
                    f"this process's cgroup {line[3:]} is not under {V2_ROOT} (a container "
                    f"without a cgroup namespace of its own?)"
                )
            return own
    return V2_ROOT


def _offered(own: Path) -> set[str]:
    """The controllers ``own``'s parent gives it (all of them in a stand-in hierarchy that does not say)."""
    listed = own / "cgroup.controllers"
    if not listed.exists() and os.environ.get(env_vars.CGROUP_V2_ROOT):
        return {*REQUIRED, "cpu"}
    return set(listed.read_text().split())
