"""One slot's cgroup, and how a test's processes join it before they start anything: a ``sh`` writes itself into
each ``cgroup.procs`` and then execs the rest. A cold test joins before bubblewrap starts (``enter_command``);
bubblewrap then gives it a cgroup namespace rooted at the slot. A warm worker joins inside its sandbox, before the
uid drop (``join_inside``: bubblewrap's PID-namespace init then stays out of the slot), and takes its cgroup
namespace with ``unshare`` once joined: joining from inside a namespace rooted elsewhere is refused where cgroup2
is mounted ``nsdelegate`` (as systemd mounts it). A ``preexec_fn`` would make ``subprocess`` fork a trainer holding
tens of GB, not vfork it.
"""

import os
import re
import signal
import time
from pathlib import Path

from judging.policy import SCRATCH

_OOM_KILL = re.compile(rb"^oom_kill (\d+)$", re.MULTILINE)


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
        binds = [
            arg for folder, path in zip(self.folders, inside) for arg in ("--bind", str(folder / "cgroup.procs"), path)
        ]
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
