"""The environment variables the judge reads, besides its flags: host settings a cluster's admin or a test sets, not
a run's. Each name of ``NOT_READ`` is refused when set, with the name the judge reads instead, before the judge starts
anything: set and silently ignored, it would leave the judge on the defaults it was set to move."""

import os

from cli import UsageError

# The first slot uid (judging/slots.py), where the default's range is taken on this host.
SLOT_UID_BASE = "JUDGE_SLOT_UID_BASE"
# Another folder to use as the cgroup v2 hierarchy (judging/cgroups/): a stand-in folder in the tests.
CGROUP_V2_ROOT = "JUDGE_CGROUP_V2_ROOT"
NOT_READ = {"REWARDS_SLOT_UID_BASE": SLOT_UID_BASE, "REWARDS_CGROUP_V2_ROOT": CGROUP_V2_ROOT}


def refuse_names_not_read() -> None:
    """UsageError, one line naming the variable to set instead, when one of ``NOT_READ`` is set."""
    for name, read in NOT_READ.items():
        if name in os.environ:
            raise UsageError(f"{name} is not read; set {read} instead (unset {name})")
