/* One pipeline's 1F1B schedule, replayed op by op: the iteration time a plan reports, and the
 * timeline its picture draws, come from here.
 *
 * The replay runs the runtime's order (src/runtime/schedule.c): stage s of S does min(S-s-1, n)
 * warm-up forwards, then alternates one forward and one backward, then drains the backwards.
 * Forward i on stage s starts when stage s is free and forward i of stage s-1 has arrived (its
 * end + that hop's p2p); backward i when stage s is free and backward i of stage s+1 has arrived
 * (the last stage: after its own forward i). So a slow hop costs what it costs the schedule: once
 * in the fill and drain, and again in each micro-batch's pace wherever the pipeline's round trip
 * (the forward down, the backward back up) is longer than the stages' own work.
 *
 * The search cannot replay every split it weighs, so it minimises a closed form instead
 * (ah_1f1b_estimate): sum_s c_s + 2 sum_h p_h + (n - 1) (max_s c_s + pace), c_s = f_s + b_s,
 * pace = ah_p2p_pace (the hops' share of the slowest round trip). The pace term does not depend
 * on the split, so the search's dynamic programme stays exact for the estimate; the estimate is
 * never below the replay in practice (docs/cost-model.md gives the measured gap). */
#ifndef AH_PLAN_REPLAY_H
#define AH_PLAN_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/evaluate.h"

typedef struct ah_op {
    double start, end;
    bool fwd;
} ah_op_t;

/* Replays stages st[0 .. S) (fwd_s, bwd_s, and p2p_s: the hop to the next stage, each direction)
 * for n micro-batches; with_p2p false replays the same order with every hop free. ops, when not
 * NULL, gets S * 2n entries: stage s's ops in execution order at ops[s * 2n ..]. Returns the
 * makespan (the last op's end), or NAN when out of host memory. */
double ah_1f1b_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops);

/* The hops' share of a micro-batch's pace: the largest 2 * (sum of the hops inside a window of
 * consecutive stages) / (the window's stage count), over every window; hop_s[h] is the one-way
 * time from stage h to h + 1 (S - 1 of them). 0 for S = 1. */
double ah_p2p_pace(const double *hop_s, int S);

/* The search's closed form of a pipeline's time (above), from sum_s c_s, max_s c_s, the sum of
 * the hops and their pace. */
double ah_1f1b_estimate(double sum_c, double max_c, double sum_hop, double pace, int64_t n);

#endif
