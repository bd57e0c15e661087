# Plan equivalence with the optimizer sharded (see test_train_equivalence.sh; issue 21): AdamW state
# split over every data-parallel group, evenly over 4 replicas, and unevenly (member k of n owns a
# part in proportion to k + 1) over asymmetric pipelines with a recomputing stage and the tied
# embedding's group of first and last stages, over TP 2 x asymmetric PP x DP, and over an
# interleaved pipeline (2 stages per device) beside a plain one.
exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" dp4:even asym:uneven tp2-asym:uneven il-mixed:uneven
