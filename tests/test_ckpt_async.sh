# Asynchronous checkpoints (the default; --ckpt-sync the old way; docs/checkpoints.md):
#  1. tp2-asym (8 ranks on 2 nodes, TP 2, ranks that write nothing): losses with no checkpoints, with
#     --ckpt-sync and with asynchronous saves every 4 steps are bit-identical; steps 4 and 8 were
#     written in the background ("async": true; step 8 by AdamW itself, runtime/ckpt_fuse.c), the last
#     one synchronously; every file of the
#     async steps has the size and CRC-32C of the --ckpt-sync run's; every committed step verifies;
#     a resume from step 8 (async-written) continues bit-identically. Host memory: a node short of
#     its snapshots (and replicas) refused by plan, evaluate and train alike.
#  2. dp2 (n0, n1), a rank of n1 killed (SIGKILL) while its snapshot of step 8 is being written: after
#     its first shard file, after its part file, and with the writer stopped there while the rank
#     trains on (then kill -9 from outside). Each time step 8 is committed on no node, step 4
#     verifies on both, and --resume continues from step 4 bit-identically.
# Usage: bash tests/test_ckpt_async.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
STEPS=12
run() { # plan out np [flags...]
    local plan=$1 out=$2 np=$3
    shift 3
    timeout 180 $MPIRUN -np "$np" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS --quiet \
        --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>&1
}
verify_nodes() { # root nodes...
    local root=$1 node
    shift
    for node in "$@"; do
        "$AUTOHET" ckpt verify --local-root "$root/$node" >"$WORK/verify.out" 2>&1 \
            || { cat "$WORK/verify.out" >&2; fail "$root/$node: committed steps do not verify"; }
    done
}

# ---- 1. losses, files, resume ----------------------------------------------------------------
TP=$PLANS/train-tp2-asym.json
run "$TP" ref 8 || { cat "$WORK/ref.out" >&2; fail "reference run"; }
run "$TP" sync 8 --ckpt-sync --ckpt-every 4 --keep 5 --local-root "$WORK/cks" || { cat "$WORK/sync.out" >&2; fail "--ckpt-sync run"; }
run "$TP" async 8 --ckpt-every 4 --keep 5 --local-root "$WORK/cka" || { cat "$WORK/async.out" >&2; fail "async run"; }
same_losses ref sync
same_losses ref async
python3 - "$WORK/sync.jsonl" "$WORK/async.jsonl" "$WORK/cks" "$WORK/cka" <<'PY' || fail "async checkpoints"
import json, os, sys
def events(p):
    return {o["step"]: o for o in map(json.loads, open(p)) if o.get("event") == "checkpoint"}
sync, asyn = events(sys.argv[1]), events(sys.argv[2])
assert sorted(sync) == sorted(asyn) == [4, 8, 12], (sorted(sync), sorted(asyn))
assert all(e["ok"] for e in list(sync.values()) + list(asyn.values()))
assert not any(e.get("async") for e in sync.values()), sync
assert asyn[4].get("async") and asyn[8].get("async") and not asyn[12].get("async"), asyn
for e in (asyn[4], asyn[8]):
    assert e["wait_seconds"] >= 0 and e["snapshot_seconds"] >= 0 and e["bytes"]["local"] == sync[4]["bytes"]["local"], e
    assert e["writer_cpu_seconds"] >= 0, e
# the writer threads' CPU on the snapshots (a waiting rank's own writing is not theirs: > 0 over both)
assert asyn[4]["writer_cpu_seconds"] + asyn[8]["writer_cpu_seconds"] > 0, asyn
assert not any("writer_cpu_seconds" in e for e in sync.values()), sync
# AdamW writes the snapshot (runtime/ckpt_fuse.c): not at step 4 (the first save: no layout yet,
# copied), every tensor at step 8 (the bytes written to the disks less each file's header)
tensors = asyn[8]["snapshot_adamw_bytes"]
assert asyn[4]["snapshot_adamw_bytes"] == 0 and 0.9 * asyn[8]["bytes"]["local"] < tensors < asyn[8]["bytes"]["local"], asyn
for node in sorted(os.listdir(sys.argv[3])):
    for step in (4, 8, 12):
        d = f"step-{step:08d}/manifest.json"
        a = json.load(open(os.path.join(sys.argv[4], node, d)))["files"]
        s = json.load(open(os.path.join(sys.argv[3], node, d)))["files"]
        assert a == s, f"{node} step {step}: the async files differ from --ckpt-sync's"
