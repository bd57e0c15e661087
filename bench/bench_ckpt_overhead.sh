#!/usr/bin/env bash
# What a checkpoint costs training (issue 36's measure): the same run on the emulated cluster
# cpu-hetero (6 ranks) three ways, side by side in alternating rounds: "none", saving only after
# the last step (the baseline); "sync", saving after every step with --ckpt-sync (each save
# written before the next step); "async", saving after every step the default way (a host-memory
# snapshot written in the background, committed at a later step boundary). Prints each round's
# wall and step times, the medians and the ratios to "none" (issue 36's target for async: at most
# 1.10x), and what the async runs waited for a snapshot still being written; beside the wall time,
# the CPU seconds the job used (user + system of autohet run and every rank it waited for,
# /usr/bin/time), which a machine shared with other work changes far less than the wall time (and
# of it the async runs' writer threads' a save, the checkpoint events' "writer_cpu_seconds"), and
# the cores the machine left idle during each run (/proc/stat), the CPU the background writer can
# take without slowing training.
#
#   bash bench/bench_ckpt_overhead.sh [BUILD_DIR]       (default build)
#   ROUNDS=5 STEPS=40 bash bench/bench_ckpt_overhead.sh B
#   SCALE=3 bash bench/bench_ckpt_overhead.sh B         (every emulated device 3x slower, below)
#   SCALE=auto bash bench/bench_ckpt_overhead.sh B      (the smallest whole SCALE that is faithful here)
#   BASE=B0 bash bench/bench_ckpt_overhead.sh B         (a fourth mode, "base": async with B0's autohet,
#                                                        another build, in the same rounds: a change's
#                                                        side-by-side figure, both against B's "none")
#   FLOOR=1 bash bench/bench_ckpt_overhead.sh B         (a mode "floor": "none" again, beside a separate
#                                                        process writing that round's save bytes with
#                                                        O_DIRECT and fsync once every 1.10 x none's step:
#                                                        what the disk writes alone cost at the rate a
#                                                        1.10x run needs, with no snapshot, copy or commit)
#
# Is the emulation faithful? An emulated device of slowdown s computes on a core for 1/s of its
# phase and sleeps the rest (runtime/emulate.h), so the ranks ask for sum over ranks of 1/slowdown
# cores of compute. cpu-hetero's 2 cpu-fast (slowdown 1) and 4 cpu-slow (slowdown 3) ask for
# 2 + 4/3 = 3.3 cores: on a machine with fewer, the devices cannot run at their stated speed, the
# ranks queue for the cores, and the background writer can only take its CPU out of training. On
# a GPU host the trainer's CPU cores are idle while its GPUs compute, and the writer runs on them;
# a faithful emulation of that needs the ranks' demand below the machine's cores, with room left
# for the writer. The bench prints the demand beside nproc. SCALE=k (default 1, cpu-hetero as it
# is, so that older figures stay comparable) writes the bench's own cluster file from cpu-hetero
# with every type's slowdown multiplied by k and its tflops and mem_bw_gb_s divided by k (the plan
# and the emulation agree; the links unchanged: communication is not stretched), so the demand is
# 1/k of it; SCALE=auto takes the smallest whole k whose demand leaves at least half a core idle.
# A longer step also makes the same save a smaller share of it: the bench prints the save's bytes
# and the step time beside the ratios, so a reader sees both; a ratio at SCALE > 1 says what a host
# with idle cores would see at that step time, not what the default setting shows.
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
BASE_AUTOHET=${BASE:+$(cd "$BASE" && pwd)/autohet}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-30}
SCALE=${SCALE:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

# The cluster: cpu-hetero, or its devices SCALE times slower (above); prints the ranks' compute
# demand in cores against nproc.
CLUSTER=cpu-hetero
python3 - examples/clusters/cpu-hetero.json "$SCALE" "$(nproc)" "$WORK/cluster.json" >"$WORK/scale" <<'PY'
import json, math, sys
c, scale, cores, out = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4]
def demand(k):  # cores the ranks compute on: sum over ranks of 1 / slowdown
    return sum(n["count"] / (c["gpu_types"][n["gpu"]]["emulate"]["slowdown"] * k) for n in c["nodes"])
k = float(math.ceil(demand(1) / (cores - 0.5))) if scale == "auto" else float(scale)
if k <= 0:
    sys.exit(f"bench_ckpt_overhead: SCALE must be > 0 or auto, got {scale}")
print(f"{k:g} {demand(k):.2f} {demand(1):.2f}")
for t in c["gpu_types"].values():
    t["emulate"]["slowdown"] *= k
    t["tflops"] = {d: v / k for d, v in t["tflops"].items()}
    t["mem_bw_gb_s"] /= k
