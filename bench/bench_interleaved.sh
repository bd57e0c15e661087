# Interleaved 1F1B against 1F1B and zero-bubble (issue 35), measured: a deep pipeline with few
# micro-batches (the case where 1F1B idles most) on the emulated CPU cluster, P devices of one
# emulated type, demo-gpt2's 6 blocks. 1F1B and zero-bubble: one stage of 6 / P blocks per device;
# interleaved: 6 one-block stages, device d on stages d, d + P, ... (v = 6 / P chunks). Every
# schedule trains in alternation in one run, each against `autohet evaluate`'s prediction
# calibrated by `autohet profile` through the same emulation. Prints the ratios; never fails on a
# timing.
# Usage: bash bench/bench_interleaved.sh BUILD_DIR   [P=3 N=3 T=128 SLOW=4 STEPS=6 WARMUP=2 ROUNDS=2 KEEP=1]
# (N, the micro-batches, a multiple of P; KEEP=1 keeps the work files and names their directory)
set -euo pipefail
P=${P:-3} N=${N:-3} T=${T:-128} SLOW=${SLOW:-4}
STEPS=${STEPS:-6} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-2}
SCHEDS=(1f1b interleaved zero-bubble)
. "$(dirname "$0")/common.sh"
emu_cluster "$WORK/cluster.json" "$P"
for sched in "${SCHEDS[@]}"; do
    python3 - "$WORK/$sched.json" "$sched" "$P" "$N" "$T" "$WORK/cluster.json" <<'PY'
import json, sys
out, sched, P, n, T, cluster = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
L = 6  # demo-gpt2's blocks
assert L % P == 0, f"P={P} must divide {L}"
per = 1 if sched == "interleaved" else L // P
stages = [{"layers": [a, a + per], "gpu": "cpu-emu", "recompute": False,
           "devices": [{"node": "n0", "index": (a // per) % P}]} for a in range(0, L, per)]
plan = {"version": 1, "model": "demo-gpt2", "train": {"global_batch": n, "seq_len": T, "micro_batch": 1, "precision": "fp32"},
        "tp": 1, "cluster": json.load(open(cluster)), "pipelines": [{"micro_batches": n, "schedule": sched, "stages": stages}]}
json.dump(plan, open(out, "w"))
PY
done
echo "== calibration: autohet profile --model demo-gpt2 --micro-batch 1 --seq-len $T (through the emulation)"
"$AH" profile --model demo-gpt2 --cluster "$WORK/cluster.json" --tp 1 --micro-batch 1 --seq-len "$T" --steps 5 --rounds 4 \
    -o "$WORK/profile.json" >/dev/null
for sched in "${SCHEDS[@]}"; do
    "$AH" evaluate --plan "$WORK/$sched.json" --profile "$WORK/profile.json" --json >"$WORK/$sched.eval.json"
done
for k in $(seq "$ROUNDS"); do
    for sched in "${SCHEDS[@]}"; do echo "$(train_median "$P" "$WORK/$sched.json" "$sched-$k")" >>"$WORK/$sched.steps"; done
done
python3 - "$WORK" "$STEPS" "$WARMUP" "${SCHEDS[@]}" <<'PY'
import json, statistics, sys
work, steps, warmup, scheds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rounds = {s: [float(x) for x in open(f"{work}/{s}.steps")] for s in scheds}
meas = {s: statistics.median(r) for s, r in rounds.items()}
ev = {s: json.load(open(f"{work}/{s}.eval.json")) for s in scheds}
pred = {s: ev[s]["iteration_s"] for s in scheds}
print(f"== measured vs predicted (median step of {steps} after {warmup} warm-up, median over rounds)")
print(f"   {'schedule':<12} {'predicted s':>12} {'measured s':>12} {'meas/pred':>10} {'vs 1f1b meas':>13} {'vs 1f1b pred':>13}  rounds")
for s in scheds:
    print(f"   {s:<12} {pred[s]:12.4f} {meas[s]:12.4f} {meas[s] / pred[s]:10.3f} {meas[s] / meas['1f1b']:13.3f} "
          f"{pred[s] / pred['1f1b']:13.3f}  {' '.join(f'{x:.4f}' for x in rounds[s])}")
print("   peak device memory predicted (MiB): " + ", ".join(f"{s} {ev[s]['memory_bytes'] / 2**20:.2f}" for s in scheds))
PY
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
