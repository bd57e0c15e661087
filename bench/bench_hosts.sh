#!/usr/bin/env bash
# The cost model's network terms against links of known bandwidth, on emulated hosts
# (tests/cluster/cluster.sh; root), one rank per host (the model's link is per device), the links
# shaped by tc tbf to each speed in turn and the cluster file's inter_node_gb_s set to the same
# speed. Two plans of tiny-gpt2:
#   dp  three data-parallel replicas on h0..h2: every step's gradient sync crosses hosts;
#   pp  two pipelines of three stages (h0 > h1 > h2 and h3 > h4 > h5), 4 micro-batches each: every
#       activation and gradient between stages crosses hosts, and each stage's DP pair too.
#       Its CPU type is emulated 20x slower, so that a stage's compute per micro-batch exceeds
#       one p2p message at the slow speed, as on real clusters (the model charges p2p on the
#       fill and drain, not in the steady state).
# Per plan and speed: autohet evaluate's predicted iteration, DP-sync and p2p time, and the
# measured median step (steps 2.. of STEPS). A prediction's compute part is the roofline of an
# emulated CPU type, not this machine's, so the network terms are checked by the difference
# between two speeds: measured delta / predicted delta (target within 15 %), printed beside each
# speed's own ratio. Each run uses Open MPI's TCP transport twice:
#   defaults  Open MPI's own: a message over 64 KiB waits for the receiver's go-ahead (the
#             rendezvous), which queues behind the receiver's own outgoing data in the shaped
#             link's FIFO (up to 100 ms of it): a latency the model's latency_us does not have;
#   autohet   what autohet run --launcher ssh passes (src/elastic/launch_ssh.c): the ring
#             all-reduce the model counts and messages up to 4 MiB sent eagerly.
# Usage: bash bench/bench_hosts.sh [BUILD_DIR] [MBIT_SLOW] [MBIT_FAST]   (default build, 20, 100)
# STEPS: steps per run (default 12; the first two are not counted). ROUNDS: runs per plan, speed
# and MPI setting, the speeds alternating (default 2). PLANS: "dp pp" (default).
set -u
SLOW=${2:-20}
FAST=${3:-100}
STEPS=${STEPS:-12}
ROUNDS=${ROUNDS:-2}
PLANS=${PLANS:-dp pp}
HOSTS=6
. "$(dirname "$0")/hosts_common.sh"
for mbit in "$SLOW" "$FAST"; do
    for plan in $PLANS; do
        python3 - "$SRC/examples/plans/train-dp4.json" "$WORK/plan-$plan-$mbit.json" "$mbit" "$plan" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mbit, kind = float(sys.argv[3]), sys.argv[4]
ty = d["pipelines"][0]["stages"][0]["gpu"]
if kind == "dp":  # three replicas of the whole model, one per host
    d["pipelines"] = d["pipelines"][:3]
    for i, (p, mb) in enumerate(zip(d["pipelines"], [3, 3, 2])):
        p["micro_batches"] = mb
        p["stages"][0]["devices"] = [{"node": "h%d" % i, "index": 0}]
    hosts = 3
else:  # two pipelines of three stages, each stage on its own host
    d["train"].update(global_batch=16, seq_len=64, micro_batch=2)
    d["cluster"]["gpu_types"][ty]["emulate"]["slowdown"] = 20
    cuts = [(0, 2), (2, 3), (3, 4)]
    d["pipelines"] = [{"micro_batches": 4, "stages": [
        {"layers": list(c), "gpu": ty, "recompute": False, "devices": [{"node": "h%d" % (3 * p + s), "index": 0}]}
        for s, c in enumerate(cuts)]} for p in range(2)]
    hosts = 6
proto = d["cluster"]["nodes"][0]
d["cluster"]["nodes"] = [dict(proto, name="h%d" % i, count=1) for i in range(hosts)]
d["cluster"]["network"]["inter_node_gb_s"] = mbit / 8000.0
d["cluster"]["network"]["latency_us"] = 50
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
        "$AUTOHET" evaluate --plan "$WORK/plan-$plan-$mbit.json" --json >"$WORK/eval-$plan-$mbit.json" ||
            fail "evaluate $plan at $mbit Mbit/s"
    done
done
# the speeds alternate round by round, so that a change in this machine's load between runs
# falls on both speeds alike (each speed's figure is the median over its rounds' medians)
for round in $(seq "$ROUNDS"); do
    for mbit in "$SLOW" "$FAST"; do
        cluster_shape "$mbit" || fail "tc at $mbit Mbit/s"
        for plan in $PLANS; do
            np=$([ "$plan" = dp ] && echo 3 || echo 6)
            seq 0 $((np - 1)) | sed 's/^/h/' >"$WORK/hosts-$plan"
            for mpi in defaults autohet; do
                extra=()
                [ $mpi = autohet ] && extra=("${AUTOHET_MPI[@]}")
                cluster_head timeout 300 "${CMPI[@]}" "${extra[@]}" -np "$np" --hostfile "$WORK/hosts-$plan" \
                    "$AUTOHET" train --plan "$WORK/plan-$plan-$mbit.json" --data "$WORK/text.bin" --steps "$STEPS" \
                    --quiet --metrics "$WORK/m-$plan-$mbit-$mpi-$round.jsonl" 2>"$WORK/err" ||
                    { cat "$WORK/err" >&2; fail "training $plan at $mbit Mbit/s"; }
            done
        done
    done
done
python3 - "$WORK" "$ROUNDS" "$SLOW" "$FAST" $PLANS <<'PY'
import json, statistics, sys
work, rounds, speeds, plans = sys.argv[1], int(sys.argv[2]), sys.argv[3:5], sys.argv[5:]
print(f"{'plan':>4} {'link':>10} {'MPI':>9} {'predicted s':>12} {'DP sync':>8} {'p2p':>7} {'measured s':>11} {'meas/pred':>10}")
meas = {}
for plan in plans:
    for s in speeds:
        ev = json.load(open(f"{work}/eval-{plan}-{s}.json"))
        p, b = ev["iteration_s"], ev["breakdown"]
        for mpi in ("defaults", "autohet"):
            m = statistics.median(statistics.median([json.loads(l)["seconds"] for l in
                                                     open(f"{work}/m-{plan}-{s}-{mpi}-{r}.jsonl")][2:])
                                  for r in range(1, rounds + 1))
            meas[plan, s, mpi] = (p, m)
            print(f"{plan:>4} {s + ' Mbit/s':>10} {mpi:>9} {p:12.4f} {b['dp_sync_s']:8.4f} {b['p2p_s']:7.4f} {m:11.4f} {m / p:10.2f}")
for plan in plans:
    for mpi in ("defaults", "autohet"):
        (ps, ms), (pf, mf) = meas[plan, speeds[0], mpi], meas[plan, speeds[1], mpi]
        print(f"{plan}, slow - fast, MPI {mpi}: predicted {ps - pf:.4f} s, measured {ms - mf:.4f} s, "
              f"measured/predicted {(ms - mf) / (ps - pf):.2f}")
PY
