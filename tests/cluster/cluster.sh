# A test cluster of K emulated hosts on this one machine (sourced by the many-hosts tests; root).
#
#   . tests/cluster/cluster.sh
#   cluster_up K [MBIT]     hosts h0..h(K-1) and a head node "head", every link at MBIT Mbit/s
#                           (0 or absent: unshaped); sets CL_* below; removes itself at exit
#   cluster_head CMD...     runs CMD on the head node (where mpirun and the agent run)
#   cluster_on HOST CMD...  runs CMD on HOST through its sshd (the way Open MPI reaches it)
#   cluster_kill_host HOST  every process on HOST killed at once (its sshd included)
#   cluster_freeze_host HOST  every process on HOST stopped (SIGSTOP) at once: a hang, no
#                           connection closed (the kernel still accepts and acknowledges)
#   cluster_thaw_host HOST  every process on HOST continued (SIGCONT): the host answers again
#   cluster_revive_host HOST  HOST back as a new machine: an empty disk, a fresh sshd
#   cluster_shape MBIT      every link reshaped to MBIT Mbit/s (0: unshaped)
#   cluster_regions FAST SLOW "H..." "H..."  two regions of hosts: each host's egress (tc htb) at
#                           FAST Mbit/s to a host of its own region, SLOW to one of the other
#                           (a tbf under the slow class, so a long GSO packet is not let through
#                           at once; its queue 100 ms at SLOW, at least 256 KiB)
#   cluster_place PLAN "H..." ...  one device a stage: pipeline p's stages on the hosts of the p-th
#                           list, in order (each host's devices indexed 0, 1, ... as they come);
#                           PLAN rewritten, and beside it PLAN's .json made .hosts, rank r's host
#                           on line r (what autohet plan --rankfile writes, for mpirun --hostfile)
#   cluster_short           true when AH_CLUSTER_SHORT=1 (.ci/run's sanitizer stage): a test
#                           then runs its short subset (each test's header says which)
#   cluster_down            removes everything cluster_up made (also run by the EXIT trap, on
#                           SIGTERM/SIGINT/SIGHUP once the foreground command returns; what a
#                           SIGKILLed test left, the next cluster_up removes)
#
# Each host is a network namespace with one veth to a bridge that lives in a namespace of its own
# (the switch), its own hostname (UTS namespace), its own processes (PID namespace: a host cannot
# signal another's), its own private disk (mount namespace) and its own host memory: a fresh tmpfs
# on /dev/shm (CL_SHM_MB, default 512 MiB), gone with the host's last process (cluster_kill_host)
# and empty again after cluster_revive_host, as a machine's RAM (the in-memory checkpoint replicas
# live there: docs/checkpoints.md), and an empty ~/.bashrc (below):
# CL_DISK is the same path on every host, and each sees only its own directory there (the head
# and this machine see an empty directory). Hosts are reached through a real sshd per host with
# keys, host keys and known_hosts this script makes: `ssh -F CL_SSH_CONFIG` in BatchMode, so a
# host that would ask for a password or an unknown host key fails at once. CL_RSH is a command
# that does that (for Open MPI's plm_rsh_agent and autohet run --rsh-agent). Every address is in
# 10.250.X.0/24 inside these namespaces; this machine's own namespace gets none.
#
# Shaping: tc tbf on each host's and the head's interface, egress, at MBIT (a host-to-host
# transfer is shaped once, at the sender; cl_tbf below). This kernel has no netem, so no
# latency is added; cluster_up says so when asked for one (CL_LATENCY_MS, refused when set).
#
# Sets: CL_DIR (all state: keys, configs, logs), CL_HOSTS (h0 h1 ...), CL_IFACE (the interface
# name in every namespace, for btl_tcp_if_include / oob_tcp_if_include), CL_RSH, CL_SSH_CONFIG,
# CL_DISK, CL_HOSTFILE_ALL (every host with 64 slots).

CL_IFACE=ahc0
CL_SSHD=${CL_SSHD:-/usr/sbin/sshd}

cl_fail() { echo "cluster.sh: $*" >&2; return 1; }

# cl_ns NAME: the namespace name of host NAME in this cluster.
cl_ns() { echo "ah$CL_ID-$1"; }

cluster_short() { [ "${AH_CLUSTER_SHORT:-0}" = 1 ]; }

# cl_pids_in NS: the pids whose network namespace is NS.
cl_pids_in() { ip netns pids "$(cl_ns "$1")" 2>/dev/null; }

