/* One pipeline's 1F1B schedule, replayed op by op: the iteration time a plan reports, and the
 * timeline its picture draws, come from here.
 *
 * The replay runs the runtime's order (src/runtime/schedule.c): stage s of S does min(S-s-1, n)
 * warm-up forwards, then alternates one forward and one backward, then drains the backwards.
 * Forward i on stage s starts when stage s is free and forward i of stage s-1 has arrived (its
 * end + that hop's p2p); backward i when stage s is free and backward i of stage s+1 has arrived
 * (the last stage: after its own forward i); a hop's messages in one direction share its link,
 * each waiting for the one before it to be off the wire (ah_hop_arrival). So a slow hop costs what
 * it costs the schedule: once
 * in the fill and drain, and again in each micro-batch's pace wherever the pipeline's round trip
 * (the forward down, the backward back up) is longer than the stages' own work.
 *
 * The search cannot replay every split it weighs, so it minimises a closed form instead
 * (ah_1f1b_estimate): sum_s c_s + 2 sum_h p_h + (n - 1) (max_s c_s + pace), c_s = f_s + b_s,
 * pace = ah_p2p_pace (the hops' share of the slowest round trip). The pace term does not depend
 * on the split, so the search's dynamic programme stays exact for the estimate; the estimate is
 * never below the replay in practice (docs/cost-model.md gives the measured gap). */
/* Extra warm-up (a plan stage's warmup_extra x_s, 1F1B and zero-bubble): stage s runs
 * min(S - s - 1 + x_s, n) warm-up forwards instead of min(S - s - 1, n), so x_s more micro-batches
 * are in flight below it (their activations kept: the memory model counts them). In the steady
 * state a stage's backward of micro-batch j waits on the round trip below it; with a slow hop
 * between stages h and h + 1 (a WAN) that trip is longer than the stages' work by about twice the
 * hop, and x >= 2 hop / (f + b) more micro-batches in flight above the hop (x_s = x for s <= h)
 * hide it behind compute; what is left is the hop in the fill and drain. x_s never grows down the
 * pipeline (the validator's [warmup]): a stage's extra forwards are fed by the stages above it, and
 * a stage below the hop warming up more would only wait on the hop sooner. The replays read x_s
 * from ah_stage_eval_t.warmup_extra; the order, its memory and W sets from the _warm variants'
 * extra (stage-indexed; NULL: none; ignored under interleaved). */
#ifndef AH_PLAN_REPLAY_H
#define AH_PLAN_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/evaluate.h"
#include "plan/plan.h"

/* An op of a replayed schedule: a forward, a backward (1F1B's and interleaved's whole backward;
 * zero-bubble's input-gradient pass B) or a weight-gradient pass W (zero-bubble's). */
typedef enum { AH_OP_F = 0, AH_OP_B = 1, AH_OP_W = 2 } ah_op_kind_t;

typedef struct ah_op {
    double start, end;
    bool fwd;
    uint8_t kind;   /* ah_op_kind_t */
    int stage;      /* the (virtual) stage it runs */
    int64_t mb;     /* its micro-batch */
} ah_op_t;

/* Replays stages st[0 .. S) (fwd_s, bwd_s, and p2p_s: the hop to the next stage, each direction;
 * the last stage's p2p_s and p2p_wire_s are not read) for n micro-batches; with_p2p false replays
 * the same order with every hop free. ops, when not NULL, gets S * 2n entries: stage s's ops in
 * execution order at ops[s * 2n ..]. Returns the makespan (the last op's end), or NAN when out of
 * host memory or a stage's time is not a number.
 * Each op is computed once, in an order where its inputs are already there (replay.c). */
double ah_1f1b_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops);

/* When a hop's message, sent at `sent`, has arrived: it goes on the wire once the hop's previous
 * message in the same direction is off it (*link_free), is on it wire_s (p2p_wire_s: bytes over
 * bandwidth) and arrives p2p_s after it went on; *link_free becomes the end of its wire time. A
 * link carries one direction's bytes one after another: two sends close together take twice the
 * wire time, as the LogGP model's gap per byte says (Alexandrov et al., 1995). */
static inline double ah_hop_arrival(double sent, double p2p_s, double wire_s, double *link_free) {
    const double start = sent > *link_free ? sent : *link_free;
    *link_free = start + (wire_s < p2p_s ? wire_s : p2p_s);
    return start + p2p_s;
}

/* The hops' share of a micro-batch's pace: the largest 2 * (sum of the hops inside a window of
 * consecutive stages) / (the window's stage count), over every window; hop_s[h] is the one-way
 * time from stage h to h + 1 (S - 1 of them). 0 for S = 1. */
double ah_p2p_pace(const double *hop_s, int S);

/* The search's closed form of a pipeline's time (above), from sum_s c_s, max_s c_s, the sum of
 * the hops and their pace. */
double ah_1f1b_estimate(double sum_c, double max_c, double sum_hop, double pace, int64_t n);

