/* The plans of a replay (sim/replay.h): the nodes a policy plans on given what is up, and the plan
 * of that set, made once per set by the policy's planner (autohet and on-demand: ah_planner_run_sharded;
 * the baselines: ah_baseline_run) on the sub-cluster, and priced for the replay: tokens/s, iteration,
 * $ per second of the nodes it uses (on-demand at on-demand prices), egress while it trains, each
 * device's checkpoint bytes and shard placement, a sharded save's all-gather, the egress of its
 * uploads to the cloud tier, the memory tier's holders. Errors: out of host memory returns NULL/false; a set with no plan is an entry with the
 * planner's message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/replica.h"
#include "core/timing.h"
#include "core/vec.h"
#include "elastic/join_rule.h"
#include "plan/plan_out.h"
#include "planner/planner.h"
#include "sim/replay.h"

void ah_sim_entry_free(ah_sim_entry_t *e) {
    if (!e) return;
    for (int k = 0; k < 3; k++) ah_sim_entry_free(e->alt[k]);
    free(e->alone);
    free(e->key);
    free(e->uses);
    free(e->gpus);
    ah_placement_free(&e->place);
    free(e->ckpt_bytes);
    free(e->holder);
    free(e);
}

/* The nodes a policy plans on, given what is up: varuna keeps the type with the most GPUs up
 * among the types that run the precision; autohet-region, its region's. */
static void policy_mask(const ah_sim_replay_t *x, char *key) {
    const ah_cluster_t *c = x->c;
    int keep_type = -1;
    if (x->pol == AH_POLICY_VARUNA) {
        int best = 0;
        for (int ty = 0; ty < c->n_types; ty++) {
            if (!ah_gpu_runs(&c->types[ty], x->o->train.precision)) continue;
            int n = 0;
            for (int i = 0; i < c->n_nodes; i++)
                if (x->up[i] && c->nodes[i].type == ty) n += c->nodes[i].count;
            if (n > best) {
                best = n;
                keep_type = ty;
            }
        }
    }
    for (int i = 0; i < c->n_nodes; i++) {
        bool in = x->pol == AH_POLICY_ON_DEMAND || x->up[i];
        if (x->pol == AH_POLICY_VARUNA) in = in && c->nodes[i].type == keep_type;
        if (x->region) in = in && strcmp(c->nodes[i].region, x->region) == 0;
        if (x->plan_within) in = in && x->plan_within[i];
        if (x->plan_devices) in = in && x->plan_devices[i] != 0;
        /* skip_types is set only up to AH_SIM_CHURN_MAX_TYPES types (ah_sim_plan_choose); a shift of 32 or more is undefined */
        if (c->nodes[i].spot && x->skip_types && c->nodes[i].type < 32 && (x->skip_types >> c->nodes[i].type & 1u))
            in = false;
        key[i] = in ? '1' : '0';
    }
    key[c->n_nodes] = 0;
}

