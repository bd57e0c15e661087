/* The DP sync's price (plan/dp_price.c; formulas: docs/cost-model.md "Links", "Hierarchical DP
 * sync"): each layer's DP group summed on the links its own ring crosses (the flat ring) or
 * hierarchically across domains, the sharded optimizer's reduce-scatter and all-gather with it.
 * Internal to the plan module: ah_evaluate and ah_plan_dp_sync_s price every stage with it, so the
 * planner's search (which calls ah_plan_dp_sync_s on its candidates), `evaluate` and the simulator
 * (which reads ah_evaluate's figures) agree. Ownership: an ah_dp_terms_t owns its memo of each
 * group's links (ah_dp_terms_free); no errors: without host memory for the memo or a group's nodes
 * a group is priced on the plan's DP link, as before the per-group pricing. */
#ifndef AH_PLAN_DP_PRICE_H
#define AH_PLAN_DP_PRICE_H

#include "cost/cost.h"
#include "plan/dp_overlap.h"
#include "plan/plan.h"

typedef struct {
    int P; /* members of a layer's DP group: the pipelines' CP degrees summed */
    double grad_elt, bw, lat;     /* bw, lat: the plan's DP link (its slowest between two nodes) */
    int64_t block_params, head_norm;
    double embed_sync, head_sync; /* the embedding's (and tied head copy's) rows, an untied head's, each
                                   * on its own group's ring */
    double matrix_bytes;          /* one TP rank's rows of the embedding (and untied head) matrix */
    int holders, flows;           /* the embedding's holders; the groups that sum at once */
    bool own_ring;                /* no stage spans nodes, so ah_dp_group_nodes' nodes (a pipeline's
                                   * first device's) are every member's: a group's own ring priced */
    bool *cut;                    /* [L + 1]: some stage of the plan starts at block b (a segment's
                                   * start: its blocks are one DP group); NULL: no memory */
    ah_link_t worst;              /* the plan's worst class between two of its nodes */
    bool ordered;                 /* no per-pair links and the classes' figures in order: a group's
                                   * ring is its worst class's (plan/dp_price.c ring_link) */
    double *ring;                 /* [2 (L + 2)]: each DP group's ring bandwidth and latency once
                                   * found (indexed as links; bandwidth 0: not yet); NULL: no memo */
    ah_dp_links_t *links;         /* each DP group's links once found (group_links; block b's group at
                                   * [b], the embedding's at [L], the head's at [L + 1]; domains 0: not
                                   * yet); NULL: found each time */
    bool hierarchical;            /* priced under "dp_sync": hierarchical (p's; ah_plan_dp_syncs prices
                                   * both modes on one set of terms) */
    struct ah_dp_stage_memo *stages; /* [n_stage_memo]: stage syncs once priced, by blocks, ends and
                                      * mode (a stage's sync depends on nothing else of it); NULL: none */
    int n_stage_memo;
    ah_dp_links_memo_t *links_memo; /* the groups' links found through it (ah_dp_links_memo_of; not
                                     * owned); NULL: ah_dp_links_of */
} ah_dp_terms_t;

/* p's figures for ah_dp_stage_sync (p need not be validated beyond its stages' nodes, blocks and
 * types). */
void ah_dp_terms_init(const ah_plan_t *p, ah_dp_terms_t *d);
void ah_dp_terms_free(ah_dp_terms_t *d);

/* The DP sync of stage sg (embed: it holds the embedding; head: it is a last stage), and its parts
 * in the overlapped sync's order (plan/dp_overlap.h; parts->first, last, head and blk_bwd_s are the
 * caller's). */
double ah_dp_stage_sync(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                        ah_sync_stage_t *parts);

#endif