/* ---- the other schedules (sched_replay.c) ----
 *
 * A pipeline of S (virtual) stages on P devices (device groups), n micro-batches, in the order
 * each schedule runs its ops on a device; the replay then runs like 1F1B's: an op starts when its
 * device is free and its input has arrived (a forward: the previous stage's forward of the
 * micro-batch + that hop; a backward: the next stage's backward + the hop, or on the last stage its
 * own forward; a W: its own B). Ops of one device run in its order, never reordered by timing.
 *
 * AH_SCHED_1F1B: ah_1f1b_replay (P = S).
 * AH_SCHED_INTERLEAVED (P devices, v = S / P chunks, device d on stages d, d+P, ...; n a multiple of
 * P): Megatron-LM's interleaved 1F1B (schedules.py, forward_backward_pipelining_with_interleaving):
 * device d runs w = min(2 (P - d - 1) + (v - 1) P, n v) warm-up forwards (all n v when n = P), then
 * pairs of one forward and one backward, then the remaining backwards. Its k-th forward runs chunk
 * c = (k mod P v) / P on micro-batch (k / P v) P + k mod P; its k-th backward the same micro-batch of
 * chunk v - 1 - c. Each op takes its own stage's (chunk's) time: stages need not be alike.
 * AH_SCHED_ZERO_BUBBLE (P = S): ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023; the
 * order of PaddlePaddle's pipeline_scheduler_ZBH1): stage s runs 1F1B's sequence of forwards and
 * backwards with each backward split into B (bwd_s - wgrad_s) and W (wgrad_s); W(j) follows B(j)
 * at once, except for the first min(s, n) micro-batches, whose W passes run after the last B, in the
 * drain where 1F1B's stage s idles. The input gradients so run up the pipeline at B's pace: with
 * F = B = W on uniform stages the bubble is (S - 1) F, a third of 1F1B's (S - 1)(F + B + W).
 * Memory: a micro-batch holds its activations from F until W, so stage s keeps up to min(S, n) of
 * them (ah_sched_peak_act) where 1F1B's keeps min(S - s, n): the pipeline's peak, stage 0's, is
 * 1F1B's, but a later stage holds as many as stage 0 (the paper's "same peak memory as 1F1B" is
 * the peak over the stages). */

/* The order, peak activations and W sets below with each stage's extra warm-up (above). */
void ah_sched_order_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra, ah_op_t *ops);
int64_t ah_sched_peak_act_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra,
                               const int64_t *act_per_mb, int64_t *live);
int64_t ah_sched_wgrad_inflight_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra);

/* Ops per device of the schedule: 2 n S / P (3 n for zero-bubble). */
int64_t ah_sched_ops_per_device(ah_schedule_t sched, int S, int P, int64_t n);

/* Replays the schedule (above): st[0 .. S) the stages (zero-bubble and its W: wgrad_s, the part of
 * bwd_s that is the weight gradient), P the devices, stage q on device q mod P. ops, when not NULL,
 * gets P * ah_sched_ops_per_device entries, device d's in its order from ops[d * per ..]. Returns
 * the makespan, or NAN when out of host memory or when the order cannot run (a micro-batch count
 * the schedule refuses: the validator's rules). */
double ah_sched_replay(ah_schedule_t sched, const ah_stage_eval_t *st, int S, int P, int64_t n, bool with_p2p,
                       ah_op_t *ops);

/* Device d's peak activation bytes under the schedule, act_per_mb[q] the bytes one micro-batch
 * keeps on stage q (stage q on device q mod P): a forward adds its stage's, the op that frees them
 * (the backward; zero-bubble's W) takes them off. live, when not NULL, gets for each of d's stages
 * q (live[q]) its micro-batches in flight at that peak. 1F1B: min(S - s, n) (ah_inflight).
 * Interleaved: the runtime keeps each chunk's activations in slots of its own (runtime/schedule.h),
 * as many as that chunk ever holds at once, so live[q] is chunk q's own most and the bytes are
 * sum over d's stages of live[q] x act_per_mb[q], above the peak of the running sum (Megatron's
 * order peaks the chunks at different times: device 0 of P = 2, v = 2 holds 4 + 2 slots where the
 * sum peaks at 5 micro-batches; docs/design-changes.md entry 49). */
int64_t ah_sched_peak_act(ah_schedule_t sched, int S, int P, int64_t n, int d, const int64_t *act_per_mb,
                          int64_t *live);

/* Device d's ops in the order it runs them (kind, stage, micro-batch; no times), the order the
 * replay prices and the runtime runs (runtime/schedule.h): ops has room for
 * ah_sched_ops_per_device entries. The sizes are the validator's (P = S for 1F1B and
 * zero-bubble). */
void ah_sched_order(ah_schedule_t sched, int S, int P, int64_t n, int d, ah_op_t *ops);

/* Zero-bubble: the most micro-batches device d holds between a B and its W (their weight-gradient
 * inputs kept: cost.h wgrad_keep_bytes each); 0 for the other schedules, whose backward is whole. */
int64_t ah_sched_wgrad_inflight(ah_schedule_t sched, int S, int P, int64_t n, int d);

#endif
