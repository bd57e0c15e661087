/* One pipeline, exactly: the best layer split + recomputation for a given stage-type sequence
 * and micro-batch count, and the best micro-batch split over several pipelines.
 *
 * Pipeline time (the search's closed form of 1F1B, plan/replay.h):
 *     T = sum_s c_s + 2 sum p2p + (n-1) (max_s c_s + pace), c_s = f_s + b_s,
 * pace the hops' share of a micro-batch's round trip (ah_p2p_pace). The p2p parts do not depend
 * on the split, so the search minimises
 *     V(n) = sum_s c_s + (n-1) max_s c_s
 * over block counts nb_s >= 1 (sum = L) and recompute flags, subject to memory (which depends on
 * n through the in-flight count min(S-s, n)) and optional per-stage block caps. Exactly: for each
 * candidate bound K on the max (every stage cost that can occur, sorted), minsum(K) = the smallest
 * sum with every stage <= K, by dynamic programming over (stage, blocks used); then
 * V(n) = min_K minsum(K) + (n-1) K. The K that attains the true optimum is a candidate, and for
 * it minsum(K) <= the optimum's sum, so the minimum is exact. The walk over K starts at the
 * smallest feasible K (feasibility is a capacity check, found by bisection) and stops as soon as
 * minsum(inf) + (n-1) K cannot beat the best found.
 *
 * Shapes are memoised per (stage types, in-flight class min(n, S), per-stage caps), so the many
 * pipeline sets and micro-batch counts of a search share their work.
 */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#include "core/hash.h"
#include "core/vec.h"

/* One in-flight class of a shape: n == nclass (nclass < S) or n >= S (nclass == S). */
typedef struct pclass {
    int64_t nclass;
    double *fb_fit;  /* [S][nb 0..L][r]: the stage's f + b where nb is within its cap and fits memory
                      * at this class's in-flight count, else NAN (stage_cost's two tests, once) */
    int nK;
    double *K;       /* candidate bounds on the max stage cost, ascending */
    double *minsum;  /* per K: NAN until computed, INFINITY if infeasible */
    int kmin;        /* first feasible K, -1 if none */
    int64_t T_len;   /* cached V(n), see slot_of */
    double *T;
    int *bestk;
    ah_split_t **split; /* cached splits per n, NULL until asked for */
} pclass_t;

/* A pipeline shape: stage types and per-stage block caps; its classes are made on demand. */
struct ah_pentry {
    ah_sctx_t *owner; /* the stage table it was made from (its CP degree's) */
    uint64_t hash;
    int keylen;
    int *key;        /* S, ty[S], cap[S] */
    int S;
    const int *ty;   /* into key */
    const int *cap;  /* into key */
    pclass_t **cls;  /* [S], index nclass - 1 */
};

/* ---- context ---- */

ah_cost_ctx_t ah_sctx_cost(const ah_sctx_t *x) {
    /* a CP group's ring on the stage's node: the type's intra-node link (cp_bw 0), as ah_evaluate
     * finds it for a group of one node */
    ah_cost_ctx_t c = {.model = x->model, .cluster = x->cluster, .train = &x->train, .t = x->t, .profile = x->profile,
                       .cp = x->cp};
    return c;
}

