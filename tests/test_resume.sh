# Resume inside the trainer: a run saves every 4 steps; a restart from its step-8 checkpoint must
# continue exactly where it left off. Same plan: every later loss bit-identical (as printed, 9
# significant digits) to the uninterrupted run; another plan (other DP/PP/TP, fewer devices):
# within 1e-4 relative. The recover event must name the step and the data position (8 * B), so no
# sample is skipped or repeated.
# Usage: bash tests/test_resume.sh BUILD_DIR SOURCE_DIR [CASE]
#   CASE plans (default): pp4 saves; resume pp4 (bit-exact), single and dp4.
#   CASE tp:              tp2-asym saves (TP 2, asymmetric pipelines, 2 nodes); resume tp2-asym
#                         (bit-exact), single (TP 2 -> 1) and tp4 (TP 2 -> 4).
#   CASE schedules:       pp4 saves under 1F1B; resume pp4 (bit-exact) and pp4 under zero-bubble
#                         (the same placement: step 8's loss, a forward of the restored weights,
#                         bit-identical; later steps within 1e-4, W's accumulation order being
#                         another). A plan name NAME+SCHEDULE is train_common.sh's with_schedule.
#   CASE cp:              cp2 saves (context parallelism: the CP ranks hold the same weights, one
#                         copy written per node); resume cp2 (bit-exact), single (CP 2 -> 1) and
#                         cp4 (CP 2 -> 4), within 1e-4 (the CP split changes the attention's
#                         summation order); then single saves, its files and bytes the cp2 run's,
#                         and cp2 resumes it (CP 1 -> 2, within 1e-4); a CP 2 pair on nodes n0 and n1
#                         writes a whole copy on each node, and without n1's disk resumes
#                         bit-exact, n1's rank reading from n0 (the peer tier); cp2-pp2-sharded (the optimizer
#                         sharded over the CP ranks) on two nodes resumes bit-exact; --init-from
#                         the cp2 run's export of step 8 at CP 4 (its first loss step 8's, within 1e-4).
#                         AH_CLUSTER_SHORT=1 (the sanitizer stage): resume cp4 only, no extras.
. "$(dirname "$0")/train_common.sh"
CASE=${3:-plans}
STEPS=12
run() { # plan-name out-name [extra flags...]
    local plan=$1 out=$2
    shift 2
    local n cmd file=$PLANS/train-$plan.json
    [ -r "$WORK/$plan.json" ] && file=$WORK/$plan.json # a plan the test wrote
    if [ "${plan#*+}" != "$plan" ]; then
        file=$WORK/$plan.json
        with_schedule "$PLANS/train-${plan%%+*}.json" "${plan#*+}" "$file"
    fi
    n=$(plan_ranks "$file")
    cmd=("$AUTOHET" train --plan "$file" --data "$WORK/text.bin" --steps $STEPS --quiet
         --metrics "$WORK/$out.jsonl" "$@")
    timeout 120 $MPIRUN -np "$n" "${cmd[@]}" >"$WORK/$out.out" 2>"$WORK/$out.err" \
        || { cat "$WORK/$out.out" "$WORK/$out.err" >&2; fail "$out: autohet train failed"; }
}
# A copy of the checkpoint root (ck unless named) whose newest complete step is 8, in ck8.
at_step8() {
    rm -rf "$WORK/ck8"
    cp -r "$WORK/${1:-ck}" "$WORK/ck8"
    rm -rf "$WORK"/ck8/*/step-00000012
}
case $CASE in
plans) SAVER=pp4; SAME=pp4; OTHERS=(single dp4) ;;
tp) SAVER=tp2-asym; SAME=tp2-asym; OTHERS=(single tp4) ;;
schedules) SAVER=pp4; SAME=pp4; OTHERS=(pp4+zero-bubble) ;;
cp) SAVER=cp2; SAME=cp2; OTHERS=(single cp4) ;;
*) fail "unknown case $CASE" ;;
esac
run "$SAVER" full --ckpt-every 4 --local-root "$WORK/ck"
python3 - "$WORK/full.jsonl" <<'PY' || fail "checkpoint events"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [4, 8, 12] and all(e["ok"] and e["bytes"]["local"] > 0 for e in ev), ev
PY
"$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" >/dev/null || fail "the saved steps do not verify"
# ckpt ls/verify take train's --local-root (a folder of node roots) as well as one node's root.
"$AUTOHET" ckpt ls --local-root "$WORK/ck" >"$WORK/ls.out" || fail "ckpt ls on the folder of node roots"
grep -Eq '^local:n0 +8 +committed' "$WORK/ls.out" && grep -Eq '^local:n0 +12 +committed' "$WORK/ls.out" ||
    { cat "$WORK/ls.out" >&2; fail "ckpt ls: expected node n0's 2 kept steps, 8 and 12"; }
if [ "$CASE" = tp ]; then # two nodes: each labelled
    grep -Eq '^local:n1 +12 +committed' "$WORK/ls.out" || { cat "$WORK/ls.out" >&2; fail "ckpt ls: node n1's steps"; }
fi
"$AUTOHET" ckpt ls --local-root "$WORK/ck/n0" | grep -Eq '^local +12 +committed' || fail "ckpt ls of one node's root"
"$AUTOHET" ckpt verify --local-root "$WORK/ck" >/dev/null || fail "ckpt verify on the folder of node roots"
! "$AUTOHET" ckpt ls --local-root "$WORK/no-such-dir" >"$WORK/ls.out" 2>"$WORK/ls.err" &&
    grep -q "no-such-dir: cannot open" "$WORK/ls.err" && [ ! -s "$WORK/ls.out" ] ||
    fail "ckpt ls on a missing directory must fail, say so, and print no table: $(cat "$WORK/ls.out")"
# a step directory given by mistake (it listed an empty table, exit 0)
! "$AUTOHET" ckpt ls --local-root "$WORK/ck/n0/step-00000012/" 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt ls: usage error: --local-root $WORK/ck/n0/step-00000012/ is the directory of step 12, not a checkpoint root: give its root, --local-root $WORK/ck/n0$" \
        "$WORK/ls.err" || { cat "$WORK/ls.err" >&2; fail "ckpt ls on a step directory must say so and name its root"; }
for bad in "--step 4" "--step -1"; do
    # (-1 is outside --step's range, which the parser checks first)
    # shellcheck disable=SC2086
    ! "$AUTOHET" ckpt ls --local-root "$WORK/ck" $bad 2>"$WORK/ls.err" &&
        grep -Eq "not a flag of ckpt ls|--step: expected 0 \.\. " "$WORK/ls.err" ||
        fail "ckpt ls $bad must be refused, not ignored"
done
# a step that is not there: the message names it, the root and the steps that are
! "$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" --step 4 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt verify: I/O error: no committed checkpoint step 4 in --local-root $WORK/ck/n0 (committed there: local 8, local 12)$" \
        "$WORK/ls.err" || { cat "$WORK/ls.err" >&2; fail "ckpt verify --step 4 (not kept): the message"; }
! "$AUTOHET" ckpt verify --local-root "$WORK" 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt verify: I/O error: no committed checkpoint step in --local-root $WORK$" "$WORK/ls.err" ||
    { cat "$WORK/ls.err" >&2; fail "ckpt verify of a root without steps: the message"; }
! "$AUTOHET" ckpt verify --local-root "$WORK/ck" --s3-endpoint http://127.0.0.1:1 2>"$WORK/ls.err" &&
    grep -q -- "--s3-endpoint needs --cloud" "$WORK/ls.err" || fail "ckpt verify --s3-endpoint without --cloud"
SHORT=0
[ "$CASE" = cp ] && [ "${AH_CLUSTER_SHORT:-0}" = 1 ] && SHORT=1 SAME= OTHERS=(cp4)
for plan in $SAME "${OTHERS[@]}"; do
    at_step8
    run "$plan" "resume-$plan" --local-root "$WORK/ck8" --resume
    grep -q "resumed from step 8" "$WORK/resume-$plan.out" || fail "resume-$plan: no 'resumed from step 8'"
    if [ "$plan" = "$SAME" ]; then resumed_within full "resume-$plan" 8 0
    elif [ "${plan%%+*}" = "$SAME" ]; then resumed_within full "resume-$plan" 8 -1e-4 # placement unchanged
    else resumed_within full "resume-$plan" 8 1e-4; fi
done
[ "$SHORT" = 1 ] && { echo PASS; exit 0; }
if [ "$CASE" = cp ]; then
    # One copy: the CP 2 run's checkpoints are the one-device run's, file for file and byte for byte.
    run single full1 --ckpt-every 4 --local-root "$WORK/ck1"
    python3 - "$WORK/full.jsonl" "$WORK/full1.jsonl" <<'PY' || fail "the CP 2 run's checkpoints are not one copy"
import json, sys
ev = [[(o["step"], o["files"], o["bytes"]["local"]) for o in map(json.loads, open(p)) if o.get("event") == "checkpoint"]
      for p in sys.argv[1:]]
assert ev[0] == ev[1], f"cp2 {ev[0]} vs single {ev[1]}"
print(f"  cp2 and single save the same (step, files, bytes): {ev[0]}")
PY
    at_step8 ck1 # CP 1 -> 2
    run cp2 resume1-cp2 --local-root "$WORK/ck8" --resume
    resumed_within full1 resume1-cp2 8 1e-4
    # CP ranks on two nodes: each node's disk gets a whole copy (its lowest holder writes), as
    # data-parallel replicas do.
    python3 - "$PLANS/train-cp2.json" "$WORK/cp2-2nodes.json" <<'PY' || fail "cp2-2nodes plan"
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"][0]["stages"][0]["devices"][1] = {"node": "n1", "index": 0}
json.dump(d, open(sys.argv[2], "w"))
PY
    run cp2-2nodes two-nodes --ckpt-every 4 --local-root "$WORK/ck2n"
    for node in n0 n1; do
        "$AUTOHET" ckpt verify --local-root "$WORK/ck2n/$node" --step 8 >/dev/null &&
            [ "$(find "$WORK/ck2n/$node/step-00000008" -name '*.safetensors' | wc -l)" = 6 ] ||
            fail "two-nodes: node $node's disk does not hold a whole copy of step 8 (6 shards)"
    done
    # n1's disk lost: its CP rank reads every shard from n0 (the peer tier), the same run's losses
    at_step8 ck2n
    rm -rf "$WORK/ck8/n1"
    run cp2-2nodes resume-two-nodes --local-root "$WORK/ck8" --resume
    resumed_within full resume-two-nodes 8 0
    python3 -c 'import json,sys; r=[o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "recover"][0]; assert r["files"]["local"] == 6 and r["files"]["peer"] == 6, r' \
        "$WORK/resume-two-nodes.jsonl" || fail "resume-two-nodes: expected 6 files local and 6 from the peer"
    # The sharded optimizer over CP ranks (cp2-pp2-sharded, CP rank 1 moved to node n1 so that each
    # group's state is on two disks): its save gathers each stage's moments from both CP ranks, its
    # resume scatters them back, bit-exact.
    python3 - "$PLANS/train-cp2-pp2-sharded.json" "$WORK/sharded-2nodes.json" <<'PY' || fail "sharded-2nodes plan"
import json, sys
d = json.load(open(sys.argv[1]))
moved = {("n0", 1): ("n1", 0), ("n0", 3): ("n1", 1)}
devs = [x for st in d["pipelines"][0]["stages"] for x in st["devices"]]
for x in devs + [x for g in d["optimizer_shards"] for x in g["shares"]]:
    x["node"], x["index"] = moved.get((x["node"], x["index"]), (x["node"], x["index"]))
json.dump(d, open(sys.argv[2], "w"))
PY
    run sharded-2nodes sharded --ckpt-every 4 --local-root "$WORK/cksh"
    at_step8 cksh
    run sharded-2nodes resume-sharded --local-root "$WORK/ck8" --resume
    resumed_within sharded resume-sharded 8 0
    # --init-from at CP 4: step 8 of the CP 2 run, exported; on the data from step 8's batch on, its
    # first loss is step 8's.
    "$AUTOHET" ckpt export --local-root "$WORK/ck/n0" --step 8 -o "$WORK/x8" >/dev/null || fail "export step 8"
    /usr/bin/python3 "$SRC/tests/hf_files.py" shift "$WORK/text.bin" "$WORK/text8.bin" $((8 * 8 * 32)) ||
        fail "shift the data by 8 batches"
    timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$PLANS/train-cp4.json" --data "$WORK/text8.bin" --steps 1 \
        --quiet --metrics "$WORK/init.jsonl" --init-from "$WORK/x8" >"$WORK/init.out" 2>&1 ||
        { cat "$WORK/init.out" >&2; fail "cp4 --init-from failed"; }
    python3 - "$WORK/full.jsonl" "$WORK/init.jsonl" <<'PY' || fail "cp4 --init-from step 8's export"
import json, sys
want = [o["loss"] for o in map(json.loads, open(sys.argv[1])) if o.get("step") == 8 and "event" not in o][0]
got = [o["loss"] for o in map(json.loads, open(sys.argv[2])) if "event" not in o][0]
assert abs(got - want) <= 1e-4 * abs(want), (got, want)
print(f"  cp4 --init-from step 8's export: first loss {got} vs step 8's {want}")
PY
fi
# Nothing to resume from: start from scratch, say so, and train the same as a fresh run.
run "$SAME" scratch --local-root "$WORK/empty" --resume
grep -q "starting from scratch" "$WORK/scratch.out" || fail "no 'starting from scratch' message"
python3 - "$WORK/full.jsonl" "$WORK/scratch.jsonl" <<'PY' || fail "a fresh --resume run differs"
import json, sys
a = [o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o]
b = [o["loss"] for o in map(json.loads, open(sys.argv[2])) if "event" not in o]
assert a == b, (a, b)
PY
echo PASS
