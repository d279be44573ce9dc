"""The judge's settings, shared by every command that judges code.

`rl_trainer.py`, `python -m rewards score` and `python -m data verify` all parse `JudgeArguments`, so they
accept the same judge flags.
"""

import os
from dataclasses import dataclass, field

from cli import positive
from judging.env_vars import refuse_names_not_read
from judging.judge import Judge
from judging.levels import SANDBOX_CHOICES
from judging.licence_proxy import parse_licence_hosts
from judging.policy import (
    DEFAULT_DISK_MB,
    DEFAULT_LICENCE_HOSTS,
    DEFAULT_MEMORY_MB,
    DEFAULT_SANDBOX,
    DEFAULT_TIMEOUT,
    default_workers,
)


@dataclass
class JudgeArguments:
    """How completions are run: the q binary, the sandbox, and the limits of one execution."""

    q_binary: str | None = field(
        default=None,
        metadata={"help": "The q executable. Default: $Q_INTERPRETER_PATH, $Q_EXECUTABLE_PATH, $QHOME/l64/q, PATH."},
    )
    sandbox: str = field(
        default=DEFAULT_SANDBOX,
        metadata={
            "help": "auto: the strongest isolation available (logged; never root without namespaces); strict: refuse "
            "to run without namespaces; bwrap, unshare, rlimits: exactly that level or stop. At bwrap, Python runs "
            "in warm workers when they start (root), else a fresh interpreter per test; bwrap-cold: always fresh.",
            "choices": list(SANDBOX_CHOICES),
        },
    )
    judge_timeout: float = field(
        default=DEFAULT_TIMEOUT,
        metadata={"help": "Seconds per test (during training, in the trainer).", "aliases": ["--timeout"]},
    )
    judge_workers: int | None = field(
        default=None,
        metadata={
            "help": "Parallel executions per process. Default: the cores this process may run on (its "
            "affinity), shared among local ranks.",
            "aliases": ["--workers"],
        },
    )
    judge_memory_mb: int = field(
        default=DEFAULT_MEMORY_MB,
        metadata={
            "help": "Memory of one test, in MB: all its processes together, tmpfs and memfd pages included "
            "(a cgroup per slot, as root), and each process's address space. Without a writable cgroup only "
            "the latter holds; the logged isolation line says which."
        },
    )
    judge_disk_mb: int = field(
        default=DEFAULT_DISK_MB,
        metadata={
            "help": "What one test may write, in MB: the size of its /scratch, /tmp and /dev/shm, each a "
            "tmpfs in the bwrap sandbox (memory, never the host disk)."
        },
    )
    q_licence_hosts: str = field(
        default=DEFAULT_LICENCE_HOSTS,
        metadata={
            "help": "What judged q may reach, only through the judge's licence proxy: auto (the hosts q "
            "contacts in a trusted start-up run, logged; none if it contacts none), none, or "
            "HOST:PORT[,HOST:PORT...]."
        },
    )

    def __post_init__(self):
        self._licence_hosts = parse_licence_hosts(self.q_licence_hosts)  # parsed once, handed to the judge
        positive("--judge_timeout/--timeout", self.judge_timeout, "number of seconds")
        positive("--judge_workers/--workers", self.judge_workers)
        positive("--judge_memory_mb", self.judge_memory_mb)
        positive("--judge_disk_mb", self.judge_disk_mb)
        refuse_names_not_read()

    def make_judge(self) -> Judge:
        """The process's one judge. Every rank judges its own completions, so ranks on a node share its cores."""
        workers = self.judge_workers or default_workers(int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        return Judge(
            timeout=self.judge_timeout,
            workers=workers,
            sandbox=self.sandbox,
            memory_mb=self.judge_memory_mb,
            q_binary=self.q_binary,
            q_licence_hosts=self._licence_hosts,
            disk_mb=self.judge_disk_mb,
        )
