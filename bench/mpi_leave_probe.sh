#!/bin/bash
# Can ranks leave a running mpirun job without ending it? (issue 36, docs/elastic.md "Can survivors
# keep their processes?"). Builds bench/mpi_leave_probe.c with mpicc and runs, with and without
# mpirun --enable-recovery (ORTE's orte_enable_recovery):
#   1. on this machine, 3 ranks: the last one leaves after an MPI_Comm_split that leaves it out
#      (MPI_Finalize then exit 0 / exit 0 without MPI_Finalize / SIGKILL), the other two all-reduce
#      25 times 0.2 s apart on the split communicator, then finalize;
#   2. (root, sshd: tests/cluster/cluster.sh) the same over 3 emulated hosts, one rank each, with
#      the leaver's whole host killed (its Open MPI daemon too) 2.5 s in;
#   3. two separate mpirun jobs joined through MPI_Comm_accept/connect (an ompi-server), the
#      connecting job's rank then SIGKILLed: what the other job's next all-reduces do.
#   4. (root, sshd) one mpirun job a host (h0 h1 h2, each started inside its host), joined through
#      MPI_Comm_accept/connect and MPI_Intercomm_merge (an ompi-server on the head), h2's job
#      joining the running world of the other two at a round boundary (no restart of theirs); at
#      the notice every rank is alive: the world splits off the leaving job, every rank lets go of
#      the communicators that span jobs (kept / MPI_Comm_free / MPI_Comm_disconnect), then the
#      leaver's whole host is killed: do the survivors' all-reduces after the death return, and do
#      their mpiruns exit 0? PROBE_RUNS times (default 3) each, the disconnect variant once;
#      PROBE_NP ranks a job (default 1: a job a host of one device).
# Prints each case's mpirun exit status, seconds, and whether the survivors finished.
#   [PROBE_CASES="local hosts jobs pair"] [PROBE_RUNS=3] [PROBE_NP=1] bash bench/mpi_leave_probe.sh [OUT_DIR]
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O1 -o "$OUT/probe" "$SRC/bench/mpi_leave_probe.c" || exit 1
CASES=" ${PROBE_CASES:-local hosts jobs pair} "
NP=${PROBE_NP:-1} # ranks in each job of the separate-jobs cases
wants() { [[ $CASES == *" $1 "* ]]; }
secs() { echo "$(date +%s.%N) - $1" | bc; }
report() { # report CASE STATUS START LOG
    local fin
    fin=$(grep -c "^rank [01] .* finalized" "$4")
    printf '%-58s mpirun status %3s after %5.1f s; survivors finalized: %s of 2\n' "$1" "$2" "$(secs "$3")" "$fin"
}
for opt in "" "--enable-recovery"; do
    wants local || break
    for mode in finalize exit kill; do
        s=$(date +%s.%N)
        timeout 30 mpirun --quiet $opt --oversubscribe -np 3 "$OUT/probe" $mode 25 >"$OUT/local-$mode$opt.log" 2>&1
        report "one machine, rank 2 leaves ($mode)${opt:+, $opt}" $? "$s" "$OUT/local-$mode$opt.log"
    done
