/* The agent's plan choice weighing single-copy rollback exposure (autohet run --exposure-aware; the
 * agent's side of simulate --exposure-aware, docs/simulator.md rule 12, docs/elastic.md "Exposure"). A
 * plan that keeps a piece of the state (a shard group at a TP index) on one node only loses that piece
 * when the node goes without notice: the restore reads it from the cloud, and the run goes back to the
 * newest step there. Of the planner's plan and its three baselines' on the same nodes (candidates the
 * search scored anyway: ah_plan_result_t.baselines, nothing planned again) the one that earns the most
 * is taken: 1 / ah_planner_key (iterations per second, or per $ under --objective cost) times the share
 * of time kept, elastic/join_rule.h ah_exposure_kept, the same formula the simulator weighs with. Pure:
 * no clock, no I/O; tests/test_agent_logic.c checks it. */
#ifndef AH_ELASTIC_AGENT_EXPOSURE_H
#define AH_ELASTIC_AGENT_EXPOSURE_H

#include <stdbool.h>
#include <stdint.h>

#include "elastic/join_rule.h"
#include "planner/planner.h"
#include "spec/cluster.h"

/* What the choice weighs, each measured by the run (agent_join.c). */
typedef struct ah_exposure_facts {
    const ah_cluster_t *cluster; /* the run's cluster: node types and spot flags (a plan's nodes by name) */
    ah_churn_t churn;            /* the removals seen so far, per type of cluster */
    double recovery_s;           /* what a preemption costs: the mean recovery with the steps it redid */
    int64_t ckpt_every;          /* steps between checkpoints: a rollback undoes half of them on average */
    bool memory_tier;            /* in-memory replicas (--replica-memory-gb): a piece alone is handed over
                                    or in its partner's memory; nothing rolls back */
} ah_exposure_facts_t;

/* One candidate as weighed: its hit rates, its rollback, the share kept, the score (higher earns more). */
typedef struct ah_exposure_weighed {
    double hit_rate, alone_hit_rate, rollback_s, kept, score;
    int alone_spot; /* spot nodes of the plan that hold a piece alone */
} ah_exposure_weighed_t;

/* Weighs r's plan (w[0]) and each of its baselines' that exists (w[1 + k]; score -1 when none) under the
 * objective of o; returns the index of the best: -1 the planner's plan (ties go to it), else the baseline
 * k. false in *ok when out of host memory (then -1). */
int ah_exposure_pick(const ah_plan_result_t *r, const ah_planner_opts_t *o, const ah_exposure_facts_t *f,
                     ah_exposure_weighed_t w[1 + AH_BASELINE_COUNT], bool *ok);

/* Whether every piece (a shard group at a TP index) that plan p's ranks on a leaving node hold is also held by a
 * rank on a staying node (leaving[i]: cluster c's node i leaves; p's nodes by name): then a step committed under p
 * survives the leavers on the staying disks, and the trainers write a change's step behind the next step instead
 * of saving it before the move (runtime/ckpt_change.c survives, which also counts the memory tier and the cloud).
 * false in *ok when out of host memory or a node of p is not c's (then false). */
bool ah_exposure_leavers_kept(const ah_plan_t *p, const ah_cluster_t *c, const bool *leaving, bool *ok);

#endif
