"""What each slot's cgroup is bounded by, beside the memory and task counts the judge is given."""

# pids.max counts the sandbox's own processes too (bwrap, its init, setpriv, the warm worker) beside the test's.
SANDBOX_PROCESSES = 8
# Each slot may use one CPU's time per period (cpu.max, cpu.cfs_quota_us), and slots share equally below that.
# The judge's folder takes the highest weight the kernel allows: a folder's weight is spread over the CPUs its busy
# slots run on, so at a few slots' weight a slot whose neighbour spins kept half its weight, and the trainer's busy
# processes, pushed off the spinner's CPU, took the rest (an honest test 1.4-1.6x slower beside a spinner). At the
# top weight a test keeps its CPU whatever runs beside it; the quota still bounds each slot to one CPU's time, only
# while a test runs.
CPU_PERIOD_US = 100_000
CPU_QUOTA_US = CPU_PERIOD_US
V1_SHARES, V1_SHARES_MAX = 1024, 262144
V2_WEIGHT, V2_WEIGHT_MAX = 100, 10000
