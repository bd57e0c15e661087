#!/usr/bin/env bash
# The hierarchical DP sync against the flat ring on the same plan, across two emulated regions
# (tests/cluster/cluster.sh; root): four hosts, h0 h1 in region east and h2 h3 in west, one rank
# each, pure DP of tiny-gpt2 (4 replicas: examples/plans/train-dp4.json). Each host's egress is
# shaped with tc htb: to a host of its own region at FAST Mbit/s, to one of the other region at
# SLOW Mbit/s (this kernel has no netem: no WAN delay is added, and the cluster file's latencies
# stay small). The cluster file says the same: inter_node_gb_s FAST / 8000, inter_region_gb_s SLOW
# / 8000 (per GPU, one GPU a host), a private east-west link. The same plan runs with "dp_sync":
# "ring" and "hierarchical", alternating round by round (so a change of this machine's load falls
# on both alike), --no-overlap-grad-sync (the whole sync after the backward, as pred.iteration_s
# counts it), with what autohet run --launcher ssh passes to mpirun (src/elastic/launch_ssh.c: the
# ring all-reduce the model counts). Printed: per sync, autohet evaluate's predicted iteration and
# DP sync and the measured median step (steps 2.. of STEPS, median over ROUNDS); the ring minus
# hierarchical difference measured against predicted, and hierarchical / ring both ways.
# Usage: bash bench/bench_hier_sync.sh [BUILD_DIR] [MBIT_SLOW] [MBIT_FAST]   (default build, 20, 400)
# STEPS (default 10), ROUNDS (default 2).
set -u
SLOW=${2:-20}
FAST=${3:-400}
STEPS=${STEPS:-10}
ROUNDS=${ROUNDS:-2}
HOSTS=4
. "$(dirname "$0")/hosts_common.sh"
cluster_regions "$FAST" "$SLOW" "h0 h1" "h2 h3" || fail "tc htb between the regions"
CMPI+=("${AUTOHET_MPI[@]}")
printf 'h0\nh1\nh2\nh3\n' >"$WORK/hosts"
for sync in ring hierarchical; do
    python3 - "$SRC/examples/plans/train-dp4.json" "$WORK/plan-$sync.json" "$SLOW" "$FAST" "$sync" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
slow, fast, sync = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
proto = d["cluster"]["nodes"][0]
d["cluster"]["nodes"] = [dict(proto, name=f"h{i}", count=1, zone=r + "-a", region=r)
                         for i, r in enumerate(["east", "east", "west", "west"])]
d["cluster"]["network"].update(inter_node_gb_s=fast / 8000, latency_us=50, inter_zone_gb_s=fast / 8000,
                               inter_region_gb_s=slow / 8000, inter_region_latency_us=50,
                               links=[{"between": ["east", "west"], "private": True}])
for i, p in enumerate(d["pipelines"]):
    p["stages"][0]["devices"] = [{"node": f"h{i}", "index": 0}]
d["dp_sync"] = sync
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
    "$AUTOHET" evaluate --plan "$WORK/plan-$sync.json" --json >"$WORK/eval-$sync.json" || fail "evaluate ($sync)"
done
for round in $(seq "$ROUNDS"); do
    for sync in ring hierarchical; do
        cluster_head timeout 300 "${CMPI[@]}" -np 4 --hostfile "$WORK/hosts" \
            "$AUTOHET" train --plan "$WORK/plan-$sync.json" --data "$WORK/text.bin" --steps "$STEPS" --quiet \
            --no-overlap-grad-sync --metrics "$WORK/m-$sync-$round.jsonl" 2>"$WORK/err" ||
            { cat "$WORK/err" >&2; fail "training ($sync, round $round)"; }
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); links: ${FAST} Mbit/s inside a region, ${SLOW} Mbit/s across"
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
row = {}
print(f"{'DP sync':>12} {'predicted s':>12} {'pred. sync':>11} {'measured s':>11} {'meas/pred':>10}")
for sync in ("ring", "hierarchical"):
    ev = json.load(open(f"{work}/eval-{sync}.json"))
    p, s = ev["iteration_s"], ev["breakdown"]["dp_sync_s"]
    m = statistics.median(statistics.median([json.loads(l)["seconds"] for l in open(f"{work}/m-{sync}-{r}.jsonl")][2:])
                          for r in range(1, rounds + 1))
    row[sync] = (p, m)
    print(f"{sync:>12} {p:12.4f} {s:11.4f} {m:11.4f} {m / p:10.2f}")
(pr, mr), (ph, mh) = row["ring"], row["hierarchical"]
print(f"ring - hierarchical: predicted {pr - ph:.4f} s, measured {mr - mh:.4f} s, measured/predicted {(mr - mh) / (pr - ph):.2f}")
print(f"hierarchical / ring: predicted {ph / pr:.3f}, measured {mh / mr:.3f}")
PY