/* The stage table of CP degree cp (1: none). */
static ah_status_t sctx_init_one(ah_sctx_t *x, const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *train,
                                 int t, int cp, const ah_profile_t *profile, ah_error_t *err) {
    memset(x, 0, sizeof *x);
    x->cp = cp;
    x->model = m;
    x->cluster = c;
    x->train = *train;
    x->t = t;
    x->profile = profile;
    x->L = (int)m->n_layer;
    x->n_types = c->n_types;
    x->N = train->global_batch / train->micro_batch;
    const size_t n = (size_t)x->n_types * AH_KINDS * (size_t)(x->L + 1) * 2;
    x->sc = calloc(n, sizeof *x->sc);
    x->fb = calloc(n, sizeof *x->fb);
    x->capacity = calloc((size_t)x->n_types, sizeof *x->capacity);
    x->memo_cap = 1024;
    x->memo = calloc(x->memo_cap, sizeof *x->memo);
    if (!x->sc || !x->fb || !x->capacity || !x->memo) {
        ah_sctx_free(x);
        return ah_error_set(err, AH_ERR_OOM, "out of host memory for the planner's stage table");
    }
    const ah_cost_ctx_t ctx = ah_sctx_cost(x);
    for (int ty = 0; ty < x->n_types; ty++) {
        x->capacity[ty] = ah_gpu_capacity_bytes(&c->types[ty]);
        for (int k = 0; k < AH_KINDS; k++)
            for (int nb = 1; nb <= x->L; nb++)
                for (int r = 0; r < 2; r++) {
                    size_t i = ah_sctx_index(x, ty, k, nb, r);
                    ah_stage_cost(&ctx, ty, 0, nb, k & 1, (k & 2) != 0, r, &x->sc[i]);
                    x->fb[i] = x->sc[i].fwd_s + x->sc[i].bwd_s;
                }
    }
    x->p_block = ah_layer_params(m, AH_LAYER_BLOCK, t);
    x->head_norm = ah_head_norm_params(m, t);
    x->grad_elt = (double)ah_precision_elt_bytes(train->precision);
    x->vc_grad = (double)ah_head_matrix_params(m, t) * x->grad_elt; /* one TP rank's rows */
    return AH_OK;
}

ah_status_t ah_sctx_init_cp(ah_sctx_t *x, const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *train, int t,
                            const ah_profile_t *profile, unsigned cp_mask, ah_error_t *err) {
    ah_status_t st = sctx_init_one(x, m, c, train, t, 1, profile, err);
    for (int k = 1; k < AH_CP_LEVELS && st == AH_OK; k++) {
        if (!(cp_mask & (1u << k))) continue;
        if (!(x->by_cp[k] = malloc(sizeof *x->by_cp[k]))) {
            st = ah_error_set(err, AH_ERR_OOM, "out of host memory for the planner's CP %d stage table", 1 << k);
        } else if ((st = sctx_init_one(x->by_cp[k], m, c, train, t, 1 << k, profile, err)) != AH_OK) {
            free(x->by_cp[k]);
            x->by_cp[k] = NULL;
        }
    }
    if (st != AH_OK) ah_sctx_free(x);
    return st;
}

ah_status_t ah_sctx_init(ah_sctx_t *x, const ah_model_t *m, const ah_cluster_t *c,
                         const ah_train_t *train, int t, const ah_profile_t *profile,
                         ah_error_t *err) {
    return ah_sctx_init_cp(x, m, c, train, t, profile, 0, err);
}

ah_sctx_t *ah_sctx_of_cp(ah_sctx_t *x, int cp) {
    if (cp <= 1) return x;
    const int k = __builtin_ctz((unsigned)cp);
    return k < AH_CP_LEVELS ? x->by_cp[k] : NULL;
}

static void pclass_free(pclass_t *c) {
    if (!c) return;
    for (int64_t i = 0; c->split && i < c->T_len; i++) free(c->split[i]);
    void *owned[] = {c->split, c->fb_fit, c->K, c->minsum, c->T, c->bestk, c};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
}

static void pentry_free(ah_pentry_t *e) {
    if (!e) return;
    if (e->cls)
        for (int i = 0; i < e->S; i++) pclass_free(e->cls[i]);
    free(e->cls);
    free(e->key);
    free(e);
}

void ah_sctx_free(ah_sctx_t *x) {
    for (int k = 1; k < AH_CP_LEVELS; k++)
        if (x->by_cp[k]) {
            ah_sctx_free(x->by_cp[k]);
            free(x->by_cp[k]);
        }
    if (x->memo)
        for (size_t i = 0; i < x->memo_cap; i++) pentry_free(x->memo[i]);
    ah_dp_links_memo_free(x->links_memo);
    void *owned[] = {x->memo, x->view_pipes, x->view_stages, x->sc, x->fb, x->capacity};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
    memset(x, 0, sizeof *x);
}

