# A damaged newest step is survived when an older one is intact: a shard flipped, deleted or
# truncated (no tier holds it intact), a manifest truncated in step 12, or one bit flipped in one of two
# nodes' manifests of step 12 (their data positions disagree) -> the resume says on
# stderr which step it skipped and why (file and CRC), takes step 8, moves step 12 aside on the node's
# disk (step-00000012.superseded-*, kept) and trains on; `ckpt export` without --step falls back the same way (with --step 12 it
# refuses); `ckpt verify` exits 1 on a damaged manifest. When no step restores, the resume is
# refused, not trained from scratch. (A shard damaged locally but intact on a peer or in the cloud
# still restores its step: test_resume_tiers, test_resume_cloud.)
# Usage: bash tests/test_resume_damaged.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-single.json
SHARD=step-00000012/block-001.tp1-0.safetensors
train() { # out-name root [flags...]: one rank, 14 steps
    local out=$1 root=$2
    shift 2
    timeout 60 $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --steps 14 \
        --local-root "$root" --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
}
timeout 60 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --steps 12 --ckpt-every 4 \
    --local-root "$WORK/ck" >/dev/null 2>&1 || fail "the saving run"
copy() { rm -rf "$WORK/$1"; cp -r "$WORK/ck" "$WORK/$1"; }
# resumed8 NAME WHY: NAME's resume (without --ckpt-every) took step 8, said why step 12 was skipped
# and moved it aside.
resumed8() {
    grep -q "resumed from step 8" "$WORK/$1.out" || { cat "$WORK/$1.out" "$WORK/$1.err" >&2; fail "$1: not resumed from step 8"; }
    grep -qF "$2" "$WORK/$1.err" || { cat "$WORK/$1.err" >&2; fail "$1: the skip of step 12 is not explained ($2)"; }
    grep -qF "node n0: step 12 moved aside to $WORK/$1/n0/step-00000012.superseded-" "$WORK/$1.err" ||
        { cat "$WORK/$1.err" >&2; fail "$1: step 12 not moved aside"; }
    [ -d "$(echo "$WORK/$1"/n0/step-00000012.superseded-*)" ] || fail "$1: step 12 not kept aside"
    [ -n "${3:-}" ] || [ ! -e "$WORK/$1/n0/step-00000012" ] || fail "$1: step 12 is still on the disk"
}
# A flipped byte: the CRC names the file.
copy flip
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-100]^=255; open(p,'wb').write(b)" "$WORK/flip/n0/$SHARD"
"$AUTOHET" ckpt export --local-root "$WORK/flip" -o "$WORK/hf" >"$WORK/export.out" 2>"$WORK/export.err" ||
    { cat "$WORK/export.err" >&2; fail "export without --step did not fall back"; }
grep -q "step 8 -> " "$WORK/export.out" && grep -q "newer steps skipped (step 12: no intact copy of block-001.tp1-0.safetensors (.*CRC-32C .* the file is corrupt)); exporting step 8" "$WORK/export.err" ||
    { cat "$WORK/export.out" "$WORK/export.err" >&2; fail "export: the skipped step is not named"; }
"$AUTOHET" ckpt export --local-root "$WORK/flip" --step 12 -o "$WORK/hf12" 2>"$WORK/export.err" && fail "export --step 12 of a damaged step"
grep -q "step 12: no intact copy of block-001" "$WORK/export.err" || fail "export --step 12: $(cat "$WORK/export.err")"
train flip "$WORK/flip" --resume --reschedule --ckpt-every 4 || { cat "$WORK/flip.err" >&2; fail "resume past a flipped byte"; }
resumed8 flip "checkpoint step 12 skipped (step 12: no tier has an intact copy of block-001.tp1-0.safetensors (local: $WORK/flip/n0/$SHARD: CRC-32C" saved-anew
python3 - "$WORK/flip.jsonl" <<'PY' || fail "the recover event"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rec = [o for o in lines if o.get("event") == "recover"][0]
assert rec["step"] == 8 and [s["step"] for s in rec["skipped"]] == [12] and "the file is corrupt" in rec["skipped"][0]["why"], rec
# the run saves step 12 anew (the damaged directory moved aside, so the save is not refused)
ck = [o for o in lines if o.get("event") == "checkpoint" and o["step"] == 12]
assert ck and ck[0]["ok"], ck
PY
# A deleted and a truncated shard.
copy del
rm "$WORK/del/n0/$SHARD"
train del "$WORK/del" --resume --reschedule || { cat "$WORK/del.err" >&2; fail "resume past a deleted shard"; }
resumed8 del "no tier has an intact copy of block-001.tp1-0.safetensors"
copy cut
truncate -s 1000 "$WORK/cut/n0/$SHARD"
train cut "$WORK/cut" --resume --reschedule || { cat "$WORK/cut.err" >&2; fail "resume past a truncated shard"; }
resumed8 cut "1000 bytes but the manifest says"
# A truncated manifest: verify fails naming it; the resume says so and takes step 8.
copy man
truncate -s 100 "$WORK/man/n0/step-00000012/manifest.json"
"$AUTOHET" ckpt verify --local-root "$WORK/man" >"$WORK/verify.out" 2>&1
st=$?
[ $st = 1 ] || { cat "$WORK/verify.out" >&2; fail "ckpt verify exits $st on a damaged manifest (expected 1)"; }
grep -q "step 12: FAILED: the manifest is damaged: $WORK/man/n0/step-00000012/manifest.json" "$WORK/verify.out" ||
    { cat "$WORK/verify.out" >&2; fail "verify does not name the damaged manifest"; }
