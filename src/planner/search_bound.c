/* The planner's lower bound (ah_planner_lower_bound, planner.h): what every plan of one (t, m)
 * must pay — compute with its TP communication and the head; the 1F1B bubble implied by how fast
 * P pipelines can turn micro-batches over (no pipeline's largest stage beats its last stage's
 * block and head, its groups' summed rate, or what their memory lets them hold in whole blocks,
 * alone, pooled with the faster pipelines', or split with one other pipeline); the group fill
 * (every pipeline fills at its own groups' rates, its hops included); DP sync on the best link
 * the plan's scope allows; the optimizer step. Plans are bounded by
 * class: scope (one node, one zone, the cluster), pipeline count P and X, the most blocks of any
 * stage. docs/planner.md ("What the search guarantees") proves each term;
 * tests/test_planner_exact.c checks it against the brute-force optimum of every (t, m) and that
 * each term sets the bound somewhere; search_bound.h says which class and term bind. What the
 * groups hold within memory (per pipeline, pooled, split in two) is bound_holds.c's. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "planner/planner.h"
#include "planner/bound_scope.h"
#include "planner/search_bound.h"
#include "planner/bound_holds.h"

#define AH_BOUND_SPACES 2 /* the most spaces one set-up bounds (ah_planner_lower_bounds) */

/* Blocks per second of the U fastest groups. */
static double rate_of(const bound_in_t *in, int64_t U) {
    double r = 0;
    for (int i = 0; i < in->n && U > 0; i++) {
        const int64_t take = in->ty[i].count < U ? in->ty[i].count : U;
        r += (double)take / in->ty[i].c->b;
        U -= take;
    }
    return r;
}

/* An upper bound on Q = sum_p 1 / M_p (M_p: pipeline p's largest stage time) over plans of P
 * pipelines on at most U groups: the groups' summed block rate over W = L + kappa (a pipeline's
 * stages turn one micro-batch over in M_p, so M_p R_p >= W), and P times the best one pipeline's
 * 1 / M: 1 / h1 (its last stage runs a block and the head) and 1 / m_one (it holds L whole blocks
 * within memory). *limit: which. */
static double q_bound(const bound_in_t *in, int64_t P, int64_t U, int *limit) {
    const double one[2] = {1 / in->h1, 1 / in->m_one};
    double Q = rate_of(in, U) / (in->L + in->kappa);
    *limit = AH_Q_RATE;
    for (int i = 0; i < 2; i++)
        if ((double)P * one[i] < Q) {
            Q = (double)P * one[i];
            *limit = i == 0 ? AH_Q_HEAD : AH_Q_ONE_PIPELINE;
        }
    return Q;
}

/* DP sync of a plan of P pipelines on a link (bw, lat) whose largest stage holds X blocks: that
 * stage's gradients, or the first stage's when larger (a block at least, and the embedding's rows
 * over P to 2P holders: *by_embedding); across zones the least of the hierarchical sync too. */
static double sync_bound(const bound_in_t *in, int64_t P, double bw, double lat, int X, bool *by_embedding) {
    *by_embedding = false;
    if (P < 2) return 0;
    const ah_hier_bound_t *across = in->hier; /* the hierarchical sync's least (ah_bound_dp_sum_s) */
    if (in->space.overlap) { /* the embedding's all-reduce is final at the backward's end: always
                              * exposed; and a device's queue starts at most its blocks' backward
                              * (X of them, at most bwd_max each) before that end */
        const double embed = ah_bound_dp_sum_s(in->grad_vc, P, 2 * P, bw, lat, across);
        const double blocks = ah_bound_dp_sum_s(X * in->grad_block, P, P, bw, lat, across) - X * in->bwd_max;
        *by_embedding = embed >= blocks;
        return fmax(embed, blocks);
    }
    const double largest = ah_bound_dp_sum_s(X * in->grad_block, P, P, bw, lat, across);
    const double first = ah_bound_dp_sum_s(in->grad_block, P, P, bw, lat, across) +
                         ah_bound_dp_sum_s(in->grad_vc, P, 2 * P, bw, lat, across);
    *by_embedding = first > largest;
    return fmax(largest, first);
}

/* The optimizer step of the larger of those two stages. */
static double opt_bound(const bound_in_t *in, int X) {
    return in->opt_block * fmax(X, 1 + in->embed_blocks); /* optimizer time is linear in parameters */
}