double ah_stage_sync_s(const ah_sctx_t *x, int nb, int kind, int P, int holders, double bw,
                       double lat) {
    const bool embed = kind & 1, head = (kind & 2) != 0;
    const int64_t params = (int64_t)nb * x->p_block + (head ? x->head_norm : 0);
    double sync = ah_allreduce_seconds((double)params * x->grad_elt, P, bw, lat);
    if (embed || (head && x->model->tied)) sync += ah_allreduce_seconds(x->vc_grad, holders, bw, lat);
    if (head && !x->model->tied) sync += ah_allreduce_seconds(x->vc_grad, P, bw, lat);
    return sync;
}

double ah_stage_opt_s(const ah_sctx_t *x, int type, int kind, int nb) {
    const ah_cost_ctx_t ctx = ah_sctx_cost(x);
    return ah_optimizer_seconds(&ctx, type, x->sc[ah_sctx_index(x, type, kind, nb, 0)].params);
}

/* ---- stage options ---- */

/* Cost of stage s of class c (of its shape) holding nb blocks with every stage bounded by K: the
 * cheaper recompute choice that fits memory, the cap and K; +inf if none. For each choice the
 * allowed block counts are downward closed (cost and memory grow with nb), so callers may stop at
 * the first +inf. */
static double stage_cost(const ah_sctx_t *x, const pclass_t *c, int s, int nb, double K, bool *rc) {
    const double *fit = &c->fb_fit[((size_t)s * (size_t)(x->L + 1) + (size_t)nb) * 2];
    for (int r = 0; r < 2; r++) /* r = 0 first: recomputation only adds time */
        if (fit[r] <= K) {  /* NAN (over the cap or memory) never is */
            if (rc) *rc = r;
            return fit[r];
        }
    return INFINITY;
}

/* c's fb_fit for shape e: false when out of host memory. */
static bool fill_fb_fit(const ah_sctx_t *x, const ah_pentry_t *e, pclass_t *c) {
    const int S = e->S, W = x->L + 1;
    c->fb_fit = malloc(sizeof(double) * (size_t)S * (size_t)W * 2);
    if (!c->fb_fit) return false;
    for (int s = 0; s < S; s++) {
        const int kind = ah_stage_kind(s, S), ty = e->ty[s];
        const int64_t inflight = ah_inflight(S, s, c->nclass);
        for (int nb = 0; nb < W; nb++)
            for (int r = 0; r < 2; r++) {
                const size_t i = ah_sctx_index(x, ty, kind, nb, r);
                c->fb_fit[((size_t)s * (size_t)W + (size_t)nb) * 2 + (size_t)r] =
                    nb <= e->cap[s] && ah_stage_memory_bytes(&x->sc[i], inflight) <= x->capacity[ty] ? x->fb[i] : NAN;
            }
    }
    return true;
}

/* Feasible with every stage <= K iff each stage can hold one block and together they can hold L. */
static bool feasible(const ah_sctx_t *x, const ah_pentry_t *e, const pclass_t *c, double K) {
    int64_t total = 0;
    for (int s = 0; s < e->S; s++) {
        int u = 0;
        while (u < x->L && isfinite(stage_cost(x, c, s, u + 1, K, NULL))) u++;
        if (u == 0) return false;
        total += u;
    }
    return total >= x->L;
}

/* Stage s's cost under K for 1 .. u[s] blocks into cost[s * W + nb] (the allowed counts are
 * downward closed), u[s] at most room(s) = L - (S - s - 1), the later stages needing a block each. */
static void cost_rows(const ah_sctx_t *x, const ah_pentry_t *e, const pclass_t *c, double K, int *u, double *cost) {
    const int L = x->L, S = e->S, W = L + 1;
    for (int s = 0; s < S; s++) {
        const int room = L - (S - s - 1);
        for (u[s] = 0; u[s] < room; u[s]++) {
            double v = stage_cost(x, c, s, u[s] + 1, K, NULL);
            if (!isfinite(v)) break;
            cost[s * W + u[s] + 1] = v;
        }
    }
}

