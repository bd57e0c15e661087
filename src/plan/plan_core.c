/* Plan construction and teardown (reading/writing is plan_io.c, rules are plan_validate.c). */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

ah_status_t ah_plan_init(ah_plan_t *p, const ah_model_t *m, const ah_train_t *train, int tp,
                         const ah_cluster_t *cluster, int n_pipelines, ah_error_t *err) {
    memset(p, 0, sizeof *p);
    p->model = *m;
    p->train = *train;
    p->tp = tp;
    if (n_pipelines < 0) return ah_error_set(err, AH_ERR_INTERNAL, "negative pipeline count");
    if (cluster) {
        ah_status_t s = ah_cluster_copy(cluster, &p->cluster, err);
        if (s != AH_OK) return s;
    }
    if (n_pipelines > 0) {
        p->pipelines = calloc((size_t)n_pipelines, sizeof *p->pipelines);
        if (!p->pipelines) {
            ah_cluster_free(&p->cluster);
            return ah_error_set(err, AH_ERR_OOM, "out of host memory for %d pipelines", n_pipelines);
        }
    }
    p->n_pipelines = n_pipelines;
    return AH_OK;
}

ah_status_t ah_pipeline_alloc(ah_pipeline_t *pl, int n_stages, ah_error_t *err) {
    free(pl->stages);
    pl->stages = NULL;
    pl->n_stages = 0;
    pl->cp = 1;
    if (n_stages <= 0) return ah_error_set(err, AH_ERR_INTERNAL, "a pipeline needs at least one stage");
    pl->stages = calloc((size_t)n_stages, sizeof *pl->stages);
    if (!pl->stages) return ah_error_set(err, AH_ERR_OOM, "out of host memory for %d stages", n_stages);
    pl->n_stages = n_stages;
    return AH_OK;
}

void ah_plan_free(ah_plan_t *p) {
    if (!p) return;
    for (int i = 0; i < p->n_pipelines; i++) free(p->pipelines[i].stages);
    free(p->pipelines);
    for (int k = 0; k < p->n_opt_groups; k++) free(p->opt_groups[k].shares);
    free(p->opt_groups);
    ah_cluster_free(&p->cluster);
    memset(p, 0, sizeof *p);
}

static const char *const SCHEDULES[] = {"1f1b", "interleaved", "zero-bubble"};

const char *ah_schedule_name(ah_schedule_t s) {
    return s >= AH_SCHED_1F1B && s <= AH_SCHED_ZERO_BUBBLE ? SCHEDULES[s] : "unknown";
}

bool ah_schedule_parse(const char *s, ah_schedule_t *out) {
    for (int k = 0; k < 3; k++)
        if (strcmp(s, SCHEDULES[k]) == 0) return *out = (ah_schedule_t)k, true;
    return false;
}

int *ah_pipeline_warmup(const ah_pipeline_t *pl) {
    int *x = malloc(sizeof *x * (size_t)(pl->n_stages > 0 ? pl->n_stages : 1));
    for (int s = 0; x && s < pl->n_stages; s++) x[s] = pl->stages[s].warmup_extra;
    return x;
}

int ah_pipeline_groups(const ah_pipeline_t *pl) {
    if (pl->schedule != AH_SCHED_INTERLEAVED || !pl->stages) return pl->n_stages;
    int groups = 0;
    for (int s = 0; s < pl->n_stages; s++) {
        const ah_device_ref_t d = pl->stages[s].devices[0];
        int t = 0;
        while (t < s && (pl->stages[t].devices[0].node != d.node || pl->stages[t].devices[0].index != d.index)) t++;
        groups += t == s;
    }
    return groups;
}

int ah_pipeline_group_of(const ah_pipeline_t *pl, int s) {
    if (pl->schedule != AH_SCHED_INTERLEAVED) return s;
    const int groups = ah_pipeline_groups(pl);
    return groups > 0 ? s % groups : 0;
}

int ah_plan_rank_of(const ah_plan_t *p, int i, int s, int r) {
    int base = 0;
    for (int j = 0; j < i; j++) base += ah_pipeline_groups(&p->pipelines[j]) * ah_stage_devices(&p->pipelines[j], p->tp);
    return base + ah_pipeline_group_of(&p->pipelines[i], s) * ah_stage_devices(&p->pipelines[i], p->tp) + r;
}

const ah_device_ref_t *ah_plan_rank_device(const ah_plan_t *p, int r) {
    for (int i = 0; i < p->n_pipelines && r >= 0; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int devs = ah_stage_devices(pl, p->tp), groups = ah_pipeline_groups(pl);
        if (r < groups * devs) return &pl->stages[r / devs].devices[r % devs];
        r -= groups * devs;
    }
    return NULL;
}

int ah_plan_device_count(const ah_plan_t *p) {
    int n = 0;
    for (int i = 0; i < p->n_pipelines; i++) n += ah_pipeline_groups(&p->pipelines[i]) * ah_stage_devices(&p->pipelines[i], p->tp);
    return n;
}

ah_status_t ah_plan_copy(const ah_plan_t *p, ah_plan_t *out, ah_error_t *err) {
    ah_status_t st = ah_plan_init(out, &p->model, &p->train, p->tp, &p->cluster, p->n_pipelines, err);
    if (st == AH_OK) {
        out->dp_sync = p->dp_sync;
        out->p2p = p->p2p;
    }
    for (int i = 0; i < p->n_pipelines && st == AH_OK; i++) {
        st = ah_pipeline_alloc(&out->pipelines[i], p->pipelines[i].n_stages, err);
        if (st != AH_OK) break;
        out->pipelines[i].micro_batches = p->pipelines[i].micro_batches;
        out->pipelines[i].schedule = p->pipelines[i].schedule;
        out->pipelines[i].cp = p->pipelines[i].cp;
        memcpy(out->pipelines[i].stages, p->pipelines[i].stages, sizeof(ah_stage_t) * (size_t)p->pipelines[i].n_stages);
    }
    if (st == AH_OK && p->n_opt_groups > 0) st = ah_plan_copy_shards(p, out, err);
    if (st != AH_OK) ah_plan_free(out);
    return st;
}