/* Fills e from a planner result on a sub-cluster whose node i is full-cluster node map[i]. */
static bool entry_fill(ah_sim_replay_t *x, ah_sim_entry_t *e, const ah_plan_result_t *res, const int *map) {
    const ah_plan_t *p = &res->plan;
    const ah_cluster_t *c = x->c;
    /* the iteration as train runs it by default, the DP sync overlapped, and its egress at that rate:
     * the rule plan and evaluate price by (plan/plan_out.h ah_plan_priced_iteration_s,
     * ah_usd_per_hour_at) */
    e->iteration_s = ah_plan_priced_iteration_s(&res->eval, true);
    e->tokens_per_s = (double)(p->train.global_batch * p->train.seq_len) / e->iteration_s;
    e->bound_tokens_per_s = res->lower_bound_s > 0 && isfinite(res->lower_bound_s)
                                ? (double)(p->train.global_batch * p->train.seq_len) / res->lower_bound_s : 0;
    ah_plan_traffic_t traffic;
    ah_plan_traffic(p, &traffic);
    e->egress_usd_per_s = ah_usd_per_hour_at(traffic.egress_usd, e->iteration_s) / 3600.0;
    e->tp = p->tp;
    ah_error_t err;
    if (ah_placement_build(p, map, c->n_nodes, &e->place, &err) != AH_OK) return false;
    for (int r = 0; x->plan_devices && r < e->place.n_ranks; r++) { /* GPU i of a node planned on: its i-th kept */
        const uint64_t m = x->plan_devices[e->place.ranks[r].node];
        for (int b = 0, seen = 0; b < 64; b++)
            if ((m >> b & 1u) && seen++ == e->place.ranks[r].index) {
                e->place.ranks[r].index = b;
                break;
            }
    }
    e->ckpt_bytes = calloc((size_t)(e->place.n_ranks > 0 ? e->place.n_ranks : 1), sizeof *e->ckpt_bytes);
    if (!e->ckpt_bytes) return false;
    ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = p->tp, .profile = x->o->profile, .cp = 1};
    /* A sharded plan's save all-gathers, on each device, the AdamW state the others own of its
     * groups, over the inter-node link (the worst device bounds it). */
    e->gather_s = 0;
    e->sharded = p->n_opt_groups > 0;
    const int n_dev = ah_plan_device_count(p);
    int64_t *held = p->n_opt_groups > 0 ? malloc(2 * (size_t)n_dev * sizeof *held) : NULL;
    if (held && ah_opt_elems_all(p, held, held + n_dev, &err) == AH_OK)
        for (int i = 0; i < p->n_pipelines; i++)
            for (int s = 0; s < p->pipelines[i].n_stages; s++)
                for (int k = 0; k < ah_stage_devices(&p->pipelines[i], p->tp); k++) {
                    const int ty = p->pipelines[i].stages[s].type, r = ah_plan_rank_of(p, i, s, k);
                    const double bytes = (double)held[n_dev + r] * (double)ah_optimizer_state_bytes(p->train.precision);
                    const double t = bytes / ah_link_bw(&p->cluster, AH_LINK_INTER_NODE, ty, ty);
                    if (t > e->gather_s) e->gather_s = t;
                }
    free(held);
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++) {
            const ah_stage_t *st = &pl->stages[s];
            ah_stage_cost_t sc;
            ah_stage_cost(&ctx, st->type, st->first, st->last, s == 0, s == pl->n_stages - 1, st->recompute, &sc);
            /* every CP rank holds the stage; a device of an interleaved pipeline, several */
            for (int k = 0; k < ah_stage_devices(pl, p->tp); k++) {
                const int node = map[st->devices[k].node];
                e->ckpt_bytes[ah_plan_rank_of(p, i, s, k)] += sc.params * AH_SIM_CKPT_BYTES_PER_PARAM;
                if (!e->uses[node]) {
                    e->uses[node] = true;
                    e->gpus[c->nodes[node].type] += c->nodes[node].count;
                    const double price = x->pol == AH_POLICY_ON_DEMAND ? ah_sim_on_demand_price(c, node, x->o)
                                                                       : c->nodes[node].usd_per_gpu_hour;
                    e->usd_per_s += price * c->nodes[node].count / 3600.0;
                }
            }
        }
    }
    if (!ah_sim_upload(c, x->model, x->bucket, e) || !(e->alone = calloc((size_t)c->n_nodes + 1, sizeof *e->alone)) ||
        !ah_replica_alone_nodes(&e->place, c->n_nodes, e->alone)) return false;
    if (!ah_sim_agent_policy(x->pol) || x->o->replica_memory_gb <= 0) return true;
    e->holder = malloc(sizeof *e->holder * (size_t)(c->n_nodes + 1));
    if (!e->holder || !ah_sim_memory_holders(c, &e->place, e->ckpt_bytes, x->o->replica_memory_gb, e->holder))
        return false;
    e->replicate_s = ah_sim_memory_replication(c, &e->place, e->ckpt_bytes, e->holder, &e->replicate_usd,
                                               &e->replicate_wan_bytes);
    /* no periodic replication where it cannot pay: every piece on two nodes' disks (ckpt/replica.h) */
    bool pays = false;
    if (!ah_replica_pays(&e->place, &pays)) return false;
    e->periodic_off = !x->o->replicas_always && !pays;
    x->r->replica_plans_off += e->periodic_off;
    return e->replicate_s >= 0;
}

/* With o->exposure_aware (autohet): e->alt[k], the plan of the planner's baseline k on the same set, where
 * it has one (candidates its search scored; no planning of their own). false: out of host memory. */
static bool fill_alternates(ah_sim_replay_t *x, ah_sim_entry_t *e, const ah_plan_result_t *res, const int *map) {
    if (!x->o->exposure_aware || !ah_sim_agent_policy(x->pol) || !res->baselines) return true;
    for (int k = 0; k < AH_BASELINE_COUNT && k < 3; k++) {
        if (!res->baselines[k].ok) continue;
        ah_sim_entry_t *a = calloc(1, sizeof *a);
        if (!a) return false;
        e->alt[k] = a;
        a->key = strdup(e->key);
        a->uses = calloc((size_t)x->c->n_nodes + 1, sizeof(bool));
        a->gpus = calloc((size_t)x->c->n_types + 1, sizeof(int));
        a->ok = true;
        if (!a->key || !a->uses || !a->gpus || !entry_fill(x, a, &res->baselines[k].r, map)) return false;
    }
    return true;
}