/* minsum(K) by DP over (stage, blocks used); fills out when given. NAN: out of host memory. */
static double dp_minsum(const ah_sctx_t *x, const ah_pentry_t *e, const pclass_t *c, double K,
                        ah_split_t *out) {
    const int L = x->L, S = e->S, W = L + 1;
    double *buf = malloc(sizeof(double) * ((size_t)W * 2 + (size_t)S * (size_t)W));
    int *u = malloc(sizeof(int) * 2 * (size_t)S);
    int *choice = out ? malloc(sizeof(int) * (size_t)S * (size_t)W) : NULL;
    if (!buf || !u || (out && !choice)) {
        free(buf);
        free(u);
        free(choice);
        return NAN;
    }
    double *cur = buf, *nxt = buf + W, *cost = buf + 2 * W; /* cost[s * W + nb] under K */
    int *rest = u + S;
    cost_rows(x, e, c, K, u, cost);
    for (int s = S - 1, sum = 0; s >= 0; s--) { /* rest[s]: the most blocks stages after s can hold */
        rest[s] = sum;
        sum = sum + u[s] < L ? sum + u[s] : L;
    }
    for (int j = 0; j <= L; j++) cur[j] = INFINITY;
    cur[0] = 0;
    /* reach: the most blocks the stages so far can hold (cur[j] is +inf above it) */
    for (int s = 0, reach = 0; s < S; s++) {
        const int room = L - (S - s - 1); /* later stages need a block each */
        const int top_j = reach < room - 1 ? reach : room - 1;
        const double *cs = cost + s * W;
        for (int j = s + 1; j <= room; j++) nxt[j] = INFINITY;
        if (choice) {
            for (int j = s; j <= top_j; j++) {
                if (!isfinite(cur[j])) continue;
                const int top = room - j < u[s] ? room - j : u[s];
                for (int nb = 1; nb <= top; nb++) {
                    double v = cur[j] + cs[nb];
                    if (v < nxt[j + nb]) {
                        nxt[j + nb] = v;
                        choice[s * W + j + nb] = nb;
                    }
                }
            }
        } else { /* the same minimum (a sum's value does not depend on when it is taken), over the
                  * targets from which the later stages can still hold the rest (rest[s] at most) */
            for (int nb = 1; nb <= u[s]; nb++) {
                const double cn = cs[nb];
                double *to = nxt + nb;
                const int hi = room - nb < top_j ? room - nb : top_j;
                const int lo = L - rest[s] - nb > s ? L - rest[s] - nb : s;
                for (int j = lo; j <= hi; j++) {
                    const double v = cur[j] + cn;
                    to[j] = v < to[j] ? v : to[j];
                }
            }
        }
        reach = reach + u[s] < room ? reach + u[s] : room;
        double *tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    double best = cur[L];
    if (out && isfinite(best)) {
        for (int s = S - 1, j = L; s >= 0; s--) {
            int nb = choice[s * W + j];
            bool rc = false;
            stage_cost(x, c, s, nb, K, &rc);
            out->nb[s] = nb;
            out->rc[s] = rc;
            j -= nb;
        }
    }
    free(buf);
    free(u);
    free(choice);
    return best;
}

static pclass_t *pclass_new(const ah_sctx_t *x, const ah_pentry_t *e, int64_t nclass) {
    pclass_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nclass = nclass;
    const int S = e->S, L = x->L;
    c->K = malloc(sizeof(double) * (size_t)S * (size_t)L * 2);
    if (!c->K || !fill_fb_fit(x, e, c)) {
        pclass_free(c);
        return NULL;
    }
    /* candidate K: every stage cost that can occur. Stages of one type, kind and cap allow the same
     * costs but for memory, which the stage with the fewest micro-batches in flight (the last such
     * stage) allows most of, so each such set is listed once, at its last stage. */
    int nK = 0;
    for (int s = 0; s < S; s++) {
        const int kind = ah_stage_kind(s, S), ty = e->ty[s];
        bool later = false; /* a later stage of the same type, kind and cap lists them */
        for (int q = s + 1; q < S && !later; q++)
            later = e->ty[q] == ty && ah_stage_kind(q, S) == kind && e->cap[q] == e->cap[s];
        if (later) continue;
        const int64_t inflight = ah_inflight(S, s, nclass);
        for (int nb = 1; nb <= L && nb <= e->cap[s]; nb++)
            for (int r = 0; r < 2; r++) {
                size_t i = ah_sctx_index(x, ty, kind, nb, r);
                if (ah_stage_memory_bytes(&x->sc[i], inflight) <= x->capacity[ty]) c->K[nK++] = x->fb[i];
            }
    }
    qsort(c->K, (size_t)nK, sizeof(double), ah_cmp_double);
    int u = 0;
    for (int i = 0; i < nK; i++)
        if (u == 0 || c->K[i] != c->K[u - 1]) c->K[u++] = c->K[i];
    c->nK = u;
    c->minsum = malloc(sizeof(double) * (size_t)(u > 0 ? u : 1));
    if (!c->minsum) {
        pclass_free(c);
        return NULL;
    }
    for (int i = 0; i < u; i++) c->minsum[i] = NAN;
    /* the smallest feasible K, by bisection (feasibility is monotone in K) */
    c->kmin = -1;
    if (u > 0 && S <= L && feasible(x, e, c, c->K[u - 1])) {
        int lo = 0, hi = u - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (feasible(x, e, c, c->K[mid])) hi = mid;
            else lo = mid + 1;
        }
        c->kmin = lo;
    }
    return c;
}

