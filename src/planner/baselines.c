/* The three baselines, in the same cost model (scored with ah_evaluate):
 *
 *  uniform (Megatron-LM): P identical pipelines of S stages; TP groups taken in cluster order
 *    (GPU types ignored); equal layers per stage (the remainder to the first stages); equal
 *    micro-batches per pipeline (so P divides global_batch / m); one recompute flag for all; and
 *    because types are ignored every stage must fit the smallest GPU in the plan.
 *  batch-balanced (Whale-like): the same symmetric structure, but each pipeline's micro-batches
 *    are in proportion to its speed (1 / its bottleneck stage time; largest remainders, >= 1 each),
 *    and memory must fit each device's own capacity.
 *  megatron-best (what a Megatron-Core user would run): the best symmetric plan (one TP degree, P
 *    identical pipelines of S stages, equal layers, equal micro-batches, P dividing
 *    global_batch / m, one recompute flag) on the TP groups of any one GPU type, or on all of them
 *    (cluster order); memory must fit each device's own capacity. Megatron users drop the slow
 *    GPUs rather than pace on them. Its FINALISTS fastest 1F1B structures then also run Megatron-Core's
 *    interleaved 1F1B with the best virtual-stage count each (interleave_finalists; when
 *    --schedule allows interleaved, and for a plan to train when the runtime runs it), and it is compared as
 *    Megatron-Core runs with --overlap-grad-reduce: by ah_planner_time_s, the DP sync overlapped
 *    with the backward. Unless --cp is 1 it also weighs context parallelism as Megatron-Core sets
 *    it, one degree for every pipeline (baseline_cp.c).
 *
 * Each tries every TP degree, micro-batch size (as the planner), stage count S, pipeline count
 * (uniform: the largest that divides the micro-batch count; batch-balanced: all groups used;
 * megatron-best: every divisor of the micro-batch count that the groups hold) and recompute flag,
 * and keeps the fastest feasible plan; uniform keeps, of the feasible plans, the fastest among
 * those that use the most devices (Megatron-LM uses every GPU it is given). A structure whose
 * stage-time estimate (structure_lb; not a true bound of the 1F1B replay, so a heuristic:
 * docs/planner.md) does not beat the best so far is not built; one whose true lower bound
 * (ah_baseline_lb, baseline_lb.c) reaches the time it must beat (skip_bar) is not evaluated, which
 * changes no result. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#include "cost/profile.h"

#include "core/str.h"

static const char *const BASELINE_NAMES[AH_BASELINE_COUNT] = {"uniform", "batch-balanced", "megatron-best"};

const char *ah_baseline_name(ah_baseline_t b) { return BASELINE_NAMES[b]; }

bool ah_baseline_parse(const char *s, ah_baseline_t *out) {
    const int i = ah_str_index(s, BASELINE_NAMES, AH_BASELINE_COUNT);
    if (i >= 0) *out = (ah_baseline_t)i;
    return i >= 0;
}

typedef struct {
    int node, slot, type; /* type: the node's GPU type */
    int64_t capacity;     /* its GPUs' memory, bytes */
} bgroup_t;

/* One (t, m) of one baseline: its groups and a lazily filled table of stage costs by
 * (type, kind, blocks, recompute), for structure_lb. */
typedef struct {
    const ah_model_t *model;
    const ah_cluster_t *cluster;
    const ah_planner_opts_t *o;
    ah_baseline_t kind;
    ah_train_t tr;
    int t, G, L;
    bgroup_t *g;              /* room for the cluster's groups: those of (t, part) */
    ah_stage_cost_t *sc; /* fwd_s NAN = not computed yet */
    double *bott, *sum, *rem; /* scratch, one per group: per pipeline bottleneck and summed stage */
    int64_t *n;               /* times, the batch-balanced split */
    int *order;
    struct lb_memo *memo;     /* structure_lb's: the groups' type runs, each type's one-type pipeline */
    struct finalists *fin;    /* megatron-best where interleaved may run: its best 1F1B structures */
    int part;                 /* the groups': a GPU type, or -1 for all */
    struct frame *frame;      /* where try_structure builds a structure's plan */
} bctx_t;

