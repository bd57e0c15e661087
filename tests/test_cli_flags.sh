#!/usr/bin/env bash
# The flag parser as a new user meets it (issue 19, items 9 and 13): every count a verb takes has
# a range its --help shows, and a value past it is refused at once (`plan --global-batch 1e9` ran
# for minutes); the largest value admitted is fast; a flag given twice is refused, named (the last
# one silently won); `ckpt ls --help` prints ckpt ls's own usage; `autohet --version`; a
# `train --run-dir` that does not exist is made.
source "$(dirname "$0")/train_common.sh"

# refused NAME PATTERN CMD...: exit 2 within 5 s, stderr matching PATTERN
refused() {
    local name=$1 pat=$2
    shift 2
    local t0=$(date +%s.%N) rc
    timeout 60 "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    local secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$(date +%s.%N)")
    [ $rc = 2 ] || fail "$name: exit $rc, want 2: $(head -c 400 "$WORK/err")"
    grep -q -- "$pat" "$WORK/err" || fail "$name: stderr lacks \"$pat\": $(head -c 400 "$WORK/err")"
    python3 -c "import sys; sys.exit(float(sys.argv[1]) > 5)" "$secs" || fail "$name: took $secs s to refuse"
}

# ---- --version: the project's version ----
want=$(sed -n 's/^project(autohet VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$want" ] || fail "no VERSION in CMakeLists.txt's project()"
[ "$("$AUTOHET" --version)" = "autohet $want" ] || fail "--version: $("$AUTOHET" --version 2>&1)"
"$AUTOHET" --help | grep -q -- "--version" || fail "autohet --help does not mention --version"

# ---- every verb's --help: parses (a table with an unranged count is refused) and shows ranges ----
verbs=$("$AUTOHET" --help | sed -n 's/^  \([a-z]*\) .*/\1/p')
[ "$(echo "$verbs" | wc -w)" -ge 9 ] || fail "verbs: $verbs"
for v in $verbs; do
    sub=$v
    [ "$v" = ckpt ] && sub="ckpt ls"
    # shellcheck disable=SC2086
    "$AUTOHET" $sub --help >"$WORK/help" 2>"$WORK/err" || fail "$sub --help: $(cat "$WORK/err")"
done
"$AUTOHET" plan --help | grep -q -- "--global-batch B .*\[1 \.\. 65536\]" || fail "plan --help: no range for --global-batch"
"$AUTOHET" run --help | grep -q -- "--steps N .*\[1 \.\. 10000000\]" || fail "run --help: no range for --steps"

# ---- past a range: refused at once, naming the flag, its range and the value ----
refused "plan --global-batch 1e9" "^autohet plan: --global-batch: expected 1 .. 65536, got 1000000000" \
    "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --global-batch 1000000000
refused "plan --seq-len 2^40" "^autohet plan: --seq-len: expected 1 .. 1048576, got 1099511627776" \
    "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --seq-len 1099511627776
refused "plan --micro-batch 2^30" "^autohet plan: --micro-batch: expected 1 .. 65536 or \"auto\"" \
    "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --micro-batch 1073741824
refused "plan --exact-max-groups 2^40" "^autohet plan: --exact-max-groups: expected 1 .. 4096" \
    "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --exact-max-groups 1099511627776
refused "simulate --global-batch 1e9" "^autohet simulate: --global-batch: expected 1 .. 65536, got 1000000000" \
    "$AUTOHET" simulate --model llama2-7b --cluster mixed-32 --global-batch 1000000000
refused "model --seq-len 2^40" "^autohet model: --seq-len: expected 1 .. 1048576" \
    "$AUTOHET" model --model gpt2-124m --seq-len 1099511627776
refused "profile --micro-batch 2^30" "^autohet profile: --micro-batch: expected up to .* integers in 1 .. 65536" \
    "$AUTOHET" profile --model tiny-gpt2 --micro-batch 1073741824 -o "$WORK/p.json"
refused "run --steps 2^40" "^autohet run: --steps: expected 1 .. 10000000, got 1099511627776" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --steps 1099511627776
refused "run --global-batch 1e9" "^autohet run: --global-batch: expected 1 .. 65536" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --global-batch 1000000000
refused "run --grace-s 1e9" "^autohet run: --grace-s: expected 0 .. 86400" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --grace-s 1e9
refused "run --in-place --no-handover" "^autohet run: --in-place needs the next plan .* --no-handover" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --in-place --no-handover
refused "run --in-place --no-in-place" "^autohet run: --in-place and --no-in-place: give one" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --in-place --no-in-place
# in place is run's default (issue 36): --no-handover alone is no longer refused, it implies --no-in-place,
# said once on stdout (here the run then stops on a bad --recovery, the next check, before any launch)
refused "run --no-handover --recovery bad" "^autohet run: --recovery: expected local-first or cloud-only" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --no-handover --recovery bad
grep -q "no-handover" "$WORK/err" && fail "run --no-handover: refused: $(cat "$WORK/err")"
[ "$(grep -c "^autohet run: note: --no-handover: no change in place at a notice" "$WORK/out")" = 1 ] ||
    fail "run --no-handover: the note on no change in place not said once: $(cat "$WORK/out")"
"$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --no-handover --no-in-place \
    --recovery bad >"$WORK/out" 2>/dev/null
grep -q "note: --no-handover" "$WORK/out" && fail "run --no-handover --no-in-place: the note said though nothing was implied"
refused "train --steps 2^40" "^autohet train: --steps: expected 1 .. 10000000" \
    "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps 1099511627776
refused "train --seed -1" "^autohet train: --seed: expected 0 .. 4294967295, got -1" \
    "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --seed -1
refused "ckpt verify --step 2^40" "^autohet ckpt verify: --step: expected 0 .. 10000000" \
    "$AUTOHET" ckpt verify --local-root "$WORK" --step 1099511627776

# ---- the flags verbs share (issue 40, item 5): one rule, one --help line, one parser ----
# plan, run and simulate show the same line for each shared flag (simulate took --micro-batch 0 and
# refused auto, plan the other way round; simulate defaulted to bf16 and refused auto; run took no
# --objective or --budget)
for f in --micro-batch --precision --objective --budget --schedule; do
    want=$("$AUTOHET" plan --help | grep -- "^  $f ")
    [ -n "$want" ] || fail "plan --help has no $f line"
    for v in run simulate; do
        got=$("$AUTOHET" $v --help | grep -- "^  $f ")
        [ "$got" = "$want" ] || fail "$v --help's $f line differs from plan's: \"$got\" vs \"$want\""
    done
done
for f in --global-batch --seq-len --shard-optimizer --profile; do
    "$AUTOHET" simulate --help | grep -q -- "^  $f " || fail "simulate --help lacks the shared $f"
done
# the optimizer flags run passes on to train: train's line with "trainer: " before it (run said
# "trainer: peak learning rate (> 0)", no default, where train says 1e-3)
for f in --lr --warmup --weight-decay --grad-clip --seed --cloud; do
    want=$("$AUTOHET" train --help | grep -- "^  $f " | sed 's/^\(  [^ ]* [^ ]* *\)/\1trainer: /')
    got=$("$AUTOHET" run --help | grep -- "^  $f ")
    [ -n "$want" ] && [ "$got" = "$want" ] || fail "run --help's $f line is not train's: \"$got\" vs \"$want\""
done
want=$("$AUTOHET" plan --help | grep -- "^  --profile ")
for v in evaluate run simulate; do
    got=$("$AUTOHET" $v --help | grep -- "^  --profile ")
    [ "$got" = "$want" ] || fail "$v --help's --profile line differs from plan's: \"$got\" vs \"$want\""
done
[ "$("$AUTOHET" plan --help | grep -- "^  --global-batch ")" = "$("$AUTOHET" simulate --help | grep -- "^  --global-batch ")" ] ||
    fail "plan's and simulate's --global-batch lines differ"
"$AUTOHET" plan --help | grep -q -- "^  --precision fp32|bf16|fp16|auto .*(default auto" || fail "plan --precision: not auto by default"
# one parser per flag: the same value refused with the same words by every verb
for v in plan simulate run; do
    data=()
    [ $v = run ] && data=(--data "$WORK/text.bin")
    refused "$v --micro-batch 0" "^autohet $v: --micro-batch: expected 1 .. 65536 or \"auto\", got \"0\" (auto lets the planner pick)" \
        "$AUTOHET" $v --model tiny-gpt2 --cluster cpu-hetero "${data[@]}" --micro-batch 0
    refused "$v --precision fp8" "^autohet $v: --precision: expected fp32, bf16, fp16 or auto, got \"fp8\"" \
        "$AUTOHET" $v --model tiny-gpt2 --cluster cpu-hetero "${data[@]}" --precision fp8
    refused "$v --objective money" "^autohet $v: --objective: expected time or cost, got \"money\"" \
        "$AUTOHET" $v --model tiny-gpt2 --cluster cpu-hetero "${data[@]}" --objective money
    refused "$v --budget 0" "^autohet $v: --budget: expected > 0, got 0" \
        "$AUTOHET" $v --model tiny-gpt2 --cluster cpu-hetero "${data[@]}" --budget 0
    refused "$v --schedule gpipe" "^autohet $v: --schedule: expected auto, 1f1b, interleaved or zero-bubble, got \"gpipe\"" \
        "$AUTOHET" $v --model tiny-gpt2 --cluster cpu-hetero "${data[@]}" --schedule gpipe
done
# --schedule (issue 35): plan takes every schedule it prices and says per pipeline what it chose
# and why one keeps 1F1B; simulate, whose policies train, takes any schedule the runtime runs
# (ah_schedule_runtime_runs: all three now; one it did not run would be refused by name)
"$AUTOHET" plan --model tiny-gpt2 --cluster cpu-hetero --global-batch 8 --seq-len 32 --micro-batch 1 \
    --schedule zero-bubble >"$WORK/out" 2>&1 || fail "plan --schedule zero-bubble: $(head -c 400 "$WORK/out")"
grep -q "^schedules: pipeline 0 (1 stage, .*): 1f1b (the schedule asked for needs two stages or more).*; pipeline 1 (2 stages, .*): zero-bubble, " "$WORK/out" ||
    fail "plan --schedule zero-bubble: no 2-stage pipeline on zero-bubble, or the 1-stage one's reason not said: $(grep schedules "$WORK/out")"
timeout 60 "$AUTOHET" simulate --model tiny-gpt2 --cluster cpu-hetero --global-batch 8 --seq-len 32 --micro-batch 1 \
    --hours 1 --schedule zero-bubble >"$WORK/out" 2>&1 || fail "simulate --schedule zero-bubble: $(head -c 400 "$WORK/out")"
# and the values the rule allows are taken by each verb (simulate: auto micro-batch and precision)
timeout 60 "$AUTOHET" simulate --model tiny-gpt2 --cluster cpu-hetero --global-batch 8 --seq-len 64 --hours 1 \
    --micro-batch auto --precision auto --objective cost --budget 10 --policy autohet >"$WORK/out" 2>"$WORK/err" ||
    fail "simulate with the shared flags' values: $(head -c 400 "$WORK/err")"
grep -q "^model tiny-gpt2, global batch 8 x seq-len 64, fp32" "$WORK/out" ||
    fail "simulate --precision auto on cpu-hetero: not fp32: $(head -2 "$WORK/out")"
# run: --budget and --objective mean what they mean in plan (a budget below every plan: refused)
timeout 60 "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --work-dir "$WORK/rb" \
    --steps 1 --budget 0.01 >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc = 1 ] && grep -q "every plan costs more than --budget" "$WORK/err" ||
    fail "run --budget 0.01: exit $rc: $(head -c 400 "$WORK/err")"
[ -e "$WORK/rb/launch-0" ] && fail "run --budget 0.01 launched"
# ... and need every node's price, as plan's (a node without one was $0)
printf '{"nodes": [{"name": "a0", "gpu": "A100-80G", "count": 2, "usd_per_gpu_hour": 1}, {"name": "a1", "gpu": "A100-80G", "count": 2}]}\n' \
    >"$WORK/unpriced.json"
timeout 60 "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/unpriced.json" --data "$WORK/text.bin" \
    --work-dir "$WORK/rp" --steps 1 --objective cost >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc = 1 ] && grep -q -- "--objective cost needs every node's price: .*for node a1" "$WORK/err" ||
    fail "run --objective cost, a node unpriced: exit $rc: $(head -c 400 "$WORK/err")"

