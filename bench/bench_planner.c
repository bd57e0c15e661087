/* Planner benchmark (not a test; never fails on a timing).
 *
 * 1. Planning time for 8, 64, 512 and 4096 GPUs of three types (A100-80G / H800 / H20; 8-GPU
 *    nodes, a third of the nodes of each type, H20 in a second zone; the 8-GPU cluster is one node
 *    of each type with 4 / 2 / 2 GPUs) for llama2-70b and gpt3-175b, global batch 1024 x 2048
 *    tokens, bf16, micro-batch auto, as autohet plan runs it (ah_planner_run_sharded: the
 *    schedules chosen per pipeline, --schedule auto). Prints the plan's iteration with the DP sync
 *    overlapped (ah_planner_time_s: what the planner compares), the same planner under --schedule
 *    1f1b and the ratio, the lower bound over any schedule and the plan's gap to it, the search
 *    mode, and the speedup over the three baselines (uniform, batch-balanced, megatron-best: the
 *    upgraded one, interleaved where faster), all with the DP sync overlapped. The planning time is
 *    the auto run's, baselines included.
 * 2. With GLPK (AH_HAVE_GLPK): the per-pipeline subproblem the planner solves by DP — layer split
 *    and recomputation per stage of a fixed pipeline for a fixed micro-batch count, minimising
 *    sum_s c_s + (n-1) max_s c_s under memory — also solved as an integer program, side by side:
 *    both optima and both times. (The whole plan as one integer program is not attempted.)
 *
 * Usage: bench_planner [--quick]   (--quick: skip 4096 GPUs) */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/planner.h"
#ifdef AH_HAVE_GLPK
#include <glpk.h>
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *TYPES[3] = {"A100-80G", "H800", "H20"};
static const double PRICE[3] = {1.8, 2.6, 1.1};

static void make_cluster(int gpus, ah_cluster_t *c) {
    memset(c, 0, sizeof *c);
    c->n_types = 3;
    c->types = calloc(3, sizeof *c->types);
    for (int k = 0; k < 3; k++) c->types[k] = *ah_gpu_catalog_find(TYPES[k]);
    const int nodes = gpus == 8 ? 3 : gpus / 8;
    c->n_nodes = nodes;
    c->nodes = calloc((size_t)nodes, sizeof *c->nodes);
    for (int i = 0; i < nodes; i++) {
        ah_node_t *n = &c->nodes[i];
        n->type = gpus == 8 ? i : i * 3 / nodes;
        n->count = gpus == 8 ? (i == 0 ? 4 : 2) : 8;
        snprintf(n->name, sizeof n->name, "%s-%d", TYPES[n->type], i);
        snprintf(n->zone, sizeof n->zone, "%s", n->type == 2 ? "b" : "a");
        n->usd_per_gpu_hour = PRICE[n->type];
    }
    c->net.inter_node_gb_s = 25;
    c->net.inter_zone_gb_s = 5;
    c->net.latency_us = 10;
    c->net.inter_zone_latency_us = 100;
    c->net.intra_latency_us = 2;
    c->net.cloud_gb_s = 1;
}

static void plan_row(const char *model_name, int gpus) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    if (ah_model_load(model_name, &m, &err) != AH_OK) {
        printf("%s\n", err.msg);
        return;
    }
    make_cluster(gpus, &c);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 1024;
    o.train.seq_len = 2048;
    ah_plan_result_t r, only;
    double t0 = now_s();
    ah_status_t st = ah_planner_run_sharded(&m, &c, &o, false, &r, &err);
    double dt = now_s() - t0;
    o.schedule = AH_SCHEDULE_ONLY_1F1B;
    if (st == AH_OK && (st = ah_planner_run_sharded(&m, &c, &o, false, &only, &err)) != AH_OK) ah_plan_result_free(&r);
    if (st != AH_OK) {
        printf("%-11s %5d  %8.3f s  no plan: %.90s...\n", model_name, gpus, dt, err.msg);
        ah_cluster_free(&c);
        return;
    }
    double sp[AH_BASELINE_COUNT]; /* the planner ran the baselines (its planning time includes them) */
    for (int k = 0; k < AH_BASELINE_COUNT; k++)
        sp[k] = r.baselines[k].ok ? ah_planner_time_s(&o, &r.baselines[k].r.eval) / ah_planner_time_s(&o, &r.eval) : NAN;
    const double t = ah_planner_time_s(&o, &r.eval), t1 = ah_planner_time_s(&o, &only.eval);
    printf("%-11s %5d  %8.3f s  %9.3f s  %9.3f s  %5.3fx  %9.3f s  %6.1f%%  %-8s  tp %d mb %lld P %-4d  %5.2fx  %5.2fx  "
           "%5.2fx\n", model_name, gpus, dt, t, t1, t1 / t, r.lower_bound_s, 100 * (t / r.lower_bound_s - 1),
           r.exact ? "exact" : "template", r.plan.tp, (long long)r.plan.train.micro_batch, r.plan.n_pipelines, sp[0],
           sp[1], sp[2]);
    ah_plan_result_free(&r);
    ah_plan_result_free(&only);
    ah_cluster_free(&c);
}

#ifdef AH_HAVE_GLPK
/* The split subproblem as an integer program: x[s][nb][r] binary, one per stage, blocks sum to
 * L, M >= every stage's cost; minimise sum cost + (n-1) M. Infeasible options are left out. */