/* The least 2 sum p2p of a pipeline of at least S stages: S - 1 hops, ceil(S / per_node) - 1 of
 * them leaving a node (both grow with the stage count). */
static double fill_hops(const bound_in_t *in, int S) {
    const double lo = fmin(in->p2p_min, in->p2p_between), more = in->p2p_between - lo;
    const int leave = in->per_node > 0 ? (S + in->per_node - 1) / in->per_node - 1 : 0;
    return 2.0 * ((S - 1) * lo + leave * more);
}

/* The least C_p + 2 sum p2p of a pipeline of at least S stages: every block at the fastest rate,
 * the least head, and S - 1 hops on the fastest link. */
static double fill_bound(const bound_in_t *in, int S) {
    return in->L * in->b_min + in->h_min + fill_hops(in, S);
}

/* The least pace the hops add to each micro-batch after a pipeline's first (ah_p2p_pace) in a
 * pipeline of at least S stages: its whole-pipeline window, 2 (sum of its hops) / S', S' >= S
 * its stages. Of its S' - 1 hops at least h' = ceil(S' / k) - 1 >= S' / k - 1 leave a node
 * (k = per_node), so the window is at least 2 ((S' - 1) / S' lo + (1 / k - 1 / S') (between - lo)),
 * which grows with S'. And past per_node (per_zone) stages a hop leaves a node (a zone): the
 * window of the two stages around it is at least that hop. */
static double pace_bound(const bound_in_t *in, int S) {
    const double lo = fmin(in->p2p_min, in->p2p_between), more = in->p2p_between - lo;
    const double leave = in->per_node > 0 ? fmax(0, 1.0 / in->per_node - 1.0 / S) : 0;
    double pace = 2.0 * ((double)(S - 1) / S * lo + leave * more);
    /* a window of two stages around a hop that leaves a node (or a zone): 2 p / 2 */
    if (S > in->per_node) pace = fmax(pace, in->p2p_between);
    if (S > in->per_zone) pace = fmax(pace, in->p2p_zones);
    return pace;
}

/* The most micro-batches per second one pipeline of exactly S stages turns over after its first:
 * 1 / (M + pi), M its largest stage time, pi its hops' pace. M >= m_one, and M >= W / R_S (its
 * stages hold W blocks, a stage of group g at most M / b_g of them, and its S groups are at best
 * the S fastest); pi >= pace_bound(S). In a scope across zones, a pipeline of S groups of one
 * zone runs at most that zone's S fastest groups' rate, and one across zones has a window of two
 * stages around a hop between zones: pi >= the least such hop. */
static double pipe_rate(const bound_in_t *in, int S) {
    const double W = in->L + in->kappa, pace = pace_bound(in, S), m = fmax(in->m_one, W / rate_of(in, S));
    if (!in->zone_rate || S > in->per_zone) return 1 / (m + pace);
    /* in one zone, its groups' rate; across zones, a hop between zones in a window of two */
    const double in_zone = in->zone_rate[S] > 0 ? 1 / (fmax(in->m_one, W / in->zone_rate[S]) + pace) : 0;
    return fmax(in_zone, 1 / (m + fmax(pace, in->p2p_zones)));
}

/* The pipeline part of any plan of P pipelines on at most U groups whose pipelines have at least
 * S stages, given Q >= sum_p 1 / M_p: max_p T_p >= max(N W / R_U, C + (N - P) / Q'), C the least
 * fill (fill_bound). Pipeline p runs n_p - 1 <= (T - C) / (M_p + pi_p) micro-batches after its
 * first, so N - P <= (T - C) Q' for any Q' >= sum_p 1 / (M_p + pi_p); two hold:
 *   - Q / (1 + pi Q / P), pi = pace_bound(S) <= pi_p: 1 / (M + pi) = x / (1 + pi x), x = 1 / M, is
 *     concave in x, so the sum is at most P g(Q / P) (Jensen, g increasing);
 *   - P max pipe_rate(S') over the stage counts S' a pipeline of the class can have (S to L, and
 *     at most U - (P - 1) S: the others hold S each).
 * *pace: what the hops' pace adds to the bubble term over C + (N - P) / Q. */
