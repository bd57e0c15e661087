# fp16 mixed precision on the command line (issue 18): every verb that takes --precision accepts
# fp16 (plan, evaluate of an fp16 plan, model, simulate, run's check); plan --precision auto picks
# fp16 on a V100/T4 cluster and bf16 on an A100 one and says why (text and --json "why".precision);
# fp16 is refused where no type runs it; train's loss-scale flags are checked and refused on a plan
# that is not fp16; run refuses fp16 on CPU-emulated types, naming the type.
. "$(dirname "$0")/train_common.sh"
AH=$AUTOHET
pass=0
check() { # NAME STATUS
    [ "$2" -eq 0 ] || fail "$1"
    pass=$((pass + 1))
}
expect() { # RC NEEDLE ARGS...: exit code and a message holding NEEDLE
    local want=$1 needle=$2
    shift 2
    "$AH" "$@" >"$WORK/out" 2>&1
    local rc=$?
    [ "$rc" -eq "$want" ] && grep -q -- "$needle" "$WORK/out"
    st=$?; check "$* -> rc $rc (want $want, \"$needle\"): $(head -c 600 "$WORK/out")" $st
}
cat >"$WORK/v100t4.json" <<'JSON'
{"nodes": [{"name": "v0", "gpu": "V100-16G", "count": 8, "usd_per_gpu_hour": 0.9},
           {"name": "t0", "gpu": "T4", "count": 4, "usd_per_gpu_hour": 0.5}]}
JSON
cat >"$WORK/a100.json" <<'JSON'
{"nodes": [{"name": "a0", "gpu": "A100-80G", "count": 8}]}
JSON
P="--model gpt2-124m --global-batch 32 --seq-len 1024 --micro-batch 4"
expect 0 "why fp16: fp16 (with dynamic loss scaling)" plan $P --cluster "$WORK/v100t4.json"
expect 0 ", fp16$" plan $P --cluster "$WORK/v100t4.json"
expect 0 "why bf16: bf16: every GPU type runs it" plan $P --cluster "$WORK/a100.json"
expect 0 ", fp16$" plan $P --cluster "$WORK/v100t4.json" --precision fp16 -o "$WORK/p16.json"
grep -q '"precision": "fp16"' "$WORK/p16.json"; check "the plan file says fp16" $?
! grep -q "^why fp16" "$WORK/out"; check "a given precision has no precision why" $?
"$AH" plan $P --cluster "$WORK/v100t4.json" --json >"$WORK/j.json"; check "plan --json" $?
python3 - "$WORK/j.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["plan"]["train"]["precision"] == "fp16", d["plan"]["train"]
assert "fp16" in d["why"]["precision"] and "bf16: no GPU type" in d["why"]["precision"], d["why"]
PY
check "--json why.precision" $?
expect 1 "no GPU type of the cluster runs bf16" plan $P --cluster "$WORK/v100t4.json" --precision bf16
expect 2 "expected fp32, bf16, fp16 or auto" plan $P --cluster "$WORK/v100t4.json" --precision half
expect 0 "fp16" evaluate --plan "$WORK/p16.json"
expect 0 "+ fp32 master" model --model gpt2-124m --precision fp16
expect 2 "expected fp32, bf16 or fp16" model --model gpt2-124m --precision fp8
expect 0 "fp16" simulate --model gpt2-124m --cluster "$WORK/v100t4.json" --precision fp16 --hours 1 --global-batch 32 \
    --seq-len 1024
expect 2 "type cpu-fast runs on the CPU backend, which trains fp32 only" run --model tiny-gpt2 --cluster cpu-hetero \
    --precision fp16 --data "$WORK/text.bin"
# train's loss-scale flags: checked, and refused on a plan that does not train fp16
R=$(plan_ranks "$PLANS/train-single.json")
T="train --plan $PLANS/train-single.json --data $WORK/text.bin --steps 1 --quiet"
for bad in "--loss-scale 1000|not a power of two" "--loss-scale 0.5|--loss-scale: expected 1 .. " \
           "--loss-scale-window 0|--loss-scale-window: expected 1 .. " "--loss-scale 1024|apply to fp16 plans only"; do
    timeout 120 $MPIRUN -np "$R" $AUTOHET $T ${bad%%|*} >"$WORK/out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "${bad#*|}" "$WORK/out"
    st=$?; check "train ${bad%%|*} -> rc $rc: $(head -c 400 "$WORK/out")" $st
done
echo "PASS ($pass checks)"
