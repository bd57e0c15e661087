# Plan equivalence (see test_train_equivalence.sh) under context parallelism (issue 38): one
# pipeline whose sequences are split over CP 2 and CP 4 ranks (ring attention, the causal load
# balance), CP 2 with TP 2 (4 ranks), CP 2 with PP 2 and a recomputing first stage (4 ranks:
# p2p between matching CP ranks); then tiny-llama (grouped-query attention: the 2 key/value heads
# go around the ring, rotary angles by position) at CP 2 against its own one-process run.
set -e
bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" cp2 cp4 cp2-tp2 cp2-pp2
REF=llama-single exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" llama-cp2