static double pipe_bound(const bound_in_t *in, int64_t P, int64_t U, double Q, int S, double *pace) {
    const double W = in->L + in->kappa; /* one micro-batch, in blocks of the groups it runs on */
    if (in->space.any_schedule) { /* a device runs n_p micro-batches of its work (n_p M_p <= T), and
                                   * a micro-batch goes forward through every block and back by their
                                   * input gradients, over at least S - 1 hops each way */
        if (pace) *pace = 0;
        const double round_trip = in->L * in->path_min + fill_hops(in, S);
        return fmax(fmax((double)in->N * W / rate_of(in, U), (double)in->N / Q), round_trip);
    }
    const double after = (double)(in->N - P);
    const double jensen = Q / (1 + pace_bound(in, S) * Q / (double)P);
    double most = 0;
    const int64_t top = U - (P - 1) * S < in->L ? U - (P - 1) * S : in->L;
    for (int64_t s = S; s <= top; s++)
        most = fmax(most, isnan(in->rate_at[s]) ? (in->rate_at[s] = pipe_rate(in, (int)s)) : in->rate_at[s]);
    const double q = most > 0 ? fmin(jensen, (double)P * most) : jensen;
    const double bubble = fill_bound(in, S) + after / q;
    if (pace) *pace = after / q - after / Q;
    return fmax((double)in->N * W / rate_of(in, U), bubble);
}

/* The group fill: the least T at which plans of P pipelines whose stages hold at most X blocks
 * can run N micro-batches, each pipeline filling at its own groups' rates. Pipeline p runs
 * n_p - 1 <= (T - C_p - 2 H_p) / M_p micro-batches after its first (H_p: its hops). A stage of
 * x_s blocks of work (its blocks; the last stage also kappa for the head) has x_s b_s <= c_s <=
 * M_p, sum_s x_s = W, and each stage but the last pays a hop of at least p, x_s / x_g of it with
 * x_g = min(X, u_any) >= x_s (such a stage's x_s is its block count); so
 * (T - C_p - 2 H_p) / M_p <= sum_s (x_s / M_p)(T / W - b_s - 2 p / x_g) + (the last stage's hop
 * it does not pay) <= sum_s f_g(T) + e, where f_g(T) = (T / W - b_g - 2 p / x_g)^+ / b_g
 * (x_s / M_p <= 1 / b_s) and e = max_g 2 p / (x_g b_g). The
 * groups are disjoint, so N - P <= sum over every group of f_g(T) + P e: piecewise linear in
 * T / W, increasing, solved segment by segment. A group too slow to gain anything counts 0, so
 * the term says what slow groups cost in fill that the rate term pools away. With the hops' pace
 * pi >= pace_bound(S) of every pipeline (S its least stage count), n_p - 1 <= (T - C_p - 2 H_p) /
 * (M_p + pi) and x_s / (M_p + pi) <= 1 / (b_s + pi / x_g), so f_g(T) divides by b_g + pi / x_g. */
static double group_fill_bound(const bound_in_t *in, int64_t P, int X, int S) {
    const double pi = pace_bound(in, S);
    double a[in->n], slope[in->n], e = 0; /* a: where a type's f_g starts to grow, in T / W */
    int n = 0;
    for (int i = 0; i < in->n; i++) {
        const type_cost_t *c = in->ty[i].c;
        const int x = c->u_any < X ? c->u_any : X;
        if (x < 1) continue; /* holds no block: not in any pipeline */
        e = fmax(e, 2 * in->hop_min / (x * c->b));
        int j = n++; /* by a increasing */
        const double ai = c->b + 2 * in->hop_min / x;
        for (; j > 0 && a[j - 1] > ai; j--) a[j] = a[j - 1], slope[j] = slope[j - 1];
        a[j] = ai;
        slope[j] = in->ty[i].count / (c->b + pi / x);
    }
    const double need = (double)(in->N - P) - (double)P * e, W = in->L + in->kappa;
    if (n == 0 || need <= 0) return 0;
    double s = 0, cut = 0; /* on [a_k, a_(k+1)]: sum f_g = s (T / W) - cut */
    for (int k = 0; k < n; k++) {
        s += slope[k];
        cut += slope[k] * a[k];
        const double tau = (need + cut) / s;
        if (k == n - 1 || tau <= a[k + 1]) return tau * W;
    }
    return 0; /* not reached */
}

