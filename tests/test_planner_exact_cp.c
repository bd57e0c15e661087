/* The planner's per-pipeline context parallelism is exact (issue 38; docs/planner.md "Context
 * parallelism"): on random small instances (<= 8 GPUs, 1-2 GPU types, <= 4 layers, sequences of
 * 128-512 tokens, memory set so that activations bind, fixed seeds) a brute force over every
 * per-pipeline assignment of CP degrees {1, 2, 4, 8} x the search space finds the same least
 * iteration time (the search's closed form, ah_eval_t.search_estimate_s; 1e-12 relative) as the
 * search run with every degree open (ah_planner_opts_t.cp_per_pipeline), whose plan checks. Where
 * nothing fits unsplit, --cp auto (ah_planner_run_cp) returns that optimum too.
 *
 * The brute force enumerates, for every TP degree t and micro-batch size (divisors of the global
 * batch up to 8): every multiset of pipelines, a pipeline a CP degree c and an ordered sequence of
 * nodes (at most L stages), each stage c TP groups of its node, within each node's groups; every
 * split of the micro-batches (>= 1 per pipeline); every layer split (>= 1 block per stage) and
 * recompute flag per stage; each plan built and scored with ah_evaluate. It shares nothing with the
 * planner but the cost model. One assumption it shares with the search, stated: the groups of one
 * node are interchangeable (ah_evaluate sees a stage through its node, type and the links between
 * nodes; tests/test_planner_exact.c enumerates groups one by one without CP and checks it).
 *
 * A last, fixed instance is test_plan_cp_choice.sh's 4 memory-poor and 2 rich devices at 4096
 * tokens, whose optimum gives the types different degrees (the poor ones' to fit).
 *
 * Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage) every SHORT_STRIDE-th instance; the counts are
 * the full run's claim. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "harness.h"
#include "plan/evaluate.h"
#include "planner/planner.h"
#include "rand_instance.h"

#define INSTANCES 40
#define BUDGET 40000.0 /* plans the brute force may score per instance */
#define SHORT_STRIDE 4
#define MAX_PIPES 64

/* A pipeline shape: its CP degree and nodes. */
typedef struct {
    int cp, S, node[8];
} shape_t;

typedef struct {
    const ah_model_t *m;
    const ah_cluster_t *c;
    ah_train_t train;
    int t, L;
    int groups[8]; /* TP groups per node */
    shape_t *shapes;
    int n_shapes, cap_shapes;
    int sel[16], P;
    bool count_only;
    double plans, best;
    int best_cp_max, best_mixed; /* the best plan's largest CP degree, whether its degrees differ */
} bf_t;

static void add_shape(bf_t *b, const shape_t *s) {
    if (b->n_shapes == b->cap_shapes) {
        b->cap_shapes = b->cap_shapes ? 2 * b->cap_shapes : 64;
        b->shapes = realloc(b->shapes, sizeof *b->shapes * (size_t)b->cap_shapes);
        if (!b->shapes) abort();
    }
    b->shapes[b->n_shapes++] = *s;
}

/* Every node sequence of CP degree s->cp extending s (used: groups taken per node). */
static void gen_shapes(bf_t *b, shape_t *s, int *used) {
    if (s->S > 0) add_shape(b, s);
    if (s->S == b->L) return;
    for (int n = 0; n < b->c->n_nodes; n++)
        if (used[n] + s->cp <= b->groups[n]) {
            used[n] += s->cp;
            s->node[s->S++] = n;
            gen_shapes(b, s, used);
            s->S--;
            used[n] -= s->cp;
        }
}

/* The compositions of L into S parts >= 1 (S - 1 cut points among L - 1), into comp[n * S + k]. */
static int compositions(int L, int S, int *comp) {
    int n = 0;
    for (int mask = 0; mask < 1 << (L - 1); mask++) {
        if (__builtin_popcount((unsigned)mask) != S - 1) continue;
        for (int i = 1, k = 0, last = 0; i <= L; i++)
            if (i == L || (mask & (1 << (i - 1)))) {
                comp[n * S + k++] = i - last;
                last = i;
            }
        n++;
    }
    return n;
}