/* ---- memo ---- */

static uint64_t hash_key(const int *k, int n) {
    uint64_t h = AH_FNV1A64_OFFSET;
    for (int i = 0; i < n; i++) h = ah_fnv1a64_mix(h, (uint32_t)k[i]);
    return h;
}

static bool memo_grow(ah_sctx_t *x) {
    size_t cap = x->memo_cap * 2;
    ah_pentry_t **m = calloc(cap, sizeof *m);
    if (!m) return false;
    for (size_t i = 0; i < x->memo_cap; i++) {
        ah_pentry_t *e = x->memo[i];
        if (!e) continue;
        size_t j = e->hash & (cap - 1);
        while (m[j]) j = (j + 1) & (cap - 1);
        m[j] = e;
    }
    free(x->memo);
    x->memo = m;
    x->memo_cap = cap;
    return true;
}

ah_pentry_t *ah_pipe_get(ah_sctx_t *x, int S, const int *ty, const int *caps) {
    if (S < 1 || S > AH_MAX_STAGES) return NULL;
    int key[1 + 2 * AH_MAX_STAGES];
    key[0] = S;
    for (int s = 0; s < S; s++) {
        key[1 + s] = ty[s];
        int c = caps ? caps[ty[s] * AH_KINDS + ah_stage_kind(s, S)] : x->L;
        key[1 + S + s] = c < x->L ? c : x->L;
    }
    const int keylen = 1 + 2 * S;
    uint64_t h = hash_key(key, keylen);
    size_t j = h & (x->memo_cap - 1);
    for (; x->memo[j]; j = (j + 1) & (x->memo_cap - 1)) {
        ah_pentry_t *e = x->memo[j];
        if (e->hash == h && e->keylen == keylen && memcmp(e->key, key, sizeof(int) * (size_t)keylen) == 0)
            return e;
    }
    if ((x->memo_len + 1) * 2 > x->memo_cap) {
        if (!memo_grow(x)) return NULL;
        j = h & (x->memo_cap - 1);
        while (x->memo[j]) j = (j + 1) & (x->memo_cap - 1);
    }
    ah_pentry_t *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->key = malloc(sizeof(int) * (size_t)keylen);
    e->cls = calloc((size_t)S, sizeof *e->cls);
    if (!e->key || !e->cls) {
        pentry_free(e);
        return NULL;
    }
    memcpy(e->key, key, sizeof(int) * (size_t)keylen);
    e->keylen = keylen;
    e->hash = h;
    e->owner = x;
    e->S = S;
    e->ty = e->key + 1;
    e->cap = e->key + 1 + S;
    x->memo[j] = e;
    x->memo_len++;
    return e;
}

