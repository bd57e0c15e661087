# In-memory peer replicas sent over one flow a rank (runtime/ckpt_replica.c; plan/ckpt_traffic.h
# ah_ckpt_lane_count, ah_ckpt_lanes_assign): two nodes of two ranks each (train-dp4's four replicas,
# two on n0, two on n1), so each node's step (6 files, written by its lowest rank) goes to its partner
# over two lanes, the node's rank k sending its share of the files to the partner's rank k, the
# partner's leader writing the manifest once both lanes have landed. A run saving every 4 steps
# (--ckpt-sync) dies at step 10 (n1's ranks SIGKILLed, test hook):
#   - every file of steps 4 and 8 is in the partner's memory (memory bytes and files = the disks'),
#     each held step's manifest lists the 6 files, and it verifies;
#   - n1 lost with its disk and memory, the resume takes step 8 bit-exact with the uninterrupted run:
#     n0's ranks from n0's disk, n1's new ranks from n0's memory;
#   - with --replica-when-it-pays (what autohet run passes) the periodic saves are not replicated, as
#     every piece is on both nodes' disks (ckpt/replica.h ah_replica_pays), said once.
. "$(dirname "$0")/train_common.sh"
STEPS=12
python3 - "$PLANS/train-dp4.json" "$WORK/dp22.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, p in enumerate(d["pipelines"]):
    p["micro_batches"] = 2
    p["stages"][0]["devices"] = [{"node": "n0" if i < 2 else "n1", "index": i % 2}]
json.dump(d, open(sys.argv[2], "w"))
PY
train() { plan_train dp22 180 "$@"; } # out [flags...]
train full || { cat "$WORK/full.err" >&2; fail "the uninterrupted run"; }
AH_TEST_HOOK="phase=step,step=10,node=n1,action=kill" train died --ckpt-every 4 --ckpt-sync --local-root "$WORK/ck" \
    --replica-memory-gb 1 --replica-root "$WORK/mem" && fail "the run with n1 killed at step 10 exited 0"
python3 - "$WORK/died.jsonl" <<'PY' || fail "checkpoint events with replicas over two lanes"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [4, 8], ev
for e in ev:
    assert e["ok"] and e["bytes"]["memory"] == e["bytes"]["local"] > 0, e
    assert e["memory_files"] == e["files"] == 12 and e["memory_left_files"] == 0 and "memory_error" not in e, e
PY
for held in n0/from-n1 n1/from-n0; do
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert len(m["files"]) == 6, m["files"]' \
        "$WORK/mem/$held/step-00000008/manifest.json" || fail "$held: the manifest of step 8"
    "$AUTOHET" ckpt verify --local-root "$WORK/mem/$held" --step 8 >"$WORK/verify.out" 2>&1 ||
        { cat "$WORK/verify.out"; fail "$held: step 8 does not verify"; }
done
rm -rf "$WORK/ck/n1" "$WORK/mem/n1"
train resumed --ckpt-every 4 --local-root "$WORK/ck" --resume --replica-memory-gb 1 --replica-root "$WORK/mem" ||
    { cat "$WORK/resumed.err" >&2; fail "the resume"; }
resumed_exactly full resumed 8 'r["files"]["memory"] > 0 and r["files"]["peer"] == 0 and r["files"]["cloud"] == 0'
# --replica-when-it-pays (autohet run's trainers): every piece of this plan is on both nodes' disks, so the
# periodic saves are not replicated, said once
rm -rf "$WORK/ck" "$WORK/mem"
train pays --ckpt-every 4 --ckpt-sync --local-root "$WORK/ck" --replica-memory-gb 1 --replica-root "$WORK/mem" \
    --replica-when-it-pays || { cat "$WORK/pays.err" >&2; fail "the run with --replica-when-it-pays"; }
[ "$(grep -c 'are not replicated to the peers' "$WORK/pays.err")" = 1 ] || { cat "$WORK/pays.err"; fail "the note, once"; }
python3 - "$WORK/pays.jsonl" <<'PY' || fail "--replica-when-it-pays: nothing replicated"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev][:2] == [4, 8] and all(e["bytes"].get("memory", 0) == 0 for e in ev), ev
PY
[ -z "$(cd "$WORK/mem" 2>/dev/null && echo */*/step-*/manifest.json | grep -v '\*')" ] || fail "replicas held: $(ls -R "$WORK/mem")"
echo PASS