/* What structure_lb finds once: run_end[i], the first group after i of another type than group i
 * (set_groups), so a pipeline of one type is seen at once; and per type and recompute flag
 * (type[2 type + rc]), the stage-time sum and bottleneck of its pipeline of S stages, and the last
 * micro-batch count and capacity it fits with at fit_S stages; each while the stage costs and groups
 * of set_groups' call numbered `epoch` (stamp, fit_stamp) stand. */
typedef struct {
    double sum, bott;
    int64_t fit_n, fit_cap;
    int S, fit_S;
    unsigned stamp, fit_stamp;
} one_type_t;
struct lb_memo {
    int *run_end;
    one_type_t *type;
    unsigned epoch;
};

/* megatron-best's best 1F1B structures, which it then runs interleaved (interleave_finalists). */
#define FINALISTS 3
typedef struct {
    double time;
    int t, part, P, S;
    int64_t mb;
    bool rc;
} finalist_t;
struct finalists {
    int n;
    finalist_t f[FINALISTS];
};

/* Keeps structure (P, S, rc) of b, whose plan takes `time`, among the fastest FINALISTS. */
static void note_finalist(const bctx_t *b, int P, int S, bool rc, double time) {
    struct finalists *f = b->fin;
    if (f->n == FINALISTS && f->f[FINALISTS - 1].time <= time) return;
    int k = f->n < FINALISTS ? f->n++ : FINALISTS - 1;
    for (; k > 0 && f->f[k - 1].time > time; k--) f->f[k] = f->f[k - 1];
    f->f[k] = (finalist_t){time, b->t, b->part, P, S, b->tr.micro_batch, rc};
}

/* Micro-batches in proportion to speed (1 / bottleneck stage time c[i]), >= 1 each, largest
 * remainders (ties to the earlier pipeline) for what is left, into n; rem and order are scratch
 * of P entries. */
static const double *sort_rem; /* for by_remainder; baselines run on one thread */
static int by_remainder(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (sort_rem[i] != sort_rem[j]) return sort_rem[i] > sort_rem[j] ? -1 : 1;
    return i - j;
}

static void split_by_speed(int P, const double *c, int64_t N, int64_t *n, double *rem, int *order) {
    double total = 0;
    for (int i = 0; i < P; i++) total += 1.0 / c[i];
    int64_t given = 0;
    for (int i = 0; i < P; i++) {
        const double want = (double)(N - P) * (1.0 / c[i]) / total;
        n[i] = 1 + (int64_t)floor(want);
        rem[i] = want - floor(want);
        given += n[i];
        order[i] = i;
    }
    sort_rem = rem;
    qsort(order, (size_t)P, sizeof *order, by_remainder);
    for (int k = 0; given < N; k++, given++) n[order[k]]++;
}

/* Whether pipeline p > 0 of S stages over b->g has the stage types of pipeline p - 1. */
static bool same_types(const bctx_t *b, int p, int S) {
    for (int s = 0; s < S; s++)
        if (b->g[p * S + s].type != b->g[(p - 1) * S + s].type) return false;
    return true;
}

static const ah_stage_cost_t *stage_sc(const bctx_t *b, int type, int kind, int nb, int rc) {
    ah_stage_cost_t *sc = &b->sc[(((size_t)type * AH_KINDS + (size_t)kind) * (size_t)(b->L + 1) + (size_t)nb) * 2 +
                                 (size_t)rc];
    if (isnan(sc->fwd_s)) {
        const ah_cost_ctx_t ctx = {.model = b->model, .cluster = b->cluster, .train = &b->tr, .t = b->t, .profile = b->o->profile, .cp = 1};
        ah_stage_cost(&ctx, type, 0, nb, kind & 1, (kind & 2) != 0, rc, sc);
    }
    return sc;
}

/* Pipeline p's (of S stages over b->g) stage-time sum and bottleneck into b->sum[p], b->bott[p]:
 * a pipeline of one type takes its type's (b->memo), another the pipeline's before it when of the
 * same types; found as the sums over its stages otherwise (the same figures either way). */