# cl_tbf NS MBIT: NS's interface shaped to MBIT Mbit/s. The bucket holds 1 ms of the rate (16 KiB at
# least: a few packets), so that a link idle for a while sends what follows at about its rate, not
# a free burst first (64 KiB of free bytes per round of a small all-reduce at 20 Mbit/s were a
# quarter of it); the queue holds 100 ms.
cl_tbf() {
    local burst=$(($2 * 125 > 16384 ? $2 * 125 : 16384))
    ip netns exec "$1" tc qdisc replace dev "$CL_IFACE" root tbf rate "${2}mbit" burst "$burst" latency 100ms
}

# cl_host_up NAME ADDR MBIT: a namespace on the switch at ADDR, its own hostname and disk, an sshd.
cl_host_up() {
    local name=$1 addr=$2 mbit=$3 ns veth
    ns=$(cl_ns "$name")
    veth=ahv$CL_ID$4
    ip netns add "$ns" || return 1
    ip -n "$(cl_ns sw)" link add "$veth" type veth peer name "$CL_IFACE" netns "$ns" || return 1
    ip -n "$(cl_ns sw)" link set "$veth" master ahbr up || return 1
    ip -n "$ns" addr add "$addr/24" dev "$CL_IFACE" || return 1
    ip -n "$ns" link set "$CL_IFACE" up && ip -n "$ns" link set lo up || return 1
    if [ "$mbit" != 0 ]; then
        cl_tbf "$ns" "$mbit" || return 1
    fi
    mkdir -p "$CL_DIR/disks/$name"
    echo "$addr $name" >>"$CL_DIR/hosts"
}

# cl_sshd NAME: host NAME's sshd, inside its UTS and mount namespaces (every session it starts
# inherits them): hostname NAME, CL_DIR/disks/NAME bind-mounted on CL_DISK, a tmpfs of its own on
# /dev/shm, /etc/hosts the cluster's.
cl_sshd() {
    local name=$1
    cat >"$CL_DIR/sshd-$name.conf" <<EOF
ListenAddress $(awk -v h="$name" '$2 == h {print $1}' "$CL_DIR/hosts")
Port 22
HostKey $CL_DIR/host_key
PidFile $CL_DIR/sshd-$name.pid
AuthorizedKeysFile $CL_DIR/client_key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv *
MaxStartups 100
MaxSessions 100
EOF
    # root's ~/.bashrc is this machine's, not the host's: bash sources it for every ssh command,
    # and here it runs `pyenv init` (seconds each under load; a lock that a killed host left
    # behind makes every later session wait 60 s), so each host sees an empty one
    ip netns exec "$(cl_ns "$name")" unshare --uts --mount --pid --fork --mount-proc --propagation private sh -c '
        hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" /etc/hosts &&
        mount -t tmpfs -o "size=$8m,mode=1777" tmpfs /dev/shm &&
        { [ ! -e "$7" ] || mount --bind /dev/null "$7"; } && exec "$5" -D -e -f "$6"' \
        sh "$name" "$CL_DIR/disks/$name" "$CL_DISK" "$CL_DIR/hosts" "$CL_SSHD" "$CL_DIR/sshd-$name.conf" "$HOME/.bashrc" \
        "${CL_SHM_MB:-512}" \
        >"$CL_DIR/sshd-$name.log" 2>&1 &
    disown
}

# cl_gc: removes clusters whose test was SIGKILLed (no trap ran): their owner pid is gone.
cl_gc() {
    local d owner
    for d in /tmp/ah-cluster.*; do
        [ -r "$d/owner" ] || continue
        owner=$(cat "$d/owner")
        kill -0 "$owner" 2>/dev/null && continue
        (CL_ID=$(cat "$d/id") CL_DIR=$d && cluster_down)
    done
}

