# Plan equivalence (see test_train_equivalence.sh) under context parallelism (issue 38): one
# pipeline whose sequences are split over CP 2 and CP 4 ranks (ring attention, the causal load
# balance), CP 2 with TP 2 (4 ranks), CP 2 with PP 2 and a recomputing first stage (4 ranks:
# p2p between matching CP ranks), three pipelines of CP 2, CP 4 and CP 1 in one job (7 ranks: the
# DP groups take every replica's CP ranks), CP 2 with PP 2 and the optimizer sharded over each stage's
# two CP ranks in uneven parts (cp2-pp2-sharded: the sharded groups are every replica's CP ranks,
# as Megatron's distributed optimizer shards over DP x CP), CP 2 x PP 2 under zero-bubble (the
# ring's backward in B, W without it) and CP 2 under interleaved 1F1B (4 stages on 2 device groups
# of 2 CP ranks: one CP group per device group, its chunks' rings in schedule order); then tiny-llama (grouped-query attention: the 2 key/value heads
# go around the ring, rotary angles by position) at CP 2 against its own one-process run.
# AH_CLUSTER_SHORT=1 (CI's sanitizer stage): CP 2 x PP 2 with recomputation and the sharded
# optimizer, and the LLaMA run, only.
# First, what is refused by name: a CP pipeline in bf16. (Checkpoints of CP plans:
# test_resume_cp.sh.)
set -e
AH=$1/autohet PLANS_DIR=$2/examples/plans W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
refused() { # want-text args...
    local want=$1
    shift
    if "$AH" train "$@" >"$W/out" 2>&1; then echo "FAIL: autohet train $* ran" >&2; exit 1; fi
    grep -qF "$want" "$W/out" || { cat "$W/out" >&2; echo "FAIL: expected \"$want\"" >&2; exit 1; }
}
"$AH" tokenize "$2/README.md" -o "$W/t.bin" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["train"]["precision"]="bf16"; json.dump(d, open(sys.argv[2], "w"))' \
    "$PLANS_DIR/train-cp2.json" "$W/bf16.json"
refused "[cp] pipelines[0].cp: 2; the runtime does not run context parallelism in bf16 or fp16" \
    --plan "$W/bf16.json" --data "$W/t.bin"
PLANS=(cp2 cp4 cp2-tp2 cp2-pp2 cp-mixed cp2-pp2-sharded cp2-pp2+zero-bubble cp2-il2)
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && PLANS=(cp2-pp2-sharded)
bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" "${PLANS[@]}"
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-cp2
