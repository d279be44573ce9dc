#!/usr/bin/env bash
# A real Slurm cluster of two nodes on this one host, for trying train.sbatch and for tests/product/test_slurm.py.
#
#   scripts/slurm/local_cluster.sh up [DIR]     start it in DIR (default: a new folder under /tmp); prints DIR
#   scripts/slurm/local_cluster.sh down DIR     stop the daemons it started there, by their pid files
#
# Needs Debian's slurm-wlm and munge (scripts/install.sh --slurm) and root: slurmd starts jobs as their user.
# `up` writes a munge key and starts munged on its own socket, then slurmctld and two slurmd daemons
# (`slurmd -N n1`, `slurmd -N n2`), each node at NodeAddr=127.0.0.1 on a port of its own, all configured by
# DIR/slurm.conf, and waits until both nodes are idle. Nothing outside DIR is touched: point the Slurm commands at
# it with `export SLURM_CONF=DIR/slurm.conf`, then `sbatch -N2 ...`, `srun -N2 hostname`, `squeue`, `scancel`.
# Processes are tracked by parentage (proctrack/linuxproc): no cgroups needed, and scancel still reaches every
# process a job started that stays in its process tree.
set -euo pipefail

usage="usage: scripts/slurm/local_cluster.sh up [DIR] | down DIR"
NODES=(n1 n2)
WAIT_S="${LOCAL_CLUSTER_WAIT:-60}"

fail() {
    echo "local_cluster.sh: $1" >&2
    exit 2
}

free_ports() {  # free_ports N: N TCP ports free on this host now
    python3 - "$1" <<'EOF'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
}

write_config() {  # write_config DIR CTLD_PORT NODE_PORT...
    local dir="$1" ctld_port="$2" cpus node
    shift 2
    cpus="$(nproc)"
    cat > "$dir/slurm.conf" <<EOF
# Written by scripts/slurm/local_cluster.sh: a two-node cluster on one host, everything under $dir.
ClusterName=local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/pids/slurmctld.pid
SlurmdPidFile=$dir/pids/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=10
SlurmdTimeout=60
InactiveLimit=0
EOF
    for node in "${NODES[@]}"; do
        echo "NodeName=$node NodeHostname=$(hostname) NodeAddr=127.0.0.1 Port=$1 CPUs=$cpus State=UNKNOWN" \
            >> "$dir/slurm.conf"
        shift
    done
    echo "PartitionName=local Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP" \
        >> "$dir/slurm.conf"
}

wait_until_idle() {  # both nodes idle, or say why not and return 1
    local dir="$1" waited=0 states
    while :; do
        states="$(SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)"
        if [[ "$(grep -c ' idle$' <<< "$states")" == "${#NODES[@]}" ]]; then
            return
        fi
        if (( waited >= WAIT_S )); then
            echo "local_cluster.sh: the nodes are not idle after ${WAIT_S}s (${states:-no answer}); see $dir/log/" >&2
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

start_daemons() {  # start_daemons DIR: munged, slurmctld, a slurmd per node; 1 if one fails or a node stays down
    local dir="$1" node
    munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/pids/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
        return 1
    slurmctld -f "$dir/slurm.conf" -i || return 1
    for node in "${NODES[@]}"; do
        slurmd -f "$dir/slurm.conf" -N "$node" || return 1
    done
    wait_until_idle "$dir"
}

up() {
    local dir="$1" ports
    for command in munged slurmctld slurmd sinfo; do
        command -v "$command" >/dev/null ||
            fail "$command not found; install slurm-wlm and munge (scripts/install.sh --slurm)"
    done
    [[ "$(id -u)" == 0 ]] || fail "run as root: slurmd starts each job as its user"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [[ ! -e "$dir/slurm.conf" ]] || fail "$dir already holds a cluster; stop it with: $0 down $dir"
    mkdir -p "$dir"/{munge,state,pids,log} "${NODES[@]/#/$dir/spool/}"
    chmod 755 "$dir" "$dir/munge"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    read -r -a ports <<< "$(free_ports $((1 + ${#NODES[@]})))"
    write_config "$dir" "${ports[@]}"
    if ! start_daemons "$dir"; then
        down "$dir"  # nothing left running from a cluster that did not come up
        exit 1
    fi
    echo "$dir"
}

down() {
    local dir="$1" pidfile pid waited
    [[ -d "$dir/pids" ]] || fail "$dir holds no cluster started by this script"
    # slurmd first (their jobs end with them), then slurmctld, then munged.
    for pidfile in "$dir"/pids/slurmd-*.pid "$dir/pids/slurmctld.pid" "$dir/pids/munged.pid"; do
        [[ -f "$pidfile" ]] || continue
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        waited=0
        while kill -0 "$pid" 2>/dev/null && (( waited < 100 )); do
            sleep 0.1
            waited=$((waited + 1))
        done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

case "${1:-}" in
    up)
        [[ $# -le 2 ]] || fail "$usage"
        up "${2:-$(mktemp -d /tmp/slurm-local.XXXXXX)}"
        ;;
    down)
        [[ $# -eq 2 ]] || fail "name the cluster's folder; $usage"
        down "$2"
        ;;
    *) fail "$usage" ;;
esac