cluster_up() {
    local k=$1 mbit=${2:-0} i
    [ "$(id -u)" = 0 ] || { cl_fail "needs root (network namespaces)"; return 1; }
    [ -x "$CL_SSHD" ] || { cl_fail "no $CL_SSHD: apt-get install openssh-server (scripts/setup.sh)"; return 1; }
    command -v ip >/dev/null || { cl_fail "no ip: apt-get install iproute2 (scripts/setup.sh)"; return 1; }
    [ -z "${CL_LATENCY_MS:-}" ] || { cl_fail "CL_LATENCY_MS: this kernel has no netem; only bandwidth is shaped"; return 1; }
    CL_ID=$(printf '%04x' $((RANDOM % 65536)))
    CL_DIR=$(mktemp -d /tmp/ah-cluster.XXXXXX)
    CL_DISK=$CL_DIR/disk
    CL_SSH_CONFIG=$CL_DIR/ssh_config
    CL_RSH=$CL_DIR/rsh
    CL_HOSTS=""
    # after the caller's own EXIT trap, which stays
    local prev
    prev=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
    trap "cluster_down; $prev" EXIT
    # a test killed (ctest's timeout, Ctrl-C) exits through the EXIT trap too
    trap 'exit 143' TERM HUP
    trap 'exit 130' INT
    mkdir -p "$CL_DISK" /run/sshd
    : >"$CL_DIR/hosts"
    cl_gc
    echo "$CL_ID" >"$CL_DIR/id"
    echo $$ >"$CL_DIR/owner"
    ip netns add "$(cl_ns sw)" || return 1
    ip -n "$(cl_ns sw)" link add ahbr type bridge && ip -n "$(cl_ns sw)" link set ahbr up || return 1
    # the head node: mpirun and the agent; sees this machine's files, reaches the hosts over ssh
    cl_host_up head "10.250.$((16#${CL_ID:0:2} % 200)).254" "$mbit" h || return 1
    for ((i = 0; i < k; i++)); do
        cl_host_up "h$i" "10.250.$((16#${CL_ID:0:2} % 200)).$((i + 1))" "$mbit" "$i" || return 1
        CL_HOSTS="$CL_HOSTS h$i"
    done
    CL_HOSTS=${CL_HOSTS# }
    ssh-keygen -q -t ed25519 -N '' -f "$CL_DIR/host_key" || return 1
    ssh-keygen -q -t ed25519 -N '' -f "$CL_DIR/client_key" || return 1
    : >"$CL_DIR/known_hosts"
    for i in $CL_HOSTS; do
        echo "$i $(cut -d' ' -f1,2 "$CL_DIR/host_key.pub")" >>"$CL_DIR/known_hosts"
        cl_sshd "$i"
    done
    # SendEnv OPENBLAS_*: every host is this machine's image, whose environment may choose
    # OpenBLAS's kernel (OPENBLAS_CORETYPE): without it a host's ranks would pick another one
    # than a rank started here, and round differently (the sshd accepts any variable)
    cat >"$CL_SSH_CONFIG" <<EOF
Host *
    SendEnv OPENBLAS_*
    User root
    IdentityFile $CL_DIR/client_key
    IdentitiesOnly yes
    UserKnownHostsFile $CL_DIR/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 5
    ServerAliveInterval 2
    ServerAliveCountMax 3
    LogLevel ERROR
    ControlMaster auto
    ControlPath $CL_DIR/cm-%h
    ControlPersist 120
EOF
    printf '#!/bin/sh\n# ssh into the test cluster (tests/cluster/cluster.sh)\nexec ssh -F %s "$@"\n' "$CL_SSH_CONFIG" >"$CL_RSH"
    chmod +x "$CL_RSH"
    : >"$CL_DIR/hostfile"
    for i in $CL_HOSTS; do echo "$i slots=64" >>"$CL_DIR/hostfile"; done
    CL_HOSTFILE_ALL=$CL_DIR/hostfile
    # every sshd answers (BatchMode: a failure here is the cluster's, not a prompt)
    for i in $CL_HOSTS; do
        local ok=0 t
        for t in $(seq 50); do
            if cluster_head "$CL_RSH" "$i" true 2>/dev/null; then ok=1; break; fi
            sleep 0.1
        done
        [ $ok = 1 ] || { cat "$CL_DIR/sshd-$i.log" >&2; cl_fail "host $i: sshd does not answer"; return 1; }
    done
}

# cluster_head CMD...: CMD in the head's network namespace, with the cluster's /etc/hosts.
cluster_head() {
    ip netns exec "$(cl_ns head)" unshare --mount --propagation private sh -c \
        'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$CL_DIR/hosts" "$@"
}

cluster_on() {
    local host=$1
    shift
    cluster_head "$CL_RSH" "$host" "$@"
}

# cluster_kill_host HOST: SIGKILL to every process in HOST's network namespace, at once.
cluster_kill_host() {
    local pids
    pids=$(cl_pids_in "$1")
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    return 0
}

# cluster_freeze_host HOST: SIGSTOP to every process in HOST's network namespace, at once.
cluster_freeze_host() {
    local pids
    pids=$(cl_pids_in "$1")
    [ -n "$pids" ] && kill -STOP $pids
}

cluster_thaw_host() {
    local pids
    pids=$(cl_pids_in "$1")
    [ -n "$pids" ] && kill -CONT $pids
}

# cl_addr HOST: HOST's address on the switch.
cl_addr() { awk -v h="$1" '$2 == h {print $1}' "$CL_DIR/hosts"; }

# cl_region_shape HOST FAST SLOW "OTHER...": HOST's egress at FAST Mbit/s, SLOW to the OTHER hosts.
cl_region_shape() {
    local ns other
    ns=$(cl_ns "$1")
    ip netns exec "$ns" tc qdisc del dev "$CL_IFACE" root 2>/dev/null
    ip netns exec "$ns" tc qdisc add dev "$CL_IFACE" root handle 1: htb default 10 r2q 1000 || return 1
    ip netns exec "$ns" tc class add dev "$CL_IFACE" parent 1: classid 1:10 htb rate "${2}mbit" || return 1
    ip netns exec "$ns" tc class add dev "$CL_IFACE" parent 1: classid 1:20 htb rate "${3}mbit" || return 1
    # htb sends a packet whenever its class has tokens left, whatever its length, so TCP's 64 KiB
    # GSO packets crossed at once after an idle moment (a pipeline's 32 KiB activations crossed
    # 5 Mbit/s in 1 ms: bench_hier_sync PLAN=pp); tbf under the slow class cuts them into segments
    # and its bucket holds a few packets. Its queue holds 100 ms at SLOW but never less than 256
    # KiB: the bench scales a WAN's rate down about 1000x and keeps the messages' sizes, and a
    # queue sized in time shrinks with the rate (62.5 KB at 5 Mbit/s), where a real link's buffer
    # (100 ms at gigabits: megabytes) takes such bursts whole. At 62.5 KB bench_hier_sync PLAN=pp-tp2
    # (two TP ranks a host, each sending 32 KiB at once, two micro-batches back to back in the
    # warm-up) overflowed it: 235-297 tail drops a run, ~200 retransmissions a host, the WAN's
    # cost 2.2x (docs/multi-host.md). 100 ms is 250 KB at 20 Mbit/s, so the floor changes little there.
    local limit
    limit=$(awk -v r="$3" 'BEGIN { b = r * 12500; printf "%d", (b > 262144 ? b : 262144) }')
    ip netns exec "$ns" tc qdisc add dev "$CL_IFACE" parent 1:20 handle 20: tbf rate "${3}mbit" burst 4500 \
        limit "$limit" || return 1
    for other in $4; do
        ip netns exec "$ns" tc filter add dev "$CL_IFACE" parent 1: protocol ip prio 1 u32 \
            match ip dst "$(cl_addr "$other")/32" flowid 1:20 || return 1
    done
}

cluster_place() {
    local plan=$1
    shift
    python3 - "$plan" "$@" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
place = [hosts.split() for hosts in sys.argv[2:]]
used = {}
for p, hosts in zip(d["pipelines"], place):
    assert len(p["stages"]) == len(hosts)
    for s, h in zip(p["stages"], hosts):
        s["devices"] = [{"node": h, "index": used.setdefault(h, 0)}]
        used[h] += 1
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\n".join(x["node"] for p in d["pipelines"] for s in p["stages"] for x in s["devices"]))' \
        "$plan" >"${plan%.json}.hosts"
}

cluster_regions() {
    local h
    for h in $3; do cl_region_shape "$h" "$1" "$2" "$4" || return 1; done
    for h in $4; do cl_region_shape "$h" "$1" "$2" "$3" || return 1; done
}

cluster_shape() {
    local h
    for h in head $CL_HOSTS; do
        ip netns exec "$(cl_ns "$h")" tc qdisc del dev "$CL_IFACE" root 2>/dev/null
        [ "$1" = 0 ] && continue
        cl_tbf "$(cl_ns "$h")" "$1" || return 1
    done
}

cluster_revive_host() {
    local host=$1 t
    rm -rf "$CL_DIR/disks/$host" && mkdir -p "$CL_DIR/disks/$host" || return 1
    cl_sshd "$host"
    for t in $(seq 50); do
        cluster_head "$CL_RSH" "$host" true 2>/dev/null && return 0
        sleep 0.1
    done
    cl_fail "host $host: sshd does not answer after the revival"
}

cluster_down() {
    [ -n "${CL_ID:-}" ] || return 0
    local h all
    # every namespace of this cluster, the ones a failed cluster_up made half-way included
    all=$(ip netns list | awk -v p="ah$CL_ID-" 'index($1, p) == 1 {print substr($1, length(p) + 1)}')
    for h in $all; do
        cluster_kill_host "$h"
    done
    for h in $all; do
        # pids die asynchronously; ip netns del only unlinks, the namespace goes with its last pid
        ip netns del "$(cl_ns "$h")" 2>/dev/null
    done
    [ -n "${CL_DIR:-}" ] && rm -rf "$CL_DIR"
    CL_ID=""
}
