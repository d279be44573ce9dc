"""The judge's own folder in each cgroup hierarchy, holding its slots' cgroups: named at random (a test sees the
name: /proc/self/cgroup, the cgroup.procs it joins through), locked while its judge lives, which is how a later
judge tells a dead judge's folder (killed before it could close) and removes it."""

import errno
import fcntl
import logging
import os
import re
import secrets
import time
from pathlib import Path

logger = logging.getLogger(__name__)
PREFIX = "judge-"
# A judge's folder younger than this may not be locked by its judge yet (``JudgeFolders.new``): never taken for stale.
STALE_AFTER = 60.0
# What ``JudgeFolders.new`` makes; ``rewards-judge-`` is the name judges made before, so that a judge killed then
# still has its folders removed by a judge started now, on a node that keeps running jobs.
JUDGE_FOLDER = re.compile(f"(?:rewards-)?{re.escape(PREFIX)}[0-9a-f]{{16}}")


class JudgeFolders:
    """The folders this judge made, one per hierarchy, each locked while the judge lives."""

    def __init__(self):
        self._folders: list[Path] = []
        self._held: list[int] = []  # a locked descriptor of each folder

    def new(self, own: Path) -> Path:
        """A fresh folder for this judge under the process's own cgroup ``own``, after removing those of dead
        judges there. Random, with no pid in its name: the lock tells a later judge it is not stale."""
        remove_stale(own)
        folder = own / f"{PREFIX}{secrets.token_hex(8)}"
        folder.mkdir()
        self._folders.append(folder)
        self._held.append(os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        fcntl.flock(self._held[-1], fcntl.LOCK_EX)
        return folder

    def remove(self, folder: Path) -> None:
        """Remove one of them (a hierarchy given up on)."""
        index = self._folders.index(folder)
        del self._folders[index]
        os.close(self._held.pop(index))
        remove_cgroup(folder)

    def close(self) -> None:
        """Remove them all and drop their locks; never raises."""
        for folder in self._folders:
            remove_cgroup(folder)
        for held in self._held:
            os.close(held)
        self._folders, self._held = [], []


def is_judge_folder(name: str) -> bool:
    return JUDGE_FOLDER.fullmatch(name) is not None


def remove_stale(own: Path) -> None:
    """Remove the cgroups of judges whose process is gone (killed before it could close): their folder's lock is
    free."""
    try:
        names = [entry.name for entry in os.scandir(own) if entry.is_dir() and is_judge_folder(entry.name)]
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
                remove_cgroup(own / name)
        except OSError:  # locked: its judge is alive
            pass
        finally:
            os.close(folder)


def remove_cgroup(parent: Path) -> None:
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
