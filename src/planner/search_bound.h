/* What binds in the planner's lower bound (search_bound.c; docs/planner.md, "What the search
 * guarantees"): the plan class whose bound is the least, and its terms. For tests and diagnosis;
 * ah_planner_lower_bound (planner.h) is the bound itself. */
#ifndef AH_PLAN_SEARCH_BOUND_H
#define AH_PLAN_SEARCH_BOUND_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/planner.h"

/* What bounds Q = sum_p 1 / M_p (M_p: pipeline p's largest stage time) in the binding class. */
typedef enum {
    AH_Q_RATE = 0,         /* the summed block rate of the groups P pipelines may use, over W */
    AH_Q_HEAD = 1,         /* P / h1: every last stage runs a block and the head */
    AH_Q_ONE_PIPELINE = 2, /* P / m_one: no pipeline beats the best one (memory, whole blocks) */
    AH_Q_POOLED = 3,       /* the first j pipelines hold j L blocks at M_j (whole blocks, memory) */
    AH_Q_PAIR = 4,         /* two pipelines: the best split of the groups between them */
    AH_Q_LIMITS
} ah_q_limit_t;

typedef struct ah_bound_terms {
    double total;        /* the bound: ah_planner_lower_bound */
    double compute;      /* N (L + kappa) / R over every group: the compute term alone */
    double pipe;         /* the binding class's pipeline part */
    double fill_p2p;     /* the p2p hops in pipe's fill term (0 when the compute term binds) */
    double pace_p2p;     /* the hops' pace in pipe's bubble term, (N - P) pi / P (0 likewise) */
    double sync;         /* its DP sync */
    bool sync_by_embedding; /* sync is the first stage's (a block and the embedding's rows) */
    double opt;          /* its optimizer step */
    int64_t P;           /* its pipelines */
    int X;               /* the most blocks of any of its stages */
    int link;            /* its worst link (ah_link_t); -1 when nothing fits and total = compute */
    bool by_compute;     /* the pipeline part is N W / R_U (else the bubble, C + (N - P) / Q, or the group fill) */
    bool by_group_fill;  /* the pipeline part is the group fill: every pipeline filling at its own groups' rates */
    int q_limit;         /* ah_q_limit_t: what bounds Q in the bubble term */
} ah_bound_terms_t;

/* ah_planner_lower_bound_in over a space (planner.h ah_bound_space_t), and (why not NULL) the terms
 * of the plan class that binds. */
double ah_planner_bound_terms_in(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                                 const ah_profile_t *profile, ah_bound_space_t space, ah_bound_terms_t *why);
/* The same over the search's own space (1F1B, the whole sync): ah_planner_lower_bound's terms. */
static inline double ah_planner_bound_terms(const ah_model_t *model, const ah_cluster_t *cluster,
                                            const ah_train_t *train, int t, const ah_profile_t *profile,
                                            ah_bound_terms_t *why) {
    return ah_planner_bound_terms_in(model, cluster, train, t, profile, (ah_bound_space_t){0}, why);
}

#endif
