/* The trainer's communicators and data-parallel groups, their spans and shards: dp_groups.h. */
#include "runtime/dp_groups.h"
#include "runtime/pipe_p2p.h"
#include "runtime/dp_hier.h"

#include <stdlib.h>

#define TRY(call)                   \
    do {                            \
        ah_status_t s_ = (call);    \
        if (s_ != AH_OK) return s_; \
    } while (0)

/* DP groups by number: segment g is g; then the first stages' (embedding), the last stages'
 * (head) and the tied matrix's groups. */
enum { GROUP_FIRST = 0, GROUP_LAST = 1, GROUP_TIED = 2 };

int ah_dp_group_id(const ah_trainer_t *tr, const ah_tensor_t *x) {
    const int G = tr->layout.n_segments;
    if (ah_tensor_tied(x, &tr->plan->model)) return G + GROUP_TIED;
    if (x->spec->layer == AH_LAYER_EMBED) return G + GROUP_FIRST;
    if (x->spec->layer == AH_LAYER_HEAD) return G + GROUP_LAST;
    int g = 0;
    while (g + 1 < G && x->block >= tr->layout.segments[g].last) g++;
    return g;
}

ah_group_t *ah_dp_group(ah_trainer_t *tr, int id) {
    const int G = tr->layout.n_segments;
    return id < G ? &tr->seg[id] : id == G + GROUP_FIRST ? &tr->first_group : id == G + GROUP_LAST ? &tr->last_group : &tr->wte_group;
}

ah_dp_shard_t *ah_dp_shard(const ah_trainer_t *tr, int id) {
    ah_trainer_t *t = (ah_trainer_t *)tr;
    const int G = t->layout.n_segments;
    return id < G ? &t->seg_shard[id] : id == G + GROUP_FIRST ? &t->first_shard : id == G + GROUP_LAST ? &t->last_shard : &t->wte_shard;
}

/* Whether this rank holds stage s of its pipeline (one of its chunks). */
static bool holds_stage(const ah_trainer_t *tr, int s) { return ah_role_chunk(&tr->role, s) >= 0; }

/* Whether this rank is a member of DP group id (from the plan, before any split). */
static bool member_of(const ah_trainer_t *tr, int id) {
    const int G = tr->layout.n_segments;
    const bool first = holds_stage(tr, 0), last = holds_stage(tr, tr->S - 1);
    if (id < G) return holds_stage(tr, tr->layout.segments[id].stage_of[tr->role.pipeline]);
    return id == G + GROUP_FIRST ? first : id == G + GROUP_LAST ? last : first || last;
}

/* The plan's sharded group for DP group id at this rank's TP rank, or NULL. */
static const ah_opt_group_t *plan_group(const ah_trainer_t *tr, int id) {
    const int G = tr->layout.n_segments;
    const ah_opt_kind_t kind = id < G ? AH_OPT_BLOCKS
                                 : id == G + GROUP_FIRST ? AH_OPT_EMBED
                                 : id == G + GROUP_LAST  ? AH_OPT_HEAD
                                                         : AH_OPT_TIED;
    for (int k = 0; k < tr->plan->n_opt_groups; k++) {
        const ah_opt_group_t *g = &tr->plan->opt_groups[k];
        if (g->kind == kind && g->tp_rank == tr->role.tp_rank &&
            (kind != AH_OPT_BLOCKS || (g->first == tr->layout.segments[id].first && g->last == tr->layout.segments[id].last)))
            return g;
    }
    return NULL;
}

typedef struct {
    int64_t begin, end;
    int member;
} part_t;

static int by_part(const void *a, const void *b) {
    const part_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->member > y->member) - (x->member < y->member);
}

/* Shard `sh` of the plan's group g: this rank's part, the parts' lengths in part order (the group
 * communicator's rank order: *key is this rank's place), members without a share holding none. */
static ah_status_t shard_parts(const ah_trainer_t *tr, const ah_opt_group_t *g, ah_dp_shard_t *sh, int *key,
                               ah_error_t *err) {
    const ah_plan_t *p = tr->plan;
    ah_device_ref_t *devs = malloc((size_t)ah_opt_group_room(p) * sizeof *devs);
    part_t *parts = malloc((size_t)ah_opt_group_room(p) * sizeof *parts);
    const int n = devs && parts ? ah_opt_group_members(p, g, devs) : -1;
    sh->counts = n > 0 ? malloc((size_t)n * sizeof *sh->counts) : NULL;
    if (!sh->counts) {
        free(devs);
        free(parts);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the optimizer's shards");
    }
    const int64_t elems = ah_opt_group_elems(p, g);
    const ah_device_ref_t me = ah_role_device(p, &tr->role);
    int mine = -1;
    for (int m = 0; m < n; m++) {
        parts[m] = (part_t){elems, elems, m};
        for (int i = 0; i < g->n_shares; i++)
            if (g->shares[i].dev.node == devs[m].node && g->shares[i].dev.index == devs[m].index)
                parts[m] = (part_t){g->shares[i].begin, g->shares[i].end, m};
        if (devs[m].node == me.node && devs[m].index == me.index) mine = m;
    }
    qsort(parts, (size_t)n, sizeof *parts, by_part);
    for (int k = 0; k < n; k++) {
        sh->counts[k] = parts[k].end - parts[k].begin;
        if (parts[k].member == mine) {
            *key = k;
            sh->begin = parts[k].begin;
            sh->end = parts[k].end;
        }
    }
    free(devs);
    free(parts);
    return AH_OK;
}

