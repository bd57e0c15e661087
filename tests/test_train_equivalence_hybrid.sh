# Plan equivalence (see test_train_equivalence.sh): TP2 x asymmetric PP x DP on 8 ranks, and PP
# with recomputation.
exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" tp2-asym pp2-recompute