static void pipe_sums(const bctx_t *b, int p, int S, bool rc) {
    const int base = b->L / S, extra = b->L % S;
    one_type_t *one = b->memo->run_end[p * S] >= (p + 1) * S ? &b->memo->type[2 * b->g[p * S].type + rc] : NULL;
    if (one && one->stamp == b->memo->epoch && one->S == S) {
        b->sum[p] = one->sum, b->bott[p] = one->bott;
        return;
    }
    if (!one && p > 0 && same_types(b, p, S)) {
        b->sum[p] = b->sum[p - 1], b->bott[p] = b->bott[p - 1];
        return;
    }
    b->sum[p] = b->bott[p] = 0;
    for (int s = 0; s < S; s++) {
        const ah_stage_cost_t *sc = stage_sc(b, b->g[p * S + s].type, ah_stage_kind(s, S), base + (s < extra ? 1 : 0), rc);
        b->sum[p] += sc->fwd_s + sc->bwd_s;
        b->bott[p] = fmax(b->bott[p], sc->fwd_s + sc->bwd_s);
    }
    if (one) one->sum = b->sum[p], one->bott = b->bott[p], one->S = S, one->stamp = b->memo->epoch;
}

/* Whether pipeline p's stages fit with n micro-batches each (cap: the uniform baseline's smallest
 * GPU, else -1: each device's own), as ah_evaluate checks memory; a pipeline of one type once per n
 * (b->memo), another unless the pipeline before it has its types and n (n_before). */
static bool pipe_fits(const bctx_t *b, int p, int S, bool rc, int64_t n, int64_t n_before, int64_t cap) {
    const int base = b->L / S, extra = b->L % S;
    one_type_t *one = b->memo->run_end[p * S] >= (p + 1) * S ? &b->memo->type[2 * b->g[p * S].type + rc] : NULL;
    if (one ? one->fit_stamp == b->memo->epoch && one->fit_S == S && one->fit_n == n && one->fit_cap == cap
            : p > 0 && n_before == n && same_types(b, p, S))
        return true;
    for (int s = 0; s < S; s++) {
        const bgroup_t *gr = &b->g[p * S + s];
        const ah_stage_cost_t *sc = stage_sc(b, gr->type, ah_stage_kind(s, S), base + (s < extra ? 1 : 0), rc);
        if (ah_stage_memory_bytes(sc, ah_inflight(S, s, n)) > (cap >= 0 ? cap : gr->capacity)) return false;
    }
    if (one) one->fit_n = n, one->fit_cap = cap, one->fit_S = S, one->fit_stamp = b->memo->epoch;
    return true;
}

/* An estimate meant as a lower bound on the iteration time of P pipelines of S stages over b->g
 * (it is not one when the slowest stage is not the last: its warm-up forwards overlap the later
 * stages' times; ah_baseline_lb is one), from the stage costs alone (p2p, DP sync and the optimizer
 * left out): max_p T_p(n_p), T_p(n) = sum_s c_s + (n - 1) max_s c_s, with n_p = N / P, or
 * batch-balanced's own split into b->n (split_by_speed on the bottleneck times ah_evaluate gives:
 * the split try_structure builds the plan with). +inf when a stage does not fit with its in-flight
 * micro-batches (uniform: the smallest GPU of the structure), exactly as ah_evaluate checks memory. */
static double structure_lb(const bctx_t *b, int P, int S, bool rc) {
    const int64_t N = b->tr.global_batch / b->tr.micro_batch;
    const bool balanced = b->kind == AH_BASELINE_BATCH_BALANCED;
    int64_t smallest = b->kind == AH_BASELINE_UNIFORM ? INT64_MAX : -1;
    for (int i = 0; i < P * S && b->kind == AH_BASELINE_UNIFORM; i++)
        smallest = b->g[i].capacity < smallest ? b->g[i].capacity : smallest;
    for (int p = 0; p < P; p++) pipe_sums(b, p, S, rc);
    if (balanced) split_by_speed(P, b->bott, N, b->n, b->rem, b->order);
    double lb = 0;
    for (int p = 0; p < P; p++) {
        const int64_t n = balanced ? b->n[p] : N / P;
        if (!pipe_fits(b, p, S, rc, n, p > 0 && balanced ? b->n[p - 1] : n, smallest)) return INFINITY;
        lb = fmax(lb, b->sum[p] + (double)(n - 1) * b->bott[p]);
    }
    return lb;
}

