"""Keeping each slot on a CPU of its own (``cpuset.cpus``), under v1 (a ``cpuset`` hierarchy of its own) and v2
(the slot's one folder) alike. The quota alone still lets a busy test run on its neighbour's CPU in bursts."""

import logging
from pathlib import Path

from judging.cgroups.files import write

logger = logging.getLogger(__name__)


def pin(folders: list[Path], keys: list, pins: dict) -> bool:
    """Keep the slot of each of ``keys`` (its cpuset folder in ``folders``) on its CPU of ``pins``; False, and none
    pinned, where one is refused (no pin for a key, a CPU outside the cgroup's own cpuset)."""
    try:
        for folder, key in zip(folders, keys):
            write(folder / "cpuset.cpus", pins[key])
    except (OSError, KeyError) as error:
        not_pinned(error)
        for folder in folders:
            try:
                write(folder / "cpuset.cpus", "")
            except OSError:
                pass
        return False
    return True


def not_pinned(error: Exception) -> None:
    """Say why the slots float (the log only: the isolation line says whether they are pinned)."""
    logger.info("slots not pinned to CPUs: %s", error)
