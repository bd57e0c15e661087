# The resumed step written behind under another plan (docs/checkpoints.md, "write behind"): a
# two-stage pipeline (n0: blocks 0-1 and the embedding, n1: blocks 2-3 and the head, TP 1) with
# in-memory replicas saves steps 4 and 8 (--ckpt-sync) and dies at step 10; n1 is lost without
# notice (its disk and memory gone). The relaunch is re-planned onto n0 alone at TP 2: it reads
# n0's pieces of step 8 from n0's disk and n1's from n0's memory, then writes step 8 behind. n0's
# disk holds step 8 committed with the old plan's files, none of the new plan's:
#   - the write-behind adds the TP-2 files beside the TP-1 ones and commits a manifest listing both
#     (event ok, "extended_nodes": ["n0"]); before session 18 it failed "step 8 is already
#     committed" and step 8 was in memory only until the next save;
#   - killed mid-addition (test hooks ckpt-piece, ckpt-write on n0): step 8 still verifies with its
#     three TP-1 files, and the next relaunch resumes from it and adds the files then;
#   - from the disk alone (memory and step 12 gone), a resume reads step 8 at TP 2, 6 files local.
. "$(dirname "$0")/train_common.sh"
STEPS=12
dp2_plan "$WORK/dp2.json"
python3 - "$WORK/dp2.json" "$WORK/pp2.json" "$WORK/tp2.json" <<'PY'
import json, sys, copy
d = json.load(open(sys.argv[1]))
p = d["pipelines"][0]
p["micro_batches"] = 8
s0, s1 = copy.deepcopy(p["stages"][0]), copy.deepcopy(p["stages"][0])
s0["layers"], s1["layers"] = [0, 2], [2, 4]
s0["devices"], s1["devices"] = [{"node": "n0", "index": 0}], [{"node": "n1", "index": 0}]
d["pipelines"] = [dict(p, stages=[s0, s1])]
json.dump(d, open(sys.argv[2], "w"))
s0["layers"], s0["devices"] = [0, 4], [{"node": "n0", "index": 0}, {"node": "n0", "index": 1}]
d["pipelines"], d["tp"] = [dict(p, stages=[s0])], 2
json.dump(d, open(sys.argv[3], "w"))
PY
run() { # run PLAN OUT [flags...]: 2 ranks, its exit status
    local plan=$1 out=$2
    shift 2
    timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/$plan.json" --data "$WORK/text.bin" --steps "$STEPS" \
        --quiet --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
}
REP=(--replica-memory-gb 1 --replica-root "$WORK/mem")
AH_TEST_HOOK="phase=step,step=10,node=n1,action=kill" run pp2 died --ckpt-every 4 --ckpt-sync --local-root "$WORK/ck" \
    "${REP[@]}" && fail "the run with n1 killed at step 10 exited 0"
rm -rf "$WORK/ck/n1" "$WORK/mem/n1"
[ -f "$WORK/mem/n0/from-n1/step-00000008/manifest.json" ] || fail "n0's memory lacks n1's step 8"
mkdir "$WORK/lost" && cp -r "$WORK/ck" "$WORK/mem" "$WORK/lost/"
names() { python3 -c 'import json,sys; print(" ".join(f["name"].split(".safetensors")[0] for f in json.load(open(sys.argv[1]))["files"]))' \
    "$WORK/ck/n0/step-00000008/manifest.json"; }
OLD=$(names)
[ "$OLD" = "block-000.tp1-0 block-001.tp1-0 embed.tp1-0" ] || fail "n0's step 8 before: $OLD"
resume() { run tp2 "$1" --ckpt-every 4 --local-root "$WORK/ck" --resume "${REP[@]}"; }
# killed while adding the files (the hook's step 8: only the write-behind saves it): step 8 as it was
for phase in ckpt-piece ckpt-write; do
    rm -rf "$WORK/ck" "$WORK/mem" && cp -r "$WORK/lost/ck" "$WORK/lost/mem" "$WORK/"
    AH_TEST_HOOK="phase=$phase,step=8,node=n0,action=kill" resume "kill-$phase" && fail "$phase: the run exited 0"
    "$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" --step 8 >"$WORK/verify.out" 2>&1 ||
        { cat "$WORK/verify.out"; fail "$phase: n0's step 8 does not verify after a kill mid-addition"; }
    [ "$(names)" = "$OLD" ] || fail "$phase: n0's step 8 lists $(names) after the kill"
done
# the addition (after the last kill: what it left is written over)
resume replan || { cat "$WORK/replan.err"; fail "the re-planned resume failed"; }
python3 - "$WORK/replan.jsonl" <<'PY' || { cat "$WORK/replan.err"; fail "the write-behind's event"; }
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
r = [o for o in lines if o.get("event") == "recover"]
assert len(r) == 1 and r[0]["step"] == 8 and r[0]["tp_from"] == 1 and r[0]["tp_to"] == 2 and r[0]["files"]["memory"] == 6, r
ev = [o for o in lines if o.get("event") == "checkpoint" and o.get("write_behind")]
assert len(ev) == 1 and ev[0]["step"] == 8 and ev[0]["ok"] and ev[0]["extended_nodes"] == ["n0"], ev
assert "held_nodes" not in ev[0] and ev[0]["files"] == 12, ev  # both ranks' TP-2 files, 6 each
assert [o["step"] for o in lines if "event" not in o] == list(range(8, 12))
PY
"$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" --step 8 >"$WORK/verify.out" 2>&1 ||
    { cat "$WORK/verify.out"; fail "n0's step 8 does not verify after the addition"; }
NEW=$(names)
for n in $OLD block-000.tp2-0 block-003.tp2-1 embed.tp2-1 head.tp2-0; do
    case " $NEW " in *" $n "*) ;; *) fail "n0's step 8 lacks $n: $NEW" ;; esac
done
# step 8 from n0's disk alone, at the new plan's degree
rm -rf "$WORK/mem" "$WORK/ck/n0/step-00000012"
run tp2 disk --local-root "$WORK/ck" --resume || { cat "$WORK/disk.err"; fail "the resume from the disk"; }
python3 - "$WORK/disk.jsonl" <<'PY' || fail "the resume from n0's disk"
import json, sys
r = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "recover"]
assert len(r) == 1 and r[0]["step"] == 8 and r[0]["tp_from"] == 2 and r[0]["files"] == {"local": 12, "memory": 0, "peer": 0, "cloud": 0}, r
PY
echo PASS