/* Appends [off, off + n) to the runs, merged with the last one when adjacent. */
static void add_run(ah_gpt_run_t *runs, int *n_runs, int64_t off, int64_t n) {
    if (n <= 0) return;
    if (*n_runs > 0 && runs[*n_runs - 1].off + runs[*n_runs - 1].n == off) runs[*n_runs - 1].n += n;
    else runs[(*n_runs)++] = (ah_gpt_run_t){off, n, 0};
}

ah_status_t ah_dp_plan_shards(ah_trainer_t *tr, const ah_gpt_config_t *cfg, int *keys, ah_gpt_run_t **runs,
                               int *n_runs, ah_error_t *err) {
    const int n_ids = ah_dp_group_count(tr);
    *runs = NULL;
    *n_runs = 0;
    for (int id = 0; id < n_ids; id++) keys[id] = -1;
    ah_gpt_param_t *params = malloc((size_t)(ah_model_tensor_count(&tr->plan->model) + 1) * sizeof *params);
    int first_block;
    const int n = params ? ah_gpt_param_list(cfg, params, &first_block) : -1;
    if (n < 0) {
        free(params);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the parameter list");
    }
    ah_status_t s = AH_OK;
    for (int i = 0; i < n && s == AH_OK; i++) {
        ah_dp_shard_t *sh = ah_dp_shard(tr, ah_dp_group_id(tr, &params[i].def));
        if (sh->n == 0) sh->off = params[i].offset;
        if (sh->off + sh->n != params[i].offset)
            s = ah_error_set(err, AH_ERR_INTERNAL, "the tensors of %s's gradient group are not adjacent in the stage",
                             params[i].def.name);
        sh->n += params[i].n;
    }
    for (int id = 0; id < n_ids && s == AH_OK; id++) {
        const ah_opt_group_t *g = tr->plan->n_opt_groups > 0 && member_of(tr, id) ? plan_group(tr, id) : NULL;
        if (g && ah_dp_shard(tr, id)->n > 0) s = shard_parts(tr, g, ah_dp_shard(tr, id), &keys[id], err);
    }
    if (s == AH_OK && tr->plan->n_opt_groups > 0) {
        if (!(*runs = malloc((size_t)(n + 1) * sizeof **runs))) s = ah_error_set(err, AH_ERR_OOM, "no host memory for the optimizer's runs");
        for (int i = 0; s == AH_OK && i < n; i++) {
            const ah_dp_shard_t *sh = ah_dp_shard(tr, ah_dp_group_id(tr, &params[i].def));
            int64_t lo = params[i].offset, hi = lo + params[i].n;
            if (sh->counts) {
                lo = lo > sh->off + sh->begin ? lo : sh->off + sh->begin;
                hi = hi < sh->off + sh->end ? hi : sh->off + sh->end;
            }
            add_run(*runs, n_runs, lo, hi - lo);
        }
    }
    free(params);
    return s;
}

/* A split where this rank joins group `color` (or none when color < 0). */
static ah_status_t split(int color, int key, ah_comm_t **out, ah_error_t *err) {
    return ah_comm_split(ah_comm_world(), color, key, out, err);
}