/* The least iteration time of plans of P_lo .. P_max pipelines whose stages hold at most X blocks
 * (q: their pooled_q), within the scope, DP sync on (bw, lat): every pipeline has at least
 * S = max(S0, ceil(L / X)) stages, at most L, so P of them use at most U = min(G, P L) groups;
 * their sync and optimizer are those of an X-block stage. */
static double bound_at(const bound_in_t *in, int64_t P_lo, int64_t P_max, int X, const double *q, double bw,
                       double lat, ah_bound_terms_t *why) {
    const int L = in->L, S = (L + X - 1) / X > in->S0 ? (L + X - 1) / X : in->S0;
    double best = INFINITY;
    for (int64_t P = P_lo; P <= P_max && P * S <= in->G && ah_bound_memory_allows(in, P); P++) {
        const int64_t U = in->G < P * L ? in->G : P * L;
        int limit;
        double Q = q_bound(in, P, U, &limit);
        if (q[P] < Q) {
            Q = q[P];
            limit = AH_Q_POOLED;
        }
        bool by_embedding;
        double pace;
        double pipe = pipe_bound(in, P, U, Q, S, &pace);
        const double sync = sync_bound(in, P, bw, lat, X, &by_embedding), opt = opt_bound(in, X);
        if (P == 2 && pipe + sync + opt < best) { /* worth the exact two-pipeline split */
            const double pair = ah_bound_pair_q(in, X);
            if (pair < Q) {
                Q = pair;
                limit = AH_Q_PAIR;
                pipe = pipe_bound(in, P, U, Q, S, &pace);
            }
        }
        if (pipe + sync + opt >= best) continue;
        const double group_fill = in->space.any_schedule ? 0 : group_fill_bound(in, P, X, S);
        const bool by_group_fill = group_fill > pipe;
        pipe = fmax(pipe, group_fill);
        if (pipe + sync + opt >= best) continue;
        best = pipe + sync + opt;
        if (why) {
            *why = (ah_bound_terms_t){.pipe = pipe, .sync = sync, .opt = opt, .P = P, .X = X, .q_limit = limit,
                                      .by_group_fill = by_group_fill};
            why->by_compute = !by_group_fill && pipe == (double)in->N * (L + in->kappa) / rate_of(in, U);
            why->fill_p2p = why->by_compute || by_group_fill ? 0 : fill_hops(in, S);
            why->pace_p2p = why->by_compute || by_group_fill ? 0 : pace;
            why->sync_by_embedding = by_embedding;
        }
    }
    return best;
}

/* The least iteration time of plans of P = P_lo .. N pipelines within the scope, over X, the
 * most blocks of any stage, in each of n spaces (best[k], why[k]: space k's; in->space is left at
 * the last). X past the most blocks any stage holds (top) caps nothing more and only adds sync.
 * Each X is first bounded with top's pooled_q (a weaker Q: looser caps), and its own table built
 * only when that could still win in some space (the tables do not depend on the space, so the
 * spaces share them: each space's bound is what it alone would find). q, q_top, cand: room for
 * G + 1, G + 1 and 4 L n values. */
static void scope_bound(bound_in_t *in, const ah_bound_space_t *spaces, int n_spaces, int64_t P_lo, double bw,
                        double lat, double *q, double *q_top, double *cand, double *best, ah_bound_terms_t *why) {
    const int L = in->L, n = ah_bound_stage_times(in, cand);
    in->cand = cand;
    in->n_cand = n;
    int64_t P_top = in->G / in->S0 < in->N ? in->G / in->S0 : in->N;
    int top = 0;
    for (int i = 0; i < in->n; i++) top = in->ty[i].c->u_any > top ? in->ty[i].c->u_any : top;
    top = top < L ? top : L;
    P_top = ah_bound_pooled_q(in, P_top, top, cand, n, q_top);
    for (int k = 0; k < n_spaces; k++) best[k] = INFINITY;
    for (int X = 1; X <= top; X++) {
        bool open[AH_BOUND_SPACES], any = false;
        for (int k = 0; k < n_spaces; k++) {
            in->space = spaces[k];
            open[k] = bound_at(in, P_lo, P_top, X, q_top, bw, lat, NULL) < best[k];
            any = any || open[k];
        }
        if (!any) continue;
        const int64_t P_max = ah_bound_pooled_q(in, P_top, X, cand, n, q);
        for (int k = 0; k < n_spaces; k++) {
            if (!open[k]) continue;
            in->space = spaces[k];
            ah_bound_terms_t here = {0};
            const double v = bound_at(in, P_lo, P_max, X, q, bw, lat, &here);
            if (v < best[k]) {
                best[k] = v;
                why[k] = here;
            }
        }
    }
}