/* Fills p (already holding P pipelines of S stages) with groups in order, equal layers. */
static void fill_structure(ah_plan_t *p, const bgroup_t *g, int S, bool recompute) {
    const int L = (int)p->model.n_layer, base = L / S, extra = L % S;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0, first = 0; s < S; s++) {
            ah_stage_t *st = &p->pipelines[i].stages[s];
            const bgroup_t *gr = &g[i * S + s];
            st->first = first;
            first += base + (s < extra ? 1 : 0);
            st->last = first;
            st->recompute = recompute;
            st->type = gr->type;
            for (int r = 0; r < p->tp; r++) st->devices[r] = (ah_device_ref_t){gr->node, gr->slot * p->tp + r};
        }
}

/* megatron-best's interleaved 1F1B (Megatron-Core's --num-layers-per-virtual-pipeline-stage):
 * p's pipelines of S stages as S v virtual stages of equal layers (the remainder to the first),
 * device d on stages d, d + S, ...; every v from 2 (at most AH_PLAN_MAX_VIRTUAL, what the runtime
 * runs) while each virtual stage holds a block and the
 * micro-batches per pipeline are a multiple of S. When one fits and beats *e under the planner's
 * time (ah_planner_time_s: the overlapped sync, as Megatron-Core's --overlap-grad-reduce), p and *e
 * become it. */
static ah_status_t interleave_best(const bctx_t *b, ah_plan_t *p, ah_eval_t *e, ah_error_t *err) {
    const int S = p->pipelines[0].n_stages, L = (int)p->model.n_layer;
    if (S < 2 || p->pipelines[0].micro_batches % S) return AH_OK;
    ah_status_t st = AH_OK;
    for (int v = 2; S * v <= L && v <= AH_PLAN_MAX_VIRTUAL && st == AH_OK; v++) {
        ah_plan_t q;
        if ((st = ah_plan_copy(p, &q, err)) != AH_OK) break;
        const int base = L / (S * v), extra = L % (S * v);
        for (int i = 0; i < q.n_pipelines && st == AH_OK; i++) {
            ah_pipeline_t *pl = &q.pipelines[i];
            if ((st = ah_pipeline_alloc(pl, S * v, err)) != AH_OK) break;
            pl->schedule = AH_SCHED_INTERLEAVED;
            for (int k = 0, first = 0; k < S * v; k++) {
                pl->stages[k] = p->pipelines[i].stages[k % S];
                pl->stages[k].first = first;
                pl->stages[k].last = first += base + (k < extra ? 1 : 0);
            }
        }
        ah_eval_t f;
        const bool scored = st == AH_OK && (st = ah_evaluate(&q, b->o->profile, &f, err)) == AH_OK;
        if (scored && f.feasible && ah_planner_time_s(b->o, &f) < ah_planner_time_s(b->o, e)) {
            ah_plan_free(p);
            ah_eval_free(e);
            *p = q;
            *e = f;
            continue;
        }
        if (scored) ah_eval_free(&f);
        ah_plan_free(&q);
    }
    return st;
}

/* p and e (taken) become *best (priced once the baseline is done: ah_baseline_run). */
static void keep(ah_plan_result_t *best, ah_plan_t *p, ah_eval_t *e) {
    ah_plan_result_free(best);
    best->plan = *p;
    best->eval = *e;
    best->plan.has_predicted = true;
    best->plan.predicted = e->pred;
    best->search_value_s = e->search_estimate_s;
    best->from_baseline = -1; /* (freed to zeros above: 0 would name the uniform baseline) */
}

/* megatron-best's finalists (its fastest 1F1B structures, b->fin) run as Megatron-Core's
 * interleaved 1F1B with the best v each (interleave_best); the fastest that fits and beats *out
 * replaces it. Finalists, not every structure: interleaving every structure the 1F1B search weighs
 * would cost the planner its second (docs/planner.md "Schedules"). */
static int collect_groups(const ah_cluster_t *c, int t, int type, ah_precision_t prec, bgroup_t *g);