/* Every layer split and recompute choice of every pipeline of plan. */
static void score_splits(bf_t *b, ah_plan_t *plan) {
    static int comp[9][8 * 8];
    int n_comp[9], o[16] = {0}, opts[16];
    for (int S = 1; S <= b->L; S++) n_comp[S] = compositions(b->L, S, comp[S]);
    for (int p = 0; p < b->P; p++) opts[p] = n_comp[plan->pipelines[p].n_stages] << plan->pipelines[p].n_stages;
    for (;;) {
        for (int p = 0; p < b->P; p++) {
            const int S = plan->pipelines[p].n_stages, ci = o[p] >> S;
            for (int s = 0, first = 0; s < S; s++) {
                ah_stage_t *sg = &plan->pipelines[p].stages[s];
                sg->first = first;
                sg->last = first += comp[S][ci * S + s];
                sg->recompute = (o[p] >> s) & 1;
            }
        }
        ah_eval_t e;
        ah_error_t err;
        if (ah_evaluate(plan, NULL, &e, &err) != AH_OK) abort();
        b->plans++;
        if (e.feasible && e.search_estimate_s < b->best) {
            b->best = e.search_estimate_s;
            b->best_cp_max = 1;
            b->best_mixed = 0;
            for (int p = 0; p < b->P; p++) {
                const int c = ah_pipeline_cp(&plan->pipelines[p]);
                if (c > b->best_cp_max) b->best_cp_max = c;
                if (c != ah_pipeline_cp(&plan->pipelines[0])) b->best_mixed = 1;
            }
        }
        ah_eval_free(&e);
        int p = 0;
        while (p < b->P && ++o[p] == opts[p]) o[p++] = 0;
        if (p == b->P) break;
    }
}

static void distribute(bf_t *b, ah_plan_t *plan, int p, int64_t left) {
    if (p == b->P - 1) {
        plan->pipelines[p].micro_batches = left;
        score_splits(b, plan);
        return;
    }
    for (int64_t v = 1; v <= left - (b->P - 1 - p); v++) {
        plan->pipelines[p].micro_batches = v;
        distribute(b, plan, p + 1, left - v);
    }
}

/* The selected pipelines at micro-batch size mb: counted, or built and scored. */
static void score_set_m(bf_t *b, int64_t mb) {
    const int64_t N = b->train.global_batch / mb;
    if (b->P > N) return;
    if (b->count_only) {
        double ways = 1, per = 1;
        for (int i = 0; i < b->P - 1; i++) ways = ways * (double)(N - 1 - i) / (double)(i + 1);
        for (int p = 0; p < b->P; p++) {
            const int S = b->shapes[b->sel[p]].S;
            double comps = 1; /* C(L - 1, S - 1) */
            for (int i = 0; i < S - 1; i++) comps = comps * (double)(b->L - 1 - i) / (double)(i + 1);
            per *= comps * (double)(1 << S);
        }
        b->plans += ways * per;
        return;
    }
    ah_train_t tr = b->train;
    tr.micro_batch = mb;
    ah_plan_t plan;
    ah_error_t err;
    if (ah_plan_init(&plan, b->m, &tr, b->t, b->c, b->P, &err) != AH_OK) abort();
    int used[8] = {0};
    for (int p = 0; p < b->P; p++) {
        const shape_t *sh = &b->shapes[b->sel[p]];
        if (ah_pipeline_alloc(&plan.pipelines[p], sh->S, &err) != AH_OK) abort();
        if (sh->cp > 1) plan.pipelines[p].cp = sh->cp;
        for (int s = 0; s < sh->S; s++) {
            ah_stage_t *sg = &plan.pipelines[p].stages[s];
            const int n = sh->node[s], g = used[n];
            used[n] += sh->cp;
            sg->type = b->c->nodes[n].type;
            for (int k = 0; k < b->t * sh->cp; k++) sg->devices[k] = (ah_device_ref_t){n, g * b->t + k};
        }
    }
    distribute(b, &plan, 0, N);
    ah_plan_free(&plan);
}

/* Multisets of shapes (nondecreasing index) within the nodes' groups. */
static void choose(bf_t *b, int start, int *used) {
    for (int i = start; i < b->n_shapes && b->P < 16; i++) {
        const shape_t *sh = &b->shapes[i];
        bool fits = true;
        for (int s = 0; s < sh->S; s++) fits &= (used[sh->node[s]] += sh->cp) <= b->groups[sh->node[s]];
        if (fits) {
            b->sel[b->P++] = i;
            if (b->train.micro_batch > 0) score_set_m(b, b->train.micro_batch);
            else
                for (int64_t mb = 1; mb <= 8 && mb <= b->train.global_batch; mb++)
                    if (b->train.global_batch % mb == 0) score_set_m(b, mb);
            choose(b, i, used);
            b->P--;
        }
        for (int s = 0; s < sh->S; s++) used[sh->node[s]] -= sh->cp;
    }
}

