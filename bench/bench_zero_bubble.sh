# Zero-bubble (ZB-H1) against 1F1B (issue 35), measured: a deep pipeline with few micro-batches (the
# case where 1F1B idles most) on emulated mixed devices, one stage per device, trained under each
# schedule in alternation in one run, each against `autohet evaluate`'s prediction calibrated by
# `autohet profile` through the same emulation (which measures B and W apart).
# Layout: demo-gpt2's 6 blocks over 4 stages alternating a fast and a 2x slower type, the slow
# stages holding half the blocks: [0, 2) fast, [2, 3) slow, [3, 5) fast, [5, 6) slow (+ the head).
# The slowdowns are high (20x, 40x) so that the four ranks' own compute stays a small share of a
# core on a loaded 2-core machine: emulation assumes a rank computes when it wants to, and
# zero-bubble, which keeps the stages busy at once, is the schedule that assumption flatters least.
# Prints the ratios; never fails on a timing.
# Usage: bash bench/bench_zero_bubble.sh BUILD_DIR   [N=4 T=128 FAST=20 SLOW=40 STEPS=6 WARMUP=2 ROUNDS=3 KEEP=1]
# (KEEP=1 keeps the plans, profile, evaluations and metrics and names their directory)
set -euo pipefail
N=${N:-4} T=${T:-128} FAST=${FAST:-20} SLOW=${SLOW:-40}
STEPS=${STEPS:-6} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/common.sh"
type_json() { # tflops of the fast type / ratio, slowdown
    echo "{\"tflops\": {\"bf16\": $1, \"fp16\": $1, \"fp32\": $1}, \"mem_bw_gb_s\": 2.5, \"intra_node_gb_s\": 5, \"emulate\": {\"slowdown\": $2, \"memory_mib\": 512}}"
}
cat >"$WORK/cluster.json" <<JSON
{"gpu_types": {"cpu-fast": $(type_json 0.0125 "$FAST"), "cpu-slow": $(type_json 0.00625 "$SLOW")},
 "nodes": [{"name": "f0", "gpu": "cpu-fast", "count": 2, "usd_per_gpu_hour": 0.3},
           {"name": "s0", "gpu": "cpu-slow", "count": 2, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
for sched in 1f1b zero-bubble; do
    python3 - "$WORK/$sched.json" "$sched" "$N" "$T" "$WORK/cluster.json" <<'PY'
import json, sys
out, sched, n, T, cluster = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
cuts = [(0, 2, "cpu-fast", "f0", 0), (2, 3, "cpu-slow", "s0", 0), (3, 5, "cpu-fast", "f0", 1), (5, 6, "cpu-slow", "s0", 1)]
plan = {"version": 1, "model": "demo-gpt2", "train": {"global_batch": n, "seq_len": T, "micro_batch": 1, "precision": "fp32"},
        "tp": 1, "cluster": json.load(open(cluster)),
        "pipelines": [{"micro_batches": n, "schedule": sched,
                       "stages": [{"layers": [a, b], "gpu": g, "recompute": False, "devices": [{"node": node, "index": i}]}
                                  for a, b, g, node, i in cuts]}]}
json.dump(plan, open(out, "w"))
PY
done
echo "== calibration: autohet profile --model demo-gpt2 --micro-batch 1 --seq-len $T (both types, through their emulation)"
"$AH" profile --model demo-gpt2 --cluster "$WORK/cluster.json" --tp 1 --micro-batch 1 --seq-len "$T" --steps 5 --rounds 4 \
    -o "$WORK/profile.json" >/dev/null
for sched in 1f1b zero-bubble; do
    "$AH" evaluate --plan "$WORK/$sched.json" --profile "$WORK/profile.json" --json >"$WORK/$sched.eval.json"
done
train() { train_median 4 "$WORK/$1.json" "$2"; } # schedule tag -> median step seconds after the warm-up
declare -a F1 ZB
for k in $(seq "$ROUNDS"); do
    F1+=("$(train 1f1b f$k)")
    ZB+=("$(train zero-bubble z$k)")
done
python3 - "$WORK" "${F1[*]}" "${ZB[*]}" "$STEPS" "$WARMUP" <<'PY'
import json, statistics, sys
work = sys.argv[1]
meas = {"1f1b": statistics.median(float(x) for x in sys.argv[2].split()),
        "zero-bubble": statistics.median(float(x) for x in sys.argv[3].split())}
pred = {s: json.load(open(f"{work}/{s}.eval.json"))["iteration_s"] for s in meas}
prof = json.load(open(f"{work}/profile.json"))["entries"]
for e in prof:
    b = e["block"]
    print(f"   profile {e['gpu']}: block F {b['fwd_s'] * 1e3:.2f} ms, B {(b['bwd_s'] - b['wgrad_s']) * 1e3:.2f} ms, W {b['wgrad_s'] * 1e3:.2f} ms")
print(f"== measured vs predicted (median step of {sys.argv[4]} after {sys.argv[5]} warm-up, median over rounds "
      f"{sys.argv[2]!r} / {sys.argv[3]!r})")
print(f"   {'schedule':<12} {'predicted s':>12} {'measured s':>12} {'meas/pred':>10}")
for s in meas:
    print(f"   {s:<12} {pred[s]:12.4f} {meas[s]:12.4f} {meas[s] / pred[s]:10.3f}")
print(f"   zero-bubble / 1f1b: measured {meas['zero-bubble'] / meas['1f1b']:.3f}, predicted {pred['zero-bubble'] / pred['1f1b']:.3f}")
PY
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
