#!/usr/bin/env bash
# Predicted vs measured recovery time for the demo set-up (docs/simulator.md, "Predicted vs
# measured recovery"). Each round, side by side under the same load:
#  1. machine properties, measured apart from the run they predict:
#     - disk: dd of 64 MiB with fsync -> the local disk write bandwidth; the three emulated nodes
#       share this one disk, so each gets a third of it (--disk-gb-s);
#     - restart: a separate, smaller run of the same job (60 steps instead of 120, slow-1
#       preempted 4 s in instead of 6) -> the fixed relaunch overhead (--restart-s) = the old
#       job's exit (stop - wait for the step - save) + start-up + the restore's bookkeeping
#       (transfer - tier seconds) + the first step's warm-up (first step after the relaunch -
#       the median step after it). Only this term is taken from it: start-up depends on the job
#       (about 1 s more for demo-gpt2 than for tiny-gpt2 on the same 4 ranks at load 7), so a
#       smaller model would not measure it;
#  2. the demo's `autohet run` (scripts/demo.sh: demo-gpt2 on cpu-hetero, global batch 8 x 128,
#     120 steps, a checkpoint every 10, grace 10 s, slow-1 removed 6 s in) -> its `recover` event;
#  3. `autohet simulate` on the same cluster, model and batch (fp32, as the trainer runs) with a
#     trace that removes slow-1 at 6 s, given only the two machine figures -> its per-event
#     recovery for that preemption.
# Prints both breakdowns term by term and the error of the total. Never fails on a timing.
# Usage: bench/bench_sim_recovery.sh [BUILD_DIR] [ROUNDS]   (KEEP=DIR keeps the runs there)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${2:-3}
AH="$BUILD/autohet"
PY=python3
[ -x "$AH" ] || { echo "bench_sim_recovery: no $AH (build first)" >&2; exit 1; }
W=${KEEP:-$(mktemp -d)}
mkdir -p "$W"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || text=README.md
"$AH" tokenize "$text" -o "$W/tokens.bin" >/dev/null
echo "6000,remove,slow-1" >"$W/demo-events.csv"
echo "4000,remove,slow-1" >"$W/cal-events.csv"
# The same event for the simulator: the spot pool cpu-slow is slow-0, slow-1 (cluster order); node1
# and node2 take them at 0, node2 (slow-1) goes at 6 s.
printf '0,add,node1\n0,add,node2\n6000,remove,node2\n' >"$W/trace.csv"
# One recovery's terms from an `autohet run` work dir: the agent's recover event, and from the
# trainer's own metrics of the stopped launch the wait for the step boundary (its preempt
# event's seconds: notice to step end) and the save at the notice (the checkpoint of that step).
cat >"$W/measured.py" <<'PYEOF'
import json

def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]