static ah_status_t interleave_finalists(bctx_t *b, ah_plan_result_t *out, ah_error_t *err) {
    ah_status_t st = AH_OK;
    const struct finalists fin = *b->fin;
    for (int k = 0; k < fin.n && st == AH_OK; k++) {
        const finalist_t *f = &fin.f[k];
        b->t = f->t;
        b->tr.micro_batch = f->mb;
        b->G = collect_groups(b->cluster, f->t, f->part, b->tr.precision, b->g);
        ah_plan_t p;
        ah_eval_t e;
        st = ah_plan_init(&p, b->model, &b->tr, f->t, b->cluster, f->P, err);
        for (int i = 0; i < f->P && st == AH_OK; i++) {
            st = ah_pipeline_alloc(&p.pipelines[i], f->S, err);
            p.pipelines[i].micro_batches = b->tr.global_batch / f->mb / f->P;
        }
        if (st == AH_OK) fill_structure(&p, b->g, f->S, f->rc);
        if (st == AH_OK && (st = ah_evaluate(&p, b->o->profile, &e, err)) == AH_OK) {
            st = interleave_best(b, &p, &e, err);
            if (st == AH_OK && e.feasible && p.pipelines[0].schedule == AH_SCHED_INTERLEAVED &&
                ah_planner_time_s(b->o, &e) < ah_planner_time_s(b->o, &out->eval)) {
                keep(out, &p, &e);
                continue;
            }
            ah_eval_free(&e);
        }
        ah_plan_free(&p);
    }
    return st;
}

/* The plan of the structure being scored, built in place: its pipelines and stages in storage
 * kept from structure to structure (P S <= the cluster's groups), so that scoring a structure
 * allocates no plan; the one kept is copied out (ah_plan_copy). */
struct frame {
    ah_plan_t p;        /* pipelines: room for `room`; p.n_pipelines the structure's */
    ah_stage_t *stages; /* room for `room`, pipeline i's from i S */
    int room, tp_written; /* the most devices per stage written (those past the plan's tp are 0) */
};

static ah_status_t frame_init(struct frame *f, const ah_model_t *m, const ah_train_t *tr, const ah_cluster_t *c, int room,
                              ah_error_t *err) {
    memset(f, 0, sizeof *f);
    f->stages = calloc((size_t)room, sizeof *f->stages);
    const ah_status_t st = f->stages ? ah_plan_init(&f->p, m, tr, 1, c, room, err)
                                     : ah_error_set(err, AH_ERR_OOM, "out of host memory for the baselines' %d stages", room);
    if (st == AH_OK) f->room = room;
    else {
        free(f->stages);
        f->stages = NULL;
    }
    return st;
}

static void frame_free(struct frame *f) {
    f->p.n_pipelines = 0; /* their stages are f->stages */
    ah_plan_free(&f->p);
    free(f->stages);
    f->stages = NULL;
}

/* b's frame as P pipelines of S stages over b->g (fill_structure), N / P micro-batches each, or
 * batch-balanced's split (b->n, from structure_lb: on the bottleneck times ah_evaluate gives). */
static const ah_plan_t *frame_structure(const bctx_t *b, int P, int S, bool recompute) {
    struct frame *f = b->frame;
    ah_plan_t *p = &f->p;
    const int64_t N = b->tr.global_batch / b->tr.micro_batch;
    if (f->tp_written > b->t) { /* a smaller TP degree than before: no device past it */
        for (int k = 0; k < f->room; k++)
            memset(&f->stages[k].devices[b->t], 0, sizeof(ah_device_ref_t) * (size_t)(f->tp_written - b->t));
        f->tp_written = b->t;
    }
    if (b->t > f->tp_written) f->tp_written = b->t;
    p->train = b->tr;
    p->tp = b->t;
    p->n_pipelines = P;
    for (int i = 0; i < P; i++)
        p->pipelines[i] = (ah_pipeline_t){.micro_batches = b->kind == AH_BASELINE_BATCH_BALANCED ? b->n[i] : N / P,
                                          .n_stages = S, .stages = f->stages + (size_t)i * (size_t)S,
                                          .schedule = AH_SCHED_1F1B, .cp = 1};
    fill_structure(p, b->g, S, recompute);
    return p;
}

