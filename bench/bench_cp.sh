# Context parallelism (issue 38), measured against the cost model: one pipeline of one stage
# (demo-gpt2's shape, 6 blocks, its context stretched to T as a config.json) at CP 1, 2 and 4 on
# the emulated CPU cluster, every CP rank a device of
# one emulated type on one node. Each trains in alternation in one run, against `autohet
# evaluate`'s prediction calibrated by `autohet profile` (one process, through the same emulation,
# at the whole sequence and at each CP rank's T/cp tokens, in one profile file: the cost model
# prices a CP rank's layers as measured at T/cp, attention at the ring kernels' measured seconds,
# plus the ring's exposed transfers and the DP sync over the CP ranks). Also printed: the
# prediction from the profile at T alone (a CP rank's layers at 1/cp of it, as before session 17),
# and that without the ring figures (attention at 1/cp of the one-process kernel's too).
# Prints the ratios; never fails on a timing.
# SLOW 16 by default (it was 4): the CP 4 plan's 4 ranks share this VM's 2 cores, and at SLOW 4
# each computes a quarter of its emulated time, all four at once (the ring keeps them in step), so
# the plan asks a whole core of a 2-core host in bursts that contend, and each of its 240 ring
# exchanges a step waits for a rank to get a core back: traced per ring step at load 14, a CP 4
# rank waited 0.275 s a step in the ring against 0.089 s of emulated compute. At SLOW 16 a rank
# computes 1/16 of the time and the same trace waited 0.044 s against 0.342 s (docs/benchmarks.md
# "Context parallelism: measured vs predicted"). SLOW=4 still runs, as a test of the host.
# Usage: bash bench/bench_cp.sh BUILD_DIR   [N=4 T=128 SLOW=16 STEPS=6 WARMUP=2 ROUNDS=3 CPS="1 2 4" KEEP=1]
set -euo pipefail
N=${N:-4} T=${T:-128} SLOW=${SLOW:-16}
STEPS=${STEPS:-6} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-3}
read -r -a CPS <<<"${CPS:-1 2 4}"
. "$(dirname "$0")/common.sh"
emu_cluster "$WORK/cluster.json" 4
"$AH" model --model demo-gpt2 --json >"$WORK/demo.json"
python3 - "$WORK/demo.json" "$T" "$WORK/model.config.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["model"]
json.dump({"model_type": "gpt2", "n_layer": m["n_layer"], "n_embd": m["d_model"], "n_head": m["n_head"],
           "n_inner": m["d_ff"], "vocab_size": m["vocab"], "n_positions": max(m["max_pos"], int(sys.argv[2])),
           "tie_word_embeddings": m["tied"]}, open(sys.argv[3], "w"))
PY
"$AH" model --model "$WORK/model.config.json" --json >"$WORK/model.json"
for cp in "${CPS[@]}"; do
    python3 - "$WORK/cp$cp.json" "$cp" "$N" "$T" "$WORK/cluster.json" "$WORK/model.json" <<'PY'
import json, sys
out, cp, n, T, cluster = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
model = json.load(open(sys.argv[6]))["model"]
stage = {"layers": [0, 6], "gpu": "cpu-emu", "recompute": False,
         "devices": [{"node": "n0", "index": k} for k in range(cp)]}
plan = {"version": 1, "model": model, "train": {"global_batch": n, "seq_len": T, "micro_batch": 1, "precision": "fp32"},
        "tp": 1, "cluster": json.load(open(cluster)), "pipelines": [{"micro_batches": n, "cp": cp, "stages": [stage]}]}
json.dump(plan, open(out, "w"))
PY
done
echo "== calibration: autohet profile --model demo-gpt2 at context $T --micro-batch 1 --seq-len $T, and at each CP rank's T/cp (through the emulation)"
for cp in "${CPS[@]}"; do
    "$AH" profile --model "$WORK/model.config.json" --cluster "$WORK/cluster.json" --tp 1 --micro-batch 1 --seq-len $((T / cp)) \
        --steps 5 --rounds 4 -o "$WORK/profile-t$((T / cp)).json" >/dev/null
