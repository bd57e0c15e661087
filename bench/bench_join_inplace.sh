#!/usr/bin/env bash
# A host that joins, taken in place against the relaunch (issue 36 "Survivors keep their processes";
# docs/elastic.md "The join in place, the agent's part"), on tests/test_agent_inplace_join.sh's case: the
# agent on small_cluster (tiny-gpt2, local launcher), slow-1 down at the start (fast-0 + slow-0 train) and
# back once 3 steps are in, --join-horizon-s 1000000 so that the join rule re-plans onto it at once; 80
# steps, --ckpt-every 100 (the only save before the end: the one at the join). Each round, one after the
# other: "in-place" (--in-place: slow-1's mpirun started into the running job, the request with "join")
# and "relaunch" (--no-in-place: the notice to every rank, the save, the relaunch under the plan with slow-1;
# in place is run's default).
# Printed per run: the agent's recover event (seconds from the join's decision to the first step under
# the new plan, and its breakdown), then the medians and their ratio.
#   [ROUNDS=3] bash bench/bench_join_inplace.sh [BUILD_DIR]
set -u
ROUNDS=${ROUNDS:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
source "$SRC/tests/train_common.sh" "${1:-$SRC/build}" "$SRC"
source "$SRC/tests/agent_common.sh"
command -v ompi-server >/dev/null || { echo "no ompi-server"; exit 1; }
echo "(cores: $(nproc), load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))"
small_cluster
STEPS=80 CKPT_EVERY=100
for round in $(seq "$ROUNDS"); do
    for mode in in-place relaunch; do
        d=$WORK/$mode$round
        echo "0,remove,slow-1" >"$d.csv"
        flag=(--no-in-place)
        [ $mode = in-place ] && flag=(--in-place)
        t0=$(date +%s%N)
        run_agent "$d" "${flag[@]}" --events "$d.csv" --grace-s 60 --join-horizon-s 1000000 &
        agent=$!
        wait_until 60 step_lines_at_least 3 "$d/launch-0/metrics.jsonl" || fail "$mode: no 3 steps in 60 s"
        echo "$((($(date +%s%N) - t0) / 1000000)),add,slow-1" >>"$d.csv"
        wait $agent || { cat "$d.log"; fail "$mode: autohet run"; }
        python3 - "$d" "$mode" "$round" <<'PY' || { cat "$d.log"; fail "$mode: no recovery"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
r = [x for x in ev if x.get("event") == "recover"]
assert len(r) == 1 and r[0]["in_place"] == (sys.argv[2] == "in-place"), r
r = r[0]
bd = " ".join(f"{k[:-2]} {v:.3f}" for k, v in r["breakdown"].items())
print(f"round {sys.argv[3]} {sys.argv[2]:9s} {r['seconds']:.3f} s ({bd}) at step {r['step']}")
PY
    done
done | tee "$WORK/rounds.txt"
python3 - "$WORK/rounds.txt" <<'PY'
import statistics, sys
t = {}
for l in open(sys.argv[1]):
    w = l.split()
    t.setdefault(w[2], []).append(float(w[3]))
a, b = statistics.median(t["in-place"]), statistics.median(t["relaunch"])
print(f"join to the first step under the new plan, medians over {len(t['in-place'])} rounds: in place {a:.3f} s, "
      f"relaunch {b:.3f} s: relaunch / in place {b / a:.2f}x")
PY
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
