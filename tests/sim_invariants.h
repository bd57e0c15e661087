/* Invariants every replay keeps whatever its input (bench/sim_chaos.py checks the same on simulate's
 * --json over the shared traces): no negative or non-finite time, token or dollar; each recovery's terms
 * sum to its seconds; the breakdown's states sum to the horizon and its terms to the recovery hours;
 * tokens kept plus tokens lost at most what the replay trained. Header-only, for the sim tests. */
#ifndef AH_TEST_SIM_INVARIANTS_H
#define AH_TEST_SIM_INVARIANTS_H

#include <math.h>

#include "harness.h"
#include "sim/sim.h"

static inline bool sim_inv_ok(double v) { return isfinite(v) && v >= 0; }

static inline void sim_invariants(const char *what, const ah_sim_avail_t *a, double horizon_s,
                                  const ah_sim_result_t *r) {
    CHECK(sim_inv_ok(r->tokens) && sim_inv_ok(r->tokens_lost) && sim_inv_ok(r->usd) && sim_inv_ok(r->gpu_hours) &&
              sim_inv_ok(r->recovery_s) && sim_inv_ok(r->egress_usd),
          "%s: tokens %g, lost %g, $%g, GPU-h %g, recovery %g s, egress $%g: none negative", what, r->tokens,
          r->tokens_lost, r->usd, r->gpu_hours, r->recovery_s, r->egress_usd);
    double top = 0, trained = 0;
    for (int k = 0; k < r->n_segs; k++) {
        const ah_sim_segment_t *g = &r->segs[k];
        CHECK(g->end_s >= g->start_s && g->start_s >= 0 && g->end_s <= horizon_s * (1 + 1e-12),
              "%s: segment %d spans %g .. %g s of %g", what, k, g->start_s, g->end_s, horizon_s);
        if (g->phase == AH_PHASE_TRAIN) trained += g->tokens_per_s * (g->end_s - g->start_s);
        top = fmax(top, g->tokens_per_s);
    }
    for (int k = 0; k < r->n_recs; k++) {
        const ah_sim_recovery_t *v = &r->recs[k];
        const double terms = v->wait_s + v->save_s + v->replan_s + v->restart_s + v->transfer_s + v->first_step_s;
        CHECK(sim_inv_ok(v->wait_s) && sim_inv_ok(v->save_s) && sim_inv_ok(v->replan_s) && sim_inv_ok(v->restart_s) &&
                  sim_inv_ok(v->transfer_s) && sim_inv_ok(v->first_step_s) && sim_inv_ok(v->tokens_lost),
              "%s: recovery %d (%s): no negative term or loss", what, k, v->event);
        CHECK(fabs(terms - v->seconds) <= 1e-9 * fmax(1, v->seconds), "%s: recovery %d (%s): terms %.9g s != %.9g s",
              what, k, v->event, terms, v->seconds);
        trained += (v->wait_s + v->first_step_s) * top; /* the steps a recovery counts, at most at the top rate */
    }
    CHECK(r->tokens + r->tokens_lost <= trained * (1 + 1e-9) + 1, "%s: tokens %g + lost %g > trained at most %g",
          what, r->tokens, r->tokens_lost, trained);
    ah_sim_breakdown_t b;
    ah_sim_breakdown(a, horizon_s, r, &b);
    const double h = horizon_s / 3600, terms_h = b.wait_h + b.save_h + b.replan_h + b.restart_h + b.transfer_h +
                                                 b.first_step_h + b.interrupted_h;
    CHECK(fabs(b.train_h + b.recover_h + b.stalled_h - h) <= 1e-9 * h, "%s: train %g + recover %g + stalled %g != %g h",
          what, b.train_h, b.recover_h, b.stalled_h, h);
    CHECK(fabs(terms_h - b.recover_h) <= 1e-9 * fmax(1, b.recover_h),
          "%s: the recovery terms %.9g h != the recovery hours %.9g h", what, terms_h, b.recover_h);
}

#endif
