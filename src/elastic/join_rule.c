/* The join rule (join_rule.h): the churn's hit rate, the stay, and whether a restart pays. */
#include "elastic/join_rule.h"

#include <math.h>

double ah_churn_hit_rate(const ah_churn_t *c, const int *spot_nodes) {
    double rate = 0;
    for (int ty = 0; ty < c->n_types; ty++) {
        if (spot_nodes[ty] == 0) continue;
        const double per_node = c->removals[ty] / (c->node_s[ty] + AH_CHURN_PRIOR_S),
                     events = c->removal_events[ty] / (c->elapsed_s + AH_CHURN_PRIOR_S);
        rate += fmin(spot_nodes[ty] * per_node, events);
    }
    return rate;
}

double ah_join_stay_s(double hit_rate, double horizon_s) {
    if (horizon_s > 0) return horizon_s;
    return hit_rate > 0 ? 1.0 / hit_rate : INFINITY;
}

double ah_join_exposure_s(double hit_now, double hit_joined, double stay_s, double recovery_s) {
    const double extra = hit_joined - hit_now;
    if (!(extra > 0) || !(recovery_s > 0) || !isfinite(stay_s) || !isfinite(recovery_s)) return 0;
    return extra * stay_s * recovery_s;
}

bool ah_join_pays(double key_now, double key_joined, double stay_s, double cost_s, double *gain_s) {
    if (gain_s) *gain_s = 0;
    if (!isfinite(key_joined)) return false;
    if (!isfinite(key_now)) { /* the running plan is out of bounds: any plan in them is better */
        if (gain_s) *gain_s = INFINITY;
        return true;
    }
    if (!(key_joined < key_now * (1 - 1e-9))) return false;
    const double gain = isfinite(stay_s) ? stay_s * (1 - key_joined / key_now) : INFINITY;
    if (gain_s) *gain_s = gain;
    return gain > cost_s;
}

double ah_exposure_kept(double hit_rate, double recovery_s, double alone_hit_rate, double rollback_s) {
    return fmax(0, 1 - hit_rate * recovery_s - alone_hit_rate * rollback_s);
}
