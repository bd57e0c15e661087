#!/usr/bin/env bash
# Nothing lost with a sharded optimizer (issue 21; see test_nothing_lost.sh): autohet run
# --shard-optimizer even on the emulated cluster, every plan's AdamW state split over its
# data-parallel groups ([fast-0] + [slow-0 > slow-1]: each group over two nodes). slow-1, which holds
# its own parts of the optimizer state, is killed without notice late in the run and not replaced
# (seed 15: re-planned without it), killed without notice and replaced at once (seed 6: the same
# plan again), and preempted with a notice that saves, then replaced (seed 4). After recovery every loss matches the
# uninterrupted sharded run (bit-exact on the same plan, 1e-4 on another), every step's samples are
# trained once, and no kill damages a committed step: the state came from the checkpoints, which
# hold whole moments (docs/checkpoints.md "Sharded optimizer").
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
small_cluster
run_agent "$WORK/ref" --shard-optimizer even || { cat "$WORK/ref.log"; fail "reference run"; }
python3 - "$WORK/ref/plan-0.json" <<'PY' || fail "the reference plan is not sharded"
import json, sys
p = json.load(open(sys.argv[1]))
assert len(p["pipelines"]) >= 2 and p.get("optimizer_shards"), p.get("optimizer_shards")
print(f"reference: {len(p['pipelines'])} pipelines, {len(p['optimizer_shards'])} sharded groups")
PY
for seed in 15 6 4; do
    seed_case $seed "$WORK/ref" --shard-optimizer even
    python3 - "$WORK/seed-$seed" <<'PY' || fail "seed: a plan of two pipelines or more was not sharded"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/plan-*.json")):
    p = json.load(open(f))
    assert len(p["pipelines"]) < 2 or p.get("optimizer_shards"), f
PY
done
echo "PASS"
