# Plan equivalence (see test_train_equivalence.sh) under device emulation (slowdown 3): TP 2 x
# asymmetric PP x DP on 8 ranks. Before emulation excluded the TP all-reduces from the stretched
# time, TP ranks fed each other's sleeps into their own and such a run never finished.
EMULATE_SLOWDOWN=3 exec bash "$(dirname "$0")/test_train_equivalence.sh" "$1" "$2" tp2-asym