/* The fastest structure so far: its evaluation, and what rebuilds its plan (best_plan) once the
 * search is done, so that a structure kept and then beaten costs no plan of its own. */
typedef struct {
    bool have;
    ah_eval_t eval;
    int t, part, P, S;
    int64_t mb;
    bool rc;
} best_t;

/* The time a structure's plan must reach to be kept (by_used: a uniform structure that uses more
 * devices than the best is kept whatever its time) or to be one of megatron-best's finalists (b->fin):
 * a structure whose true lower bound (ah_baseline_lb) reaches it is not scored. INFINITY: any may be. */
static double skip_bar(const bctx_t *b, const best_t *best, bool by_used) {
    if (!best->have || by_used) return INFINITY;
    const double t = ah_planner_time_s(b->o, &best->eval);
    if (!b->fin) return t;
    return b->fin->n == FINALISTS ? fmax(t, b->fin->f[FINALISTS - 1].time) : INFINITY;
}

static const ah_stage_cost_t *lb_cost(void *b, int type, int kind, int nb, bool rc) { return stage_sc(b, type, kind, nb, rc); }

/* Scores one structure; keeps it in *best when it is feasible and faster. */
static ah_status_t try_structure(const bctx_t *b, int P, int S, bool recompute, best_t *best, ah_error_t *err) {
    /* Megatron-LM runs on every GPU it is given (world size = DP x PP x TP); picking a subset by
     * speed would be type-aware. So uniform keeps the layout that uses the most devices and only
     * then the fastest; without this, a large micro-batch (few micro-batches, so few pipelines)
     * let it keep just the first, fast devices in cluster order. */
    const int used = P * S * b->t, best_used = best->have ? best->P * best->S * best->t : 0;
    const bool by_used = b->kind == AH_BASELINE_UNIFORM && best->have && used != best_used;
    if (by_used && used < best_used) return AH_OK;
    const double lb = structure_lb(b, P, S, recompute);
    if (!isfinite(lb) || (best->have && !by_used && lb >= ah_planner_time_s(b->o, &best->eval))) return AH_OK;
    const ah_plan_t *p = frame_structure(b, P, S, recompute);
    const double bar = skip_bar(b, best, by_used);
    if (bar < INFINITY && ah_baseline_lb(b->o, p, lb_cost, (void *)b, bar) >= bar) return AH_OK;
    ah_eval_t e;
    ah_status_t st = ah_evaluate(p, b->o->profile, &e, err);
    if (st != AH_OK) return st;
    bool fits = e.feasible;
    if (b->kind == AH_BASELINE_UNIFORM) { /* types ignored: every stage must fit the smallest GPU */
        int64_t smallest = INT64_MAX;
        for (int r = 0; r < e.n_devices; r++)
            if (e.devices[r].capacity_bytes < smallest) smallest = e.devices[r].capacity_bytes;
        for (int r = 0; r < e.n_devices; r++) fits &= e.devices[r].memory_bytes <= smallest;
    }
    if (fits && b->fin) note_finalist(b, P, S, recompute, ah_planner_time_s(b->o, &e));
    const bool better = !best->have || (by_used ? used > best_used
                                                : ah_planner_time_s(b->o, &e) < ah_planner_time_s(b->o, &best->eval));
    if (fits && better) {
        ah_eval_free(&best->eval);
        *best = (best_t){true, e, b->t, b->part, P, S, b->tr.micro_batch, recompute};
    } else
        ah_eval_free(&e);
    return AH_OK;
}

/* Every structure of one (t, m) on the groups b->g. */
static ah_status_t try_structures(const bctx_t *b, best_t *best, ah_error_t *err) {
    const int64_t N = b->tr.global_batch / b->tr.micro_batch;
    ah_status_t st = AH_OK;
    for (int S = 1; S <= b->L && S <= b->G && S <= AH_MAX_STAGES && st == AH_OK; S++) {
        int P = b->G / S;
        if (P > N) P = (int)N;
        if (b->kind != AH_BASELINE_BATCH_BALANCED)
            while (P > 1 && N % P) P--;
        /* megatron-best: every pipeline count that divides N, the largest first (it is usually the
         * fastest, so the bound prunes the rest); the others: the one above */
        for (; P >= 1 && st == AH_OK; P--) {
            if (N % P && b->kind != AH_BASELINE_BATCH_BALANCED) continue;
            for (int rc = 0; rc < 2 && st == AH_OK; rc++) st = try_structure(b, P, S, rc, best, err);
            if (b->kind != AH_BASELINE_MEGATRON_BEST) break;
        }
    }
    return st;
}

