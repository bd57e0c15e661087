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
# Prints each case's mpirun exit status, seconds, and whether the survivors finished.
#   bash bench/mpi_leave_probe.sh [OUT_DIR]
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O1 -o "$OUT/probe" "$SRC/bench/mpi_leave_probe.c" || exit 1
secs() { echo "$(date +%s.%N) - $1" | bc; }
report() { # report CASE STATUS START LOG
    local fin
    fin=$(grep -c "^rank [01] .* finalized" "$4")
    printf '%-58s mpirun status %3s after %5.1f s; survivors finalized: %s of 2\n' "$1" "$2" "$(secs "$3")" "$fin"
}
for opt in "" "--enable-recovery"; do
    for mode in finalize exit kill; do
        s=$(date +%s.%N)
        timeout 30 mpirun --quiet $opt --oversubscribe -np 3 "$OUT/probe" $mode 25 >"$OUT/local-$mode$opt.log" 2>&1
        report "one machine, rank 2 leaves ($mode)${opt:+, $opt}" $? "$s" "$OUT/local-$mode$opt.log"
    done
done
if [ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ]; then
    . "$SRC/tests/cluster/cluster.sh"
    cluster_up 3 0 >/dev/null || exit 1
    printf 'h0 slots=1\nh1 slots=1\nh2 slots=1\n' >"$CL_DIR/hf"
    cp "$OUT/probe" "$CL_DIR/probe"
    for opt in "" "--enable-recovery"; do
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
    cluster_down
else
    echo "3 emulated hosts: skipped (needs root and sshd)"
fi
ompi-server --no-daemonize -r "$OUT/uri" & server=$!
sleep 1
for opt in "" "--enable-recovery"; do
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
kill $server 2>/dev/null
echo "logs in $OUT"
