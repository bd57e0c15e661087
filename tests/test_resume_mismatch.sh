# Resumes that would quietly go wrong are refused, saying what to do:
# - another seq_len: the manifest's data position counts samples of the saved length, so the run
#   would re-read or skip data; refused naming both lengths. A manifest of an older autohet without
#   "seq_len" is resumed as before (unchecked).
# - a plan whose node names are not the checkpoint's: --local-root DIR holds steps only under
#   DIR/OLD; refused naming the node and its newest step (it started from scratch, silently). A
#   preempted node's directory is deleted, so a re-plan still resumes from the nodes left
#   (test_resume_tiers, test_nothing_lost*); an empty root still starts from scratch (test_resume).
# - another learning-rate schedule (--steps, --warmup, --lr: the cosine's length, warm-up and
#   peak, kept in the manifest's "schedule"): every remaining step's learning rate would change
#   (a new --steps did so silently); refused naming both and what to give, unless --reschedule,
#   which says the change. A manifest without "schedule" is resumed unchecked.
# Usage: bash tests/test_resume_mismatch.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-single.json
timeout 60 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --steps 8 --ckpt-every 4 \
    --local-root "$WORK/ck" >/dev/null 2>&1 || fail "the saving run"
grep -q '"seq_len": 32' "$WORK/ck/n0/step-00000008/manifest.json" || fail "the manifest records no seq_len"
resume() { # plan root [flags]: one rank, 10 steps (the saving run's 8: --reschedule), --resume; output in $WORK/out
    local plan=$1 root=$2
    shift 2
    timeout 60 $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$plan" --data "$WORK/text.bin" --steps 10 \
        --local-root "$root" --resume --reschedule "$@" >"$WORK/out" 2>&1
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
# The learning-rate schedule: the manifest keeps it; a resume under another is refused, naming
# both; --reschedule changes it, saying so, and the next checkpoint keeps the new one.
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("schedule"); assert s == {"steps": 8, "warmup": 10, "lr": 0.001}, s' \
    "$WORK/ck/n0/step-00000008/manifest.json" || fail "the manifest keeps no learning-rate schedule"
sched() { # root [flags]: one rank, --resume; exit status in $WORK/sched.rc, output in $WORK/sched.out
    local root=$1
    shift
    timeout 60 $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --local-root "$root" \
        --metrics "$WORK/sched.jsonl" "$@" >"$WORK/sched.out" 2>&1
    echo $? >"$WORK/sched.rc"
}
cp -r "$WORK/ck" "$WORK/cks"
sched "$WORK/cks" --resume --steps 12
[ "$(cat "$WORK/sched.rc")" != 0 ] || fail "a resume with --steps 12 of a --steps 8 run was accepted (its cosine schedule changed)"
grep -q "^autohet train: usage error: step 8 was trained under the cosine learning-rate schedule of --steps 8 --warmup 10 --lr 0.001; --steps 12 would change the learning rate of the steps left to train (step 10: 0.0001, now 0.001); resume with --steps 8 --warmup 10 --lr 0.001, or add --reschedule to change the schedule$" "$WORK/sched.out" ||
    { cat "$WORK/sched.out" >&2; fail "the --steps refusal does not name both schedules"; }
sched "$WORK/cks" --resume --steps 9 --lr 0.002 --warmup 2
grep -q "; --steps 9 --warmup 2 --lr 0.002 would change the learning rate of the steps left to train (step 8: 0.0009, now 0.0002891)" "$WORK/sched.out" ||
    { cat "$WORK/sched.out" >&2; fail "the --lr/--warmup refusal"; }
# no learning rate of a step left to train changes: nothing left (--steps at the checkpoint, as
# autohet run's rerun with --steps at the newest checkpoint), or steps 8, 9 still in the warm-up of
# 10: not refused, and nothing said
for flags in "--steps 8 --lr 0.002" "--steps 10"; do
    # shellcheck disable=SC2086
    sched "$WORK/cks" --resume $flags
    [ "$(cat "$WORK/sched.rc")" = 0 ] && grep -q "resumed from step 8" "$WORK/sched.out" && ! grep -q "schedule" "$WORK/sched.out" ||
        { cat "$WORK/sched.out" >&2; fail "$flags: refused or said, though no learning rate changes"; }
    rm -rf "$WORK/cks" && cp -r "$WORK/ck" "$WORK/cks"
done
sched "$WORK/cks" --reschedule --steps 12
[ "$(cat "$WORK/sched.rc")" = 2 ] && grep -q "^autohet train: usage error: --reschedule needs --resume" "$WORK/sched.out" ||
    { cat "$WORK/sched.out" >&2; fail "--reschedule without --resume"; }
# --reschedule: said; step 8 runs at the new schedule's rate (cosine over 12 steps after 2 of
# warm-up: 1e-4 + 9e-4 (1 + cos(pi 6/10)) / 2 = 4.109e-4, where the old one gave 9e-4); step 12's
# manifest keeps the new schedule, which a plain resume then takes.
sched "$WORK/cks" --resume --reschedule --steps 12 --warmup 2 --ckpt-every 4
[ "$(cat "$WORK/sched.rc")" = 0 ] || { cat "$WORK/sched.out" >&2; fail "--reschedule"; }
grep -q "^autohet train: --reschedule: resumed at step 8 under --steps 12 --warmup 2's learning-rate schedule, not --steps 8 --warmup 10 --lr 0.001's (step 8's learning rate 0.0004109, was 0.0009)" "$WORK/sched.out" ||
    { cat "$WORK/sched.out" >&2; fail "--reschedule does not say the change"; }
python3 - "$WORK/sched.jsonl" "$WORK/cks/n0/step-00000012/manifest.json" <<'PY' || fail "the rescheduled run's learning rate or manifest"
import json, math, sys
lr = {o["step"]: o["lr"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
want = 1e-4 + 9e-4 * 0.5 * (1 + math.cos(math.pi * 6 / 10))
assert sorted(lr) == [8, 9, 10, 11] and abs(lr[8] - want) < 1e-6 * want, lr
assert json.load(open(sys.argv[2]))["schedule"] == {"steps": 12, "warmup": 2, "lr": 0.001}
PY
sched "$WORK/cks" --resume --steps 12 --warmup 2
[ "$(cat "$WORK/sched.rc")" = 0 ] && grep -q "resumed from step 12" "$WORK/sched.out" || { cat "$WORK/sched.out" >&2; fail "a resume under the kept schedule"; }
# A manifest of an older autohet, without "schedule": resumed unchecked.
cp -r "$WORK/ck" "$WORK/cko"
python3 - "$WORK/cko/n0" <<'PY'
import glob, json, sys
for p in glob.glob(sys.argv[1] + "/step-*/manifest.json"):
    d = json.load(open(p))
    del d["schedule"]
    json.dump(d, open(p, "w"))
PY
sched "$WORK/cko" --resume --steps 12
[ "$(cat "$WORK/sched.rc")" = 0 ] && grep -q "resumed from step 8" "$WORK/sched.out" && ! grep -q "reschedule" "$WORK/sched.out" ||
    { cat "$WORK/sched.out" >&2; fail "an older manifest without a schedule"; }
echo PASS