done
# jobs_case LEAVER DETACH RUN: one mpirun a host (h0 h1 h2, each inside its host, NP ranks), joined
# through an ompi-server on the head; h2's job joins the running world of h0's and h1's at round 5;
# at round 12 (the notice) the world splits off job LEAVER, every rank lets go of the communicators
# that span jobs (DETACH: 0 keeps them, 1 MPI_Comm_disconnect, 2 MPI_Comm_free), then the leaver's
# host is killed; the survivors all-reduce to round 30 and finalize.
jobs_case() {
    local leaver=$1 detach=$2 run=$3 d k s st=() how=(kept disconnect free)
    d=$OUT/jobs-$leaver-$detach-$run
    mkdir -p "$d"
    cluster_head ompi-server --no-daemonize -r "$d/uri" & local server=$!
    for k in $(seq 50); do [ -s "$d/uri" ] && break; sleep 0.1; done
    s=$(date +%s.%N)
    local pids=()
    for k in 0 1 2; do
        cluster_on "h$k" timeout 30 mpirun --quiet --allow-run-as-root --ompi-server "file:$d/uri" -np $NP --oversubscribe \
            --mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE \
            "$CL_DIR/probe" jobs "$d" $k 3 "$leaver" "$detach" 5 12 30 >"$d/job$k.log" 2>&1 &
        pids+=($!)
    done
    for k in $(seq 250); do grep -q "leaver: " "$d/job$leaver.log" && break; sleep 0.1; done
    cluster_kill_host "h$leaver"
    touch "$d/dead"
    for k in 0 1 2; do wait "${pids[$k]}"; st+=($?); done
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    cluster_revive_host "h$leaver" >/dev/null
    local survivors="" after="" fin=0
    for k in 0 1 2; do
        [ "$k" = "$leaver" ] && continue
        survivors="$survivors ${st[$k]}"
        after="$after${after:++}$(grep -c "sum $((2 * NP)) (after the death)" "$d/job$k.log")"
        fin=$((fin + $(grep -c 'survivor: finalized' "$d/job$k.log")))
    done
    printf '%-58s survivors'"'"' mpirun status%s after %5.1f s; joined: %s; all-reduces after the death: %s; finalized: %s of %s\n' \
        "3 jobs$([ "$NP" = 1 ] || echo " of $NP ranks"), h2's joins; job $leaver leaves (${how[$detach]}), host h$leaver killed" "$survivors" "$(secs "$s")" \
        "$(grep -q "on the world: rc 0, sum $((3 * NP))" "$d/job$(((leaver + 1) % 3)).log" && echo yes || echo no)" \
        "${after:-0}" "$fin" $((2 * NP))
}
if [ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ]; then
    . "$SRC/tests/cluster/cluster.sh"
    cluster_up 3 0 >/dev/null || exit 1
    printf 'h0 slots=1\nh1 slots=1\nh2 slots=1\n' >"$CL_DIR/hf"
    cp "$OUT/probe" "$CL_DIR/probe"
    for opt in "" "--enable-recovery"; do
        wants hosts || break
        for mode in finalize kill; do
            s=$(date +%s.%N)
            cluster_head timeout 60 mpirun --quiet $opt --allow-run-as-root --mca plm_rsh_agent "$CL_RSH" \
                --hostfile "$CL_DIR/hf" --map-by seq -np 3 --mca btl_tcp_if_include $CL_IFACE \
                --mca oob_tcp_if_include $CL_IFACE "$CL_DIR/probe" $mode 25 >"$OUT/hosts-$mode$opt.log" 2>&1 &
            p=$!
            sleep 2.5
            cluster_kill_host h2
            wait $p
            report "3 hosts, rank 2 leaves ($mode), host h2 killed${opt:+, $opt}" $? "$s" "$OUT/hosts-$mode$opt.log"
            cluster_revive_host h2 >/dev/null
        done
    done
    for run in $(seq "${PROBE_RUNS:-3}"); do
        wants jobs || break
        jobs_case 2 2 "$run"
        jobs_case 0 2 "$run"
        jobs_case 2 0 "$run"
    done
    ! wants jobs || jobs_case 2 1 1
    cluster_down
else
    echo "3 emulated hosts: skipped (needs root and sshd)"
fi
wants pair && { ompi-server --no-daemonize -r "$OUT/uri" & server=$!; sleep 1; }
for opt in "" "--enable-recovery"; do
    wants pair || break
    rm -f "$OUT/port"
    s=$(date +%s.%N)
    timeout 20 mpirun --quiet $opt --ompi-server "file:$OUT/uri" -np 1 "$OUT/probe" accept "$OUT/port" 10 \
        >"$OUT/accept$opt.log" 2>&1 &
    a=$!
    timeout 20 mpirun --quiet $opt --ompi-server "file:$OUT/uri" -np 1 "$OUT/probe" connect "$OUT/port" \
        >"$OUT/connect$opt.log" 2>&1
    wait $a
    st=$?
    printf '%-58s mpirun status %3s after %5.1f s; all-reduces after the death returned: %s of 10\n' \
        "two jobs joined, the other job's rank killed${opt:+, $opt}" $st "$(secs "$s")" \
        "$(grep -c 'with the dead job' "$OUT/accept$opt.log")"
done
! wants pair || kill $server 2>/dev/null
echo "logs in $OUT"
