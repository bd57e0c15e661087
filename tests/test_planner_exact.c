/* The planner is exact: on random small instances (<= 8 GPUs, 2-3 GPU types, <= 12 layers, fixed
 * seeds) an independent brute force — plain nested enumeration over every plan of the space,
 * each scored with ah_evaluate; it shares nothing with the planner but the cost model — finds
 * the same optimal iteration time (1e-12 relative). Every emitted plan passes ah_plan_check and
 * the planner's own value agrees with ah_evaluate's.
 *
 * Zones (issue 39): a plan whose groups span two zones is scored with the flat ring and with the
 * hierarchical DP sync, and counts at the lower. The planner is exact over the ring (its optimum
 * is the brute force's over ring-priced plans or better), and never below the optimum over both
 * (it weighs the hierarchical sync per candidate, not exhaustively); where the hierarchical sync
 * wins nowhere, the two optima are one and the planner finds it. The bounds hold over both.
 *
 * The brute force works at the level of TP groups (each group distinct, even two groups of one
 * node), enumerates: t; every set of disjoint pipelines (ordered sequences of groups, at most L
 * stages each), listed once per set; micro-batch size (divisors of the global batch up to 8, as
 * the planner's auto); every split of the micro-batches (>= 1 per pipeline); every layer split
 * (>= 1 block per stage) and recompute flag per stage. Instance sizes are drawn and then shrunk
 * (fewer layers) until the brute force's plan count fits a budget, so the test stays short.
 *
 * Schedules (issue 35): on each instance's plan, ah_planner_choose_schedules gives the least
 * iteration (the overlapped DP sync) over every combination of schedule, virtual-stage count and
 * recomputation of its pipelines, each combination a plan evaluated; the bound over any schedule
 * with the overlapped sync is below it.
 *
 * Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage, where the brute force runs about 4x slower) every
 * SHORT_STRIDE-th instance only, each checked as in the full run; the counts (instances, schedule
 * choices, the bounds' binding terms) are the full run's claim, checked in CI's first stage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "plan/evaluate.h"
#include "planner/planner.h"
#include "planner/search_bound.h"
#include "rand_instance.h"

#define BUDGET 150000.0 /* plans the brute force may score per instance */
#define INSTANCES 60
#define SHORT_STRIDE 5

/* ---- brute force ---- */

typedef struct {
    int node, slot; /* slot: the group's index in its node */
} group_t;

typedef struct {
    const ah_model_t *m;
    const ah_cluster_t *c;
    ah_train_t train;
    int t;
    int G;
    group_t groups[16];
    int L;
    int comp_n[13];          /* compositions of L into S parts: count */
    int *comp[13];           /* [count][S] */
    /* current set */
    int P;
    int len[16];
    int members[16][16];
    bool count_only;
    ah_plan_t *plan;         /* the plan being filled in */
    int *opts;               /* [P] split x recompute choices per pipeline */
    bool zones;              /* the current set's groups span two zones */
    double plans;            /* plans scored (or counted) */
    double best;
    double best_ring;        /* the best over ring-priced plans */
    int64_t mb;              /* the micro-batch size being scored */
    double best_tm[9][9];    /* the best plan of each (t, m), +inf when none fits */
} bf_t;

static void compositions(bf_t *b) {
    for (int S = 1; S <= b->L; S++) {
        /* choose S-1 cut points among L-1 */
        int n = 0, cap = 1 << (b->L - 1);
        b->comp[S] = malloc(sizeof(int) * (size_t)cap * (size_t)S);
        for (int mask = 0; mask < cap; mask++) {
            if (__builtin_popcount((unsigned)mask) != S - 1) continue;
            int k = 0, last = 0;
            for (int i = 1; i < b->L; i++)
                if (mask & (1 << (i - 1))) {
                    b->comp[S][n * S + k++] = i - last;
                    last = i;
                }
            b->comp[S][n * S + k] = b->L - last;
            n++;
        }
        b->comp_n[S] = n;
    }
}

