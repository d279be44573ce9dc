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
systemd, a container) applies to the trainer still apply to them. The modules, by what they do:

- ``per_slot.py``: ``Cgroups``, the judge's cgroups (one per slot key) on whichever hierarchy the host has, and
  what the isolation line says of them;
- ``v1.py``: cgroup v1 (``memory``, ``pids``, ``cpu`` and ``cpuset`` hierarchies, as on this machine);
- ``v2.py`` and ``delegation.py``: cgroup v2 (one unified hierarchy, as on most GPU nodes), usually in a cgroup
  that the judge's scheduler delegates to it, and how the judge takes and gives back that delegation;
- ``slot.py``: ``SlotCgroup``, one slot's cgroup: how a test's processes join it, its OOM kills, killing what is
  left in it;
- ``folders.py``: the judge's own folder in each hierarchy, its lock, and removing dead judges' folders;
- ``pinning.py``: keeping each slot on a CPU of its own; ``limits.py``: the values each slot is bounded by;
  ``files.py``: reading and writing cgroup files, and saying why one cannot be.

Where no cgroup can be made, ``Cgroups.unavailable`` says which path and which permission or controller is
missing, and the judge reports what still bounds memory; where the CPU alone cannot be bounded,
``Cgroups.cpu_unavailable`` says why.
"""

from judging.cgroups.files import CgroupUnavailable
from judging.cgroups.per_slot import Cgroups
from judging.cgroups.slot import SlotCgroup, warm_joining

__all__ = ["CgroupUnavailable", "Cgroups", "SlotCgroup", "warm_joining"]
