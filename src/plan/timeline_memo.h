/* What one evaluation (ah_evaluate) has already timed, so that alike pipelines are not replayed
 * again (plan/replay.h: a replay is the evaluation's costliest part on large plans).
 *
 * - Timelines: the pipelines timed so far, by the hash of all their timeline depends on (stage
 *   count, micro-batches, schedule, device groups, each stage's fwd, bwd, wgrad and hop; a hit also has its warmup_extra). A plan's
 *   pipelines are often copies, and not only of the one before (the batch-balanced baseline
 *   alternates micro-batch counts over the pipelines of one type). A hit is checked field by
 *   field, so a pipeline takes only figures a replay of its own would give.
 * - The hops' pace (ah_p2p_pace, quadratic in the stages) of the last 1F1B pipeline, reused while
 *   the hops are the same (copies of one structure differ in stage times, not hops).
 *
 * Ownership: the memo owns its arrays (ah_timeline_memo_free); it points at no plan. Errors: init
 * returns false when out of host memory. One thread. */
#ifndef AH_PLAN_TIMELINE_MEMO_H
#define AH_PLAN_TIMELINE_MEMO_H

#include <stdbool.h>

#include "plan/evaluate.h"
#include "plan/plan.h"

typedef struct {
    int *slot, cap; /* cap (a power of two above twice the pipelines) entries: a pipeline, or -1 */
    double *hop;    /* the last 1F1B pipeline's hops (hop_n of them; room for the most stages) */
    int hop_n;
    double pace;    /* their ah_p2p_pace */
} ah_timeline_memo_t;

/* An empty memo for the pipelines of p. */
bool ah_timeline_memo_init(ah_timeline_memo_t *m, const ah_plan_t *p);
void ah_timeline_memo_free(ah_timeline_memo_t *m);

/* Pipeline i's slot (its stages in out->pipelines[i] already costed, P its device groups): the
 * earlier pipeline with the same timeline (*found true: take its time_s and estimate_s), or the
 * empty slot where the caller stores i once it is timed. */
int *ah_timeline_memo_find(const ah_timeline_memo_t *m, const ah_plan_t *p, const ah_eval_t *out, int i, int P,
                           bool *found);

/* ah_p2p_pace of stages st[0 .. S)'s hops, reused when they are the last call's. */
double ah_timeline_memo_pace(ah_timeline_memo_t *m, const ah_stage_eval_t *st, int S);

#endif
