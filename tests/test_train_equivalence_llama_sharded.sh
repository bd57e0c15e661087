# Plan equivalence for LLaMA with the optimizer sharded (see test_train_equivalence_sharded.sh):
# tiny-llama (untied head, GQA) on TP 2 x asymmetric PP x DP, shares even, against one process.
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-tp2-asym:even llama-asym:uneven