/* The TP groups of degree t on the nodes of GPU type `type` (-1: every type), in cluster order. */
static int collect_groups(const ah_cluster_t *c, int t, int type, ah_precision_t prec, bgroup_t *g) {
    int G = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        if (type >= 0 && c->nodes[i].type != type) continue;
        const int ty = c->nodes[i].type, n = ah_node_groups(c, i, t, prec);
        const int64_t capacity = ah_gpu_capacity_bytes(&c->types[ty]);
        for (int k = 0; k < n; k++) g[G++] = (bgroup_t){i, k, ty, capacity};
    }
    return G;
}

/* b on (t, micro-batch mb) and the groups of part (a GPU type, -1: all); its stage costs anew. */
static void set_groups(bctx_t *b, int t, int64_t mb, int part) {
    const size_t n_sc = (size_t)b->cluster->n_types * AH_KINDS * (size_t)(b->L + 1) * 2;
    if (b->t != t || b->tr.micro_batch != mb)
        for (size_t i = 0; i < n_sc; i++) b->sc[i].fwd_s = NAN;
    b->t = t;
    b->tr.micro_batch = mb;
    b->part = part;
    b->G = collect_groups(b->cluster, t, part, b->tr.precision, b->g);
    b->memo->epoch++;
    for (int i = b->G - 1; i >= 0; i--)
        b->memo->run_end[i] = i + 1 < b->G && b->g[i + 1].type == b->g[i].type ? b->memo->run_end[i + 1] : i + 1;
}

/* Every TP degree t, micro-batch size and part of the cluster (every type; megatron-best also each
 * type on its own), on b's scratch (b->g room for the cluster's groups): the fastest into *out. */
static ah_status_t try_all(bctx_t *b, best_t *best, ah_error_t *err) {
    const ah_planner_opts_t *opts = b->o;
    const ah_cluster_t *cluster = b->cluster;
    const int64_t top_mb = opts->train.micro_batch > 0 ? opts->train.micro_batch
                                                         : (opts->max_auto_mb > 0 ? opts->max_auto_mb : 8);
    const int last_part = b->kind == AH_BASELINE_MEGATRON_BEST ? cluster->n_types - 1 : -1;
    ah_status_t st = AH_OK;
    for (int t = 1; t <= AH_MAX_TP && st == AH_OK; t++) {
        ah_error_t e;
        if (ah_model_check_tp(b->model, t, &e) != AH_OK) continue;
        const int all = collect_groups(cluster, t, -1, opts->train.precision, b->g);
        for (int64_t mb = opts->train.micro_batch > 0 ? opts->train.micro_batch : 1; mb <= top_mb && st == AH_OK;
             mb++) {
            if (opts->train.global_batch % mb) continue;
            for (int part = -1; part <= last_part && st == AH_OK; part++) {
                set_groups(b, t, mb, part);
                if (part >= 0 && (b->G == 0 || b->G == all)) continue; /* no groups, or the whole cluster again */
                st = try_structures(b, best, err);
            }
        }
    }
    return st;
}

/* best's plan (taken with its evaluation) into *out, unless there is none. */
static ah_status_t best_plan(bctx_t *b, best_t *best, ah_plan_result_t *out, ah_error_t *err) {
    if (!best->have) return AH_OK;
    set_groups(b, best->t, best->mb, best->part);
    if (b->kind == AH_BASELINE_BATCH_BALANCED) structure_lb(b, best->P, best->S, best->rc); /* its split, b->n */
    ah_plan_t p;
    const ah_status_t st = ah_plan_copy(frame_structure(b, best->P, best->S, best->rc), &p, err);
    if (st == AH_OK)
        keep(out, &p, &best->eval);
    else
        ah_eval_free(&best->eval);
    return st;
}

