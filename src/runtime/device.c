/* Backend selection and group sums of a training rank (device.h): a loop over backend/backend.h's
 * registry, which alone knows what this build has. */
#include "runtime/device.h"

#include <stdlib.h>
#include <string.h>

bool ah_device_type_is_cpu(const ah_gpu_type_t *t) {
    return t->emulate_slowdown > 0 || strncmp(t->name, "cpu", 3) == 0;
}

/* AH_BACKEND: "cuda" forces the GPU backend; unset, "" or "auto" picks by type. */
static ah_status_t forced_gpu(bool *force, ah_error_t *err) {
    const char *e = getenv("AH_BACKEND");
    *force = e && strcmp(e, "cuda") == 0;
    if (e && *e && !*force && strcmp(e, "auto") != 0)
        return ah_error_set(err, AH_ERR_USAGE, "AH_BACKEND=%s: expected \"cuda\" (run every rank on "
                            "the CUDA backend) or \"auto\" (by device type; also when unset)", e);
    return AH_OK;
}

/* The registry's first backend for GPU device types (gpu) or for CPU ones; NULL if it has none. */
static const ah_backend_t *backend_for(bool gpu) {
    for (int i = 0; i < ah_backend_count(); i++)
        if (ah_backend_at(i)->gpu == gpu) return ah_backend_at(i);
    return NULL;
}

ah_status_t ah_device_select(const ah_plan_t *plan, int type, const ah_backend_t **backend,
                             ah_error_t *err) {
    const ah_cluster_t *cl = &plan->cluster;
    bool force;
    ah_status_t s = forced_gpu(&force, err);
    if (s != AH_OK) return s;
    /* One backend per job: the DP groups span pipelines of different types. */
    const char *cpu_name = NULL, *gpu_name = NULL;
    for (int p = 0; p < plan->n_pipelines; p++)
        for (int i = 0; i < plan->pipelines[p].n_stages; i++) {
            const ah_gpu_type_t *t = &cl->types[plan->pipelines[p].stages[i].type];
            *(ah_device_type_is_cpu(t) ? &cpu_name : &gpu_name) = t->name;
        }
    if (cpu_name && gpu_name && !force)
        return ah_error_set(err, AH_ERR_INVALID, "the plan mixes CPU device type %s and GPU device "
                            "type %s; the trainer runs one backend per job (AH_BACKEND=cuda runs "
                            "every rank on the GPU)", cpu_name, gpu_name);
    const ah_gpu_type_t *t = &cl->types[type];
    const ah_backend_t *b = backend_for(force || !ah_device_type_is_cpu(t));
    if (!b)
        return ah_error_set(err, AH_ERR_INVALID, "device type %s %s the CUDA backend, but this build "
                            "has none: configure with -DAH_CUDA=ON (docs/gpu.md)%s", t->name,
                            force ? "is forced (AH_BACKEND=cuda) onto" : "is a GPU and needs",
                            force ? ", or unset AH_BACKEND" : ", or train a plan of emulated CPU types");
    if (plan->train.precision != AH_PREC_FP32 && !b->half)
        return ah_error_set(err, AH_ERR_INVALID, "train.precision is %s, but device type %s runs "
                            "on the %s, which trains in fp32 only (set \"precision\": \"fp32\", or "
                            "use a GPU type with a -DAH_CUDA=ON build)",
                            ah_precision_name(plan->train.precision), t->name, b->title);
    *backend = b;
    return AH_OK;
}

ah_status_t ah_device_open(ah_device_t *d, const ah_plan_t *plan, const ah_backend_t *backend,
                           int index, ah_error_t *err) {
    memset(d, 0, sizeof *d);
    d->backend = backend;
    d->index = -1;
    if (backend->open(index, (int)plan->train.precision, &d->k, &d->index, err) != AH_OK)
        return ah_error_prefix(err, "%s", backend->title);
    return AH_OK;
}

ah_status_t ah_device_check(const ah_device_t *d, ah_error_t *err) {
    return d->backend->check ? d->backend->check(err) : AH_OK;
}

ah_status_t ah_group_attach(const ah_device_t *d, ah_group_t *g, ah_error_t *err) {
    if (!g->c || !d->backend->dcomm_create) return AH_OK;
    g->backend = d->backend;
    return d->backend->dcomm_create(g->c, d->index, &g->dc, err);
}

ah_status_t ah_group_sum(ah_group_t *g, float *buf, size_t n, ah_dcomm_event_t *done, ah_error_t *err) {
    if (g->dc) return g->backend->dcomm_sum(g->dc, buf, n, done, err);
    return ah_comm_allreduce_f32(g->c, buf, n, err);
}

ah_status_t ah_group_max(ah_group_t *g, float *buf, size_t n, ah_error_t *err) {
    if (g->dc) return g->backend->dcomm_max(g->dc, buf, n, err);
    return ah_comm_allreduce_max_f32(g->c, buf, n, err);
}

ah_status_t ah_group_reduce_scatter(ah_group_t *g, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                                    ah_error_t *err) {
    if (g->dc) return g->backend->dcomm_reduce_scatter(g->dc, buf, counts, done, err);
    return ah_comm_reduce_scatter_f32(g->c, buf, counts, err);
}

ah_status_t ah_group_allgather(ah_group_t *g, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                               ah_error_t *err) {
    if (g->dc) return g->backend->dcomm_allgather(g->dc, buf, counts, done, err);
    return ah_comm_allgather_f32(g->c, buf, counts, err);
}

void ah_group_free(ah_group_t *g) {
    if (g->dc) g->backend->dcomm_free(&g->dc);
    ah_comm_free(&g->c);
}
