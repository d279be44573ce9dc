"""Reading and writing cgroup files, and saying, for the isolation line, why a cgroup could not be made."""

import errno
from pathlib import Path


class CgroupUnavailable(Exception):
    """No slot cgroups can be made here; the message names the path and what is missing."""


def read(path: Path) -> str:
    return path.read_text()


def write(path: Path, value) -> None:
    """Write ``value`` to the cgroup file ``path``; an error names the path (the kernel's errors from ``write``
    have none)."""
    try:
        path.write_text(str(value))
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None


def write_if_there(path: Path, value) -> None:
    if path.exists():
        write(path, value)


def explain(error: Exception) -> str:
    """``error`` as the isolation line says it: the path, and the permission or controller that is missing."""
    if isinstance(error, CgroupUnavailable):
        return str(error)
    path = error.filename or "?"
    if error.errno == errno.EROFS:
        return f"{path} is on a read-only cgroup file system (mount it read-write, or delegate a writable subtree)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write {path} ({error.strerror}): the cgroup is not delegated to this user"
    return f"{path}: {error.strerror or error}"