static double brute_force(bf_t *b, const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr, bool count_only) {
    b->m = m;
    b->c = c;
    b->train = *tr;
    b->L = (int)m->n_layer;
    b->count_only = count_only;
    b->best = INFINITY;
    b->plans = 0;
    for (int t = 1; t <= 8; t++) {
        ah_error_t err;
        if (ah_model_check_tp(m, t, &err) != AH_OK) continue;
        b->t = t;
        b->n_shapes = 0;
        for (int n = 0; n < c->n_nodes; n++) b->groups[n] = c->nodes[n].count / t;
        for (int cp = 1; cp <= 8; cp *= 2) {
            shape_t s = {.cp = cp};
            int used[8] = {0};
            gen_shapes(b, &s, used);
        }
        int used[8] = {0};
        choose(b, 0, used);
    }
    return b->best;
}

static const ah_test_model_range_t model_range = {.heads = 2, .width_max = 1, .vocab_lo = 1, .vocab_hi = 4,
                                                  .max_pos = 512, .batch_lo = 2, .batch_hi = 4, .seq_unit = 128};

static void make_instance(int idx, ah_model_t *m, ah_cluster_t *c, ah_train_t *tr, int L) {
    ah_test_rand_model(&model_range, "rand-cp", idx, L, m, tr);
    memset(c, 0, sizeof *c);
    c->n_types = ah_test_rnd_int(1, 3) > 1 ? 2 : 1;
    c->types = calloc((size_t)c->n_types, sizeof *c->types);
    /* memory: the state and a share of one unsplit micro-batch's activations, so CP matters */
    const double state = (double)ah_model_params_total(m) * 16.0;
    const double act = (double)L * (double)ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, 1, 1, tr->seq_len, 1, tr->precision,
                                                                 false);
    for (int k = 0; k < c->n_types; k++) {
        const double bytes = state * ah_test_rnd_num(0.4, 1.2) +
                             act * (k ? ah_test_rnd_num(0.5, 3) : ah_test_rnd_num(0.05, 0.6));
        /* compute well above the links' latency */
        ah_test_rand_gpu_type(&c->types[k], k, bytes / 1073741824.0, 1, 20, 5);
    }
    c->n_nodes = c->n_types == 2 ? 2 : ah_test_rnd_int(1, 2);
    /* with two types, poor and rich nodes side by side */
    ah_test_rand_nodes(c, (const int[]){2, 4, 4}, true, false);
}

/* Instance INSTANCES (last): test_plan_cp_choice.sh's memory-poor and rich devices, where the
 * optimum gives the two types' pipelines different degrees. */
static void fixed_instance(ah_model_t *m, ah_cluster_t *c, ah_train_t *tr) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "llama-2x32");
    m->arch = AH_ARCH_LLAMA;
    m->n_layer = 2;
    m->n_head = m->n_kv_head = 2;
    m->d_model = 32;
    m->d_ff = 64;
    m->vocab = 256;
    m->max_pos = 4096;
    m->norm_eps = 1e-5;
    m->rope_theta = 10000.0;
    *tr = (ah_train_t){.global_batch = 4, .seq_len = 4096, .micro_batch = 0, .precision = AH_PREC_FP32};
    ah_error_t err;
    const char *text =
        "{\"gpu_types\": {\"poor\": {\"tflops\": {\"fp32\": 0.05}, \"mem_bw_gb_s\": 10, \"intra_node_gb_s\": 5,"
        "  \"emulate\": {\"slowdown\": 1, \"memory_mib\": 96}},"
        " \"rich\": {\"tflops\": {\"fp32\": 0.05}, \"mem_bw_gb_s\": 10, \"intra_node_gb_s\": 5,"
        "  \"emulate\": {\"slowdown\": 1, \"memory_mib\": 1024}}},"
        " \"nodes\": [{\"name\": \"p0\", \"gpu\": \"poor\", \"count\": 4}, {\"name\": \"r0\", \"gpu\": \"rich\", \"count\": 2}]}";
    if (ah_test_parse_cluster(text, c, &err) != AH_OK) abort();
}

