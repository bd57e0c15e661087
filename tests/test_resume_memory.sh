# In-memory peer replicas (--replica-memory-gb; docs/checkpoints.md "In-memory peer replicas"), on
# the 2-node data-parallel plan (n0, n1: each the other's replica holder). A run saving every 4
# steps of 12 (--ckpt-sync, so each save commits at its step) dies at step 10 (a rank of n1
# SIGKILLed, test hook): steps 4 and 8 are on both disks, step 8 alone in each host's memory (one
# step kept), n0 holding n1's pieces and n1 n0's. Then n1 is lost without notice: its disk and its
# memory gone (a new machine in its place).
#   - the resume on n0 + the new n1 takes step 8, bit-exact with the uninterrupted run: n0's rank
#     its 6 files from its disk, n1's rank its 6 from n0's memory, none from a disk of another node
#     or the cloud; saving its last step, it frees the replicas at the end;
#   - a replica corrupted in n0's memory: refused by its checksum, that file from the next tier (n0's
#     disk, as a peer), the other 5 from memory; still bit-exact;
#   - a memory copy wiped: the tier is empty, the files come from n0's disk as before replicas;
#   - a budget too small for any file (--replica-memory-gb 1e-6): the checkpoint events say every
#     file stayed on the disks (memory_left_files), nothing held;
#   - the checkpoint events give bytes.memory, and `autohet ckpt ls --replica-root` lists the tier.
. "$(dirname "$0")/train_common.sh"
STEPS=12
dp2_plan "$WORK/dp2.json"
ok() { dp2_train "$@" || { cat "$WORK/$1.out" "$WORK/$1.err" >&2; fail "$1: autohet train failed"; }; }
REP=(--replica-memory-gb 1 --replica-root "$WORK/mem")
ok full
AH_TEST_HOOK="phase=step,step=10,node=n1,action=kill" dp2_train died --ckpt-every 4 --ckpt-sync --local-root "$WORK/ck" \
    "${REP[@]}" && fail "the run with n1 killed at step 10 exited 0"
python3 - "$WORK/died.jsonl" <<'PY' || fail "checkpoint events with replicas"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [4, 8], ev
for e in ev:
    assert e["ok"] and e["bytes"]["memory"] == e["bytes"]["local"] > 0, e
    assert e["memory_files"] == e["files"] == 12 and e["memory_left_files"] == 0, e
print(f"  saves: {[(e['step'], e['bytes']['memory'], round(e['memory_seconds'], 3)) for e in ev]} (step, bytes in memory, s)")
PY
[ "$(cd "$WORK/mem" && echo */*/step-*)" = "n0/from-n1/step-00000008 n1/from-n0/step-00000008" ] ||
    fail "memory holds: $(cd "$WORK/mem" && echo */*/step-*)"
# the window: n0 killed while it receives n1's step 8 (test hook replica: one file in, no manifest): it still
# holds n1's step 4 committed (a holder frees its older step once the new one is complete everywhere,
# when both fit its budget; until session 16 it freed it before the copy and held no complete step then)
AH_TEST_HOOK="phase=replica,step=8,node=n0,action=kill" dp2_train window --ckpt-every 4 --ckpt-sync \
    --local-root "$WORK/ck-window" --replica-memory-gb 1 --replica-root "$WORK/mem-window" &&
    fail "the run with n0 killed mid-replication exited 0"
[ -f "$WORK/mem-window/n0/from-n1/step-00000004/manifest.json" ] && [ ! -e "$WORK/mem-window/n0/from-n1/step-00000008/manifest.json" ] &&
    [ -e "$WORK/mem-window/n0/from-n1/step-00000008" ] ||
    fail "n0 killed mid-replication of step 8 holds: $(cd "$WORK/mem-window" && echo */*/step-*/manifest.json)"
"$AUTOHET" ckpt verify --local-root "$WORK/mem-window/n0/from-n1" --step 4 >"$WORK/verify.out" 2>&1 ||
    { cat "$WORK/verify.out"; fail "n1's step 4 in n0's memory does not verify after the kill mid-replication"; }
python3 - "$WORK/died.jsonl" <<'PY' || fail "memory_freed_first"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert all(e["memory_freed_first"] == 0 for e in ev), ev  # 1 GB holds two steps of this model
PY
# a budget for one step per holder, not two: the older step is freed before the copy, said
GB=$(python3 -c 'import json,sys; e=[o for o in map(json.loads, open(sys.argv[1])) if o.get("event")=="checkpoint"][0]; print(e["bytes"]["memory"] * 0.75 / 1e9)' "$WORK/died.jsonl")
ok tight --ckpt-every 4 --local-root "$WORK/ck-tight" --replica-memory-gb "$GB" --replica-root "$WORK/mem-tight"
python3 - "$WORK/tight.jsonl" <<'PY' || fail "a budget for one step: memory_freed_first"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [(e["step"], e["memory_freed_first"], e["memory_left_files"]) for e in ev] == [(4, 0, 0), (8, 2, 0), (12, 2, 0)], ev
PY
"$AUTOHET" ckpt ls --replica-root "$WORK/mem" >"$WORK/ls.out" || { cat "$WORK/ls.out"; fail "ckpt ls --replica-root"; }
grep -q "memory:n0<-n1 .*8 .*committed" "$WORK/ls.out" || { cat "$WORK/ls.out"; fail "ckpt ls: the memory tier"; }