print(f"  steps 4, 8 written in the background (8's {tensors} bytes by AdamW), 12 at the end; every file equal to --ckpt-sync's (size, CRC-32C)")
PY
verify_nodes "$WORK/cka" n0 n1
# The memory model's snapshot bytes (evaluate --json "host_memory", per node) are what the ranks hold.
"$AUTOHET" evaluate --json --plan "$TP" >"$WORK/eval.json" || fail "evaluate $TP"
python3 - "$WORK/eval.json" "$WORK/async.jsonl" <<'PY' || fail "snapshot bytes: model vs runtime"
import json, sys
hm = json.load(open(sys.argv[1]))["host_memory"]
ev = [o for o in map(json.loads, open(sys.argv[2])) if o.get("event") == "checkpoint" and o.get("async")]
model = sum(n["snapshot_bytes"] for n in hm)
assert [n["node"] for n in hm] == ["n0", "n1"] and all(n["capacity_bytes"] is None for n in hm), hm
assert all(e["snapshot_bytes"] == model for e in ev), (model, [e["snapshot_bytes"] for e in ev])
print(f"  snapshots: {model} bytes in host memory, the model's figure to the byte ({hm})")
PY
cp -r "$WORK/cka" "$WORK/cka8"
rm -rf "$WORK"/cka8/*/step-00000012
run "$TP" resume8 8 --ckpt-every 4 --local-root "$WORK/cka8" --resume || { cat "$WORK/resume8.out" >&2; fail "resume from step 8"; }
same_losses ref resume8 8

# ---- host memory: a node whose "host_memory_gib" cannot hold its snapshots is refused ---------------
python3 - "$TP" "$WORK/eval.json" "$WORK/small.json" <<'PY'
import json, sys
d, hm = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["host_memory"]
need = {n["node"]: n["snapshot_bytes"] for n in hm}
for n in d["cluster"]["nodes"]:
    n["host_memory_gib"] = 64 if n["name"] == "n0" else (need["n1"] - 1) / 2**30
json.dump(d, open(sys.argv[3], "w"))
PY
"$AUTOHET" evaluate --plan "$WORK/small.json" >/dev/null 2>"$WORK/small.err" && fail "evaluate took a node short of host memory"
need1=$(python3 -c 'import json,sys; print([n["snapshot_bytes"] for n in json.load(open(sys.argv[1]))["host_memory"] if n["node"] == "n1"][0])' "$WORK/eval.json")
grep -q "node n1: .* need $need1 bytes" "$WORK/small.err" || { cat "$WORK/small.err" >&2; fail "the refusal names neither node n1 nor its $need1 bytes"; }
run "$WORK/small.json" small 8 --ckpt-every 4 --local-root "$WORK/cksmall" && fail "train took a node short of host memory"
grep -q "node n1: .* need $need1 bytes" "$WORK/small.out" || { cat "$WORK/small.out" >&2; fail "train's refusal"; }
run "$WORK/small.json" smallsync 8 --ckpt-sync --ckpt-every 4 --local-root "$WORK/cksmall" \
    || { cat "$WORK/smallsync.out" >&2; fail "--ckpt-sync keeps no snapshot: the plan trains"; }
echo "  host memory one byte short on n1: refused by evaluate and train, naming n1 and $need1 bytes; --ckpt-sync trains"
# with in-memory replicas the same check counts what a node keeps in its tmpfs: n1 holds its snapshots
# and nothing more, so with --replica-memory-gb (n0's step in n1's memory, and n1's own notice copy) it is refused
python3 - "$TP" "$WORK/eval.json" "$WORK/exact.json" <<'PY'
import json, sys
d, hm = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["host_memory"]
need = {n["node"]: n["snapshot_bytes"] for n in hm}
for n in d["cluster"]["nodes"]:
    n["host_memory_gib"] = 64 if n["name"] == "n0" else need["n1"] / 2**30
json.dump(d, open(sys.argv[3], "w"))
PY
"$AUTOHET" evaluate --plan "$WORK/exact.json" >/dev/null 2>&1 || fail "evaluate refused a node that holds its snapshots"
run "$WORK/exact.json" exactrep 8 --ckpt-every 4 --local-root "$WORK/ckexact" --replica-memory-gb 1 \
    && fail "train took replicas a node's host memory cannot hold"
grep -q "node n1: its asynchronous checkpoint snapshots ($need1 bytes) and in-memory replicas" "$WORK/exactrep.out" ||
    { cat "$WORK/exactrep.out" >&2; fail "the replicas' refusal names neither n1 nor its parts"; }
echo "  n1 holding its snapshots exactly: --replica-memory-gb 1 refused, naming n1, its snapshots and replicas"
# evaluate and plan take --replica-memory-gb with train's rule (ah_host_memory_check) and message
rep1=$(sed -n 's/.*in-memory replicas (\([0-9]*\) bytes.*/\1/p' "$WORK/exactrep.out" | head -1)
"$AUTOHET" evaluate --plan "$WORK/exact.json" --replica-memory-gb 1 >/dev/null 2>"$WORK/evalrep.err" \
    && fail "evaluate took replicas a node's host memory cannot hold"
grep -q "node n1: its asynchronous checkpoint snapshots ($need1 bytes) and in-memory replicas ($rep1 bytes" "$WORK/evalrep.err" ||
    { cat "$WORK/evalrep.err" >&2; fail "evaluate's refusal is not train's (n1, $need1 and $rep1 bytes)"; }