"$AUTOHET" ckpt verify --local-root "$WORK/man" --step 8 >/dev/null || fail "verify --step 8 fails on step 12's manifest"
"$AUTOHET" ckpt ls --local-root "$WORK/man" | grep -Eq '^local:n0 +12 +damaged' || fail "ckpt ls does not show step 12 damaged"
train man "$WORK/man" --resume --reschedule || { cat "$WORK/man.err" >&2; fail "resume past a damaged manifest"; }
resumed8 man "node n0: checkpoint step 12 skipped: its manifest is damaged ($WORK/man/n0/step-00000012/manifest.json"
# A bit flipped in one node's manifest (no checksum of its own covers it), in its data position: the two
# nodes' manifests of step 12 disagree, so step 12 is skipped, named, for step 8 (before: every rank
# trained from scratch, "the checkpoint is inconsistent: starting from scratch", the older steps dropped).
dp2_plan "$WORK/dp2.json"
dp2() { # out-name [flags...]: the two-node plan, its checkpoints in $WORK/two
    local out=$1
    shift
    timeout 60 $MPIRUN -np 2 "$AUTOHET" train --quiet --plan "$WORK/dp2.json" --data "$WORK/text.bin" \
        --local-root "$WORK/two" --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
}
dp2 two-save --steps 12 --ckpt-every 4 || { cat "$WORK/two-save.err" >&2; fail "the two-node saving run"; }
flip_n1() { # STEP: one bit flipped in n1's manifest of STEP, in its data position
    python3 - "$WORK/two/n1/step-$(printf %08d "$1")/manifest.json" <<'PY' || fail "flip a bit of n1's data position"
import re, sys
t = bytearray(open(sys.argv[1], "rb").read())
m = re.search(rb'"data_position": *([0-9]+)', t)
t[m.end(1) - 1] ^= 1
open(sys.argv[1], "wb").write(t)
PY
}
flip_n1 12
dp2 two --steps 14 --resume --reschedule || { cat "$WORK/two.err" >&2; fail "resume past a flipped manifest bit"; }
grep -q "resumed from step 8" "$WORK/two.out" || { cat "$WORK/two.out" "$WORK/two.err" >&2; fail "flipped manifest bit: not resumed from step 8"; }
grep -q 'checkpoint step 12 skipped (step 12: manifests of nodes "n0" and "n1" disagree on the data position' "$WORK/two.err" ||
    { cat "$WORK/two.err" >&2; fail "flipped manifest bit: the skip of step 12 is not explained"; }
[ ! -e "$WORK/two/n1/step-00000012" ] && [ -d "$(echo "$WORK"/two/n1/step-00000012.superseded-*)" ] ||
    fail "flipped manifest bit: step 12 is still on n1's disk, or not kept aside"
