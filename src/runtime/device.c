/* Backend selection and group sums of a training rank (device.h). The only runtime file that
 * knows whether the CUDA backend was built. */
#include "runtime/device.h"

#include <stdlib.h>
#include <string.h>

#ifdef AH_HAVE_CUDA
#include "kernels/cuda/kernels_cuda.h"
#endif

bool ah_device_type_is_cpu(const ah_gpu_type_t *t) {
    return t->emulate_slowdown > 0 || strncmp(t->name, "cpu", 3) == 0;
}

/* AH_BACKEND: "cuda" forces CUDA; unset, "" or "auto" picks by type. */
static ah_status_t forced_cuda(bool *force, ah_error_t *err) {
    const char *e = getenv("AH_BACKEND");
    *force = e && strcmp(e, "cuda") == 0;
    if (e && *e && !*force && strcmp(e, "auto") != 0)
        return ah_error_set(err, AH_ERR_USAGE, "AH_BACKEND=%s: expected \"cuda\" (run every rank on "
                            "the CUDA backend) or \"auto\" (by device type; also when unset)", e);
    return AH_OK;
}

ah_status_t ah_device_select(const ah_plan_t *plan, int type, bool *cuda, ah_error_t *err) {
    const ah_cluster_t *cl = &plan->cluster;
    bool force;
    ah_status_t s = forced_cuda(&force, err);
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
    *cuda = force || !ah_device_type_is_cpu(t);
    const char *prec = ah_precision_name(plan->train.precision);
    if (!*cuda) {
        if (plan->train.precision != AH_PREC_FP32)
            return ah_error_set(err, AH_ERR_INVALID, "train.precision is %s, but device type %s runs "
                                "on the CPU backend, which trains in fp32 only (set \"precision\": "
                                "\"fp32\", or use a GPU type with a -DAH_CUDA=ON build)", prec, t->name);
        return AH_OK;
    }
#ifdef AH_HAVE_CUDA
    if (plan->train.precision != AH_PREC_FP32 && plan->train.precision != AH_PREC_BF16)
        return ah_error_set(err, AH_ERR_INVALID, "train.precision is %s; the CUDA backend trains in "
                            "fp32 or bf16", prec);
    return AH_OK;
#else
    return ah_error_set(err, AH_ERR_INVALID, "device type %s %s the CUDA backend, but this build "
                        "has none: configure with -DAH_CUDA=ON (docs/gpu.md)%s", t->name,
                        force ? "is forced (AH_BACKEND=cuda) onto" : "is a GPU and needs",
                        force ? ", or unset AH_BACKEND" : ", or train a plan of emulated CPU types");
#endif
}

ah_status_t ah_device_open(ah_device_t *d, const ah_plan_t *plan, bool cuda, int index, ah_error_t *err) {
    memset(d, 0, sizeof *d);
    d->k = ah_kernels_cpu();
    d->space = &ah_mem_host;
    d->cuda = -1;
    if (!cuda) return AH_OK;
#ifdef AH_HAVE_CUDA
    const int n = ah_cuda_device_count();
    ah_status_t s = ah_cuda_init(n > 0 ? index % n : 0, err);
    if (s != AH_OK) return ah_error_prefix(err, "CUDA backend");
    d->k = plan->train.precision == AH_PREC_BF16 ? ah_kernels_cuda_bf16() : ah_kernels_cuda();
    d->space = ah_cuda_mem_space();
    d->cuda = index % n;
    return AH_OK;
#else
    (void)plan, (void)index;
    return ah_error_set(err, AH_ERR_INTERNAL, "the CUDA backend was selected in a build without it");
#endif
}

ah_status_t ah_device_check(const ah_device_t *d, ah_error_t *err) {
#ifdef AH_HAVE_CUDA
    if (d->cuda >= 0) return ah_cuda_check(err);
#endif
    (void)d, (void)err;
    return AH_OK;
}

ah_status_t ah_group_attach(const ah_device_t *d, ah_group_t *g, ah_error_t *err) {
#ifdef AH_HAVE_CUDA
    if (g->c && d->cuda >= 0) return ah_dcomm_create(g->c, d->cuda, 0, &g->dc, err);
#endif
    (void)d, (void)g, (void)err;
    return AH_OK;
}

ah_status_t ah_group_sum(ah_group_t *g, float *buf, size_t n, ah_error_t *err) {
#ifdef AH_HAVE_CUDA
    if (g->dc) return ah_dcomm_allreduce_f32(g->dc, buf, n, err);
#endif
    return ah_comm_allreduce_f32(g->c, buf, n, err);
}

void ah_group_free(ah_group_t *g) {
#ifdef AH_HAVE_CUDA
    ah_dcomm_free(&g->dc);
#endif
    ah_comm_free(&g->c);
}