/* Every split and recompute choice of every pipeline, for the micro-batch counts set. */
static void score_splits(bf_t *b) {
    ah_plan_t *plan = b->plan;
    const int P = b->P;
    int o[16] = {0};
    ah_error_t err;
    for (;;) {
        for (int p = 0; p < P; p++) {
            const int S = b->len[p], ci = o[p] >> S, rmask = o[p] & ((1 << S) - 1);
            for (int s = 0, first = 0; s < S; s++) {
                ah_stage_t *st = &plan->pipelines[p].stages[s];
                st->first = first;
                first += b->comp[S][ci * S + s];
                st->last = first;
                st->recompute = (rmask >> s) & 1;
            }
        }
        ah_eval_t e;
        if (ah_evaluate(plan, NULL, &e, &err) != AH_OK) abort();
        b->plans++;
        /* the search minimises the closed form (plan/replay.h); the replay is checked apart */
        double v = e.search_estimate_s;
        if (e.feasible && v < b->best_ring) b->best_ring = v;
        if (b->zones) { /* the same plan with the hierarchical sync: only the sync differs */
            plan->dp_sync = AH_DP_SYNC_HIERARCHICAL;
            v = fmin(v, e.search_estimate_s - e.pred.breakdown.dp_sync_s + ah_plan_dp_sync_s(plan));
            plan->dp_sync = AH_DP_SYNC_RING;
        }
        if (e.feasible && v < b->best_tm[b->t][b->mb]) b->best_tm[b->t][b->mb] = v;
        if (e.feasible && v < b->best) {
            b->best = v;
            if (getenv("AH_TEST_ONLY")) { /* debugging one instance: show the brute force's best */
                json_t *j = ah_plan_to_json(plan);
                char *txt = json_dumps(j, JSON_COMPACT);
                fprintf(stderr, "brute best %.17g: %s\n", b->best, txt);
                free(txt);
                json_decref(j);
            }
        }
        ah_eval_free(&e);
        int p = 0;
        while (p < P && ++o[p] == b->opts[p]) o[p++] = 0;
        if (p == P) break;
    }
}

/* Every composition of `left` micro-batches over pipelines p.. (>= 1 each). */
static void distribute(bf_t *b, int p, int64_t left) {
    if (p == b->P - 1) {
        b->plan->pipelines[p].micro_batches = left;
        score_splits(b);
        return;
    }
    for (int64_t v = 1; v <= left - (b->P - 1 - p); v++) {
        b->plan->pipelines[p].micro_batches = v;
        distribute(b, p + 1, left - v);
    }
}

/* Scores every split of every kind for the current set and micro-batch size. */
static void score_set_m(bf_t *b, int64_t mb) {
    const int64_t N = b->train.global_batch / mb;
    const int P = b->P;
    if (P > N) return;
    double per_batch = 1;
    int opts[16];
    for (int p = 0; p < P; p++) {
        opts[p] = b->comp_n[b->len[p]] << b->len[p];
        per_batch *= opts[p];
    }
    /* compositions of N into P positive parts: C(N-1, P-1) */
    double ways = 1;
    for (int i = 0; i < P - 1; i++) ways = ways * (double)(N - 1 - i) / (double)(i + 1);
    if (b->count_only) {
        b->plans += ways * per_batch;
        return;
    }
    ah_train_t tr = b->train;
    tr.micro_batch = mb;
    b->mb = mb;
    ah_plan_t plan;
    ah_error_t err;
    if (ah_plan_init(&plan, b->m, &tr, b->t, b->c, P, &err) != AH_OK) abort();
    for (int p = 0; p < P; p++) {
        if (ah_pipeline_alloc(&plan.pipelines[p], b->len[p], &err) != AH_OK) abort();
        for (int s = 0; s < b->len[p]; s++) {
            const group_t *g = &b->groups[b->members[p][s]];
            ah_stage_t *st = &plan.pipelines[p].stages[s];
            st->type = b->c->nodes[g->node].type;
            for (int r = 0; r < b->t; r++) st->devices[r] = (ah_device_ref_t){g->node, g->slot * b->t + r};
        }
    }
    b->plan = &plan;
    b->zones = false;
    for (int p = 0; p < P; p++)
        for (int s = 0; s < b->len[p]; s++)
            b->zones |= strcmp(b->c->nodes[b->groups[b->members[p][s]].node].zone, b->c->nodes[b->groups[b->members[0][0]].node].zone) != 0;
    b->opts = opts;
    distribute(b, 0, N);
    ah_plan_free(&plan);
}