static pclass_t *class_of(const ah_sctx_t *x, ah_pentry_t *e, int64_t n) {
    int64_t k = n < e->S && !x->coarse_memory ? n : e->S;
    if (!e->cls[k - 1]) e->cls[k - 1] = pclass_new(x, e, k);
    return e->cls[k - 1];
}

static double minsum_at(const ah_sctx_t *x, const ah_pentry_t *e, pclass_t *c, int k) {
    if (isnan(c->minsum[k])) c->minsum[k] = dp_minsum(x, e, c, c->K[k], NULL);
    return c->minsum[k];
}

/* Index of n in c's cache, growing it; -1 when out of host memory. The last class also serves
 * n < S under coarse memory, so its cache starts at n = 1. */
static int64_t slot_of(const pclass_t *c, int64_t n, int S) { return c->nclass == S ? n - 1 : n - c->nclass; }

static int64_t t_slot(pclass_t *c, int64_t n, int S) {
    int64_t i = slot_of(c, n, S);
    if (i < c->T_len) return i;
    int64_t len = c->T_len ? c->T_len : 8;
    while (len <= i) len *= 2;
    double *T = realloc(c->T, sizeof(double) * (size_t)len);
    if (!T) return -1;
    c->T = T;
    int *bk = realloc(c->bestk, sizeof(int) * (size_t)len);
    if (!bk) return -1;
    c->bestk = bk;
    ah_split_t **sp = realloc(c->split, sizeof(ah_split_t *) * (size_t)len);
    if (!sp) return -1;
    c->split = sp;
    for (int64_t k = c->T_len; k < len; k++) {
        c->T[k] = NAN;
        c->bestk[k] = -1;
        c->split[k] = NULL;
    }
    c->T_len = len;
    return i;
}

double ah_pipe_time(ah_sctx_t *x, ah_pentry_t *e, int64_t n) {
    if (n < 1) return INFINITY;
    pclass_t *c = class_of(x, e, n);
    if (!c) return NAN;
    if (c->kmin < 0) return INFINITY;
    int64_t i = t_slot(c, n, e->S);
    if (i < 0) return NAN;
    if (!isnan(c->T[i])) return c->T[i];
    const int top = c->nK - 1;
    const double floor_sum = minsum_at(x, e, c, top); /* minsum(inf) */
    double best = INFINITY;
    int bestk = -1;
    if (n == 1) { /* no (n-1) max term: the unconstrained sum */
        best = floor_sum;
        bestk = top;
    } else {
        for (int k = c->kmin; k <= top; k++) {
            if (floor_sum + (double)(n - 1) * c->K[k] >= best) break;
            double ms = minsum_at(x, e, c, k);
            if (isnan(ms)) return NAN;
            double v = ms + (double)(n - 1) * c->K[k];
            if (v < best) {
                best = v;
                bestk = k;
            }
        }
    }
    c->T[i] = best;
    c->bestk[i] = bestk;
    return best;
}

bool ah_pipe_split(ah_sctx_t *x, ah_pentry_t *e, int64_t n, ah_split_t *out) {
    if (!isfinite(ah_pipe_time(x, e, n))) return false;
    pclass_t *c = class_of(x, e, n);
    const int64_t i = slot_of(c, n, e->S);
    if (!c->split[i]) {
        ah_split_t *sp = malloc(sizeof *sp);
        if (!sp) return false;
        if (!isfinite(dp_minsum(x, e, c, c->K[c->bestk[i]], sp))) {
            free(sp);
            return false;
        }
        c->split[i] = sp;
    }
    memcpy(out->nb, c->split[i]->nb, sizeof(int) * (size_t)e->S);
    memcpy(out->rc, c->split[i]->rc, sizeof(bool) * (size_t)e->S);
    return true;
}

/* ---- micro-batches over pipelines ---- */

/* Pipelines with the same shape and the same p2p times are one kind: the greedy treats their
 * counts together. A kind of c pipelines has r of them at n + 1 micro-batches and c - r at n. */
typedef struct {
    ah_pentry_t *e;
    double extra, pace;
    int count, r;
    int64_t n;
    double key; /* time of its next increment: V(n + 1) + extra + n pace */
} kind_t;