ah_status_t ah_baseline_run(const ah_model_t *model, const ah_cluster_t *cluster,
                            const ah_planner_opts_t *opts, ah_baseline_t kind,
                            ah_plan_result_t *out, ah_error_t *err) {
    if (kind == AH_BASELINE_MEGATRON_BEST && opts->cp != 1) return ah_megatron_best_cp(model, cluster, opts, out, err);
    memset(out, 0, sizeof *out);
    out->from_baseline = -1;
    const ah_status_t checked = opts->profile ? ah_profile_check(opts->profile, model, cluster, err) : AH_OK;
    if (checked != AH_OK) return checked;
    const int G1 = ah_cluster_gpu_count(cluster), L = (int)model->n_layer;
    bgroup_t *g = malloc(sizeof *g * (size_t)(G1 > 0 ? G1 : 1));
    const size_t n_sc = (size_t)cluster->n_types * AH_KINDS * (size_t)(L + 1) * 2, n_g = (size_t)(G1 > 0 ? G1 : 1);
    ah_stage_cost_t *sc = malloc(sizeof *sc * (n_sc > 0 ? n_sc : 1));
    double *scratch = malloc(sizeof *scratch * 3 * n_g);
    int64_t *split = malloc(sizeof *split * n_g);
    int *order = malloc(sizeof *order * n_g);
    struct lb_memo memo = {malloc(sizeof *memo.run_end * n_g),
                           calloc(2 * (size_t)(cluster->n_types > 0 ? cluster->n_types : 1), sizeof *memo.type), 0};
    struct frame frame = {0};
    ah_status_t st = g && sc && scratch && split && order && memo.run_end && memo.type
                         ? frame_init(&frame, model, &opts->train, cluster, (int)n_g, err)
                         : ah_error_set(err, AH_ERR_OOM, "out of host memory for the %s baseline", ah_baseline_name(kind));
    struct finalists fin = {0};
    const bool interleave = kind == AH_BASELINE_MEGATRON_BEST &&
                            (opts->schedule == AH_SCHEDULE_AUTO || opts->schedule == AH_SCHEDULE_ONLY_INTERLEAVED) &&
                            (!opts->schedule_trainable_only || ah_schedule_runtime_runs(AH_SCHED_INTERLEAVED));
    bctx_t b = {model, cluster, opts, kind, opts->train, 0, 0, L, g, sc, scratch, scratch + n_g,
                scratch + 2 * n_g, split, order, &memo, interleave ? &fin : NULL, -1, &frame};
    best_t best = {0};
    if (st == AH_OK) st = try_all(&b, &best, err);
    if (st == AH_OK)
        st = best_plan(&b, &best, out, err);
    else
        ah_eval_free(&best.eval);
    if (st == AH_OK && out->plan.pipelines && fin.n > 0) st = interleave_finalists(&b, out, err);
    if (st == AH_OK && out->plan.pipelines) ah_result_price(opts, out);
    const bool none_runs = st == AH_OK && !out->plan.pipelines && collect_groups(cluster, 1, -1, opts->train.precision, g) == 0;
    free(g);
    free(sc);
    free(scratch);
    free(split);
    free(order);
    free(memo.run_end);
    free(memo.type);
    if (frame.stages) frame_free(&frame);
    if (none_runs)
        st = ah_error_set(err, AH_ERR_INFEASIBLE, "the %s baseline finds no plan: no GPU type of the cluster runs %s "
                          "(none gives tflops.%s)", ah_baseline_name(kind), ah_precision_name(opts->train.precision),
                          ah_precision_name(opts->train.precision));
    else if (st == AH_OK && !out->plan.pipelines)
        st = ah_error_set(err, AH_ERR_INFEASIBLE,
                          "the %s baseline finds no plan that fits: %s",
                          ah_baseline_name(kind),
                          kind == AH_BASELINE_UNIFORM
                              ? "with types ignored every stage must fit the smallest GPU; use a smaller "
                                "micro-batch or more GPUs"
                              : "no symmetric layout fits; use a smaller micro-batch or more GPUs");
    if (st != AH_OK) ah_plan_result_free(out);
    return st;
}