# ---- the largest batch admitted plans in seconds (measured 3 s on a quiet machine; 0.6 s at 512) ----
t0=$(date +%s)
timeout 120 "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --global-batch 65536 >"$WORK/out" 2>"$WORK/err" ||
    fail "plan --global-batch 65536: $(head -c 400 "$WORK/err")"
echo "plan llama2-7b on mixed-32 at --global-batch 65536: $(($(date +%s) - t0)) s"

# ---- a flag given twice: refused, named, in either spelling ----
refused "plan --global-batch twice" "^autohet plan: --global-batch given twice; give it once" \
    "$AUTOHET" plan --model llama2-7b --cluster mixed-32 --global-batch 8 --global-batch=16
refused "run --quiet twice" "^autohet run: --quiet given twice" \
    "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --quiet --quiet
refused "run --model twice" "^autohet run: --model given twice" \
    "$AUTOHET" run --model tiny-gpt2 --model tiny-llama --cluster cpu-hetero --data "$WORK/text.bin"

# ---- ckpt SUB --help: that subcommand's usage ----
for sub in ls verify export; do
    "$AUTOHET" ckpt $sub --help >"$WORK/out" || fail "ckpt $sub --help: exit $?"
    head -1 "$WORK/out" | grep -q "^usage: autohet ckpt $sub \[\?-" || fail "ckpt $sub --help: $(head -1 "$WORK/out")"
    grep -q "ls|verify|export" "$WORK/out" && fail "ckpt $sub --help shows every subcommand: $(head -1 "$WORK/out")"