/* Buffers for one bound, sized by the cluster. */
typedef struct {
    type_cost_t *tc;
    ah_scope_t *sc;
    int *counts, *zone;
    tgroups_t *ty;
    double *cand, *q, *q_top, *zone_rate, *block_s, *rate_at;
} bound_mem_t;

static bool bound_mem_alloc(bound_mem_t *m, int nt, int nn, int L, int64_t G) {
    const size_t t = (size_t)(nt > 0 ? nt : 1), s = (size_t)(2 * nn + 1);
    m->tc = calloc(t, sizeof *m->tc);
    m->sc = malloc(sizeof *m->sc * s);
    m->counts = malloc(sizeof(int) * t * s);
    m->zone = malloc(sizeof(int) * (size_t)(nn > 0 ? nn : 1));
    m->ty = malloc(sizeof *m->ty * t);
    m->cand = malloc(sizeof(double) * t * 4 * (size_t)(L > 0 ? L : 1));
    m->q = malloc(sizeof(double) * (size_t)(G + 1));
    m->q_top = malloc(sizeof(double) * (size_t)(G + 1));
    m->zone_rate = malloc(sizeof(double) * (size_t)(L + 1));
    m->block_s = malloc(sizeof(double) * t);
    m->rate_at = malloc(sizeof(double) * (size_t)(L + 1));
    return m->tc && m->sc && m->counts && m->zone && m->ty && m->cand && m->q && m->q_top && m->zone_rate &&
           m->block_s && m->rate_at;
}

