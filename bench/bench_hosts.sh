#!/usr/bin/env bash
# The cost model's network terms against links of known bandwidth: three emulated hosts
# (tests/cluster/cluster.sh; root), one data-parallel replica of tiny-gpt2 on each, so that every
# step's gradient sync crosses hosts; the links shaped by tc tbf to each speed in turn, the
# cluster file's inter_node_gb_s set to the same speed. Per speed: autohet evaluate's predicted
# iteration and DP-sync time, and the measured median step (steps 2.. of STEPS). The compute part
# of a prediction is the roofline of an emulated CPU type, not this machine's, so the network
# terms are checked by the difference between two speeds: measured delta / predicted delta
# (target within 15 %), printed side by side with each speed's own ratio. Each speed runs twice:
# with Open MPI's own choice of non-blocking all-reduce (libnbc: for 3 ranks, rank 0 sends twice
# the buffer) and with the ring the cost model counts (coll_libnbc_iallreduce_algorithm 1, what
# autohet run --launcher ssh passes).
# Usage: bash bench/bench_hosts.sh [BUILD_DIR] [MBIT_SLOW] [MBIT_FAST]   (default build, 20, 100)
# STEPS: steps per run (default 12; the first two are not counted).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
SLOW=${2:-20}
FAST=${3:-100}
STEPS=${STEPS:-12}
AUTOHET=$BUILD/autohet
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
. "$SRC/tests/cluster/cluster.sh"
fail() { echo "bench_hosts: $*" >&2; exit 1; }
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null || fail "tokenize"
cluster_up 3 0 || fail "cannot make the test cluster"
CMPI=(mpirun --mca plm_rsh_agent "$CL_RSH" --mca btl_tcp_if_include "$CL_IFACE" --mca oob_tcp_if_include "$CL_IFACE"
      --map-by seq --bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1)
printf 'h0\nh1\nh2\n' >"$WORK/hosts"
for mbit in "$SLOW" "$FAST"; do
    python3 - "$SRC/examples/plans/train-dp4.json" "$WORK/plan-$mbit.json" "$mbit" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"] = d["pipelines"][:3]
for i, (p, mb) in enumerate(zip(d["pipelines"], [3, 3, 2])):
    p["micro_batches"] = mb
    p["stages"][0]["devices"] = [{"node": "h%d" % i, "index": 0}]
nodes = d["cluster"]["nodes"][:3]
for i, n in enumerate(nodes):
    n["name"] = "h%d" % i
d["cluster"]["nodes"] = nodes
d["cluster"]["network"]["inter_node_gb_s"] = float(sys.argv[3]) / 8000.0
d["cluster"]["network"]["latency_us"] = 50
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
    "$AUTOHET" evaluate --plan "$WORK/plan-$mbit.json" --json >"$WORK/eval-$mbit.json" || fail "evaluate at $mbit Mbit/s"
    cluster_shape "$mbit" || fail "tc at $mbit Mbit/s"
    for algo in default ring; do
        extra=()
        [ $algo = ring ] && extra=(--mca coll_libnbc_iallreduce_algorithm 1)
        cluster_head timeout 300 "${CMPI[@]}" "${extra[@]}" -np 3 --hostfile "$WORK/hosts" "$AUTOHET" train \
            --plan "$WORK/plan-$mbit.json" --data "$WORK/text.bin" --steps "$STEPS" --quiet \
            --metrics "$WORK/m-$mbit-$algo.jsonl" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "training at $mbit Mbit/s"; }
    done
done
python3 - "$WORK" "$SLOW" "$FAST" <<'PY'
import json, statistics, sys
work, speeds = sys.argv[1], sys.argv[2:]
print(f"{'link':>10} {'all-reduce':>10} {'predicted s':>12} {'of it DP sync':>14} {'measured s':>11} {'measured/predicted':>19}")
meas = {}
for s in speeds:
    ev = json.load(open(f"{work}/eval-{s}.json"))
    p, d = ev["iteration_s"], ev["breakdown"]["dp_sync_s"]
    for algo in ("default", "ring"):
        m = statistics.median([json.loads(l)["seconds"] for l in open(f"{work}/m-{s}-{algo}.jsonl")][2:])
        meas[s, algo] = (p, m)
        print(f"{s + ' Mbit/s':>10} {algo:>10} {p:12.4f} {d:14.4f} {m:11.4f} {m / p:19.2f}")
for algo in ("default", "ring"):
    (ps, ms), (pf, mf) = meas[speeds[0], algo], meas[speeds[1], algo]
    print(f"slow - fast, {algo}: predicted {ps - pf:.4f} s, measured {ms - mf:.4f} s, "
          f"measured/predicted {(ms - mf) / (ps - pf):.2f}")
PY