/* Plans the set in key (cached). NULL only when out of host memory. */
ah_sim_entry_t *ah_sim_plan_for(ah_sim_replay_t *x) {
    const ah_cluster_t *c = x->c;
    /* the cost objective weighs the held nodes' $ (rule 2; ah_sim_weighed_usd_per_s), part of the key */
    double gpus, held = 0;
    if (x->o->objective == AH_OBJECTIVE_COST && !x->o->release_idle) held = ah_sim_held_usd_per_s(x, &gpus) * 3600;
    const size_t len = (size_t)c->n_nodes * (x->plan_devices ? 4 : 1) + 1; /* ",NN" a node planned on */
    char *key = malloc(len + 32);                                            /* "$" the held $/h */
    if (!key) return NULL;
    policy_mask(x, key);
    int end = c->n_nodes;
    for (int i = 0; x->plan_devices && i < c->n_nodes; i++)
        if (key[i] == '1') end += snprintf(key + end, 4, ",%d", __builtin_popcountll(x->plan_devices[i]) % 100);
    if (held > 0) snprintf(key + end, 32, "$%.17g", held);
    for (int i = 0; i < x->n_cache; i++)
        if (strcmp(x->cache[i]->key, key) == 0) {
            free(key);
            return x->cache[i];
        }
    ah_sim_entry_t *e = calloc(1, sizeof *e);
    int *map = malloc(sizeof(int) * (size_t)(c->n_nodes + 1));
    ah_cluster_t sub = {0};
    ah_error_t err = {0};
    bool mem_ok = e && map;
    if (mem_ok) {
        e->key = key;
        key = NULL;
        e->uses = calloc((size_t)c->n_nodes + 1, sizeof(bool));
        e->gpus = calloc((size_t)c->n_types + 1, sizeof(int));
        mem_ok = e->uses && e->gpus && ah_cluster_copy(c, &sub, &err) == AH_OK;
    }
    if (mem_ok) {
        int n = 0;
        for (int i = 0; i < c->n_nodes; i++)
            if (e->key[i] == '1') {
                sub.nodes[n] = c->nodes[i];
                if (x->plan_devices) sub.nodes[n].count = __builtin_popcountll(x->plan_devices[i]);
                if (x->pol == AH_POLICY_ON_DEMAND) /* its objective and budget at the prices it pays */
                    sub.nodes[n].usd_per_gpu_hour = ah_sim_on_demand_price(c, i, x->o);
                map[n++] = i;
            }
        sub.n_nodes = n;
        ah_planner_opts_t po;
        ah_planner_opts_default(&po);
        po.train = x->o->train;
        po.profile = x->o->profile;
        po.shard = x->o->shard;
        po.objective = x->o->objective;
        po.budget_usd_per_hour = x->o->budget_usd_per_hour;
        po.held_usd_per_hour = held; /* every node held is paid (rule 2), at the prices the policy pays */
        po.schedule = x->o->schedule;
        po.cp = x->o->cp;
        po.schedule_trainable_only = true; /* the policies train */
        ah_plan_result_t res;
        ah_status_t st;
        const double t0 = ah_now_s();
        if (n == 0) st = ah_error_set(&err, AH_ERR_INFEASIBLE, "no nodes are up");
        else if (ah_sim_agent_policy(x->pol) || x->pol == AH_POLICY_ON_DEMAND) {
            st = ah_planner_run_sharded(x->model, &sub, &po, false, &res, &err);
        } else
            st = ah_baseline_run(x->model, &sub, &po,
                                 x->pol == AH_POLICY_MEGATRON_BEST ? AH_BASELINE_MEGATRON_BEST : AH_BASELINE_UNIFORM,
                                 &res, &err);
        e->plan_s = ah_now_s() - t0;
        if (st == AH_OK) {
            e->ok = true;
            mem_ok = entry_fill(x, e, &res, map) && fill_alternates(x, e, &res, map);
            ah_plan_result_free(&res);
        } else
            snprintf(e->why, sizeof e->why, "%s", err.msg);
        x->r->planner_s += e->plan_s;
        if (x->r->plans_computed++ == 0) x->r->first_plan_s = e->plan_s;
    }
    ah_cluster_free(&sub);
    free(map);
    free(key);
    mem_ok = mem_ok && ah_grow(&x->cache, &x->cap_cache, x->n_cache + 1, sizeof *x->cache);
    if (!mem_ok) {
        ah_sim_entry_free(e);
        return NULL;
    }
    x->cache[x->n_cache++] = e;
    return e;
}

double ah_sim_hit_rate(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    int *spot = calloc((size_t)x->c->n_types + 1, sizeof *spot);
    if (!spot) return 0; /* out of host memory: as with no removal seen */
    for (int i = 0; i < x->c->n_nodes; i++)
        if (e->uses[i] && x->c->nodes[i].spot) spot[x->c->nodes[i].type]++;
    const ah_churn_t c = {.n_types = x->c->n_types, .removals = x->spot_removals,
                          .removal_events = x->spot_removal_events, .node_s = x->spot_node_s, .elapsed_s = x->t};
    const double rate = ah_churn_hit_rate(&c, spot);
    free(spot);
    return rate;
}