json.dump(c, open(out, "w"), indent=1)
PY
read -r SCALE DEMAND DEMAND1 <"$WORK/scale"
[ "$SCALE" = 1 ] || CLUSTER=$WORK/cluster.json

cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8, "vocab_size": 256, "n_positions": 64}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
echo "bench_ckpt_overhead: $ROUNDS rounds of $STEPS steps on cpu-hetero at SCALE $SCALE, $(nproc) cores, $("$AUTOHET" --version | head -1)"
echo "the ranks' compute demand: $DEMAND cores of $(nproc) (sum over ranks of 1/slowdown; $DEMAND1 at SCALE 1):" \
    "$(python3 -c "import sys; d, n = float(sys.argv[1]), int(sys.argv[2]); print('faithful, %.2f cores left idle' % (n - d) if n - d >= 0.5 else 'over-committed: the emulated devices cannot run at their stated speed, and the writer takes its CPU out of training')" "$DEMAND" "$(nproc)")"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # NAME CKPT_EVERY [FLAGS...] (AUTOHET: the binary)
    local name=$1 every=$2
    shift 2
    local stat0
    stat0=$(head -1 /proc/stat)
    /usr/bin/time -f "%U %S" -o "$WORK/$name.cpu" "$AUTOHET" run --model "$WORK/model.json" --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch 8 \
        --seq-len 64 --steps "$STEPS" --ckpt-every "$every" --work-dir "$WORK/$name" --quiet "$@" >"$WORK/$name.log" 2>&1 ||
        { cat "$WORK/$name.log" >&2; echo "bench_ckpt_overhead: run $name failed" >&2; exit 1; }
    echo "$stat0" >"$WORK/$name.stat"
    head -1 /proc/stat >>"$WORK/$name.stat"
}
for r in $(seq "$ROUNDS"); do
    run "none-$r" "$STEPS"
    run "sync-$r" 1 --ckpt-sync
    run "async-$r" 1
    [ -z "$BASE_AUTOHET" ] || AUTOHET=$BASE_AUTOHET run "base-$r" 1
    [ "${FLOOR:-0}" = 1 ] || continue
    python3 - "$WORK/none-$r" "$WORK/floor.bin" "$WORK/floor-$r.stop" >"$WORK/floor-$r.writer" <<'PY' &
import json, mmap, os, statistics, sys, time
run, path, stop = sys.argv[1:]
ev = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
size = [e for e in ev if e.get("event") == "checkpoint"][-1]["bytes"]["local"] & ~((4 << 20) - 1)
period = 1.10 * statistics.median(e["seconds"] for e in ev if "event" not in e and "seconds" in e)
buf = mmap.mmap(-1, size)  # the snapshot's way: huge pages, touched before the run
buf.madvise(mmap.MADV_HUGEPAGE)
buf.write(b"\x5a" * size)
n, c0 = 0, time.process_time()
while not os.path.exists(stop):
    t = time.time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    for o in range(0, size, 4 << 20):
        os.write(fd, memoryview(buf)[o:o + (4 << 20)])
    os.fsync(fd)
    os.close(fd)
    n += 1
    time.sleep(max(0.0, period - (time.time() - t)))
print(n, size, period, time.process_time() - c0)
PY
    sleep 1 # the writer's buffer touched
    run "floor-$r" "$STEPS"
    touch "$WORK/floor-$r.stop"
    wait
done
[ -z "$BASE_AUTOHET" ] || echo "base: async with $BASE_AUTOHET ($("$BASE_AUTOHET" --version | head -1))"
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$ROUNDS" "$STEPS" "$SCALE" "$DEMAND" "${BASE_AUTOHET:+base}" <<'PY'
import json, os, statistics, sys
work, rounds, steps, scale, demand = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
base = sys.argv[6] == "base"
def figures(name):
    ev = [json.loads(l) for l in open(os.path.join(work, name, "metrics.jsonl"))]
    done = [e for e in ev if e.get("event") == "done"][-1]
    step_s = [e["seconds"] for e in ev if "event" not in e and "seconds" in e]
    saves = [e for e in ev if e.get("event") == "checkpoint"]
    state = max((e.get("bytes", {}).get("local", 0) for e in saves), default=0)
    wait = sum(e.get("wait_seconds", 0) for e in saves)
    n_async = sum(1 for e in saves if e.get("async"))
    # a save's, all ranks' writer threads' (the median: the first save also faults the buffer's pages in)
    writer = statistics.median([e["writer_cpu_seconds"] for e in saves if "writer_cpu_seconds" in e] or [0])
    user, sys_ = map(float, open(os.path.join(work, name + ".cpu")).read().split()[-2:])
    a, b = ([int(x) for x in l.split()[1:]] for l in open(os.path.join(work, name + ".stat")))
    idle = (b[3] + b[4] - a[3] - a[4]) / max(1, sum(b) - sum(a)) * os.cpu_count()
    return done["wall_s"], statistics.median(step_s), len(saves), state, wait, n_async, user + sys_, idle, writer
