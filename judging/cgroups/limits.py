"""What each slot's cgroup is bounded by, beside the memory and task counts the judge is given."""

# pids.max counts the sandbox's own processes too (bwrap, its init, setpriv, the warm worker) beside the test's.
SANDBOX_PROCESSES = 8
# Each slot may use one CPU's time per period (cpu.max, cpu.cfs_quota_us), and slots share equally below that.
# The judge's folder weighs as much as its slots together (as many processes would, each in a session of its
# own), so its tests together get the share that they had before they shared a cgroup.
CPU_PERIOD_US = 100_000
CPU_QUOTA_US = CPU_PERIOD_US
V1_SHARES, V1_SHARES_MAX = 1024, 262144
V2_WEIGHT, V2_WEIGHT_MAX = 100, 10000