/* The given micro-batch size, or (auto) every divisor of the global batch up to 8. */
static void score_set(bf_t *b) {
    if (b->train.micro_batch > 0) {
        score_set_m(b, b->train.micro_batch);
        return;
    }
    for (int64_t mb = 1; mb <= 8 && mb <= b->train.global_batch; mb++)
        if (b->train.global_batch % mb == 0) score_set_m(b, mb);
}

/* Every ordering of `items` (k of them) as a new pipeline, then the rest of the groups. */
static void sets_from(bf_t *b, unsigned remaining);

static void permute(bf_t *b, int *items, int k, int depth, unsigned remaining) {
    if (depth == k) {
        memcpy(b->members[b->P], items, sizeof(int) * (size_t)k);
        b->len[b->P++] = k;
        sets_from(b, remaining);
        b->P--;
        return;
    }
    for (int i = depth; i < k; i++) {
        int tmp = items[depth];
        items[depth] = items[i];
        items[i] = tmp;
        permute(b, items, k, depth + 1, remaining);
        items[i] = items[depth];
        items[depth] = tmp;
    }
}

/* Partitions `remaining` into ordered pipelines; the lowest group starts the next pipeline, so
 * each set is listed once. */
static void sets_from(bf_t *b, unsigned remaining) {
    if (remaining == 0) {
        score_set(b);
        return;
    }
    const int low = __builtin_ctz(remaining);
    const unsigned rest = remaining & ~(1u << low);
    for (unsigned sub = rest;; sub = (sub - 1) & rest) { /* every subset of the rest joins low */
        int items[16], k = 0;
        items[k++] = low;
        for (int i = 0; i < b->G; i++)
            if (sub & (1u << i)) items[k++] = i;
        if (k <= b->L) permute(b, items, k, 0, rest & ~sub);
        if (sub == 0) break;
    }
}

/* The brute-force optimum; best_tm (when given) gets the best plan of every (t, m), +inf where none
 * fits. */
static double brute_force(const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr, bool count_only,
                          double *plans, double best_tm[9][9], double *best_ring) {
    bf_t b = {0};
    for (int t = 0; t < 9; t++)
        for (int k = 0; k < 9; k++) b.best_tm[t][k] = INFINITY;
    b.m = m;
    b.c = c;
    b.train = *tr;
    b.L = (int)m->n_layer;
    b.count_only = count_only;
    b.best = b.best_ring = INFINITY;
    compositions(&b);
    for (int t = 1; t <= 8; t++) {
        ah_error_t err;
        if (ah_model_check_tp(m, t, &err) != AH_OK) continue;
        b.t = t;
        b.G = 0;
        for (int i = 0; i < c->n_nodes; i++)
            for (int g = 0; g < c->nodes[i].count / t; g++) b.groups[b.G++] = (group_t){i, g};
        if (b.G == 0) continue;
        for (unsigned used = 1; used < (1u << b.G); used++) sets_from(&b, used);
    }
    for (int S = 1; S <= b.L; S++) free(b.comp[S]);
    *plans = b.plans;
    if (best_tm) memcpy(best_tm, b.best_tm, sizeof b.best_tm);
    if (best_ring) *best_ring = b.best_ring;
    return b.best;
}

/* ---- schedules: the choice on the search's plan against every combination ---- */

/* Pipeline `base` (1F1B) under schedule sched with v stages per device (interleaved: each
 * device's blocks in v chunks, the first ones one more), recomputation everywhere with rc. */