modes = ("none", "sync", "async")
rows = {k: [figures(f"{k}-{r}") for r in range(1, rounds + 1)] for k in modes}
print(f"{'round':>5} {'none':>9} {'sync':>9} {'async':>9} {'sync/none':>10} {'async/none':>11}   step s (median) none / sync / async")
for r in range(rounds):
    a, b, c = (rows[k][r] for k in modes)
    print(f"{r + 1:>5} {a[0]:>7.2f} s {b[0]:>7.2f} s {c[0]:>7.2f} s {b[0] / a[0]:>10.2f} {c[0] / a[0]:>11.2f}   "
          f"{a[1]:.4f} / {b[1]:.4f} / {c[1]:.4f}")
    print(f"{'':>5} CPU {a[6]:.1f} / {b[6]:.1f} / {c[6]:.1f} s (sync {(b[6] - a[6]) / steps:+.3f}, async "
          f"{(c[6] - a[6]) / steps:+.3f} CPU-s a step, of it the writer threads' {c[8]:.3f} a save); idle cores "
          f"{a[7]:.2f} / {b[7]:.2f} / {c[7]:.2f}")
med = {k: statistics.median(x[0] for x in rows[k]) for k in modes}
if base:
    rb = [figures(f"base-{r}") for r in range(1, rounds + 1)]
    print("base (async, the other build) per round: " + ", ".join(
        f"{b[0]:.2f} s ({b[0] / rows['none'][r][0]:.2f}x; async {rows['async'][r][0] / b[0]:.2f} of it; CPU {b[6]:.1f} s, "
        f"idle cores {b[7]:.2f})" for r, b in enumerate(rb)))
    mb = statistics.median(b[0] for b in rb)
    print(f"median wall: base {mb:.2f} s ({mb / med['none']:.2f}x to none) against async {med['async']:.2f} s "
          f"({med['async'] / med['none']:.2f}x); async / base per round "
          + ", ".join(f"{rows['async'][r][0] / rb[r][0]:.2f}" for r in range(rounds)))
if os.path.exists(os.path.join(work, "floor-1.writer")):
    rf = [figures(f"floor-{r}") for r in range(1, rounds + 1)]
    wr = [open(os.path.join(work, f"floor-{r}.writer")).read().split() for r in range(1, rounds + 1)]
    print("floor (none beside a separate writer of the save's bytes) per round: " + ", ".join(
        f"{f[0]:.2f} s ({f[0] / rows['none'][r][0]:.2f}x; {int(w[0])} writes of {int(w[1]) / 1e6:.0f} MB, one every "
        f"{float(w[2]):.3f} s, the writer's CPU {float(w[3]):.2f} s)" for r, (f, w) in enumerate(zip(rf, wr))))
    mf = statistics.median(f[0] for f in rf)
    print(f"median wall: floor {mf:.2f} s ({mf / med['none']:.2f}x to none): the disk writes alone at the rate "
          f"a 1.10x run needs; async / floor per round " + ", ".join(
          f"{rows['async'][r][0] / rf[r][0]:.2f}" for r in range(rounds)))
saves, state = rows["sync"][0][2], rows["sync"][0][3]
waits = [x[4] for x in rows["async"]]
print(f"median wall: none {med['none']:.2f} s (one save at the end), sync {med['sync']:.2f} s, async {med['async']:.2f} s "
      f"(a save after each of {steps} steps, {saves} checkpoint events"
      f"{', ' + format(state / 1e6, '.0f') + ' MB written to the disks at the largest' if state else ''})")
print(f"ratios to none: sync {med['sync'] / med['none']:.2f}x, async {med['async'] / med['none']:.2f}x "
      f"(issue 36's target for async: <= 1.10x); async runs: {rows['async'][0][5]} saves in the background, "
      f"waits for the snapshot in flight {min(waits):.2f}-{max(waits):.2f} s per run")
step = statistics.median(x[1] for x in rows["none"])
print(f"at SCALE {scale}: compute demand {demand:.2f} cores of {os.cpu_count()}; a save {state / 1e6:.0f} MB against a step "
      f"of {step:.3f} s without saves ({state / 1e6 / step:.0f} MB per step-second: a longer step makes the same save "
      f"a smaller share)")
PY