static bool kind_less(const kind_t *k, int a, int b) {
    return k[a].key < k[b].key || (k[a].key == k[b].key && a < b);
}

static void sift_down(const kind_t *k, int *h, int len, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < len && kind_less(k, h[l], h[m])) m = l;
        if (r < len && kind_less(k, h[r], h[m])) m = r;
        if (m == i) return;
        int tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

typedef struct {
    ah_pentry_t *e;
    double extra, pace;
    int p;
} pipe_ref_t;

static int cmp_ref(const void *a, const void *b) {
    const pipe_ref_t *x = a, *y = b;
    if (x->e != y->e) return (uintptr_t)x->e < (uintptr_t)y->e ? -1 : 1;
    if (x->extra != y->extra) return x->extra < y->extra ? -1 : 1;
    if (x->pace != y->pace) return x->pace < y->pace ? -1 : 1;
    return x->p - y->p;
}

double ah_greedy_split(int P, ah_pentry_t *const *e, const double *extra, const double *pace,
                       int64_t N, int64_t *n) {
    if (P < 1 || N < P) return INFINITY;
    pipe_ref_t *ref = malloc(sizeof *ref * (size_t)P);
    kind_t *k = malloc(sizeof *k * (size_t)P);
    int *heap = malloc(sizeof *heap * (size_t)P), *kind_of = malloc(sizeof(int) * (size_t)P);
    double worst = 0;
    if (!ref || !k || !heap || !kind_of) {
        worst = NAN;
        goto out;
    }
    for (int p = 0; p < P; p++) ref[p] = (pipe_ref_t){e[p], extra[p], pace[p], p};
    qsort(ref, (size_t)P, sizeof *ref, cmp_ref);
    int nk = 0;
    for (int i = 0; i < P; i++) {
        if (i == 0 || ref[i].e != ref[i - 1].e || ref[i].extra != ref[i - 1].extra || ref[i].pace != ref[i - 1].pace)
            k[nk++] = (kind_t){ref[i].e, ref[i].extra, ref[i].pace, 0, 0, 1, 0};
        k[nk - 1].count++;
        kind_of[ref[i].p] = nk - 1;
    }
    for (int i = 0; i < nk; i++) {
        double t1 = ah_pipe_time(k[i].e->owner, k[i].e, 1);
        if (!isfinite(t1)) {
            worst = t1;
            goto out;
        }
        if (t1 + k[i].extra > worst) worst = t1 + k[i].extra;
        k[i].key = ah_pipe_time(k[i].e->owner, k[i].e, 2) + k[i].extra + k[i].pace;
        heap[i] = i;
    }
    for (int i = nk / 2 - 1; i >= 0; i--) sift_down(k, heap, nk, i);
    /* the pipelines of the cheapest kind all take their next micro-batch at the same time, so
     * give them out together (what one-at-a-time greedy does, in fewer steps) */
    for (int64_t left = N - P; left > 0;) {
        kind_t *kk = &k[heap[0]];
        if (!isfinite(kk->key)) {
            worst = kk->key;
            goto out;
        }
        int64_t g = kk->count - kk->r < left ? kk->count - kk->r : left;
        kk->r += (int)g;
        left -= g;
        if (kk->key > worst) worst = kk->key;
        if (kk->r == kk->count) {
            kk->n++;
            kk->r = 0;
            kk->key = ah_pipe_time(kk->e->owner, kk->e, kk->n + 1) + kk->extra + (double)kk->n * kk->pace;
            sift_down(k, heap, nk, 0);
        }
    }
    /* r pipelines of each kind (lowest index first: ref is sorted by index within a kind) get n + 1 */
    for (int i = 0; i < P; i++) {
        kind_t *kk = &k[kind_of[ref[i].p]];
        n[ref[i].p] = kk->n + (kk->r > 0 ? 1 : 0);
        if (kk->r > 0) kk->r--;
    }
out:
    free(ref);
    free(k);
    free(heap);
    free(kind_of);
    return worst;
}