static bool rebuild(const ah_pipeline_t *base, ah_schedule_t sched, int v, bool rc, ah_pipeline_t *out) {
    const int P = base->n_stages;
    out->stages = calloc((size_t)(P * v), sizeof *out->stages);
    if (!out->stages) return false;
    out->n_stages = P * v;
    out->micro_batches = base->micro_batches;
    out->schedule = sched;
    for (int q = 0, first = 0; q < P * v; q++) {
        const ah_stage_t *b = &base->stages[q % P];
        const int nb = b->last - b->first, k = nb / v + (q / P < nb % v ? 1 : 0);
        out->stages[q] = *b;
        out->stages[q].first = first;
        out->stages[q].last = first += k;
        out->stages[q].recompute = b->recompute || rc;
    }
    return true;
}

typedef struct {
    ah_schedule_t sched;
    int v;
    bool rc;
} sopt_t;

/* Every schedule a 1F1B pipeline may run, each with its own recomputation and everywhere. */
static int schedule_options(const ah_pipeline_t *pl, sopt_t *out) {
    int n = 0, least = 1 << 30;
    for (int s = 0; s < pl->n_stages; s++) least = pl->stages[s].last - pl->stages[s].first < least ? pl->stages[s].last - pl->stages[s].first : least;
    for (int rc = 0; rc < 2; rc++) {
        out[n++] = (sopt_t){AH_SCHED_1F1B, 1, rc};
        if (pl->n_stages < 2) continue;
        out[n++] = (sopt_t){AH_SCHED_ZERO_BUBBLE, 1, rc};
        for (int v = 2; v <= least && pl->micro_batches % pl->n_stages == 0; v++)
            out[n++] = (sopt_t){AH_SCHED_INTERLEAVED, v, rc};
    }
    return n;
}

/* The least iteration (overlapped sync) over every combination of schedules of base's 1F1B
 * pipelines (others kept), each combination a plan evaluated; +inf when none fits. *count: the
 * combinations. Only when they number at most cap (else NAN). */
static double best_schedules(const ah_plan_t *base, double cap, double *count) {
    const int NP = base->n_pipelines;
    sopt_t opts[8][64];
    int n[8], at[8] = {0};
    *count = 1;
    for (int i = 0; i < NP; i++) {
        n[i] = base->pipelines[i].schedule == AH_SCHED_1F1B ? schedule_options(&base->pipelines[i], opts[i]) : 1;
        if (base->pipelines[i].schedule != AH_SCHED_1F1B) opts[i][0] = (sopt_t){base->pipelines[i].schedule, 0, false};
        *count *= n[i];
    }
    if (NP > 8 || *count > cap) return NAN;
    double best = INFINITY;
    for (;;) {
        ah_plan_t q;
        ah_error_t e;
        CHECK(ah_plan_copy(base, &q, &e) == AH_OK, "%s", e.msg);
        bool ok = true;
        for (int i = 0; i < NP; i++) {
            if (opts[i][at[i]].v == 0) continue; /* not 1F1B: as it is */
            free(q.pipelines[i].stages);
            ok = ok && rebuild(&base->pipelines[i], opts[i][at[i]].sched, opts[i][at[i]].v, opts[i][at[i]].rc,
                               &q.pipelines[i]);
        }
        ah_eval_t ev;
        if (ok && ah_plan_validate(&q, &e) == AH_OK && ah_evaluate(&q, NULL, &ev, &e) == AH_OK) {
            if (ev.feasible && ev.iteration_overlap_s < best) best = ev.iteration_overlap_s;
            ah_eval_free(&ev);
        }
        ah_plan_free(&q);
        int k = 0;
        while (k < NP && ++at[k] == n[k]) at[k++] = 0;
        if (k == NP) break;
    }
    return best;
}

/* The schedules chosen on the search's plan (ah_planner_choose_schedules) against every
 * combination (when few enough): the same least iteration (1e-12), and the bound over any
 * schedule with the overlapped sync (ah_planner_space of the default options) below it. Returns
 * whether the combinations were enumerated. */
static int not_1f1b; /* plans whose best schedules are not all 1F1B */

