# A real Slurm cluster on the test cluster's emulated hosts (sourced after cluster.sh; root).
#
#   . tests/cluster/cluster.sh; . tests/cluster/slurm.sh
#   cluster_up K [MBIT]
#   slurm_up [CPUS]        slurmctld on the head node, one slurmd per host (CPUS slots each,
#                          default 8, more than this machine has: Slurm is told to trust the
#                          configuration, not the hardware); sets SLURM_CONF; waits until every
#                          host is idle
#   cluster_head salloc -N3 CMD   CMD inside an allocation of 3 hosts (srun, mpirun under Slurm)
#   slurm_revive_host HOST [JOBID]  after cluster_revive_host HOST: its slurmd again; waits until
#                          a step of JOBID runs there (without JOBID: until it is idle)
#   CL_SLURM_MSG_TIMEOUT   slurm.conf's MessageTimeout (default 10 s): srun's wait on a host that
#                          does not answer
#   CL_SLURMD_TIMEOUT      slurm.conf's SlurmdTimeout (default 30 s): how long a host may not answer
#                          slurmctld before it is DOWN and leaves every allocation (a job without
#                          --no-kill is then killed)
#
# What runs where:
#  - munged (Slurm's authentication) runs in the head's network namespace with a key this script
#    makes; its socket is a path under CL_DIR, which every namespace reaches (path-named Unix
#    sockets are not network-namespaced), so one daemon serves every host;
#    (--force: CL_DIR is mode 700, which munged would otherwise refuse for its socket);
#  - slurmctld runs on the head with the head's own hostname (UTS namespace): Slurm refuses to
#    start a controller on a host whose name is not SlurmctldHost;
#  - each slurmd runs inside its host's namespaces as that host's sshd does: its hostname, its
#    private disk at CL_DISK, the cluster's /etc/hosts. Every job step it starts inherits them,
#    so a rank started by srun sees only its own host's disk.
#  - ports 16817/16818 (not the defaults, which a system Slurm may hold) on the cluster's
#    addresses only; state, spool and logs under CL_DIR/slurm.
# cgroups: this kernel mounts cgroup v1 (hybrid); slurmd is given cgroup/v1 without automount,
# process tracking by /proc (proctrack/linuxproc) and no task plugin, so nothing is confined.
# Removal: every daemon lives in one of the cluster's namespaces, so cluster_down (the EXIT
# trap) kills them with the hosts and removes their files with CL_DIR.
# Needs slurm-wlm and munge (scripts/setup.sh installs them).

# cl_slurmd HOST: HOST's slurmd, inside its UTS, mount and PID namespaces as its sshd (cl_sshd).
cl_slurmd() {
    ip netns exec "$(cl_ns "$1")" unshare --uts --mount --pid --fork --mount-proc --propagation private sh -c '
        hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" /etc/hosts && exec slurmd -D -f "$5" -N "$1"' \
        sh "$1" "$CL_DIR/disks/$1" "$CL_DISK" "$CL_DIR/hosts" "$SLURM_CONF" >>"$CL_DIR/slurm/log/slurmd-$1.out" 2>&1 &
    disown
}

slurm_up() {
    local cpus=${1:-8} S h a i nodes=""
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null ||
        { cl_fail "no slurmctld/slurmd/munged: apt-get install slurm-wlm munge (scripts/setup.sh)"; return 1; }
    [ -n "${CL_DIR:-}" ] || { cl_fail "slurm_up: no cluster (cluster_up first)"; return 1; }
    S=$CL_DIR/slurm
    mkdir -p "$S/state" "$S/log" "$S/munge"
    head -c 1024 /dev/urandom >"$S/munge.key" && chmod 400 "$S/munge.key"
    ip netns exec "$(cl_ns head)" munged --force --key-file="$S/munge.key" --socket="$S/munge/munge.socket" \
        --pid-file="$S/munged.pid" --log-file="$S/munged.log" --seed-file="$S/munge.seed" ||
        { cat "$S/munged.log" >&2; cl_fail "munged does not start"; return 1; }
    for h in $CL_HOSTS; do
        a=$(awk -v h="$h" '$2 == h {print $1}' "$CL_DIR/hosts")
        nodes="${nodes}NodeName=$h NodeAddr=$a CPUs=$cpus RealMemory=1000 State=UNKNOWN
"
        mkdir -p "$S/spool-$h"
    done
    cat >"$S/slurm.conf" <<EOF
ClusterName=autohet-test
SlurmctldHost=head($(awk '$2 == "head" {print $1}' "$CL_DIR/hosts"))
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MessageTimeout=${CL_SLURM_MSG_TIMEOUT:-10}
ReturnToService=2
SlurmdTimeout=${CL_SLURMD_TIMEOUT:-30}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
${nodes}PartitionName=all Nodes=$(echo $CL_HOSTS | tr ' ' ',') Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nCgroupAutomount=no\n' >"$S/cgroup.conf"
    export SLURM_CONF=$S/slurm.conf
    ip netns exec "$(cl_ns head)" unshare --uts --mount --propagation private sh -c \
        'hostname head && mount --bind "$1" /etc/hosts && exec slurmctld -D -c -f "$2"' \
        sh "$CL_DIR/hosts" "$SLURM_CONF" >"$S/log/slurmctld.out" 2>&1 &
    disown
    for h in $CL_HOSTS; do
        cl_slurmd "$h"
    done
    # every host registered and idle (sinfo's node states), or the logs and an error
    for i in $(seq 100); do
        [ "$(cluster_head sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle')" = "$(echo $CL_HOSTS | wc -w)" ] && return 0
        sleep 0.2
    done
    tail -n 5 "$S"/log/* >&2
    cl_fail "slurm: not every host is idle after 20 s: $(cluster_head sinfo -N 2>&1 | tr '\n' ' ')"
}

# slurm_revive_host HOST [JOBID]: after cluster_revive_host HOST (a new machine: an empty disk, a
# fresh sshd), its slurmd started again there; returns once a job step runs on HOST inside the
# allocation JOBID (srun -w HOST) or, without JOBID, once HOST is idle; fails after 20 s. A host
# Slurm has not declared DOWN yet (SlurmdTimeout) is still part of the allocations that held it.
slurm_revive_host() {
    local host=$1 job=${2:-} t
    cl_slurmd "$host"
    for t in $(seq 100); do
        if [ -n "$job" ]; then
            cluster_head srun --jobid="$job" --overlap --mpi=none -N1 -n1 --quiet -w "$host" true 2>/dev/null && return 0
        else
            [ "$(cluster_head sinfo -h -N -n "$host" -o %t 2>/dev/null)" = idle ] && return 0
        fi
        sleep 0.2
    done
    tail -n 5 "$CL_DIR/slurm/log/slurmd-$host.log" >&2
    cl_fail "slurm: host $host does not run a job step after its revival"
}