ah_status_t ah_dp_open_groups(ah_trainer_t *tr, const ah_backend_t *backend, int dev_index, const int *keys,
                               ah_error_t *err) {
    const ah_role_t r = tr->role;
    const int G = tr->layout.n_segments;
#define KEY(id, dflt) (keys[id] >= 0 ? keys[id] : (dflt)) /* a sharded group's ranks in part order */
    ah_status_t s;
    /* Communicators, in one order on every rank (each split is collective over the world). A
     * setup failure on one rank must not leave the others waiting in a split, so the splits run
     * before anything that can fail on one rank alone. */
    const int t = tr->plan->tp, cp = ah_pipeline_cp(&tr->plan->pipelines[r.pipeline]);
    /* a TP group: one CP rank's tp ranks of the stage, named by its TP rank 0's rank; a CP group:
     * the stage's CP ranks of one TP rank, named by its CP rank 0's rank */
    if (t > 1 && (s = split(ah_layout_rank(&tr->layout, r.pipeline, r.stage, r.cp_rank * t), r.tp_rank, &tr->tp.c,
                            err)) != AH_OK)
        return s;
    bool any_cp = false; /* the CP split is collective over the world: every rank joins it then */
    for (int i = 0; i < tr->plan->n_pipelines; i++) any_cp = any_cp || ah_pipeline_cp(&tr->plan->pipelines[i]) > 1;
    if (any_cp) {
        const int color = cp > 1 ? ah_layout_rank(&tr->layout, r.pipeline, r.stage, r.tp_rank) : -1;
        if ((s = split(color, r.cp_rank, &tr->cp.c, err)) != AH_OK) return s;
    }
    if ((s = ah_p2p_split(tr, err)) != AH_OK) return s; /* the pipeline's transfers (runtime/pipe_p2p.h) */
    for (int g = 0; g < tr->layout.n_segments; g++) {
        const bool holds = holds_stage(tr, tr->layout.segments[g].stage_of[r.pipeline]);
        if ((s = split(holds ? r.tp_rank : -1, KEY(g, r.pipeline), &tr->seg[g].c, err)) != AH_OK) return s;
    }
    const bool first = holds_stage(tr, 0), last = holds_stage(tr, tr->S - 1);
    if ((s = split(first ? r.tp_rank : -1, KEY(G + GROUP_FIRST, r.pipeline), &tr->first_group.c, err)) != AH_OK) return s;
    if ((s = split(last ? r.tp_rank : -1, KEY(G + GROUP_LAST, r.pipeline), &tr->last_group.c, err)) != AH_OK) return s;
    if ((s = split(first || last ? r.tp_rank : -1, KEY(G + GROUP_TIED, tr->rank), &tr->wte_group.c, err)) != AH_OK)
        return s;
#undef KEY
    if (tr->plan->dp_sync == AH_DP_SYNC_HIERARCHICAL) /* collective over each group, in the global order */
        for (int id = 0; id < ah_dp_group_count(tr); id++)
            if (ah_dp_group(tr, id)->c && (s = ah_dp_hier_open(tr, id, &tr->hier[id], err)) != AH_OK) return s;
    /* Starting the backend can fail on one rank alone (no usable GPU): agreed on before the
     * device communicators, which are collective over their groups, in the same order. */
    if ((s = ah_comm_agree(ah_comm_world(), ah_device_open(&tr->dev, tr->plan, backend, dev_index, err), err)) != AH_OK)
        return s;
    tr->mem.space = tr->dev.backend->space;
    if ((s = ah_group_attach(&tr->dev, &tr->tp, err)) != AH_OK) return s;
    for (int g = 0; g < tr->layout.n_segments; g++)
        if ((s = ah_group_attach(&tr->dev, &tr->seg[g], err)) != AH_OK) return s;
    if ((s = ah_group_attach(&tr->dev, &tr->first_group, err)) != AH_OK ||
        (s = ah_group_attach(&tr->dev, &tr->last_group, err)) != AH_OK ||
        (s = ah_group_attach(&tr->dev, &tr->wte_group, err)) != AH_OK)
        return s;
    for (int id = 0; id < ah_dp_group_count(tr); id++) /* the hierarchical syncs', in the same order */
        if (tr->hier[id] && (s = ah_dp_hier_attach(&tr->dev, tr->hier[id], err)) != AH_OK) return s;
    if ((s = ah_group_attach(&tr->dev, &tr->cp, err)) != AH_OK) return s; /* the ring's (runtime/cp_ring.h) */
    for (int c = 0; c < tr->n_chunks; c++) {
        ah_p2p_chunk_t *x = &tr->chunks[c];
        const int k = r.cp_rank * tr->plan->tp + r.tp_rank; /* the same CP and TP rank there */
        if (x->stage > 0) x->prev = ah_layout_rank(&tr->layout, r.pipeline, x->stage - 1, k);
        if (x->stage < tr->S - 1) x->next = ah_layout_rank(&tr->layout, r.pipeline, x->stage + 1, k);
    }
    return ah_p2p_attach(tr, err); /* after the others, in the same order on every rank */
}

/* In ah_dp_sync's order, after the overlapped weight all-gathers on the same communicators. */
ah_status_t ah_dp_gather_shards(ah_trainer_t *tr, float *buf, bool host, ah_error_t *err) {
    TRY(ah_dp_gather_wait(tr, err));
    for (int id = 0; id < ah_dp_group_count(tr); id++) {
        ah_group_t *grp = ah_dp_group(tr, id);
        const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
        if (!grp->c || !sh->counts) continue;
        TRY(host ? ah_comm_allgather_f32(grp->c, buf + sh->off, sh->counts, err)
                 : ah_group_allgather(grp, buf + sh->off, sh->counts, NULL, err));
    }
    return AH_OK;
}

void ah_dp_valid_range(const ah_trainer_t *tr, int i, int64_t *lo, int64_t *hi) {
    const ah_gpt_param_t *x = &tr->stage.params[i];
    const ah_dp_shard_t *sh = ah_dp_shard(tr, ah_dp_group_id(tr, &x->def));
    *lo = x->offset;
    *hi = x->offset + x->n;
    if (!sh->counts) return;
    if (*lo < sh->off + sh->begin) *lo = sh->off + sh->begin;
    if (*hi > sh->off + sh->end) *hi = sh->off + sh->end;
    if (*hi < *lo) *hi = *lo;
}