def measured(d):
    """None when the run has no recovery from a notice the trainer saw at a step boundary (on a
    very loaded machine the notice can come before the first step: the job is then killed)."""
    agent = lines(d + "/metrics.jsonl")
    rec = next((e for e in agent if e.get("event") == "recover"), None)
    trainer = lines(d + "/launch-0/metrics.jsonl")
    pre = next((e for e in trainer if e.get("event") == "preempt"), None)
    steps = sorted(e["seconds"] for e in agent if "loss" in e and e.get("launch") == 0)
    after = sorted(e["seconds"] for e in agent if "loss" in e and e.get("launch") == 1 and e["step"] > rec["step"]
                   ) if rec else []
    if rec is None or pre is None or not steps or not after:
        return None
    wait = pre["seconds"]
    save = next((e["seconds"] for e in trainer if e.get("event") == "checkpoint" and e["step"] == rec["stopped_at"]),
                0.0)
    b = rec["breakdown"]
    m = dict(b, seconds=rec["seconds"], bytes=rec["bytes"], tier_s=rec["tier_seconds"], wait_s=wait, save_s=save)
    m["exit_s"] = b["stop_s"] - wait - save
    m["bookkeeping_s"] = b["transfer_s"] - sum(rec["tier_seconds"].values())
    # the first step of new processes is slower than the steps after it (lazy MPI connections,
    # first touches of memory): that warm-up is part of what a relaunch costs
    m["steady_after_s"] = after[len(after) // 2]
    m["warmup_s"] = b["first_step_s"] - m["steady_after_s"]
    m["restart_s"] = m["exit_s"] + b["startup_s"] + m["bookkeeping_s"] + m["warmup_s"]
    m["step_s"] = steps[len(steps) // 2]  # launch 0's median step: how much the load stretches compute
    m["predicted_step_s"] = next(e for e in agent if e.get("event") == "plan")["predicted_iteration_s"]
    return m
PYEOF
export W

# cal RUN_DIR: the smaller run; demo RUN_DIR: the demo's run. Both --no-in-place: this bench measures the
# relaunch (the simulator's --restart-s) against simulate's relaunch; run's default changes in place
cal() {
    "$AH" run --model demo-gpt2 --cluster cpu-hetero --data "$W/tokens.bin" --global-batch 8 --seq-len 128 \
        --steps 60 --lr 3e-3 --warmup 10 --ckpt-every 10 --grace-s 10 --events "$W/cal-events.csv" \
        --work-dir "$1" --quiet --no-in-place >"$1.log" 2>&1 || { echo "smaller run failed:"; tail "$1.log"; exit 1; }
}
demo() {
    "$AH" run --model demo-gpt2 --cluster cpu-hetero --data "$W/tokens.bin" --global-batch 8 --seq-len 128 \
        --steps 120 --lr 3e-3 --warmup 10 --ckpt-every 10 --grace-s 10 --events "$W/demo-events.csv" \
        --work-dir "$1" --quiet --no-in-place >"$1.log" 2>&1 || { echo "demo run failed:"; tail "$1.log"; exit 1; }
}

echo "bench_sim_recovery: $ROUNDS rounds; build $BUILD; commit $(git describe --always --dirty 2>/dev/null || echo '?')"
# Smaller runs before and after each demo run (cal-0, demo-1, cal-1, demo-2, ...): a demo run is
# predicted with the mean restart of its two neighbours, so a load that drifts during the
# benchmark biases neither side.
rm -rf "$W/cal-0"
cal "$W/cal-0"
for r in $(seq 1 "$ROUNDS"); do
    R="$W/round-$r"
    rm -rf "$R" "$W/cal-$r"
    mkdir -p "$R"
    load0=$(cut -d' ' -f1 /proc/loadavg)
    # 1a. disk write bandwidth: 64 MiB with fsync
    dd_out=$(dd if=/dev/zero of="$R/dd.bin" bs=1M count=64 conv=fsync 2>&1 | tail -1)
    rm -f "$R/dd.bin"
    # 2. the demo's run, then 1b. the next smaller run
    demo "$R/demo"
    cal "$W/cal-$r"
    load1=$(cut -d' ' -f1 /proc/loadavg)
    echo "$load0 $load1" >"$R/load"
    # 3. the simulator, from the machine figures of step 1 only. The three emulated nodes share
    # this machine's one disk, so while all save at once each gets a third of what dd measured.
    read -r restart_s disk_gb_s < <($PY - "$W/cal-$((r - 1))" "$W/cal-$r" "$dd_out" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["W"])
from measured import measured
c = [m["restart_s"] for m in (measured(sys.argv[1]), measured(sys.argv[2])) if m]
restart = sum(c) / len(c) if c else -1
# dd's last line: "67108864 bytes (67 MB, 64 MiB) copied, 0.3 s, 223 MB/s"
f = sys.argv[3].split(",")
secs = float(f[-2].split()[0])
print(f"{restart:.4f} {67108864 / secs / 1e9 / 3:.4f}")
EOF
)
    if [ "${restart_s%%.*}" = "-1" ]; then
        echo; echo "== round $r: skipped: neither smaller run around it saw its notice at a step boundary (load $load0, $load1)"
        continue
    fi
    # Checkpoint interval: 10 steps of the predicted 0.141 s iteration; it changes nothing here
    # (the save at the notice leaves nothing to roll back). --no-in-place: the relaunch, as the runs above
    # (simulate changes in place by default since session 22, as run does).
    "$AH" simulate --model demo-gpt2 --cluster cpu-hetero --trace "cpu-slow=$W/trace.csv" --global-batch 8 \
        --seq-len 128 --precision fp32 --policy autohet --hours 0.01 --ckpt-every-s 1.41 \
        --restart-s "$restart_s" --disk-gb-s "$disk_gb_s" --grace-s 10 --no-in-place --json "$R/sim.json" >"$R/sim.log" 2>&1 ||
        { echo "simulate failed:"; tail "$R/sim.log"; exit 1; }
    echo
    echo "== round $r: load average $load0 before, $load1 after =="
    $PY - "$R" "$restart_s" "$disk_gb_s" "$W/cal-$((r - 1))" "$W/cal-$r" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["W"])