done
"$AUTOHET" ckpt export --help | head -1 | grep -q -- "-o OUT_DIR" || fail "ckpt export --help lacks -o"
# each subcommand's --help lists the flags it takes, and only those
"$AUTOHET" ckpt export --help >"$WORK/out"
for f in --cloud --s3-endpoint --json; do grep -q -- "^  $f" "$WORK/out" && fail "ckpt export --help lists $f, which export refuses"; done
"$AUTOHET" ckpt ls --help | grep -qE -- "^  (--step|-o) " && fail "ckpt ls --help lists --step or -o"
"$AUTOHET" ckpt verify --help | grep -qE -- "^  (--json|-o) " && fail "ckpt verify --help lists --json or -o"
# export given the cloud tier: refused, saying that export reads only the local root
refused "ckpt export --cloud" "^autohet ckpt export: --cloud is not a flag of ckpt export: export reads only the local root" \
    "$AUTOHET" ckpt export --local-root "$WORK" -o "$WORK/hf" --cloud s3://bucket/prefix
refused "ckpt ls --step" "^autohet ckpt ls: --step is not a flag of ckpt ls" "$AUTOHET" ckpt ls --local-root "$WORK" --step 4
refused "ckpt bogus" 'unknown subcommand "bogus"' "$AUTOHET" ckpt bogus

# ---- train --run-dir that does not exist yet: made ----
timeout 120 $MPIRUN -np 1 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps 1 \
    --run-dir "$WORK/new/run" --quiet >"$WORK/out" 2>&1 || fail "train --run-dir new/run: $(cat "$WORK/out")"
[ -s "$WORK/new/run/rank-0.json" ] || fail "train --run-dir: no rank-0.json in the made directory"
echo "PASS"