"$AUTOHET" evaluate --json --plan "$TP" --replica-memory-gb 1 >"$WORK/evalrep.json" || fail "evaluate --replica-memory-gb 1 $TP"
python3 -c 'import json,sys; hm = {n["node"]: n for n in json.load(open(sys.argv[1]))["host_memory"]}
assert hm["n1"]["replica_bytes"] == int(sys.argv[2]), hm' "$WORK/evalrep.json" "$rep1" || fail "evaluate --json: n1's replica_bytes is not $rep1"
python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["cluster"], open(sys.argv[2], "w"))' "$TP" "$WORK/c-open.json"
"$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/c-open.json" --global-batch 8 --seq-len 32 -o "$WORK/p-open.json" \
    >/dev/null 2>"$WORK/p-open.err" || { cat "$WORK/p-open.err" >&2; fail "plan on $TP's cluster"; }
"$AUTOHET" evaluate --json --plan "$WORK/p-open.json" >"$WORK/p-open-eval.json" || fail "evaluate the plan"
python3 - "$WORK/c-open.json" "$WORK/p-open-eval.json" "$WORK/c-exact.json" <<'PY'
import json, sys
c, hm = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["host_memory"]
need = {n["node"]: n["snapshot_bytes"] for n in hm}
for n in c["nodes"]:
    n["host_memory_gib"] = need.get(n["name"], 64 * 2**30) / 2**30
json.dump(c, open(sys.argv[3], "w"))
PY
"$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/c-exact.json" --global-batch 8 --seq-len 32 >/dev/null 2>"$WORK/p-exact.err" ||
    { cat "$WORK/p-exact.err" >&2; fail "plan refused nodes that hold their snapshots exactly"; }
"$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/c-exact.json" --global-batch 8 --seq-len 32 --replica-memory-gb 1 \
    >/dev/null 2>"$WORK/p-rep.err" && fail "plan took replicas no node's host memory can hold"
grep -q "node n[0-9]: its asynchronous checkpoint snapshots ([0-9]* bytes) and in-memory replicas" "$WORK/p-rep.err" ||
    { cat "$WORK/p-rep.err" >&2; fail "plan's refusal names no node and its replicas"; }
echo "  evaluate and plan --replica-memory-gb 1: refused as train is, naming the node ($rep1 bytes of replicas on n1)"

# ---- 2. a rank killed while its snapshot is being written -------------------------------------
STEPS=16
dp2_plan "$WORK/dp2.json"
run "$WORK/dp2.json" dref 2 || { cat "$WORK/dref.out" >&2; fail "dp2 reference run"; }
# after_kill NAME ROOT: step 8 committed nowhere, step 4 verifies on both nodes, a resume from it.
after_kill() {
    local name=$1 root=$2
    for node in n0 n1; do
        [ -e "$root/$node/step-00000008/manifest.json" ] && fail "$name: step 8 is committed on $node"
        [ -e "$root/$node/step-00000004/manifest.json" ] || fail "$name: step 4 is not committed on $node"
    done
    verify_nodes "$root" n0 n1
    run "$WORK/dp2.json" "$name-resume" 2 --ckpt-every 4 --local-root "$root" --resume \
        || { cat "$WORK/$name-resume.out" >&2; fail "$name: resume"; }
    same_losses dref "$name-resume" 4
}
for phase in ckpt-piece ckpt-write; do
    AH_TEST_HOOK="phase=$phase,step=8,node=n1,action=kill" \
        run "$WORK/dp2.json" "kill-$phase" 2 --ckpt-every 4 --local-root "$WORK/k-$phase" \
        && fail "$phase: the job survived its killed rank"
    ls "$WORK/k-$phase"/n1/step-00000008/*.safetensors >/dev/null 2>&1 || fail "$phase: n1 wrote no shard of step 8"
    after_kill "kill-$phase" "$WORK/k-$phase"
done
# The writer stopped after its part file while its rank trains on: killed from outside.
hook=$WORK/hook
AH_TEST_HOOK="phase=ckpt-write,step=8,node=n1,file=$hook" \
    run "$WORK/dp2.json" stuck 2 --ckpt-every 4 --local-root "$WORK/k-stuck" &
job=$!
for _ in $(seq 600); do [ -s "$hook" ] && break; sleep 0.1; done
[ -s "$hook" ] || { kill $job; fail "the writer never reached the hook"; }
# training goes on past step 8 (metrics step 9: the tenth step) while the snapshot is unwritten
for _ in $(seq 600); do grep -q '"step": 9,' "$WORK/stuck.jsonl" 2>/dev/null && break; sleep 0.1; done
grep -q '"step": 9,' "$WORK/stuck.jsonl" || { kill $job; fail "training stopped while the snapshot was written"; }
kill -KILL "$(awk '{print $4}' "$hook")"
wait $job && fail "stuck: the job survived its killed rank"
after_kill stuck "$WORK/k-stuck"
echo PASS
