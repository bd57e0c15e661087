# Plan equivalence for LLaMA (see test_train_equivalence.sh), tiny-llama against one process: TP 2
# (GQA, vocabulary-parallel) x asymmetric PP (1 and 3 stages, 5 and 3 micro-batches, a recomputing
# stage) x DP on 8 ranks, and asymmetric pipelines at TP 1 (1 + 2 + 3 stages, 3/2/3 micro-batches,
# a recomputing stage).
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-tp2-asym llama-asym