static void bound_mem_free(bound_mem_t *m) {
    void *all[] = {m->tc, m->sc, m->counts, m->zone, m->ty, m->cand, m->q, m->q_top, m->zone_rate, m->block_s, m->rate_at};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

double ah_planner_lower_bound_in(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                                 const ah_profile_t *profile, ah_bound_space_t space) {
    return ah_planner_bound_terms_in(model, cluster, train, t, profile, space, NULL);
}

/* The figures every scope shares (S0 from the whole cluster's groups, already in in). */
static void shared_inputs(const ah_cost_ctx_t *ctx, bound_in_t *in) {
    int most = 0; /* the fewest stages that fit: S0 = ceil(L / the most blocks any stage holds) */
    for (int i = 0; i < in->n; i++) most = in->ty[i].c->u_any > most ? in->ty[i].c->u_any : most;
    in->S0 = most > 0 ? (in->L + most - 1) / most : INT32_MAX;
    in->p2p_min = ah_p2p_least(ctx, AH_LINK_INTRA);
    in->p2p_between = ah_p2p_least(ctx, AH_LINK_INTER_NODE);
    in->p2p_zones = ah_p2p_least(ctx, AH_LINK_INTER_ZONE);
    const double grad_elt = (double)ah_precision_elt_bytes(ctx->train->precision);
    const int64_t p_block = ah_layer_params(ctx->model, AH_LAYER_BLOCK, ctx->t);
    in->grad_block = (double)p_block * grad_elt;
    in->grad_vc = (double)ah_head_matrix_params(ctx->model, ctx->t) * grad_elt;
    in->embed_blocks = (double)ah_layer_params(ctx->model, AH_LAYER_EMBED, ctx->t) / (double)p_block;
}

/* The bound and its terms over each of n spaces (terms[k]: space k's), on one set-up: what
 * ah_planner_bound_terms_in finds for each alone. */
static void bounds_in(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                      const ah_profile_t *profile, const ah_bound_space_t *spaces, int n_spaces, ah_bound_terms_t *terms) {
    const ah_cost_ctx_t ctx = {.model = model, .cluster = cluster, .train = train, .t = t, .profile = profile, .cp = 1};
    const int nt = cluster->n_types, L = (int)model->n_layer;
    for (int k = 0; k < n_spaces; k++) terms[k] = (ah_bound_terms_t){.total = INFINITY, .compute = INFINITY, .link = -1};
    int64_t G = 0;
    for (int i = 0; i < cluster->n_nodes; i++) G += ah_node_groups(cluster, i, t, train->precision);
    bound_mem_t mem;
    if (!bound_mem_alloc(&mem, nt, cluster->n_nodes, L, G)) { /* out of host memory: 0 is still a bound */
        bound_mem_free(&mem);
        for (int k = 0; k < n_spaces; k++) terms[k].total = terms[k].compute = 0;
        return;
    }
    ah_bound_type_costs(&ctx, mem.tc);
    const int n = ah_bound_scopes(&ctx, mem.zone, mem.sc, mem.counts);
    bound_in_t in = {.L = L, .N = train->global_batch / train->micro_batch, .ty = mem.ty, .rate_at = mem.rate_at};
    ah_bound_scope_inputs(mem.tc, mem.sc[0].count, nt, &in, mem.cand);
    if (in.G > 0) {
        /* compute: a group's busy time is at most T (1F1B: n * max stage time <= T_pipe) */
        const double compute = (double)in.N * (L + in.kappa) / rate_of(&in, in.G);
        for (int k = 0; k < n_spaces; k++) terms[k].compute = compute;
        shared_inputs(&ctx, &in);
        bool zones = false; /* more than one zone: the whole cluster's scope spans them */
        for (int i = 0; i < cluster->n_nodes; i++) zones |= mem.zone[i] != 0;
        for (int ty = 0; ty < nt; ty++) mem.block_s[ty] = mem.tc[ty].b;
        if (zones) ah_zone_rates(&ctx, mem.zone, mem.block_s, L, mem.zone_rate);
        int n_zones = 0;
        for (int i = 0; i < cluster->n_nodes; i++) n_zones += mem.zone[i] == i;
        ah_hier_bound_t hier;
        ah_hier_bound_of(cluster, &mem.sc[0], n_zones, &hier);
        for (int s = 0; s < n; s++) {
            ah_bound_scope_inputs(mem.tc, mem.sc[s].count, nt, &in, mem.cand);
            in.zone_rate = zones && s == 0 ? mem.zone_rate : NULL;
            /* every scope: a DP group may sit inside one node or zone whatever the plan's other
             * groups cross, priced on its own ring (plan/dp_price.h): the k = 1 term */
            ah_hier_bound_t scope_hier = hier;
            scope_hier.per_node = mem.sc[s].per_node;
            if (s > 0 || !zones) scope_hier.domains = 1;
            in.hier = &scope_hier;
            if (in.G == 0) continue;
            in.per_node = mem.sc[s].per_node;
            in.per_zone = mem.sc[s].per_zone;
            in.hop_min = in.per_node <= 1 ? in.p2p_between : fmin(in.p2p_min, in.p2p_between);
            for (int k = 0; k <= L; k++) in.rate_at[k] = NAN;
            double bw, lat, v[AH_BOUND_SPACES];
            ah_scope_link(cluster, &mem.sc[s], &bw, &lat);
            /* one pipeline has no DP sync, and the whole cluster holds every one */
            ah_bound_terms_t here[AH_BOUND_SPACES];
            scope_bound(&in, spaces, n_spaces, s == 0 ? 1 : 2, bw, lat, mem.q, mem.q_top, mem.cand, v, here);
            for (int k = 0; k < n_spaces; k++)
                if (v[k] < terms[k].total) {
                    here[k].total = v[k];
                    here[k].compute = compute;
                    here[k].link = mem.sc[s].k;
                    terms[k] = here[k];
                }
        }
        /* every scope's bound is at least the compute bound; none finite: nothing fits at this
         * (t, m), and the compute bound still holds (the search then says what is short) */
        for (int k = 0; k < n_spaces; k++)
            if (!isfinite(terms[k].total)) terms[k].total = terms[k].compute;
    }
    bound_mem_free(&mem);
}

double ah_planner_bound_terms_in(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                                 const ah_profile_t *profile, ah_bound_space_t space, ah_bound_terms_t *why) {
    ah_bound_terms_t terms;
    bounds_in(model, cluster, train, t, profile, &space, 1, &terms);
    if (why) *why = terms;
    return terms.total;
}

double ah_planner_lower_bounds(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                               const ah_profile_t *profile, ah_bound_space_t space, double *own) {
    const ah_bound_space_t spaces[AH_BOUND_SPACES] = {{0}, space};
    ah_bound_terms_t terms[AH_BOUND_SPACES];
    bounds_in(model, cluster, train, t, profile, spaces, AH_BOUND_SPACES, terms);
    *own = terms[0].total;
    return terms[1].total;
}
