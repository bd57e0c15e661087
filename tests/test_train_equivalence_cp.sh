# Plan equivalence (see test_train_equivalence.sh) under context parallelism (issue 38): one
# pipeline whose sequences are split over CP 2 and CP 4 ranks (ring attention, the causal load
# balance), CP 2 with TP 2 (4 ranks; and cp2-tp2-span, the same with its CP group across nodes n0
# and n1, each CP rank's TP pair in one node, as Megatron-Core places CP across nodes), CP 2 with PP 2 and a recomputing first stage (4 ranks:
# p2p between matching CP ranks), three pipelines of CP 2, CP 4 and CP 1 in one job (7 ranks: the
# DP groups take every replica's CP ranks), CP 2 with PP 2 and the optimizer sharded over each stage's
# two CP ranks in uneven parts (cp2-pp2-sharded: the sharded groups are every replica's CP ranks,
# as Megatron's distributed optimizer shards over DP x CP), CP 2 x PP 2 under zero-bubble (the
# ring's backward in B, W without it) and CP 2 under interleaved 1F1B (4 stages on 2 device groups
# of 2 CP ranks: one CP group per device group, its chunks' rings in schedule order); then tiny-llama (grouped-query attention: the 2 key/value heads
# go around the ring, rotary angles by position) at CP 2 against its own one-process run.
# AH_CLUSTER_SHORT=1 (CI's sanitizer stage): CP 2 x PP 2 with recomputation and the sharded
# optimizer, and the LLaMA run, only.
# (Checkpoints of CP plans: test_resume_cp.sh; the CUDA backend's ring, bf16 and fp16 with CP:
# scripts/gpu-check.sh's cp plans, on the emulation in CI's cuda-emu stage.)
set -e
PLANS=(cp2 cp4 cp2-tp2 cp2-tp2-span cp2-pp2 cp-mixed cp2-pp2-sharded cp2-pp2+zero-bubble cp2-il2)
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && PLANS=(cp2-pp2-sharded)
bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" "${PLANS[@]}"
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-cp2
