/* What is made of a plan for people and for launchers: its picture (svg.c), its rankfile for
 * Open MPI's sequential mapper (rankfile.c), and its price by the rule of spec/cluster.h "Prices"
 * (price.c). Functions of the plan and its evaluation only: no search. */
#ifndef AH_PLAN_PLAN_OUT_H
#define AH_PLAN_PLAN_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "plan/evaluate.h"
#include "plan/plan.h"

struct json_t;

/* A picture of the plan: devices coloured by type, grouped by pipeline and stage with their layer
 * ranges, and one iteration's 1F1B timeline per pipeline (from e). */
ah_status_t ah_plan_svg_write(const ah_plan_t *p, const ah_eval_t *e, const char *path,
                              ah_error_t *err);

/* The plan's placement for Open MPI's sequential mapper (rankfile.c): host of rank r on the r-th
 * host line, its GPU index in a comment; mpirun --hostfile path --map-by seq --bind-to none. */
ah_status_t ah_plan_rankfile_write(const ah_plan_t *p, const char *path, ah_error_t *err);

/* $ per hour of the GPUs a plan uses (price.c; an unpriced node counts $0: ah_plan_price says). */
double ah_plan_usd_per_hour(const ah_plan_t *p);

/* What a plan sends per iteration by link class (plan_links.c; docs/cost-model.md "Traffic and
 * egress"), what crossing zones and regions costs, and what crosses each region boundary. */
typedef enum { AH_TRAFFIC_P2P = 0, AH_TRAFFIC_DP_SYNC, AH_TRAFFIC_TP, AH_TRAFFIC_CP_RING, AH_TRAFFIC_CKPT, AH_N_TRAFFIC_KINDS } ah_traffic_kind_t;
/* "pipeline p2p", "DP sync", "TP", "CP ring" (context parallelism's key/value ring), "checkpoint"
 * (replication to the partners and the cloud upload, under the plan's checkpoint policy). */
const char *ah_traffic_kind_name(ah_traffic_kind_t k);
/* One link between two regions that some of the plan's traffic crosses: a "links" override
 * (p->cluster.net.links[override]) or the inter-region class between two regions. */
#define AH_MAX_CROSSINGS 16
typedef struct ah_plan_crossing {
    int node_a, node_b;  /* a pair of nodes it joins (their regions, or the override, name it) */
    int override;        /* its "links" entry, -1 for the class */
    bool private_link;
    double bytes[AH_N_TRAFFIC_KINDS]; /* per iteration */
    double usd;          /* their egress $ per iteration (0 where the link has no price) */
    double bytes_per_s;  /* the pair's total_gb_s, or one flow's gb_s where it gives none */
} ah_plan_crossing_t;
typedef struct ah_plan_traffic {
    double bytes[AH_N_LINK_CLASSES]; /* per iteration, by ah_link_t */
    double egress_usd;               /* per iteration: priced bytes across zones and regions x $/GB */
    double egress_usd_by[AH_N_LINK_CLASSES]; /* egress_usd by link class (inter-zone, inter-region) */
    double unpriced_bytes;           /* bytes across zones or regions on links without a price */
    double public_bytes;             /* bytes across regions on links not marked private */
    ah_plan_crossing_t crossings[AH_MAX_CROSSINGS]; /* the links across regions, in order met */
    int n_crossings;
    int crossings_unlisted;          /* links across regions past AH_MAX_CROSSINGS (their bytes counted above) */
    double kind_bytes[AH_N_TRAFFIC_KINDS][AH_N_LINK_CLASSES]; /* bytes by kind and link class */
    double kind_usd[AH_N_TRAFFIC_KINDS];                      /* egress_usd by kind */
    int64_t ckpt_every;              /* the plan's checkpoint interval (train.ckpt.every); 0: checkpoints not counted */
    double ckpt_blocked_s;           /* per iteration: the replication to the partners, which blocks training */
} ah_plan_traffic_t;
void ah_plan_traffic(const ah_plan_t *p, ah_plan_traffic_t *out);
/* Its ckpt_blocked_s alone: 0 without an interval or in-memory replicas (train.ckpt). ah_evaluate
 * adds it to the iteration (breakdown.ckpt_s). */
double ah_plan_ckpt_blocked_s(const ah_plan_t *p);
/* "across regions: us-east-1 <-> eu-west-1 (private): pipeline p2p 4.295 GB, DP sync 1.1 GB per
 * iteration; ..." into buf, every link across regions (open_only: those not marked private) with
 * what crosses it, and without open_only a word on the rule when one is not private; "" when
 * none. Returns buf. */
const char *ah_plan_crossings_str(const ah_plan_t *p, const ah_plan_traffic_t *t, bool open_only, char *buf,
                                  size_t cap);
/* "why across regions:" for the planner's report: per link across regions, the bytes per iteration
 * (by kind), the seconds they hold it at bytes_per_s, and their egress $ per iteration and per hour
 * at iteration_s; "nothing crosses a region boundary" when the cluster has two regions or more and
 * nothing does; "" on a cluster of one region. Returns buf. */