# check OUT EXPECT: OUT resumed from step 8, bit-exact, its recover event satisfying EXPECT
check() { resumed_exactly full "$1" 8 "$2"; }
# fresh: the state at n1's loss: step 12 never saved; n1's disk and memory gone
fresh() {
    rm -rf "$WORK/ck8" "$WORK/mem8"
    cp -r "$WORK/ck" "$WORK/ck8" && cp -r "$WORK/mem" "$WORK/mem8" && rm -rf "$WORK/ck8/n1" "$WORK/mem8/n1"
}
R8=(--local-root "$WORK/ck8" --resume --replica-memory-gb 1 --replica-root "$WORK/mem8")
fresh
ok memory "${R8[@]}" --ckpt-every 4
check memory 'r["files"] == {"local": 6, "memory": 6, "peer": 0, "cloud": 0} and r["bytes"]["memory"] > 0 and r["fallbacks"] == 0'
# the resumed step, read partly from memory, is written behind; n0's disk held it committed (verified):
# n0 writes nothing, n1 commits it at once, the event is ok and names n0; both disks then hold step 8
python3 - "$WORK/memory.jsonl" <<'PY' || fail "the write-behind's checkpoint event"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint" and o.get("write_behind")]
assert len(ev) == 1 and ev[0]["step"] == 8 and ev[0]["ok"] and ev[0]["held_nodes"] == ["n0"], ev
assert ev[0]["files"] == 6 and ev[0]["bytes"]["local"] > 0, ev  # n1's rank's files only
PY
for nd in n0 n1; do
    "$AUTOHET" ckpt verify --local-root "$WORK/ck8/$nd" --step 8 >"$WORK/verify.out" 2>&1 ||
        { cat "$WORK/verify.out"; fail "$nd: step 8 not committed and verified after the write-behind"; }
done
# a run whose last step is saved on the disks frees its replicas
[ ! -e "$WORK/mem8/n0" ] && [ ! -e "$WORK/mem8/n1" ] || fail "a run that finished keeps its replicas: $(ls -R "$WORK/mem8")"
fresh
flip_byte "$WORK/mem8/n0/from-n1/step-00000008/block-001.tp1-0.safetensors"
ok corrupt "${R8[@]}"
check corrupt 'r["files"] == {"local": 6, "memory": 5, "peer": 1, "cloud": 0} and r["fallbacks"] == 1 and any("block-001" in x and "(memory: " in x and "corrupt" in x and "the peer tier" in x for x in r["repaired"])'
fresh
rm -rf "$WORK/mem8/n0"
ok wiped "${R8[@]}"
check wiped 'r["files"] == {"local": 6, "memory": 0, "peer": 6, "cloud": 0}'
# the same resume without replicas: the peer tier as before
fresh
ok plain --local-root "$WORK/ck8" --resume
check plain 'r["files"] == {"local": 6, "memory": 0, "peer": 6, "cloud": 0}'

# a budget no file fits: every file stays on the disks, said
ok tiny --ckpt-every 4 --local-root "$WORK/ck-tiny" --replica-memory-gb 1e-6 --replica-root "$WORK/mem-tiny"
python3 - "$WORK/tiny.jsonl" <<'PY' || fail "a budget too small"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert ev and all(e["bytes"]["memory"] == 0 and e["memory_left_files"] == 12 and e["memory_left_bytes"] == e["bytes"]["local"]
                  for e in ev), ev
PY
grep -q "note: --replica-memory-gb 1e-06 holds 0 bytes of step 4 in the hosts' memory; 12 files (.* bytes) do not fit and stay on the disks only" \
    "$WORK/tiny.err" || { cat "$WORK/tiny.err"; fail "the budget's note"; }
[ "$(grep -c "do not fit" "$WORK/tiny.err")" = 1 ] || fail "the budget's note said more than once"
# flags without what they act on
dp2_train lone --replica-memory-gb 1 && fail "--replica-memory-gb without --local-root accepted"
grep -q -- "--replica-memory-gb and --replica-root need --local-root" "$WORK/lone.err" || { cat "$WORK/lone.err"; fail "lone flag"; }
echo PASS