done
# profile.json: the entries at T and at every T/cp; profile-whole.json: the entry at T only (a CP
# rank's layers at 1/cp of it, attention at the ring kernels'); profile-noring.json: that without
# the ring kernels' figures (attention at 1/cp of the one-process kernel's too).
python3 - "$WORK" "$T" "${CPS[@]}" <<'PY'
import json, sys
work, T, cps = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
whole = json.load(open(f"{work}/profile-t{T}.json"))
merged = json.loads(json.dumps(whole))
merged["entries"] += [e for c in cps if c > 1 for e in json.load(open(f"{work}/profile-t{T // c}.json"))["entries"]]
json.dump(merged, open(f"{work}/profile.json", "w"))
json.dump(whole, open(f"{work}/profile-whole.json", "w"))
for e in whole["entries"]:
    e.pop("attention", None), e.pop("ring_attention", None)
json.dump(whole, open(f"{work}/profile-noring.json", "w"))
PY
for cp in "${CPS[@]}"; do
    for prof in "" -whole -noring; do
        "$AH" evaluate --plan "$WORK/cp$cp.json" --profile "$WORK/profile$prof.json" --json >"$WORK/cp$cp.eval$prof.json"
    done
done
for k in $(seq "$ROUNDS"); do
    for cp in "${CPS[@]}"; do echo "$(train_median "$cp" "$WORK/cp$cp.json" "cp$cp-$k")" >>"$WORK/cp$cp.steps"; done
done
python3 - "$WORK" "$STEPS" "$WARMUP" "${CPS[@]}" <<'PY'
import json, statistics, sys
work, steps, warmup, cps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rounds = {c: [float(x) for x in open(f"{work}/cp{c}.steps")] for c in cps}
meas = {c: statistics.median(r) for c, r in rounds.items()}
ev = {c: json.load(open(f"{work}/cp{c}.eval.json")) for c in cps}
pred = {c: ev[c]["iteration_s"] for c in cps}
whole = {c: json.load(open(f"{work}/cp{c}.eval-whole.json"))["iteration_s"] for c in cps}
old = {c: json.load(open(f"{work}/cp{c}.eval-noring.json"))["iteration_s"] for c in cps}
base = cps[0]
print(f"== measured vs predicted (median step of {steps} after {warmup} warm-up, median over rounds)")
print(f"   {'cp':<4} {'predicted s':>12} {'measured s':>12} {'meas/pred':>10} {'vs cp ' + base + ' meas':>13} "
      f"{'vs cp ' + base + ' pred':>13} {'ring s':>9} {'DP sync s':>10} {'pred at T':>10} {'meas/that':>10} "
      f"{'pred 1/cp':>10} {'meas/that':>10}  rounds")
for c in cps:
    b = ev[c]["breakdown"]
    print(f"   {c:<4} {pred[c]:12.4f} {meas[c]:12.4f} {meas[c] / pred[c]:10.3f} {meas[c] / meas[base]:13.3f} "
          f"{pred[c] / pred[base]:13.3f} {b['cp_comm_s']:9.4f} {b['dp_sync_s']:10.4f} {whole[c]:10.4f} {meas[c] / whole[c]:10.3f} "
          f"{old[c]:10.4f} {meas[c] / old[c]:10.3f}  {' '.join(f'{x:.4f}' for x in rounds[c])}")
print("   (pred at T: a CP rank's layers at 1/cp of the profile's at T, attention at the ring kernels';"
      " pred 1/cp: attention at 1/cp of the one-process kernel's too)")
print("   peak device memory predicted (MiB): " + ", ".join(f"cp {c} {ev[c]['memory_bytes'] / 2**20:.2f}" for c in cps))
PY
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
