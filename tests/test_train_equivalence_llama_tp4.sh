# Plan equivalence for LLaMA (see test_train_equivalence.sh), tiny-llama-tp4 (8 heads, 4 key/value
# heads) against one process: TP 4 (the vocabulary of 256 padded to 128 * 4 = 512 rows, 128 per
# rank: ranks 2 and 3 hold padding only), and TP 4 x PP 2 (a recomputing first stage, the untied
# head on the second stage).
REF=llama4-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama4-tp4 llama4-tp4-pp2
