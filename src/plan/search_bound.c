/* The planner's lower bound (ah_planner_lower_bound, planner.h): what every plan of one (t, m)
 * must pay — compute with its TP communication, the 1F1B bubble implied by the fewest stages that
 * fit in memory, DP sync on the best link its size allows and the optimizer step. docs/planner.md
 * ("What the search guarantees") proves each term; tests/test_planner_exact.c checks it against
 * the brute-force optimum. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdint.h>

#include "plan/planner.h"

/* The most blocks one stage can hold on any group of the cluster: its memory with one micro-batch
 * in flight (the fewest any stage has), any kind, the cheaper recompute choice; 0 when not even one
 * block fits anywhere. Memory grows with the block count, so bisection finds each type's most. */
static int most_blocks_per_stage(const ah_cost_ctx_t *ctx, int L) {
    const ah_cluster_t *c = ctx->cluster;
    int most = 0;
    for (int ty = 0; ty < c->n_types; ty++) {
        bool present = false;
        for (int i = 0; i < c->n_nodes && !present; i++)
            present = c->nodes[i].type == ty && ah_node_groups(c, i, ctx->t, ctx->train->precision) > 0;
        if (!present) continue;
        const int64_t cap = ah_gpu_capacity_bytes(&c->types[ty]);
        for (int kind = 0; kind < 4; kind++) {
            int lo = 0, hi = L; /* lo fits (0 blocks counts as fitting), find the largest */
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                bool fits = false;
                for (int rc = 0; rc < 2 && !fits; rc++) {
                    ah_stage_cost_t sc;
                    ah_stage_cost(ctx, ty, 0, mid, kind & 1, (kind & 2) != 0, rc, &sc);
                    fits = ah_stage_memory_bytes(&sc, 1) <= cap;
                }
                if (fits) lo = mid;
                else hi = mid - 1;
            }
            if (lo > most) most = lo;
        }
    }
    return most;
}

/* span[k]: the most TP groups within one link kind k (one node, one zone, the whole cluster). */
static void link_spans(const ah_cluster_t *c, int t, ah_precision_t prec, int64_t span[3]) {
    span[0] = span[1] = span[2] = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const int g = ah_node_groups(c, i, t, prec);
        span[0] = g > span[0] ? g : span[0];
        span[2] += g;
        int64_t zone = 0; /* groups in node i's zone, counted at its first node */
        bool first = true;
        for (int j = 0; j < c->n_nodes && first; j++) {
            const bool same_zone = ah_link_between(c, i, j) != AH_LINK_INTER_ZONE;
            if (j < i && same_zone) first = false;
            else if (j >= i && same_zone) zone += ah_node_groups(c, j, t, prec);
        }
        if (first) span[1] = zone > span[1] ? zone : span[1];
    }
}

/* The fastest bandwidth and least latency of link kind k (intra-node: the best type's). */
static void link_best(const ah_cluster_t *c, ah_link_t k, double *bw, double *lat) {
    *bw = 0;
    for (int ty = 0; ty < c->n_types; ty++) *bw = fmax(*bw, ah_link_bw(c, k, ty, ty));
    *lat = ah_link_latency(c, k);
}

/* Blocks per second of the U fastest TP groups: rate[] and count[] per type, in decreasing rate. */
static double top_rate(const double *rate, const int *count, int n, int64_t U) {
    double r = 0;
    for (int i = 0; i < n && U > 0; i++) {
        const int64_t take = count[i] < U ? count[i] : U;
        r += (double)take * rate[i];
        U -= take;
    }
    return r;
}

double ah_planner_lower_bound(const ah_model_t *model, const ah_cluster_t *cluster,
                              const ah_train_t *train, int t, const ah_profile_t *profile) {
    const ah_cost_ctx_t ctx = {model, cluster, train, t, profile};
    const int L = (int)model->n_layer, nt = cluster->n_types;
    const int64_t N = train->global_batch / train->micro_batch;
    double fastest = INFINITY, opt_per_param = INFINITY, rate[nt > 0 ? nt : 1];
    int count[nt > 0 ? nt : 1], G = 0;
    for (int ty = 0; ty < nt; ty++) count[ty] = 0;
    for (int i = 0; i < cluster->n_nodes; i++) count[cluster->nodes[i].type] += ah_node_groups(cluster, i, t,
                                                                                                train->precision);
    for (int ty = 0; ty < nt; ty++) {
        rate[ty] = 0;
        if (count[ty] == 0) continue;
        ah_stage_cost_t sc;
        ah_stage_cost(&ctx, ty, 0, 1, false, false, false, &sc);
        rate[ty] = 1 / (sc.fwd_s + sc.bwd_s);
        fastest = fmin(fastest, sc.fwd_s + sc.bwd_s);
        opt_per_param = fmin(opt_per_param, ah_optimizer_seconds(&ctx, ty, 1 << 20) / (1 << 20));
        G += count[ty];
    }
    if (G == 0) return INFINITY;
    for (int i = 1; i < nt; i++) /* types by decreasing rate, for top_rate */
        for (int j = i; j > 0 && rate[j] > rate[j - 1]; j--) {
            const double r = rate[j];
            const int n = count[j];
            rate[j] = rate[j - 1], count[j] = count[j - 1];
            rate[j - 1] = r, count[j - 1] = n;
        }
    /* compute: a group's busy time is at most T (1F1B: n * max stage time <= T_pipe) */
    const double compute = (double)N * L / top_rate(rate, count, nt, G);
    const int per_stage = most_blocks_per_stage(&ctx, L);
    const int S0 = per_stage > 0 ? (L + per_stage - 1) / per_stage : INT32_MAX; /* fewest stages that fit */
    if (S0 > G) return compute; /* nothing fits at this (t, m): the compute bound still holds */
    const int64_t P_max = (int64_t)(G / S0) < N ? G / S0 : N;
    const double p_block = (double)ah_layer_params(model, AH_LAYER_BLOCK, t);
    const double grad_elt = train->precision == AH_PREC_FP32 ? 4 : 2;
    int64_t span[3];
    link_spans(cluster, t, train->precision, span);
    double best = INFINITY;
    /* plans by P and by their worst link k: they use U <= span[k] groups, at least P S0 */
    for (int64_t P = 1; P <= P_max; P++)
        for (int k = P > 1 ? 0 : 2; k <= AH_LINK_INTER_ZONE; k++) {
            const int64_t U = span[k] < G ? span[k] : G;
            if (U < P * S0) continue;
            const double R = top_rate(rate, count, nt, U);
            /* the bubble: T_pipe >= L * fastest + (N - P) * L / R (docs/planner.md) */
            const double pipe = fmax((double)N * L / R, L * fastest + (double)(N - P) * L / R);
            /* the pipeline with the fewest stages has at most U / P, so a stage of at least
             * ceil(L / (U / P)) blocks, whose gradients sync over P pipelines on link k at its
             * best, and whose optimizer runs at the best memory bandwidth */
            const int64_t stages = U / P < L ? U / P : L;
            const double nb = (double)((L + stages - 1) / stages);
            double bw, lat;
            link_best(cluster, (ah_link_t)k, &bw, &lat);
            const double sync = P > 1 ? ah_allreduce_seconds(nb * p_block * grad_elt, (int)P, bw, lat) : 0;
            best = fmin(best, pipe + sync + nb * p_block * opt_per_param);
        }
    return best;
}