static double glpk_split(ah_sctx_t *x, int S, const int *ty, int64_t n) {
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    const int L = x->L;
    glp_add_rows(lp, S + 1 + S); /* S one-hot, 1 block sum, S max rows */
    for (int s = 0; s < S; s++) glp_set_row_bnds(lp, s + 1, GLP_FX, 1, 1);
    glp_set_row_bnds(lp, S + 1, GLP_FX, L, L);
    for (int s = 0; s < S; s++) glp_set_row_bnds(lp, S + 2 + s, GLP_LO, 0, 0); /* M - cost_s >= 0 */
    int Mcol = glp_add_cols(lp, 1);
    glp_set_col_bnds(lp, Mcol, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, Mcol, (double)(n - 1));
    int cap = S * L * 2 * 3 + S + 1;
    int *ia = malloc(sizeof(int) * (size_t)(cap + 1)), *ja = malloc(sizeof(int) * (size_t)(cap + 1));
    double *ar = malloc(sizeof(double) * (size_t)(cap + 1));
    int ne = 0;
    for (int s = 0; s < S; s++) {
        ia[++ne] = S + 2 + s;
        ja[ne] = Mcol;
        ar[ne] = 1;
    }
    for (int s = 0; s < S; s++) {
        const int kind = ah_stage_kind(s, S);
        const int64_t inflight = ah_inflight(S, s, n);
        for (int nb = 1; nb <= L; nb++)
            for (int r = 0; r < 2; r++) {
                size_t i = ah_sctx_index(x, ty[s], kind, nb, r);
                if (ah_stage_memory_bytes(&x->sc[i], inflight) > x->capacity[ty[s]]) continue;
                int col = glp_add_cols(lp, 1);
                glp_set_col_kind(lp, col, GLP_BV);
                glp_set_obj_coef(lp, col, x->fb[i]);
                ia[++ne] = s + 1, ja[ne] = col, ar[ne] = 1;
                ia[++ne] = S + 1, ja[ne] = col, ar[ne] = nb;
                ia[++ne] = S + 2 + s, ja[ne] = col, ar[ne] = -x->fb[i];
            }
    }
    glp_load_matrix(lp, ne, ia, ja, ar);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.mip_gap = 0;
    double v = INFINITY;
    if (glp_intopt(lp, &parm) == 0 && glp_mip_status(lp) == GLP_OPT) v = glp_mip_obj_val(lp);
    glp_delete_prob(lp);
    free(ia);
    free(ja);
    free(ar);
    return v;
}

static void glpk_rows(void) {
    printf("\nper-pipeline split subproblem: DP (planner) vs integer program (GLPK), same optimum?\n");
    printf("%-11s %-28s %4s  %14s %10s  %14s %10s  %s\n", "model", "pipeline (TP 8)", "n", "DP optimum", "DP time",
           "GLPK optimum", "GLPK time", "rel. diff");
    struct {
        const char *model;
        int S;
        int ty[8];
        int64_t n;
    } cases[] = {
        {"llama2-70b", 2, {2, 2}, 8},
        {"llama2-70b", 3, {2, 0, 1}, 16},
        {"llama2-70b", 4, {2, 0, 0, 1}, 32},
        {"gpt3-175b", 5, {2, 2, 0, 0, 1}, 16},
        {"gpt3-175b", 6, {2, 0, 0, 1, 1, 1}, 64},
    };
    ah_cluster_t c;
    make_cluster(64, &c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ah_model_t m;
        ah_error_t err;
        ah_model_load(cases[i].model, &m, &err);
        ah_train_t tr = {.global_batch = 1024, .seq_len = 2048, .micro_batch = 1, .precision = AH_PREC_BF16};
        ah_sctx_t x;
        if (ah_sctx_init(&x, &m, &c, &tr, 8, NULL, &err) != AH_OK) continue;
        double t0 = now_s();
        ah_pentry_t *e = ah_pipe_get(&x, cases[i].S, cases[i].ty, NULL);
        double dp = e ? ah_pipe_time(&x, e, cases[i].n) : NAN;
        double t1 = now_s();
        double ip = glpk_split(&x, cases[i].S, cases[i].ty, cases[i].n);
        double t2 = now_s();
        char name[64] = "";
        for (int s = 0; s < cases[i].S; s++)
            snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", s ? "," : "", TYPES[cases[i].ty[s]]);
        printf("%-11s %-28s %4lld  %14.9f %8.2f ms  %14.9f %8.2f ms  %.1e\n", cases[i].model, name,
               (long long)cases[i].n, dp, (t1 - t0) * 1e3, ip, (t2 - t1) * 1e3,
               isfinite(dp) && isfinite(ip) ? fabs(dp - ip) / ip : NAN);
        ah_sctx_free(&x);
    }
    ah_cluster_free(&c);
}
#endif

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    printf("autohet planner benchmark: global batch 1024 x 2048 tokens, bf16, micro-batch auto\n");
    printf("%-11s %5s  %10s  %11s  %11s  %6s  %11s  %7s  %-8s  %-18s  %6s  %6s  %6s\n", "model", "GPUs", "planning",
           "iteration", "1F1B only", "x", "lower bnd", "gap", "search", "plan", "vs uni", "vs bal", "vs mb");
    const int sizes[] = {8, 64, 512, 4096};
    const char *models[] = {"llama2-70b", "gpt3-175b"};
    for (int mi = 0; mi < 2; mi++)
        for (int si = 0; si < 4; si++)
            if (!(quick && sizes[si] == 4096)) plan_row(models[mi], sizes[si]);
#ifdef AH_HAVE_GLPK
    glpk_rows();
#else
    printf("\n(built without GLPK: no integer-program comparison)\n");
#endif
    return 0;
}