static bool check_schedules(int i, const ah_planner_opts_t *o, const ah_plan_result_t *r, double *combos) {
    const double want = best_schedules(&r->plan, 3000, combos);
    if (isnan(want)) return false;
    ah_plan_result_t c = {0};
    ah_error_t e;
    CHECK(ah_plan_copy(&r->plan, &c.plan, &e) == AH_OK, "%s", e.msg);
    CHECK(ah_evaluate(&c.plan, NULL, &c.eval, &e) == AH_OK, "%s", e.msg);
    CHECK(ah_planner_choose_schedules(o, &c, &e) == AH_OK, "%s", e.msg);
    const double got = ah_planner_time_s(o, &c.eval);
    CHECK(fabs(got - want) <= 1e-12 * want, "instance %d: schedules chosen give %.17g, the best combination %.17g (%s)", i,
          got, want, c.schedule_why);
    CHECK(c.eval.feasible, "instance %d: the chosen schedules do not fit", i);
    for (int k = 0, any = 0; k < c.plan.n_pipelines && !any; k++)
        if ((any = c.plan.pipelines[k].schedule != AH_SCHED_1F1B)) not_1f1b++;
    CHECK(r->lower_bound_s <= want * (1 + 1e-12), "instance %d: the bound %.17g over any schedule is above %.17g", i,
          r->lower_bound_s, want);
    ah_plan_result_free(&c);
    return true;
}

/* ---- instances ---- */

static const ah_test_model_range_t model_range = {.heads = 4, .width_max = 4, .vocab_lo = 2, .vocab_hi = 8,
                                                  .max_pos = 256, .batch_lo = 1, .batch_hi = 8, .seq_unit = 64};

static void make_instance(int idx, ah_model_t *m, ah_cluster_t *c, ah_train_t *tr, int L) {
    ah_test_rand_model(&model_range, "rand", idx, L, m, tr);
    memset(c, 0, sizeof *c);
    c->n_types = ah_test_rnd_int(2, 3);
    c->types = calloc((size_t)c->n_types, sizeof *c->types);
    /* memory around the model's state so that memory binds: between a quarter and all of it */
    const double state_gib = (double)ah_model_params_total(m) * 16.0 / 1073741824.0;
    for (int k = 0; k < c->n_types; k++) {
        const double memory_gib = state_gib * ah_test_rnd_num(0.3, 1.5) + ah_test_rnd_num(0.0, 0.002);
        ah_test_rand_gpu_type(&c->types[k], k, memory_gib, 20, 400, 30);
    }
    c->n_nodes = ah_test_rnd_int(1, 3);
    ah_test_rand_nodes(c, (const int[]){1, 2, 4}, false, true);
}

/* What bound the pairs checked: [0, AH_Q_LIMITS) what bounds Q in the bubble term, then the
 * compute term, the group fill, the binding class's worst link (intra, inter-node, inter-zone),
 * the embedding's sync and the fill's p2p hops. */
enum { B_COMPUTE = AH_Q_LIMITS, B_GROUP_FILL, B_LINK, B_EMBED = B_LINK + 3, B_P2P, B_PACE, B_COUNT };
static int binds[B_COUNT];

/* The lower bound of every (t, m) is at most that (t, m)'s brute-force optimum (a stronger check
 * than the plan's bound, the least over the pairs, against the overall optimum); binds[] counts
 * what bound it. Returns how many pairs had a plan. */
static int check_bounds(int i, const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr,
                        double best_tm[9][9]) {
    int checked = 0;
    for (int t = 1; t <= 8; t++)
        for (int mb = 1; mb <= 8; mb++) {
            if (!isfinite(best_tm[t][mb])) continue;
            ah_train_t tm = *tr;
            tm.micro_batch = mb;
            ah_bound_terms_t why;
            const double lb = ah_planner_bound_terms(m, c, &tm, t, NULL, &why);
            CHECK_NEAR(lb, ah_planner_lower_bound(m, c, &tm, t, NULL), 0);
            binds[why.by_compute ? B_COMPUTE : why.by_group_fill ? B_GROUP_FILL : why.q_limit]++;
            if (why.link >= 0) binds[B_LINK + why.link]++;
            binds[B_EMBED] += why.sync_by_embedding;
            binds[B_P2P] += why.fill_p2p > 0;
            binds[B_PACE] += why.pace_p2p > 0;
            CHECK(lb <= best_tm[t][mb] * (1 + 1e-12), "instance %d, TP %d, micro-batch %d: bound %.17g above the optimum %.17g",
                  i, t, mb, lb, best_tm[t][mb]);
            if (getenv("AH_TEST_BOUNDS"))
                fprintf(stderr, "instance %d t %d m %d: bound %.6g optimum %.6g (%.1f%%) P %lld X %d link %d %s %d\n", i,
                        t, mb, lb, best_tm[t][mb], 100 * (best_tm[t][mb] / lb - 1), (long long)why.P, why.X, why.link,
                        why.by_compute ? "compute" : why.by_group_fill ? "group-fill" : "bubble", why.q_limit);
            checked++;
        }
    return checked;
}

