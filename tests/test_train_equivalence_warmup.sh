# Extra warm-up (plan stage "warmup_extra", plan/replay.h "Extra warm-up": more micro-batches in
# flight above a slow hop, issue 39) trains the same model as one process: test_train_equivalence.sh's
# checks (20 losses within 1e-4 relative, every weight within 1e-5 after step 1) on GPT-2's 4-stage
# pipeline under 1F1B and zero-bubble with two more micro-batches in flight above its middle hop
# (warm-ups 5, 4, 1, 0 of its 8 micro-batches, not 3, 2, 1, 0), under zero-bubble with 8, 6, 2, 0
# (stage 0 all warm-up), with 3, 3, 0, 0 more (6, 5, 1, 0: the largest fall at a hop the validator
# allows, plan_validate.c [warmup]; a fall of 4 deadlocks the MPI path), and the asymmetric pipelines
# with one more above each one's first hop.
set -e
here=$(dirname "$0")
exec bash "$here/test_train_equivalence.sh" "$1" "$2" pp4~2.2 pp4+zero-bubble~2.2 pp4+zero-bubble~5.4.1 pp4~3.3 asym~1.1
