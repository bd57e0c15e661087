/* The search's state (search_state.c): the best candidate under the objective so far, the
 * fastest one constraints aside, and the best per GPU type and count (for the "idle:" line). The
 * driver (search.c) owns it and reads its fields; every search (search_exact.c, search_template.c,
 * the baselines' pipelines) offers candidates to it through planner.h's ah_search_offer, asks it
 * ah_search_bound and ah_search_key, and never sees the driver. Private to src/planner. */
#ifndef AH_PLANNER_SEARCH_STATE_H
#define AH_PLANNER_SEARCH_STATE_H

#include "planner/planner.h"

struct ah_search {
    const ah_planner_opts_t *o;
    const ah_cluster_t *cluster;
    double tokens_per_iter; /* global_batch x seq_len */
    bool have;
    double best_key;        /* iteration_s (time), usd_per_hour x iteration_s (cost) or usd_per_hour
                             * (price); usd_per_hour with the egress */
    double best_value;
    int best_t;
    int64_t best_m;
    ah_cand_t best;
    double fastest;         /* fastest plan scored, constraints aside: finite when some plan fits (the
                             * constraints message reruns the planner for the true fastest) */
    int64_t candidates;
    ah_type_best_t *by_type; /* the best eligible candidate using exactly g GPUs of type k, at
                              * by_type[type_base[k] + g] (g = 0..the type's GPUs, 0 unused), for
                              * the report's "idle:" line (search_idle.c); NULL: not kept */
    int *type_base;          /* [n_types] */
};

#endif