/* The mean of the replay's finished (re)starts, the one under way left out: their seconds less the wait
 * for the step in progress (its tokens count), and for the recovery cost also less the first step plus
 * the training their rollback undid; o->restart_s before any. */
static double mean_recovery_s(const ah_sim_replay_t *x, bool cost) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < x->r->n_recs; i++) {
        const ah_sim_recovery_t *v = &x->r->recs[i];
        if (v->interrupted || (i == x->r->n_recs - 1 && x->phase == AH_PHASE_RECOVER)) continue;
        sum += v->seconds - v->wait_s + (cost ? v->rollback_s - v->first_step_s : 0);
        n++;
    }
    return n > 0 ? sum / n : x->o->restart_s;
}

double ah_sim_recovery_cost_s(const ah_sim_replay_t *x) { return mean_recovery_s(x, true); }

double ah_sim_join_cost_s(const ah_sim_replay_t *x) { return mean_recovery_s(x, false); }

/* Preemptions per second that hit a node of plan e holding a piece alone (e->alone), as ah_sim_hit_rate. */
static double alone_hit_rate(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    int *spot = calloc((size_t)x->c->n_types + 1, sizeof *spot);
    if (!spot) return 0; /* out of host memory: as with no removal seen */
    for (int i = 0; i < x->c->n_nodes; i++)
        if (e->uses[i] && e->alone && e->alone[i] && x->c->nodes[i].spot) spot[x->c->nodes[i].type]++;
    const ah_churn_t c = {.n_types = x->c->n_types, .removals = x->spot_removals,
                          .removal_events = x->spot_removal_events, .node_s = x->spot_node_s, .elapsed_s = x->t};
    const double rate = ah_churn_hit_rate(&c, spot);
    free(spot);
    return rate;
}

/* The training a hit on a node holding a piece alone undoes: the run goes back to the newest checkpoint
 * the cloud holds, on average half the interval plus its upload old; none under the memory tier (the
 * piece is handed over, or in its partner's memory). */
static double alone_rollback_s(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    return e->holder ? 0 : x->o->ckpt_every_s / 2 + e->upload_s;
}

/* What plan e is expected to earn: tokens per second (objective time) or per $ (cost), its
 * preemptions' recoveries taken off, and with o->exposure_aware the rollbacks of its pieces held alone. */
static double expected_score(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    if (!e->ok) return 0;
    const double kept = ah_exposure_kept(ah_sim_hit_rate(x, e), ah_sim_recovery_cost_s(x),
                                         x->o->exposure_aware ? alone_hit_rate(x, e) : 0, alone_rollback_s(x, e));
    const double g = e->tokens_per_s * kept;
    return x->o->objective == AH_OBJECTIVE_COST ? g / ah_sim_weighed_usd_per_s(x, e) : g;
}

/* *best becomes e or one of its alternates when that scores more (expected_score). */
static void weigh(const ah_sim_replay_t *x, ah_sim_entry_t *e, ah_sim_entry_t **best, double *best_score) {
    for (int k = -1; k < 3; k++) {
        ah_sim_entry_t *a = k < 0 ? e : e->alt[k];
        if (!a) continue;
        const double s = expected_score(x, a);
        if (s > *best_score) {
            *best = a;
            *best_score = s;
        }
    }
}

ah_sim_entry_t *ah_sim_plan_choose(ah_sim_replay_t *x) {
    ah_sim_entry_t *best = ah_sim_plan_for(x);
    x->choice_plan_s = best ? best->plan_s : 0;
    if (!best || !ah_sim_agent_policy(x->pol) || (!x->o->churn_aware && !x->o->exposure_aware)) return best;
    double best_score = expected_score(x, best);
    weigh(x, best, &best, &best_score);
    if (!x->o->churn_aware) return best;
    const ah_cluster_t *c = x->c;
    unsigned spot_up = 0; /* the spot types up that have churned; none past AH_SIM_CHURN_MAX_TYPES types */
    for (int i = 0; i < c->n_nodes && c->n_types <= AH_SIM_CHURN_MAX_TYPES; i++)
        if (x->up[i] && c->nodes[i].spot && x->spot_removals[c->nodes[i].type] > 0) spot_up |= 1u << c->nodes[i].type;
    for (unsigned skip = spot_up; skip > 0; skip = (skip - 1) & spot_up) {
        x->skip_types = skip;
        ah_sim_entry_t *e = ah_sim_plan_for(x);
        x->skip_types = 0;
        if (!e) return NULL;
        x->choice_plan_s += e->plan_s;
        weigh(x, e, &best, &best_score);
    }
    return best;
}
