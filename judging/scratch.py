"""Scratch folders on the host: one per execution, made by the judge and removed whatever judged code left in it.

Judged code controls what is inside a scratch folder (on the levels where it writes to the host folder), so
removal must hold against any tree: 1,500 nested folders (``shutil.rmtree`` recurses and raises
``RecursionError``; the path outgrows PATH_MAX), links to host paths or to themselves, folders with mode 000.
``remove_tree`` never recurses, never follows a link, holds two descriptors at a time, costs one pass per entry
and never raises: what it could not remove it reports.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def new_scratch(parent: str, uid: int | None, filename: str, program: bytes) -> str:
    """A fresh scratch folder in ``parent``, owned by the slot uid, holding the program."""
    scratch = tempfile.mkdtemp(prefix="scratch-", dir=parent)
    if uid is not None:
        os.chown(scratch, uid, uid)
    Path(scratch, filename).write_bytes(program)
    return scratch


def remove_tree(path: str) -> str | None:
    """Remove the folder ``path`` and all it holds; None when it is gone, else why not (logged, never raised).

    Every folder found below the top is emptied of its files and its own folders are moved up into the top
    (renamed, so the depth seen is never more than two); then it is removed. A link is removed as a link.
    """
    try:
        top = _open_folder(None, path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return _left(path, error)
    moved = 0
    stuck: set[str] = set()
    try:
        while True:
            progress = False
            with os.scandir(top) as entries:
                names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
            for name, is_folder in names:
                if name in stuck:
                    continue
                try:
                    if is_folder:
                        moved = _empty_into(top, name, moved)
                        os.rmdir(name, dir_fd=top)
                    else:
                        os.unlink(name, dir_fd=top)
                    progress = True
                except FileNotFoundError:
                    progress = True
                except OSError as error:
                    stuck.add(name)
                    logger.debug("cannot remove %s/%s yet: %s", path, name, error)
            if not progress:
                break
    except (OSError, RecursionError, MemoryError) as error:
        return _left(path, error)
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError as error:
        return _left(path, error)
    return None


def _empty_into(top: int, name: str, moved: int) -> int:
    """Unlink the files of folder ``name`` (in ``top``) and rename its folders into ``top``; the rename count."""
    fd = _open_folder(top, name)
    try:
        with os.scandir(fd) as entries:
            children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_folder in children:
            if not is_folder:
                os.unlink(child, dir_fd=fd)
                continue
            while True:
                moved += 1
                try:
                    os.rename(child, f".removing-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                    break
                except PermissionError:  # a folder moved to another parent must be writable (not root)
                    _open_up(fd, child)
                    os.rename(child, f".removing-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                    break
                except OSError as error:  # that name is taken in the top folder: try the next
                    if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                        raise
    finally:
        os.close(fd)
    return moved


def _open_folder(parent: int | None, name: str) -> int:
    """Open folder ``name`` without following a link, first making it 0700 if its mode keeps us out (not root)."""
    try:
        fd = os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:
        _open_up(parent, name)
        fd = os.open(name, _FOLDER, dir_fd=parent)
    if os.geteuid() != 0 and stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
        os.fchmod(fd, 0o700)
    return fd


def _open_up(parent: int | None, name: str) -> None:
    """Make folder ``name`` 0700 through a descriptor of the folder itself, so a link swapped in for it cannot
    redirect the chmod to a host file."""
    handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if not stat.S_ISDIR(os.fstat(handle).st_mode):
            raise PermissionError(errno.EACCES, f"{name} is not a folder")
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
    finally:
        os.close(handle)


def _left(path: str, error: BaseException) -> str:
    why = f"{path} left on disk: {type(error).__name__}: {error}"
    logger.warning("%s", why)
    return why
