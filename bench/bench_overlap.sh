# Overlapped gradient sync (issue 35), measured: a data-parallel-heavy plan (R replicas of one
# stage each, every layer on every device) on the emulated CPU cluster, trained with the DP sync
# overlapped with the backward (the default) and with --no-overlap-grad-sync, in alternation in one
# run, each against `autohet evaluate`'s prediction (iteration_overlap_s with overlap, iteration_s
# without), calibrated by `autohet profile` through the same emulation.
# Prints the ratios and how many bucket collectives were complete before the sync's wait (the
# metrics' dp_sync_hidden: whether the collectives moved during the backward, which a noisy step
# time cannot show); never fails on a timing.
# SHARD=even (or memory) shards the optimizer over the replicas: the sync is then reduce-scatters
# in the backward and the updated weights' all-gathers overlapped with the next step's forward
# (docs/runtime.md "Overlapped gradient sync").
# Usage: bash bench/bench_overlap.sh BUILD_DIR   [MODEL=demo-gpt2 R=4 B=16 T=128 SLOW=4 STEPS=8 WARMUP=3 ROUNDS=2 SHARD=]
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
AH=$BUILD/autohet
MODEL=${MODEL:-demo-gpt2} R=${R:-4} B=${B:-16} T=${T:-128} SLOW=${SLOW:-4}
STEPS=${STEPS:-8} WARMUP=${WARMUP:-3} ROUNDS=${ROUNDS:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS"
echo "(cores: $(nproc), load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))"
cat >"$WORK/cluster.json" <<JSON
{"gpu_types": {"cpu-dp": {"tflops": {"bf16": 0.0125, "fp16": 0.0125, "fp32": 0.0125}, "mem_bw_gb_s": 2.5,
               "intra_node_gb_s": ${LINK_GB_S:-0.5}, "emulate": {"slowdown": $SLOW, "memory_mib": 512}}},
 "nodes": [{"name": "n0", "gpu": "cpu-dp", "count": $R, "usd_per_gpu_hour": 0.3}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
"$AH" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
python3 - "$WORK/plan.json" "$MODEL" "$R" "$B" "$T" "$WORK/cluster.json" "$AH" <<'PY'
import json, subprocess, sys
out, model, R, B, T, cluster, ah = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
L = sum(l["count"] for l in json.loads(subprocess.check_output([ah, "model", "--model", model, "--json"]))["layers"] if l["kind"] == "block")
plan = {"version": 1, "model": model, "train": {"global_batch": B, "seq_len": T, "micro_batch": 1, "precision": "fp32"},
        "tp": 1, "cluster": json.load(open(cluster)),
        "pipelines": [{"micro_batches": B // R, "stages": [{"layers": [0, L], "gpu": "cpu-dp", "recompute": False,
                                                           "devices": [{"node": "n0", "index": r}]}]} for r in range(R)]}
json.dump(plan, open(out, "w"))
PY
if [ -n "${SHARD:-}" ]; then
    "$AH" evaluate --plan "$WORK/plan.json" --shard-optimizer "$SHARD" -o "$WORK/sharded.json" >/dev/null
    mv "$WORK/sharded.json" "$WORK/plan.json"
    echo "(the optimizer sharded $SHARD over the $R replicas)"
fi
echo "== calibration: autohet profile --model $MODEL --micro-batch 1 --seq-len $T (through the emulation)"
"$AH" profile --model "$MODEL" --cluster "$WORK/cluster.json" --tp 1 --micro-batch 1 --seq-len "$T" --steps 5 --rounds 4 \
    -o "$WORK/profile.json" >/dev/null
"$AH" evaluate --plan "$WORK/plan.json" --profile "$WORK/profile.json" --json >"$WORK/eval.json"
"$AH" evaluate --plan "$WORK/plan.json" --profile "$WORK/profile.json" | grep -A1 "^DP sync overlapped" | sed 's/^/   /'
train() { # tag flags... -> median step seconds after the warm-up
    local tag=$1
    shift
    $MPIRUN -np "$R" "$AH" train --plan "$WORK/plan.json" --data "$WORK/text.bin" --steps $((WARMUP + STEPS)) --quiet \
        --metrics "$WORK/$tag.jsonl" "$@" 2>"$WORK/$tag.err" || { cat "$WORK/$tag.err" >&2; exit 1; }
    python3 -c 'import json, statistics, sys; print(statistics.median([json.loads(l)["seconds"] for l in open(sys.argv[1]) if "\"loss\"" in l][int(sys.argv[2]):]))' "$WORK/$tag.jsonl" "$WARMUP"
}
declare -a ON OFF
for k in $(seq "$ROUNDS"); do
    ON+=("$(train on$k)")
    OFF+=("$(train off$k --no-overlap-grad-sync)")
done
python3 - "$WORK/eval.json" "${ON[*]}" "${OFF[*]}" "$STEPS" "$WARMUP" "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
e = json.load(open(sys.argv[1]))
work, rounds, warmup = sys.argv[6], int(sys.argv[7]), int(sys.argv[5])
# dp_sync_hidden: bucket collectives complete when the sync began to wait, after the warm-up
hid = [h for k in range(1, rounds + 1)
       for h in [json.loads(l)["dp_sync_hidden"] for l in open(f"{work}/on{k}.jsonl") if '"loss"' in l][warmup:]]
on = statistics.median(float(x) for x in sys.argv[2].split())
off = statistics.median(float(x) for x in sys.argv[3].split())
pon, poff = e["iteration_overlap_s"], e["iteration_s"]
print(f"== measured vs predicted (median step of {sys.argv[4]} after {sys.argv[5]} warm-up, median over rounds {sys.argv[2]!r} / {sys.argv[3]!r})")
print(f"   {'mode':<12} {'predicted s':>12} {'measured s':>12} {'meas/pred':>10}")
print(f"   {'overlap':<12} {pon:12.4f} {on:12.4f} {on / pon:10.3f}")
print(f"   {'no overlap':<12} {poff:12.4f} {off:12.4f} {off / poff:10.3f}")
print(f"   overlap / no overlap: measured {on / off:.3f}, predicted {pon / poff:.3f}; DP sync predicted "
      f"{e['dp_sync_exposed_s']:.4f} s exposed of {e['breakdown']['dp_sync_s']:.4f} s")
print(f"   with overlap {sum(h[0] for h in hid)} of {sum(h[1] for h in hid)} bucket collectives complete when the "
      f"sync began to wait ({100 * sum(h[0] for h in hid) / max(1, sum(h[1] for h in hid)):.0f} %, every rank's, "
      f"the steps after the warm-up; dp_sync_hidden)")
PY
