#!/usr/bin/env bash
# Plans across two emulated regions against the cost model (tests/cluster/cluster.sh; root): four
# hosts, h0 h1 in region east and h2 h3 in west, one rank each, tiny-gpt2. Each host's egress is
# shaped with tc htb: to a host of its own region at FAST Mbit/s, to one of the other region at
# SLOW Mbit/s (this kernel has no netem: no WAN delay is added, and the cluster file's latencies
# stay small; the slow class's queue holds 100 ms at SLOW, at least 256 KiB: tests/cluster/cluster.sh
# says why: at 5 Mbit/s 100 ms is 62.5 KB, which PLAN=pp-tp2's two ranks a host overflowed, an
# artefact of scaling the rate down, not something a real link's buffer does). The cluster file says the same: inter_node_gb_s FAST / 8000, inter_region_gb_s SLOW
# / 8000 (per GPU, one GPU a host), a private east-west link. PLAN picks what is measured:
#   dp  (default) the hierarchical DP sync against the flat ring on the same plan: pure DP, 4
#       replicas (examples/plans/train-dp4.json), "dp_sync": "ring" and "hierarchical";
#   pp  a pipeline across the regions: two pipelines of two stages (layers 0-1, 2-3), stage 0 on
#       an east host and stage 1 on a west host (h0 > h2, h1 > h3), micro-batch 2 x 64 tokens, 4
#       micro-batches each: every activation and gradient (32 KiB) crosses the WAN, each stage's
#       DP pair stays in its region (the tied embedding's group spans both: 64 KiB on the ring).
#       The CPU type is emulated 20x slower, so that a stage's compute per micro-batch exceeds
#       one message at SLOW (the model charges p2p on the fill and drain: docs/multi-host.md
#       "Network terms against shaped links"), and the compute is priced from `autohet profile`
#       of that emulation. "dp_sync": "hierarchical", under which the model prices each DP group
#       on its own links (the flat ring is priced on the plan's one slowest link: the stages'
#       in-region pairs at the WAN's speed). Run with the real WAN ("wan": SLOW across) and
#       with the WAN as fast as the region link ("flat": FAST across, shaped and priced so), so
#       the difference isolates the WAN's cost.
#   pp-tp2  the same pipelines at TP 2 (two ranks a host, 8 ranks), both on the real WAN: hops
#       scatter/gather ("sg": each TP rank sends its half of the 32 KiB boundary across, the
#       receiving pair all-gathers it inside its host) against "whole" ("p2p": "whole": each TP
#       rank sends all of it), so the difference is what scatter/gather saves on the WAN.
# Both run the two variants alternating round by round (so a change of this machine's load falls
# on both alike), --no-overlap-grad-sync (the whole sync after the backward, as pred.iteration_s
# counts it), with what autohet run --launcher ssh passes to mpirun (src/elastic/launch_ssh.c: the
# ring all-reduce the model counts). Printed: per variant, autohet evaluate's predicted iteration,
# DP sync and p2p and the measured median step (steps 2.. of STEPS, median over ROUNDS); the first
# minus the second variant's time measured against predicted, and second / first both ways.
# Usage: bash bench/bench_hier_sync.sh [BUILD_DIR] [MBIT_SLOW] [MBIT_FAST]   (default build, 20, 400)
# PLAN (dp, pp or pp-tp2; default dp), STEPS (default 10), ROUNDS (default 2). About 2-4 minutes each.
set -u
SLOW=${2:-20}
FAST=${3:-400}
STEPS=${STEPS:-10}
ROUNDS=${ROUNDS:-2}
PLAN=${PLAN:-dp}
case $PLAN in
dp) VARIANTS="ring hierarchical" ;;
pp) VARIANTS="wan flat" ;;
pp-tp2) VARIANTS="whole sg" ;;
*) echo "bench_hier_sync: PLAN is dp, pp or pp-tp2, not '$PLAN'" >&2; exit 2 ;;
esac
HOSTS=4
. "$(dirname "$0")/hosts_common.sh"
CMPI+=("${AUTOHET_MPI[@]}")
for v in $VARIANTS; do
    python3 - "$SRC/examples/plans/train-dp4.json" "$WORK/plan-$v.json" "$SLOW" "$FAST" "$PLAN" "$v" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
slow, fast, kind, v = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
proto = d["cluster"]["nodes"][0]
t = 2 if kind == "pp-tp2" else 1
d["cluster"]["nodes"] = [dict(proto, name=f"h{i}", count=t, zone=r + "-a", region=r)
                         for i, r in enumerate(["east", "east", "west", "west"])]
wan = fast if v == "flat" else slow
d["cluster"]["network"].update(inter_node_gb_s=fast / 8000, latency_us=50, inter_zone_gb_s=fast / 8000,
                               inter_region_gb_s=wan / 8000, inter_region_latency_us=50,
                               links=[{"between": ["east", "west"], "private": True}])
