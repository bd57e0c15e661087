# Plan equivalence (see test_train_equivalence.sh): pure TP on 4 ranks, and asymmetric pipelines
# (1 + 2 + 3 stages, 3/2/3 micro-batches, a recomputing stage).
exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" tp4 asym