/* AH_CLUSTER_SHORT=1: every SHORT_STRIDE-th instance (said on stdout); otherwise every one. */
static int instance_stride(void) {
    const char *s = getenv("AH_CLUSTER_SHORT");
    if (!s || strcmp(s, "1") != 0) return 1;
    printf("AH_CLUSTER_SHORT=1: every %dth instance; the counts are not checked\n", SHORT_STRIDE);
    return SHORT_STRIDE;
}

int main(void) {
    int solved = 0, feasible = 0, at_limit_gpus = 0, at_limit_layers = 0, bounds_checked = 0, sched_checked = 0;
    int hier_wins = 0, hier_found = 0; /* instances whose optimum takes the hierarchical sync; found by the planner */
    double total_plans = 0, total_combos = 0;
    const char *only = getenv("AH_TEST_ONLY");
    const int stride = instance_stride();
    for (int i = 0; i < INSTANCES; i++) {
        if ((only && atoi(only) != i) || i % stride) continue;
        ah_model_t m;
        ah_cluster_t c;
        ah_train_t tr;
        double plans = 0;
        ah_test_rnd_seed(0x9e3779b97f4a7c15ull, i);
        int L = ah_test_rnd_int(1, 12);
        const uint64_t seed = ah_test_rnd_state();
        for (;;) { /* same draw, fewer layers, until the brute force fits the budget */
            ah_test_rnd_restore(seed);
            make_instance(i, &m, &c, &tr, L);
            brute_force(&m, &c, &tr, true, &plans, NULL, NULL);
            if (plans <= BUDGET || L == 1) break;
            ah_cluster_free(&c);
            L--;
        }
        if (plans > BUDGET) { /* even one layer is too many plans: skip this draw */
            ah_cluster_free(&c);
            continue;
        }
        double best_tm[9][9];
        double want_ring;
        const double want = brute_force(&m, &c, &tr, false, &plans, best_tm, &want_ring);
        hier_wins += want < want_ring;
        bounds_checked += check_bounds(i, &m, &c, &tr, best_tm);
        total_plans += plans;
        ah_planner_opts_t o;
        ah_planner_opts_default(&o);
        o.train = tr;
        ah_plan_result_t r;
        ah_error_t err = {0};
        ah_status_t st = ah_planner_run(&m, &c, &o, &r, &err);
        solved++;
        if (ah_cluster_gpu_count(&c) == 8) at_limit_gpus++;
        if (L >= 10) at_limit_layers++;
        if (!isfinite(want)) {
            CHECK(st == AH_ERR_INFEASIBLE, "instance %d: brute force finds no plan, planner says %d (%s)", i, st,
                  err.msg);
        } else {
            feasible++;
            CHECK(st == AH_OK, "instance %d: planner failed: %s", i, err.msg);
            if (st == AH_OK) {
                /* the search's optimum; the emitted plan is it unless a baseline's replays faster */
                if (want == want_ring) CHECK_NEAR(r.search_best_s, want, 1e-12);
                if (want == want_ring && r.from_baseline < 0) CHECK_NEAR(r.eval.search_estimate_s, want, 1e-12);
                CHECK(r.search_best_s <= want_ring * (1 + 1e-12) && r.search_best_s >= want * (1 - 1e-12),
                      "instance %d: the planner's %.17g not within [%.17g, %.17g] (both syncs, the ring)", i,
                      r.search_best_s, want, want_ring);
                hier_found += want < want_ring && fabs(r.search_best_s - want) <= 1e-12 * want;
                CHECK_NEAR(r.search_value_s, r.eval.search_estimate_s, 1e-12);
                CHECK(r.exact, "instance %d: not searched exactly", i);
                CHECK(r.lower_bound_s <= r.search_best_s * (1 + 1e-12),
                      "instance %d: lower bound %.17g above the optimum %.17g", i, r.lower_bound_s, r.search_best_s);
                ah_error_t e2;
                CHECK(ah_plan_check(&r.plan, NULL, &e2) == AH_OK, "instance %d: plan does not check: %s", i,
                      e2.msg);
                double combos = 0;
                if (check_schedules(i, &o, &r, &combos)) sched_checked++, total_combos += combos;
                if (only) {
                    json_t *j = ah_plan_to_json(&r.plan);
                    char *txt = json_dumps(j, JSON_COMPACT);
                    fprintf(stderr, "planner %.17g: %s\n", r.eval.pred.iteration_s, txt);
                    free(txt);
                    json_decref(j);
                }
                if (fabs(r.search_best_s - want) > 1e-12 * want)
                    fprintf(stderr, "instance %d: L=%d gpus=%d types=%d B=%lld: planner %.17g brute %.17g\n", i, L,
                            ah_cluster_gpu_count(&c), c.n_types, (long long)tr.global_batch,
                            r.search_best_s, want);
            }
        }
        if (st == AH_OK) ah_plan_result_free(&r);
        ah_cluster_free(&c);
    }
    printf("%d instances (%d feasible, %d with 8 GPUs, %d with >= 10 layers), %.0f plans brute-forced, the bound "
           "checked on %d (TP, micro-batch) pairs\n",
           solved, feasible, at_limit_gpus, at_limit_layers, total_plans, bounds_checked);
    printf("the hierarchical sync: the optimum on %d instances, the planner's plan is it on %d\n", hier_wins, hier_found);
    static const char *what[B_COUNT] = {"the groups' rate", "the head", "the best one pipeline",
                                        "the pooled pipelines", "the two pipelines' split", "the compute term", "the group fill", "intra-node", "inter-node",
                                        "inter-zone", "the embedding's sync", "the fill's p2p", "the hops' pace"};
    printf("schedules: the choice on %d plans equals the best of every combination of schedules, virtual-stage "
           "counts and recomputation (%.0f combinations evaluated; %d plans not all 1F1B)\n", sched_checked, total_combos,
           not_1f1b);
    if (stride > 1) return ah_test_finish(); /* the counts are the full run's claim */
    CHECK(sched_checked >= 20, "schedules checked on only %d plans", sched_checked);
    CHECK(not_1f1b >= 5, "only %d plans choose a schedule other than 1F1B: the choice is barely tested", not_1f1b);
    printf("what bound them (each checked against its brute-force optimum above):");
    for (int k = 0; k < B_COUNT; k++) {
        printf(" %s %d%s", what[k], binds[k], k + 1 < B_COUNT ? "," : "\n");
        /* Every scope's DP term admits a group inside one node (its own ring, plan/dp_price.h),
         * whatever links the plan's other groups and hops cross, so the whole cluster's scope,
         * which has every group and the fastest links, is never above a node's or a zone's: those
         * two are still computed (and would bind only on a tie) but no longer set the bound. */
        if (k == B_LINK + AH_LINK_INTRA || k == B_LINK + AH_LINK_INTER_NODE) continue;
        CHECK(binds[k] > 0, "no pair's bound was set by %s: that term is never tested", what[k]);
    }
    CHECK(solved >= 50, "only %d instances", solved);
    CHECK(feasible >= 40, "only %d feasible instances", feasible);
    CHECK(at_limit_gpus >= 3 && at_limit_layers >= 3, "too few instances at the limits (%d, %d)", at_limit_gpus,
          at_limit_layers);
    return ah_test_finish();
}
