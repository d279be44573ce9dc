"""``Cgroups``: the judge's cgroups, one per slot key, on whichever hierarchy the host has (v1.py or v2.py), and
what the isolation line says of them."""

import os

from judging.cgroups import v2
from judging.cgroups.files import CgroupUnavailable, explain
from judging.cgroups.folders import JudgeFolders
from judging.cgroups.limits import SANDBOX_PROCESSES
from judging.cgroups.v1 import V1Hierarchies


class Cgroups:
    """The judge's cgroups, one per slot key, each holding at most ``memory_bytes`` and ``processes`` tasks and,
    where the host's cpu controller can be used, at most one CPU's time.

    ``version`` is ``"v1"`` or ``"v2"``; where neither works, ``slots`` is empty and ``unavailable`` says why.
    ``cpu`` names the knobs that bound each slot's CPU, or is empty and ``cpu_unavailable`` says why. ``pinned``:
    each slot kept on its CPU of ``pins`` (cpuset), where the host's cpuset allows it.
    """

    def __init__(self, keys: list, memory_bytes: int, processes: int, pins: dict | None = None):
        self.version = ""
        self.unavailable = ""
        self.cpu = ""
        self.cpu_unavailable = ""
        self.pinned = False
        self.slots: dict = {}
        self._folders = JudgeFolders()
        self._hierarchy = None
        if os.geteuid() != 0:
            self.unavailable = "cgroups need the judge to run as root"
            return
        hierarchy = v2.V2Hierarchy(self._folders) if v2.in_use() else V1Hierarchies(self._folders)
        self._hierarchy = hierarchy
        try:
            self.slots = hierarchy.make(keys, memory_bytes, processes + SANDBOX_PROCESSES, pins or {})
        except (OSError, CgroupUnavailable) as error:
            self.close()
            self.unavailable = f"cgroup {hierarchy.version}: {explain(error)}"
            self.cpu_unavailable = hierarchy.cpu_unavailable
            self.slots = {}
            return
        self.version = hierarchy.version
        self.cpu, self.cpu_unavailable, self.pinned = hierarchy.cpu, hierarchy.cpu_unavailable, hierarchy.pinned

    def describe(self, memory_mb: int, processes: int) -> str:
        if not self.version:
            return ""
        return (
            f"memory: a cgroup {self.version} per slot, {memory_mb} MB for all of a test's processes together "
            f"(tmpfs, memfd and shared memory included), at most {processes + SANDBOX_PROCESSES} tasks"
        )

    def describe_cpu(self) -> str:
        """What bounds a slot's CPU, for the isolation line."""
        if self.cpu:
            pinned = ", each slot kept on a CPU of its own (cpuset)" if self.pinned else ""
            return (
                f"cpu: a cgroup {self.version} per slot, one CPU's time at most and equal shares between slots"
                f"{pinned}, however many processes or sessions a test makes ({self.cpu})"
            )
        why = self.cpu_unavailable or ("no cgroup per slot, as for memory" if self.unavailable else "no cgroups")
        return (
            f"cpu: NOT bounded per slot ({why}); a test that makes many processes or sessions takes CPU from "
            f"the tests beside it"
        )

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
        self._folders.close()
        if self._hierarchy is not None:
            self._hierarchy.close()
