/* Device memory accounting for the CPU runtime (and the emulation of a GPU's capacity).
 *
 * Every tensor the trainer keeps is allocated through ah_mem_alloc with a name, from one device
 * budget: the tracker counts live bytes and their high-water mark — the figure the memory model
 * is checked against — and refuses an allocation past the cap (emulate.memory_mib) with an
 * out-of-memory error naming the tensor and the shortfall. Tensors are grouped by lifetime in
 * arenas (parameters, optimizer state, activations); an arena frees all of its tensors at once.
 * Nothing is allocated inside the training step loop.
 *
 * The bytes come from the budget's memory space (backend/mem_space.h): the host's by default, a
 * GPU's on a rank of a GPU backend, so the same accounting is the device's high-water mark there.
 */
#ifndef AH_RUNTIME_MEM_H
#define AH_RUNTIME_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/mem_space.h"
#include "core/status.h"

typedef struct ah_mem {
    int64_t cap;       /* bytes; 0 = unlimited */
    int64_t live;      /* bytes allocated now */
    int64_t high;      /* high-water mark of live */
    char device[96];   /* for messages: "fast-0:1 (cpu-fast)" */
    const ah_mem_space_t *space; /* ah_mem_host unless set before the first allocation */
} ah_mem_t;

typedef struct ah_arena {
    ah_mem_t *mem;
    const char *name;  /* "parameters", "activations", ... */
    void **blocks;     /* owned allocations */
    int64_t *sizes;
    int n, cap_blocks;
} ah_arena_t;

void ah_mem_init(ah_mem_t *m, int64_t cap_bytes, const char *device);
void ah_arena_init(ah_arena_t *a, ah_mem_t *mem, const char *name);
/* Zeroed, in the budget's space. `tensor` names it in an out-of-memory message. */
ah_status_t ah_arena_alloc(ah_arena_t *a, int64_t bytes, const char *tensor, void **out,
                           ah_error_t *err);
/* Shorthand for float tensors of n elements. */
ah_status_t ah_arena_floats(ah_arena_t *a, int64_t n, const char *tensor, float **out, ah_error_t *err);
void ah_arena_free(ah_arena_t *a);

/* ---- host access, for code outside the kernels (initialisation, token ids, p2p staging, dumps,
 * checkpoints) ----
 * On host memory these cost nothing: ah_mem_host_view returns p itself and the copies between a
 * pointer and itself do nothing, so one code path serves both spaces with no copy on the CPU.
 *
 * ah_mem_host_view: host memory for the `bytes` at p of the budget's space: p itself on the
 * host; else a malloc'd buffer, filled by a download when `read`. ah_mem_host_done frees it (not
 * p). ah_mem_upload / ah_mem_download copy between a pointer of the space and host memory; they
 * do nothing when the two are the same pointer. */
ah_status_t ah_mem_host_view(const ah_mem_t *m, void *p, size_t bytes, bool read, void **host,
                             ah_error_t *err);
void ah_mem_host_done(const void *p, void *host);
ah_status_t ah_mem_upload(const ah_mem_t *m, void *dst, const void *host, size_t bytes, ah_error_t *err);
ah_status_t ah_mem_download(const ah_mem_t *m, void *host, const void *src, size_t bytes, ah_error_t *err);

#endif