from measured import measured
R, restart, disk = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
c = [m for m in (measured(d) for d in sys.argv[4:6]) if m]
demo = measured(R + "/demo")
if demo is None:
    print("skipped: the demo run's notice came before its first step or after its last (no recovery to compare)")
    sys.exit(0)
sim = json.load(open(R + "/sim.json"))
recs = [v for v in sim["policies"][0]["recoveries"] if v["event"].startswith("preempt")]
assert len(recs) == 1, recs
p = recs[0]
b = p["breakdown"]
print(f"machine: disk {disk:.3f} GB/s per node (dd with fsync / 3 nodes); restart {restart:.3f} s, the mean of "
      f"the smaller runs before and after: " + " and ".join(
          f"exit {x['exit_s']:.3f} + start-up {x['startup_s']:.3f} + restore bookkeeping {x['bookkeeping_s']:.3f} "
          f"+ first-step warm-up {x['warmup_s']:.3f}" for x in c))
rows = [
    ("wait for the step in progress", b["wait_s"], demo["wait_s"], ""),
    ("save at the notice", b["save_s"], demo["save_s"], ""),
    ("re-plan", b["replan_s"], demo["replan_s"], ""),
    ("restart (exit, start-up, bookkeeping, warm-up)", b["startup_s"], demo["restart_s"],
     f"exit {demo['exit_s']:.3f} + start-up {demo['startup_s']:.3f} + bookkeeping {demo['bookkeeping_s']:.3f} "
     f"+ warm-up {demo['warmup_s']:.3f}"),
]
for t in ("local", "peer", "cloud"):
    rows.append((f"transfer {t}", p["tier_seconds"][t], demo["tier_s"][t],
                 f"{p['bytes'][t] / 1e6:.2f} MB predicted, {demo['bytes'][t] / 1e6:.2f} MB moved"))
rows.append(("first step (without its warm-up)", b["first_step_s"], demo["steady_after_s"],
             f"median step after the restart; the first took {demo['first_step_s']:.3f}"))
print(f"steady step before the notice: predicted {demo['predicted_step_s']:.3f} s, measured {demo['step_s']:.3f} s "
      f"(median; the load stretches compute, which the cost model does not know)")
print(f"{'term':46s} {'predicted s':>11s} {'measured s':>11s}")
for name, a, m, note in rows:
    print(f"{name:46s} {a:11.3f} {m:11.3f}   {note}")
err = (p["seconds"] - demo["seconds"]) / demo["seconds"] * 100
print(f"{'recovery (notice -> first finished step)':46s} {p['seconds']:11.3f} {demo['seconds']:11.3f}   "
      f"error {err:+.1f} %")
open(R + "/error", "w").write(f"{err:.2f} {p['seconds']:.4f} {demo['seconds']:.4f}\n")
EOF
done
echo
$PY - "$W" "$ROUNDS" <<'EOF'
import os, sys
W, n = sys.argv[1], int(sys.argv[2])
done = [r for r in range(1, n + 1) if os.path.exists(f"{W}/round-{r}/error")]
if not done:
    sys.exit(print("no round measured (no demo run was preempted between its first and last step)"))
e = [list(map(float, open(f"{W}/round-{r}/error").read().split())) for r in done]
loads = [float(x) for r in done for x in open(f"{W}/round-{r}/load").read().split()]
n = len(done)
errs = [x[0] for x in e]
print(f"predicted vs measured over {n} rounds: errors {', '.join(f'{x:+.1f} %' for x in errs)}; "
      f"measured {min(x[2] for x in e):.2f}-{max(x[2] for x in e):.2f} s, "
      f"predicted {min(x[1] for x in e):.2f}-{max(x[1] for x in e):.2f} s; "
      f"mean error {sum(errs) / n:+.1f} %; within 25 %: {sum(abs(x) <= 25 for x in errs)} of {n}; "
      f"load average {min(loads):.2f}-{max(loads):.2f}")
EOF
