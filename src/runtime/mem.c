#include "runtime/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ah_mem_init(ah_mem_t *m, int64_t cap_bytes, const char *device) {
    memset(m, 0, sizeof *m);
    m->cap = cap_bytes;
    m->space = &ah_mem_host;
    snprintf(m->device, sizeof m->device, "%s", device ? device : "device");
}

void ah_arena_init(ah_arena_t *a, ah_mem_t *mem, const char *name) {
    memset(a, 0, sizeof *a);
    a->mem = mem;
    a->name = name;
}

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

static ah_status_t reserve(ah_arena_t *a, int64_t bytes, const char *tensor, ah_error_t *err) {
    ah_mem_t *m = a->mem;
    if (bytes < 0) return ah_error_set(err, AH_ERR_INTERNAL, "negative size for %s", tensor);
    if (m->cap > 0 && m->live + bytes > m->cap)
        return ah_error_set(err, AH_ERR_OOM,
                            "%s: out of memory allocating %s (%.2f MiB, %s): %.2f MiB in use + this "
                            "= %.2f MiB, capacity %.2f MiB, short by %lld bytes; use a plan with "
                            "recomputation, a smaller micro-batch or more stages on this device type",
                            m->device, tensor, mib(bytes), a->name, mib(m->live),
                            mib(m->live + bytes), mib(m->cap), (long long)(m->live + bytes - m->cap));
    if (a->n == a->cap_blocks) {
        int nc = a->cap_blocks ? 2 * a->cap_blocks : 64;
        void **nb = realloc(a->blocks, (size_t)nc * sizeof *nb);
        int64_t *ns = nb ? realloc(a->sizes, (size_t)nc * sizeof *ns) : NULL;
        if (nb) a->blocks = nb;
        if (!ns) return ah_error_set(err, AH_ERR_OOM, "no host memory to track %s", tensor);
        a->sizes = ns;
        a->cap_blocks = nc;
    }
    return AH_OK;
}

static void record(ah_arena_t *a, void *p, int64_t bytes) {
    a->blocks[a->n] = p;
    a->sizes[a->n] = bytes;
    a->n++;
    a->mem->live += bytes;
    if (a->mem->live > a->mem->high) a->mem->high = a->mem->live;
}

ah_status_t ah_arena_alloc(ah_arena_t *a, int64_t bytes, const char *tensor, void **out,
                           ah_error_t *err) {
    ah_status_t s = reserve(a, bytes, tensor, err);
    if (s != AH_OK) return s;
    char why[256] = "";
    void *p = a->mem->space->alloc((size_t)bytes, why, sizeof why);
    if (!p)
        return ah_error_set(err, AH_ERR_OOM, "%s: no %s memory for %s (%.2f MiB, %s; %.2f MiB "
                            "allocated): %s; use a plan with recomputation or a smaller micro-batch",
                            a->mem->device, a->mem->space->name, tensor, mib(bytes), a->name,
                            mib(a->mem->live), why);
    record(a, p, bytes);
    *out = p;
    return AH_OK;
}

ah_status_t ah_arena_floats(ah_arena_t *a, int64_t n, const char *tensor, float **out, ah_error_t *err) {
    void *p = NULL;
    ah_status_t s = ah_arena_alloc(a, n * (int64_t)sizeof(float), tensor, &p, err);
    *out = p;
    return s;
}

void ah_arena_free(ah_arena_t *a) {
    for (int i = 0; i < a->n; i++) {
        a->mem->space->free(a->blocks[i]);
        a->mem->live -= a->sizes[i];
    }
    free(a->blocks);
    free(a->sizes);
    a->blocks = NULL;
    a->sizes = NULL;
    a->n = a->cap_blocks = 0;
}

ah_status_t ah_mem_host_view(const ah_mem_t *m, void *p, size_t bytes, bool read, void **host,
                             ah_error_t *err) {
    *host = p;
    if (m->space == &ah_mem_host) return AH_OK;
    if (!(*host = malloc(bytes ? bytes : 1)))
        return ah_error_set(err, AH_ERR_OOM, "%s: no host memory for a %.2f MiB copy of device data",
                            m->device, mib((int64_t)bytes));
    ah_status_t s = read ? m->space->download(*host, p, bytes, err) : AH_OK;
    if (s != AH_OK) {
        free(*host);
        *host = NULL;
    }
    return s;
}

void ah_mem_host_done(const void *p, void *host) {
    if (host != p) free(host);
}

ah_status_t ah_mem_upload(const ah_mem_t *m, void *dst, const void *host, size_t bytes, ah_error_t *err) {
    return dst == host || bytes == 0 ? AH_OK : m->space->upload(dst, host, bytes, err);
}

ah_status_t ah_mem_download(const ah_mem_t *m, void *host, const void *src, size_t bytes, ah_error_t *err) {
    return host == src || bytes == 0 ? AH_OK : m->space->download(host, src, bytes, err);
}