int main(void) {
    const char *short_run = getenv("AH_CLUSTER_SHORT"), *only = getenv("AH_TEST_ONLY");
    const int stride = short_run && strcmp(short_run, "1") == 0 ? SHORT_STRIDE : 1;
    if (stride > 1) printf("AH_CLUSTER_SHORT=1: every %dth instance; the counts are not checked\n", stride);
    int solved = 0, feasible = 0, with_cp = 0, mixed = 0, auto_checked = 0;
    double total_plans = 0;
    bf_t b = {0};
    for (int i = 0; i <= INSTANCES; i++) {
        if ((only && atoi(only) != i) || (i % stride && i < INSTANCES)) continue;
        ah_model_t m;
        ah_cluster_t c;
        ah_train_t tr;
        ah_test_rnd_seed(0x51ed270b27a3c9f1ull, i);
        int L = ah_test_rnd_int(1, 4);
        const uint64_t seed = ah_test_rnd_state();
        for (bool fixed = i == INSTANCES; fixed; fixed = false) {
            fixed_instance(&m, &c, &tr);
            brute_force(&b, &m, &c, &tr, true);
            L = 2;
        }
        for (; i < INSTANCES;) { /* same draw, fewer layers, until the brute force fits the budget */
            ah_test_rnd_restore(seed);
            make_instance(i, &m, &c, &tr, L);
            brute_force(&b, &m, &c, &tr, true);
            if (b.plans <= BUDGET || L == 1) break;
            ah_cluster_free(&c);
            L--;
        }
        if (b.plans > BUDGET) {
            ah_cluster_free(&c);
            continue;
        }
        const double want = brute_force(&b, &m, &c, &tr, false);
        total_plans += b.plans;
        solved++;
        ah_planner_opts_t o;
        ah_planner_opts_default(&o);
        o.train = tr;
        o.cp_per_pipeline = 0xE;
        ah_plan_result_t r;
        ah_error_t err = {0};
        const ah_status_t st = ah_planner_run(&m, &c, &o, &r, &err);
        if (i == INSTANCES) CHECK(b.best_mixed, "the poor and rich devices' optimum has one CP degree");
        if (!isfinite(want)) {
            CHECK(st == AH_ERR_INFEASIBLE, "instance %d: brute force finds no plan, planner says %d (%s)", i, st, err.msg);
        } else {
            feasible++;
            with_cp += b.best_cp_max > 1;
            mixed += b.best_mixed;
            CHECK(st == AH_OK, "instance %d: planner failed: %s", i, err.msg);
            if (st == AH_OK) {
                CHECK(fabs(r.search_best_s - want) <= 1e-12 * want,
                      "instance %d (L %d, %d GPUs): search %.17g, brute force %.17g (its best's CP up to %d%s)", i, L,
                      ah_cluster_gpu_count(&c), r.search_best_s, want, b.best_cp_max, b.best_mixed ? ", mixed" : "");
                if (r.from_baseline < 0) CHECK_NEAR(r.eval.search_estimate_s, want, 1e-12);
                CHECK(r.exact, "instance %d: not searched exactly", i);
                CHECK(r.lower_bound_s == 0, "instance %d: a bound %.17g claimed over CP plans", i, r.lower_bound_s);
                ah_error_t e2;
                CHECK(ah_plan_check(&r.plan, NULL, &e2) == AH_OK, "instance %d: plan does not check: %s", i, e2.msg);
            }
            /* where nothing fits unsplit, --cp auto weighs CP and returns the search's optimum */
            ah_planner_opts_t o1 = o;
            o1.cp_per_pipeline = 0;
            ah_plan_result_t r1, ra;
            const bool plain = ah_planner_run(&m, &c, &o1, &r1, &err) == AH_OK;
            if (plain) ah_plan_result_free(&r1);
            if (!plain && st == AH_OK) {
                CHECK(ah_planner_run_cp(&m, &c, &o1, false, &ra, &err) == AH_OK, "instance %d: --cp auto: %s", i, err.msg);
                CHECK(fabs(ra.search_best_s - want) <= 1e-12 * want, "instance %d: --cp auto %.17g, optimum %.17g", i,
                      ra.search_best_s, want);
                CHECK(strstr(ra.cp_why, "searched exactly") && strstr(ra.cp_why, "nothing fits unsplit"),
                      "instance %d: --cp auto says \"%s\"", i, ra.cp_why);
                auto_checked++;
                ah_plan_result_free(&ra);
            }
        }
        if (st == AH_OK) ah_plan_result_free(&r);
        ah_cluster_free(&c);
    }
    free(b.shapes);
    printf("%d instances (%d feasible; the optimum splits the sequence in %d, with degrees differing between "
           "pipelines in %d), %.0f plans brute-forced; --cp auto checked on %d where nothing fits unsplit\n",
           solved, feasible, with_cp, mixed, total_plans, auto_checked);
    if (stride > 1) return ah_test_finish();
    CHECK(solved >= 30 && feasible >= 20, "only %d instances, %d feasible", solved, feasible);
    CHECK(with_cp >= 5 && mixed >= 2, "CP barely tested: %d optima split, %d mixed", with_cp, mixed);
    CHECK(auto_checked >= 2, "--cp auto checked on %d instances", auto_checked);
    return ah_test_finish();
}
