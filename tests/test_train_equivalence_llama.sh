# Plan equivalence for LLaMA (see test_train_equivalence.sh), tiny-llama (untied head) against one
# process: TP 2 with grouped-query attention (4 query heads over 2 key/value heads: one kv head per
# rank) and the vocabulary-parallel embedding and head at TP 2, and PP 2 with recomputation (the
# untied head on the second stage, the embedding on the first).
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-tp2 llama-pp2-recompute
