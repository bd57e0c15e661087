#!/usr/bin/env bash
# Nothing lost (2 of 4; seeds 4-6): autohet run on the emulated cluster, slow-1 preempted at a
# random time (tests/agent_common.sh seed_case: random grace periods, so some kills land in
# forward/backward and some in a checkpoint write; the node replaced at once or not). After
# recovery every loss matches an uninterrupted run (bit-exact on the same plan, 1e-4 relative on
# another), every step's samples are trained exactly once, and no kill damages a committed step.
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
small_cluster
reference "$WORK/ref"
for seed in 4 5 6; do seed_case $seed "$WORK/ref"; done
echo "PASS"
