#include "runtime/layout.h"

#include <stdlib.h>
#include <string.h>

ah_status_t ah_layout_build(const ah_plan_t *p, ah_layout_t *l, ah_error_t *err) {
    memset(l, 0, sizeof *l);
    int n_stage_total = 0;
    for (int i = 0; i < p->n_pipelines; i++) n_stage_total += p->pipelines[i].n_stages;
    l->n_ranks = ah_plan_device_count(p);
    int L = (int)p->model.n_layer;
    char *cut = calloc((size_t)L + 1, 1);
    l->roles = calloc((size_t)l->n_ranks, sizeof *l->roles);
    l->stage_rank0 = calloc((size_t)n_stage_total, sizeof *l->stage_rank0);
    l->stage_base = calloc((size_t)p->n_pipelines, sizeof *l->stage_base);
    if (!cut || !l->roles || !l->stage_rank0 || !l->stage_base) {
        free(cut);
        ah_layout_free(l);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the rank layout");
    }
    int rank = 0, base = 0;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        l->stage_base[i] = base;
        const int groups = ah_pipeline_groups(pl);
        for (int d = 0; d < groups; d++)
            for (int k = 0; k < ah_stage_devices(pl, p->tp); k++)
                l->roles[rank++] = (ah_role_t){i, d, k % p->tp, pl->n_stages / groups, groups, k / p->tp};
        for (int s = 0; s < pl->n_stages; s++) {
            l->stage_rank0[base + s] = ah_plan_rank_of(p, i, s, 0);
            cut[pl->stages[s].first] = 1;
        }
        base += pl->n_stages;
    }
    cut[L] = 1;
    for (int c = 1; c <= L; c++) l->n_segments += cut[c];
    l->segments = calloc((size_t)l->n_segments, sizeof *l->segments);
    int ok = l->segments != NULL;
    for (int c = 0, k = 0, first = 0; ok && c <= L; c++) {
        if (c == 0 || !cut[c]) continue;
        ah_segment_t *sg = &l->segments[k++];
        sg->first = first;
        sg->last = c;
        first = c;
        sg->stage_of = malloc((size_t)p->n_pipelines * sizeof *sg->stage_of);
        if (!sg->stage_of) { ok = 0; break; }
        for (int i = 0; i < p->n_pipelines; i++) {
            const ah_pipeline_t *pl = &p->pipelines[i];
            int s = 0;
            while (s + 1 < pl->n_stages && pl->stages[s].last <= sg->first) s++;
            sg->stage_of[i] = s;
        }
    }
    free(cut);
    if (!ok) {
        ah_layout_free(l);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the rank layout");
    }
    return AH_OK;
}

void ah_layout_free(ah_layout_t *l) {
    for (int k = 0; l->segments && k < l->n_segments; k++) free(l->segments[k].stage_of);
    free(l->segments);
    free(l->roles);
    free(l->stage_rank0);
    free(l->stage_base);
    memset(l, 0, sizeof *l);
}

int ah_layout_rank(const ah_layout_t *l, int pipeline, int stage, int device) {
    return l->stage_rank0[l->stage_base[pipeline] + stage] + device;
}

int ah_role_chunk(const ah_role_t *r, int s) {
    const int c = (s - r->stage) / r->stride;
    return s >= r->stage && (s - r->stage) % r->stride == 0 && c < r->chunks ? c : -1;
}

ah_device_ref_t ah_role_device(const ah_plan_t *p, const ah_role_t *r) {
    return p->pipelines[r->pipeline].stages[r->stage].devices[r->cp_rank * p->tp + r->tp_rank];
}
