"""Taking and giving back the v2 cgroup a scheduler delegates to the judge (Slurm's task cgroup, a systemd service
with ``Delegate=yes``, a container). A cgroup that holds processes cannot give controllers to children (the "no
internal processes" rule), so the judge moves the processes of its cgroup into a child leaf (``LEAF``), enables the
controllers beside it and makes its slots there; the last judge to close moves them back and removes the leaf.
Judges sharing a cgroup (trainer ranks) do this under a lock on that cgroup's folder (``locked``)."""

import errno
import fcntl
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path

from judging.cgroups.files import CgroupUnavailable, read, write
from judging.cgroups.folders import is_judge_folder, remove_stale

logger = logging.getLogger(__name__)
LEAF = "judge-leaf"


@contextmanager
def locked(own: Path):
    """An exclusive lock on the cgroup folder ``own``, shared by every judge (and trainer rank) in it."""
    fd = os.open(own, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def enable(own: Path, controllers: list[str]) -> None:
    """Enable ``controllers`` for the children of ``own`` (the lock held). v2 refuses that (EBUSY) while ``own``
    holds processes, except in the root cgroup: they then move into the child ``LEAF`` first. A process forked
    meanwhile lands in ``own`` again, so this tries until nothing is left to move."""
    subtree = own / "cgroup.subtree_control"
    wanted = [name for name in controllers if name not in read(subtree).split()]
    for attempt in range(100):
        if not wanted:
            return
        try:
            write(subtree, " ".join(f"+{name}" for name in wanted))
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
        _move_processes(own, own / LEAF)
        if attempt:
            time.sleep(0.001 * min(attempt, 20))
    left = read(own / "cgroup.procs").split()
    raise CgroupUnavailable(
        f"{own} keeps holding processes ({' '.join(left[:5])}) that cannot be moved into "
        f"{own / LEAF}, so it cannot give controllers to the judge's slots"
    )


def release(own: Path) -> None:
    """If no judge is left in ``own`` and its processes were moved into ``LEAF``: switch its controllers off, move
    them back and remove the leaf (the lock held), so the cgroup is as the scheduler made it."""
    leaf = own / LEAF
    remove_stale(own)
    if not leaf.is_dir() or any(entry.is_dir() and is_judge_folder(entry.name) for entry in os.scandir(own)):
        return
    enabled = read(own / "cgroup.subtree_control").split()
    if enabled:
        write(own / "cgroup.subtree_control", " ".join(f"-{name}" for name in enabled))
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


def _move_processes(source: Path, target: Path) -> None:
    target.mkdir(exist_ok=True)
    for pid in read(source / "cgroup.procs").split():
        try:
            write(target / "cgroup.procs", pid)
        except OSError as error:
            if error.errno != errno.ESRCH:  # gone meanwhile
                raise
