#!/usr/bin/env bash
# What a checkpoint costs training (issue 36's first measure): the same run on the emulated
# cluster cpu-hetero (6 ranks), saving after every step against saving only after the last,
# side by side in alternating rounds; prints each round's wall time and step time, the medians
# and their ratio (issue 36's target, once saves are asynchronous: at most 1.10x).
#
#   bash bench/bench_ckpt_overhead.sh [BUILD_DIR]       (default build)
#   ROUNDS=5 STEPS=40 bash bench/bench_ckpt_overhead.sh B
#
# Model: GPT-2's shape at 4 layers, 512 wide, 8 heads, a byte vocabulary (12.9 M parameters; fp32
# weights + AdamW m and v, 155 MB of state over the ranks); global batch 8 x 64 tokens; the local
# launcher (every rank on this machine, so the saves share its disk). Wall time is autohet run's
# (its done event: planning, launch, every step, the saves, the end): a save runs between step
# lines, so the trainer's seconds per step (also printed) do not hold it and the wall time does.
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
AUTOHET=$BUILD/autohet
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-30}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8, "vocab_size": 256, "n_positions": 64}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
echo "bench_ckpt_overhead: $ROUNDS rounds of $STEPS steps on cpu-hetero, $(nproc) cores, $("$AUTOHET" --version | head -1)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # NAME CKPT_EVERY
    "$AUTOHET" run --model "$WORK/model.json" --cluster cpu-hetero --data "$WORK/text.bin" --global-batch 8 \
        --seq-len 64 --steps "$STEPS" --ckpt-every "$2" --work-dir "$WORK/$1" --quiet >"$WORK/$1.log" 2>&1 ||
        { cat "$WORK/$1.log" >&2; echo "bench_ckpt_overhead: run $1 failed" >&2; exit 1; }
}
for r in $(seq "$ROUNDS"); do
    run "none-$r" "$STEPS"
    run "every-$r" 1
done
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$ROUNDS" "$STEPS" <<'PY'
import json, os, statistics, sys
work, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def figures(name):
    ev = [json.loads(l) for l in open(os.path.join(work, name, "metrics.jsonl"))]
    done = [e for e in ev if e.get("event") == "done"][-1]
    step_s = [e["seconds"] for e in ev if "event" not in e and "seconds" in e]
    saves = [e for e in ev if e.get("event") == "checkpoint"]
    state = max((e.get("bytes", {}).get("local", 0) for e in saves), default=0)
    return done["wall_s"], statistics.median(step_s), len(saves), state
rows = {k: [figures(f"{k}-{r}") for r in range(1, rounds + 1)] for k in ("none", "every")}
print(f"{'round':>5} {'wall, last only':>16} {'wall, every step':>17} {'ratio':>6}   step s (median) last / every")
for r in range(rounds):
    a, b = rows["none"][r], rows["every"][r]
    print(f"{r + 1:>5} {a[0]:>14.2f} s {b[0]:>15.2f} s {b[0] / a[0]:>6.2f}   {a[1]:.4f} / {b[1]:.4f}")
wa = statistics.median(x[0] for x in rows["none"])
wb = statistics.median(x[0] for x in rows["every"])
saves, state = rows["every"][0][2], rows["every"][0][3]
print(f"median wall: {wa:.2f} s with one save at the end, {wb:.2f} s with a save after each of {steps} steps "
      f"({saves} checkpoint events{', ' + format(state / 1e6, '.0f') + ' MB written to the disks at the largest' if state else ''}): "
      f"{wb / wa:.2f}x (issue 36's target with asynchronous saves: <= 1.10x)")
PY
