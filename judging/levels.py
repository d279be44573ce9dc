"""The sandbox levels, strongest first, as values: what each needs installed, what it isolates, where a test's
program lies and how the isolation line names it; and which levels each ``--sandbox`` choice tries.

judging/sandbox.py builds each level's command line (its docstring says what each level does), judging/running.py
runs it and judging/setup.py picks the level by probing.
"""

from dataclasses import dataclass

from judging.policy import SCRATCH, TMPFS


@dataclass(frozen=True)
class Level:
    """One sandbox level. ``tool`` is the program it needs installed (what wraps each test; rlimits has only
    ``prlimit``). ``namespaces``: PID, network, IPC and UTS namespaces of the test's own (without a PID namespace
    what a test leaves is killed by uid). ``own_view``: a private read-only filesystem view holding the test's own
    tmpfs folders, into whose /scratch the program is copied, with the seccomp program and a fixed /proc; without
    one the host's filesystem is visible and the program lies in a host folder. ``isolates`` is what the isolation
    line says of the namespaces and the view."""

    name: str  # as --sandbox and Judge.level say it
    tool: str
    namespaces: bool
    own_view: bool
    isolates: str

    @property
    def warm(self) -> bool:
        """Whether Python may run in warm workers at this level: each worker is a sandbox with a view of its own."""
        return self.own_view

    def program_path(self, filename: str, host_folder: str | None) -> str:
        """Where the program ``filename`` lies when it runs: the sandbox's own /scratch (a tmpfs, nothing on the
        host), or, without a view of its own, ``host_folder`` (judging/scratch.py makes it)."""
        return f"{SCRATCH if self.own_view else host_folder}/{filename}"

    def describe(self, disk_mb: int) -> str:
        """The isolation line's start: the level, what it isolates and where a test writes."""
        if self.own_view:
            disk = f"{', '.join(TMPFS)} tmpfs of {disk_mb} MB each (nothing reaches the host disk)"
        else:
            disk = "disk unbounded but for fsize (scratch is a host folder)"
        return f"{self.name}{'' if self.namespaces else ' (weak)'}: {self.isolates}, {disk}"


BWRAP = Level(
    "bwrap", "bwrap", namespaces=True, own_view=True, isolates="pid+net+ipc+uts namespaces, private read-only fs"
)
UNSHARE = Level(
    "unshare", "unshare", namespaces=True, own_view=False, isolates="pid+net+ipc+uts namespaces, host fs visible"
)
RLIMITS = Level(
    "rlimits", "prlimit", namespaces=False, own_view=False, isolates="no namespaces, network and host fs reachable"
)
LEVELS = (BWRAP, UNSHARE, RLIMITS)

# The --sandbox choices: auto (the strongest level that works; as root, only levels with namespaces), strict (only
# levels with namespaces), or one level; bwrap-cold is bwrap with a fresh interpreter per Python test, where the
# other choices that may pick bwrap use warm workers when they start.
COLD_BWRAP = "bwrap-cold"
SANDBOX_CHOICES = ("auto", "strict", "bwrap", COLD_BWRAP, "unshare", "rlimits")


def level_named(name: str) -> Level:
    for level in LEVELS:
        if level.name == name:
            return level
    raise ValueError(f"unknown sandbox level {name!r}; use one of {', '.join(level.name for level in LEVELS)}")


def candidates(choice: str, as_root: bool) -> tuple[Level, ...]:
    """The levels the ``--sandbox`` value ``choice`` tries, strongest first. ``auto`` as root never tries rlimits,
    which would run judged code as root beside the trainer (reading its data and environment, able to kill it)."""
    if choice == "auto" and not as_root:
        return LEVELS
    if choice in ("auto", "strict"):
        return tuple(level for level in LEVELS if level.namespaces)
    return (BWRAP,) if choice == COLD_BWRAP else (level_named(choice),)