if kind == "dp":
    for i, p in enumerate(d["pipelines"]):
        p["stages"][0]["devices"] = [{"node": f"h{i}", "index": 0}]
    d["dp_sync"] = v
else:  # pipeline p: h(p) in east > h(p + 2) in west
    ty = d["pipelines"][0]["stages"][0]["gpu"]
    d["train"].update(global_batch=16, seq_len=64, micro_batch=2)
    d["cluster"]["gpu_types"][ty]["emulate"]["slowdown"] = 20
    d["pipelines"] = [{"micro_batches": 4, "stages": [
        {"layers": [2 * s, 2 * s + 2], "gpu": ty, "recompute": False,
         "devices": [{"node": f"h{p + 2 * s}", "index": k} for k in range(t)]}
        for s in range(2)]} for p in range(2)]
    d["dp_sync"] = "hierarchical"
    d["tp"] = t
    # tc shapes a host's egress, which its t ranks share: the pair carries two hosts' worth
    d["cluster"]["network"]["links"][0]["total_gb_s"] = 2 * wan / 8000
    if v == "whole":
        d["p2p"] = "whole"
    json.dump(d["cluster"], open(sys.argv[2] + ".cluster", "w"))
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
done
# PLAN=pp: the compute priced from a profile of the emulated type (autohet profile runs the
# emulation as train does), not the type's roofline, so that the model's compute per micro-batch
# against one message is the measured one (the p2p the replay charges depends on it)
PROFILE=()
TP=1
[ "$PLAN" = pp-tp2 ] && TP=2
if [ "$PLAN" != dp ]; then
    first=${VARIANTS%% *}
    "$AUTOHET" profile --model tiny-gpt2 --cluster "$WORK/plan-$first.json.cluster" --micro-batch 2 --seq-len 64 \
        --tp "$TP" --steps 5 --rounds 3 -o "$WORK/profile.json" >/dev/null || fail "autohet profile"
    PROFILE=(--profile "$WORK/profile.json")
fi
for v in $VARIANTS; do
    "$AUTOHET" evaluate --plan "$WORK/plan-$v.json" "${PROFILE[@]}" --json >"$WORK/eval-$v.json" || fail "evaluate ($v)"
done
# ranks in the plan's order: pipeline by pipeline, stage by stage
# (mpirun maps by the file's lines, one a rank: a host's TP ranks are its lines in a row)
if [ "$PLAN" = dp ]; then printf 'h0\nh1\nh2\nh3\n'; else for h in h0 h2 h1 h3; do for _ in $(seq "$TP"); do echo "$h"; done; done; fi >"$WORK/hosts"
[ "$PLAN" = dp ] && { cluster_regions "$FAST" "$SLOW" "h0 h1" "h2 h3" || fail "tc htb between the regions"; }
for round in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do
        if [ "$PLAN" != dp ]; then
            cluster_regions "$FAST" "$([ "$v" = flat ] && echo "$FAST" || echo "$SLOW")" "h0 h1" "h2 h3" ||
                fail "tc htb between the regions ($v)"
        fi
        cluster_head timeout 300 "${CMPI[@]}" -np $((4 * ${TP:-1})) --hostfile "$WORK/hosts" \
            "$AUTOHET" train --plan "$WORK/plan-$v.json" --data "$WORK/text.bin" --steps "$STEPS" --quiet \
            --no-overlap-grad-sync --metrics "$WORK/m-$v-$round.jsonl" 2>"$WORK/err" ||
            { cat "$WORK/err" >&2; fail "training ($v, round $round)"; }
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); links: ${FAST} Mbit/s inside a region, ${SLOW} Mbit/s across (PLAN=$PLAN)"
python3 - "$WORK" "$ROUNDS" $VARIANTS <<'PY'
import json, statistics, sys
work, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
row = {}
print(f"{'variant':>12} {'predicted s':>12} {'pred. sync':>11} {'pred. p2p':>10} {'measured s':>11} {'meas/pred':>10}")
for v in variants:
    ev = json.load(open(f"{work}/eval-{v}.json"))
    p, b = ev["iteration_s"], ev["breakdown"]
    m = statistics.median(statistics.median([json.loads(l)["seconds"] for l in open(f"{work}/m-{v}-{r}.jsonl")][2:])
                          for r in range(1, rounds + 1))
    row[v] = (p, m)
    print(f"{v:>12} {p:12.4f} {b['dp_sync_s']:11.4f} {b['p2p_s']:10.4f} {m:11.4f} {m / p:10.2f}")
(a, (pa, ma)), (b, (pb, mb)) = row.items()
print(f"{a} - {b}: predicted {pa - pb:.4f} s, measured {ma - mb:.4f} s, measured/predicted {(ma - mb) / (pa - pb):.2f}")
print(f"{b} / {a}: predicted {pb / pa:.3f}, measured {mb / ma:.3f}")
PY
