# Resumes that would quietly go wrong are refused, saying what to do:
# - another seq_len: the manifest's data position counts samples of the saved length, so the run
#   would re-read or skip data; refused naming both lengths. A manifest of an older autohet without
#   "seq_len" is resumed as before (unchecked).
# - a plan whose node names are not the checkpoint's: --local-root DIR holds steps only under
#   DIR/OLD; refused naming the node and its newest step (it started from scratch, silently). A
#   preempted node's directory is deleted, so a re-plan still resumes from the nodes left
#   (test_resume_tiers, test_nothing_lost*); an empty root still starts from scratch (test_resume).
# Usage: bash tests/test_resume_mismatch.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-single.json
timeout 60 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --steps 8 --ckpt-every 4 \
    --local-root "$WORK/ck" >/dev/null 2>&1 || fail "the saving run"
grep -q '"seq_len": 32' "$WORK/ck/n0/step-00000008/manifest.json" || fail "the manifest records no seq_len"
resume() { # plan root: one rank, 10 steps, --resume; output in $WORK/out
    timeout 60 $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$1" --data "$WORK/text.bin" --steps 10 \
        --local-root "$2" --resume >"$WORK/out" 2>&1
}
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["train"]["seq_len"]=16; json.dump(d,open(sys.argv[2],"w"))' \
    "$PLAN" "$WORK/s16.json"
cp -r "$WORK/ck" "$WORK/ck16"
resume "$WORK/s16.json" "$WORK/ck16" && fail "a resume with seq_len 16 of a seq_len 32 checkpoint was accepted"
grep -q "^autohet train: invalid input: step 8 was saved with seq_len 32 but the plan trains seq_len 16: its data position (sample 64) counts samples of 32 tokens.*resume with a plan of seq_len 32" "$WORK/out" ||
    { cat "$WORK/out" >&2; fail "the seq_len refusal does not name both lengths"; }
# An older manifest, without seq_len: resumed as before.
python3 - "$WORK/ck16/n0" <<'PY'
import glob, json, sys
for p in glob.glob(sys.argv[1] + "/step-*/manifest.json"):
    d = json.load(open(p))
    del d["seq_len"]
    json.dump(d, open(p, "w"))
PY
resume "$WORK/s16.json" "$WORK/ck16" || { cat "$WORK/out" >&2; fail "an older manifest without seq_len"; }
grep -q "resumed from step 8" "$WORK/out" || { cat "$WORK/out" >&2; fail "an older manifest: not resumed"; }
# Renamed nodes: refused, naming the checkpoint's node, its newest step and the plan's nodes.
sed 's/"n0"/"gpu-a"/g' "$PLAN" >"$WORK/renamed.json"
cp -r "$WORK/ck" "$WORK/ckr"
resume "$WORK/renamed.json" "$WORK/ckr" && fail "a plan of other node names started from scratch beside the checkpoint"
grep -q "^autohet train: usage error: --local-root $WORK/ckr holds checkpoints of node n0 (newest step 8), not a node of this plan (gpu-a.*rename the directory" "$WORK/out" ||
    { cat "$WORK/out" >&2; fail "the renamed-node refusal does not name node n0"; }
rmdir "$WORK/ckr/gpu-a" && mv "$WORK/ckr/n0" "$WORK/ckr/gpu-a" || fail "rename n0 to gpu-a" # (the refused run made gpu-a)
resume "$WORK/renamed.json" "$WORK/ckr" || { cat "$WORK/out" >&2; fail "the renamed directory"; }
grep -q "resumed from step 8" "$WORK/out" || { cat "$WORK/out" >&2; fail "the renamed directory: not resumed"; }
echo PASS
