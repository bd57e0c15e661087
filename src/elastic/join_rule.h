/* When joined nodes are worth a restart: the rule the agent applies (agent_join.c) and the simulator
 * prices (sim/sim.c), so both take capacity in at the same moments. Pure: no files, no MPI, no plans.
 *
 * A restart onto the plan with the joined nodes stops training for cost_s (the stop at the next step
 * boundary with its save, the relaunch, the restore, the first step; plus the exposure below), then
 * trains on the better plan
 * until something changes it: expected after stay_s, the time until the joined plan is hit (a joined
 * node leaving ends the gain; a removal from the running plan would re-plan onto the joined nodes
 * anyway). Of the next stay_s seconds the restarted job trains stay_s - cost_s, paying for all of them
 * (time or $): per unit of work key_joined x stay_s / (stay_s - cost_s) against the running plan's
 * key_now, so the restart pays when
 *     key_joined x stay_s < key_now x (stay_s - cost_s)
 * where a key is what a unit of work costs (seconds per iteration under the time objective, $ per
 * iteration under the cost objective: ah_planner_key; 1 / tokens per second in the simulator). With
 * no removal seen (stay_s infinite) that is the plan being better (the whole rule until session 19, applied
 * only at a checkpoint). Said as
 * a gain, in seconds of the running plan's work: gain_s = stay_s x (1 - key_joined / key_now), which
 * must exceed cost_s. A join that does not pay waits: the next join (several joined nodes together
 * gain more), the next checkpoint or the next first step decide again.
 *
 * The exposure: the joined plan is hit more often than the running one (its joined spot nodes), and
 * each extra hit costs a recovery the running plan would not have had (its seconds and the training a
 * rollback undoes): (its hit rate - the running plan's) x stay_s x that recovery, added to cost_s
 * (ah_join_exposure_s; with the stay 1 / its hit rate, at most one recovery).
 *
 * The stay: a fixed horizon when one is given (`autohet run --join-horizon-s`, `simulate
 * --join-horizon-s`), else 1 / the joined plan's hit rate from the removals seen so far
 * (ah_churn_hit_rate: the simulator's churn statistics, sim/plans.c ah_sim_hit_rate). */
#ifndef AH_ELASTIC_JOIN_RULE_H
#define AH_ELASTIC_JOIN_RULE_H

#include <stdbool.h>

/* The removals seen so far, per GPU type (arrays of n_types, the caller's). */
typedef struct ah_churn {
    int n_types;
    const double *removals;       /* spot nodes of the type removed */
    const double *removal_events; /* changes that removed some of them (several at once count once) */
    const double *node_s;         /* seconds its spot nodes were up, summed */
    double elapsed_s;             /* since the run began */
} ah_churn_t;

/* Hours of no removal assumed before the first: a type never seen removed is not taken as never
 * removed, and one removal early does not make a rate of one per second. */
#define AH_CHURN_PRIOR_S 3600.0

/* Preemptions per second that hit a plan with spot_nodes[ty] spot nodes of each type: per type, its
 * nodes times the type's removals per node-second up (AH_CHURN_PRIOR_S added to the seconds), at most
 * the type's removing changes per second (nodes removed together hit once). */
double ah_churn_hit_rate(const ah_churn_t *c, const int *spot_nodes);

/* The stay: horizon_s when > 0, else 1 / hit_rate (INFINITY at 0). */
double ah_join_stay_s(double hit_rate, double horizon_s);

/* The exposure (above): max(0, hit_joined - hit_now) x stay_s x recovery_s; 0 when either is not finite
 * and positive. */
double ah_join_exposure_s(double hit_now, double hit_joined, double stay_s, double recovery_s);

/* The share of its time a plan is expected to train, weighed by the simulator's autohet
 * (sim/plans.c, simulate --exposure-aware) and the agent (agent_exposure.c, run --exposure-aware) alike
 * (docs/simulator.md rule 12): max(0, 1 - hit_rate x recovery_s - alone_hit_rate x rollback_s), hit_rate
 * the plan's preemptions per second (ah_churn_hit_rate), recovery_s what one costs, alone_hit_rate those
 * that hit a node holding a piece of the state alone (ckpt/replica.h ah_replica_alone_nodes), rollback_s
 * the training such a hit undoes (the piece read from the cloud: the run goes back to its newest step). */
double ah_exposure_kept(double hit_rate, double recovery_s, double alone_hit_rate, double rollback_s);

/* Whether restarting onto the joined plan pays (above); *gain_s (may be NULL) the gain in seconds of
 * the running plan's work (INFINITY with an infinite stay and a better plan). A plan out of bounds
 * (key INFINITY) never pays; any finite one beats a running plan out of bounds. */
bool ah_join_pays(double key_now, double key_joined, double stay_s, double cost_s, double *gain_s);

#endif