const char *ah_plan_region_why(const ah_plan_t *p, const ah_plan_traffic_t *t, double iteration_s, char *buf,
                               size_t cap);
/* The rule for traffic across regions in the open (docs/multi-host.md "Across regions"): AH_OK when
 * allowed (--allow-unencrypted-wan) or when nothing of p crosses a region boundary on a link not
 * marked private; else AH_ERR_USAGE naming each such link, what crosses it, and the ways out. */
ah_status_t ah_plan_wan_check(const ah_plan_t *p, bool allowed, ah_error_t *err);
/* The iteration a plan's $ are counted at: the one train runs it at, the DP sync overlapped with
 * the backward (e->iteration_overlap_s, train's default), or after it (e->pred.iteration_s) when
 * overlap is false (--no-overlap-grad-sync). Its $/h with egress, egress $/h and $ per million
 * tokens in plan and evaluate, the planner's --objective and --budget, and simulate's replay (which
 * runs train's default) are all at this one rate (docs/planner.md "Prices"). */
double ah_plan_priced_iteration_s(const ah_eval_t *e, bool overlap);
/* $ per hour of usd_per_iteration $ paid every iteration of iteration_s seconds: the one rule for
 * egress $/h (0 when iteration_s is not a positive finite time). */
double ah_usd_per_hour_at(double usd_per_iteration, double iteration_s);
/* $ per hour of the GPUs a plan uses (an unpriced node counts $0) plus its egress (t, of p) at
 * iteration_s (ah_plan_priced_iteration_s), the part that is egress in *egress_usd_per_hour (may be
 * NULL): the price the planner's --objective cost and --budget weigh, and ah_plan_price shows. */
double ah_plan_usd_per_hour_at(const ah_plan_t *p, const ah_plan_traffic_t *t, double iteration_s,
                               double *egress_usd_per_hour);

/* A plan's price as shown (price.c; the rule: spec/cluster.h "Prices"): priced false, both figures
 * 0 and the unpriced nodes it uses named in unpriced, when a node it uses has no price. */
typedef struct ah_plan_price {
    bool priced;
    double usd_per_hour;   /* the GPUs the plan uses, and its egress */
    double egress_usd_per_hour; /* the part of usd_per_hour its egress is */
    double iteration_s;         /* the iteration it is priced at (ah_plan_priced_iteration_s) */
    double iterations_per_hour; /* at iteration_s */
    bool egress_unpriced;  /* bytes cross zones or regions on a link with no price ($0 counted) */
    ah_plan_traffic_t traffic;
    double usd_per_mtoken; /* $ per million tokens at iteration_s */
    char unpriced[256];    /* "h20-0, h20-1": list of the plan's unpriced nodes; "" when priced */
} ah_plan_price_t;
ah_plan_price_t ah_plan_price(const ah_plan_t *p, double iteration_s);
/* "$41.60/h, $0.0717 per million tokens, at 0.9341 s per iteration" (with " (egress $.../h)" before
 * the rate where it pays egress), or "unpriced ($/h and $ per million tokens unknown: no
 * usd_per_gpu_hour for h20-0)", into buf, which it returns. */
const char *ah_plan_price_str(const ah_plan_price_t *pr, char *buf, size_t cap);
/* "traffic per iteration: intra-node 1.234 GB, inter-node ..., inter-zone 0.5 GB ($1.80/h),
 * inter-region ... GB ($...); egress $0.0012 per iteration", with " (egress unpriced)" and a word
 * on bytes crossing regions in the open. */
const char *ah_plan_traffic_str(const ah_plan_price_t *pr, char *buf, size_t cap);
/* "checkpoint traffic per iteration (a save every K, counted above): inter-node ... GB, inter-zone
 * ..., inter-region ...; egress $... per iteration ($.../h); the replication to the partners blocks
 * training ... s per iteration", "... none (...)" when the policy moves nothing, or "checkpoint
 * traffic: not counted (no --ckpt-every ...)" without an interval; into buf, which it returns. */
const char *ah_plan_ckpt_str(const ah_plan_price_t *pr, char *buf, size_t cap);
/* Sets "usd_per_hour" and "usd_per_mtoken" (numbers, or null when unpriced), "unpriced" (the
 * nodes, or null), "priced_iteration_s" (the iteration they are at), "bytes_per_iteration" {intra-node, inter-node, inter-zone, inter-region},
 * "egress_usd_per_hour" (null when unpriced), "egress_unpriced", "bytes_per_iteration_by_kind" {kind:
 * {link class: bytes}} and "checkpoint" {"every" (null: not counted), "egress_usd_per_iteration",
 * "egress_usd_per_hour" (null when unpriced), "blocked_s_per_iteration"} on the JSON object doc. */
void ah_plan_price_json(const ah_plan_price_t *pr, struct json_t *doc);
/* Sets "region_crossings": [{"between": [A, B], "private", "bytes_per_iteration": {"pipeline p2p",
 * "DP sync", "TP", "CP ring"}}] (t of p; ah_plan_crossings_str's links) on doc. */
void ah_plan_crossings_json(const ah_plan_t *p, const ah_plan_traffic_t *t, struct json_t *doc);

#endif