# Ranks that see different newest steps (a tier changed during the resume): n1's step 16 comes back to its disk after
# the peers' manifests are shared and before its rank lists the disk (AH_TEST_HOOK resume-list pauses n1 there), so
# n1 sees step 16 and n0 nothing newer than step 12, whose two manifests disagree (n1's data position flipped).
# Refused on every rank, named by agree_step. Before (3ba0e70's pick_step), n0 skipped step 12 into another
# all-reduce while n1 left for the next collective: an MPI error or a hang, not the named refusal.
rm -rf "$WORK/two"
dp2 diff-save --steps 16 --ckpt-every 4 || { cat "$WORK/diff-save.err" >&2; fail "the saving run of the differing steps"; }
flip_n1 12
rm -rf "$WORK/two/n0/step-00000016"
mv "$WORK/two/n1/step-00000016" "$WORK/held16"
m=$WORK/diff.mark
AH_TEST_HOOK="phase=resume-list,step=any,node=n1,action=pause,file=$m" dp2 diff --steps 18 --resume --reschedule &
run=$!
for _ in $(seq 600); do [ -e "$m" ] && break; sleep 0.05; done
[ -e "$m" ] || { kill $run; fail "differing steps: the resume never reached its listing"; }
mv "$WORK/held16" "$WORK/two/n1/step-00000016"
rm -f "$m"
wait $run && fail "differing steps: the resume trained"
grep -q "ranks see different newest checkpoints (steps -1..16); a tier changed during the resume" "$WORK/diff.err" ||
    { cat "$WORK/diff.err" >&2; fail "differing steps: not refused by name"; }
# Nothing restores: refused (training from scratch would drop the steps unsaid), the steps kept.
copy none
truncate -s 1000 "$WORK/none/n0/$SHARD" "$WORK/none/n0/step-00000008/block-001.tp1-0.safetensors"
train none "$WORK/none" --resume --reschedule && fail "a root whose every step is damaged was trained from scratch"
grep -q "^autohet train: invalid input: --local-root $WORK/none: no checkpoint step can be restored (step 12: .*; step 8: .*); repair or remove the damaged steps" "$WORK/none.err" ||
    { cat "$WORK/none.err" >&2; fail "the refusal does not say why"; }
! grep -q '"loss"' "$WORK/none.jsonl" 2>/dev/null || fail "the refused run trained"
[ -d "$WORK/none/n0/step-00000012" ] && [ -d "$WORK/none/n0/step-00000008" ] || fail "the refused run removed steps"
# An earlier timeline's steps where this run saves anew (scripts/chaos-run.sh changestop): two stages on
# nodes n0 and n1, n1's disk lost, so no step is whole and the resume trains from scratch beside n0's
# steps 4, 8 and 12. Each is moved aside (step-0000000N.superseded-*, kept, said once), the run commits
# them anew, and a second resume restores the new step 8 bit-exactly. Before, n0's saves of steps 8
# and 12 were refused ("step 8 is already committed") and the run went on without checkpoints.
python3 - "$PLANS/train-pp2-recompute.json" "$WORK/pp.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"][0]["stages"][1]["devices"] = [{"node": "n1", "index": 0}]
json.dump(d, open(sys.argv[2], "w"))
PY
pp() { # out-name [flags...]: stage 0 on n0, stage 1 on n1, 12 steps, a step every 4, three kept
    local out=$1
    shift
    timeout 60 $MPIRUN -np 2 "$AUTOHET" train --quiet --plan "$WORK/pp.json" --data "$WORK/text.bin" --steps 12 \
        --ckpt-every 4 --keep 3 --local-root "$WORK/tl" --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
}
pp tl-ref || { cat "$WORK/tl-ref.err" >&2; fail "the earlier timeline's run"; }
rm -rf "$WORK/tl/n1"
pp tl --resume || { grep -v "^ \|^--\|^$" "$WORK/tl.err" >&2; fail "from scratch beside old steps"; }
python3 - "$WORK/tl.jsonl" <<'PY' || { cat "$WORK/tl.err" >&2; fail "from scratch beside old steps: saves"; }
import json, sys
ck = {o["step"]: o["ok"] for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"}
assert ck == {4: True, 8: True, 12: True}, f"checkpoint events {ck}: steps 4, 8, 12 not committed anew"
PY
for n in 4 8 12; do
    d=$WORK/tl/n0/step-$(printf %08d $n)
    [ "$(grep -c "node n0: step $n moved aside to $d.superseded-" "$WORK/tl.err")" = 1 ] ||
        { cat "$WORK/tl.err" >&2; fail "step $n: not said once as moved aside"; }
    [ -f "$(echo "$d".superseded-*/manifest.json)" ] && [ -f "$d/manifest.json" ] || fail "step $n: the old one not kept aside"
done
"$AUTOHET" ckpt ls --local-root "$WORK/tl" | grep -q superseded && fail "ckpt ls lists a superseded step"
rm -rf "$WORK"/tl/n*/step-00000012
STEPS=12
pp tl2 --resume || { cat "$WORK/tl2.err" >&2; fail "the resume from the new step 8"; }
resumed_exactly tl-ref tl2 8 True
echo PASS
