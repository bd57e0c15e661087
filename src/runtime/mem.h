/* Device memory accounting for the CPU runtime (and the emulation of a GPU's capacity).
 *
 * Every tensor the trainer keeps is allocated through ah_mem_alloc with a name, from one device
 * budget: the tracker counts live bytes and their high-water mark — the figure the memory model
 * is checked against — and refuses an allocation past the cap (emulate.memory_mib) with an
 * out-of-memory error naming the tensor and the shortfall. Tensors are grouped by lifetime in
 * arenas (parameters, optimizer state, activations); an arena frees all of its tensors at once.
 * Nothing is allocated inside the training step loop.
 */
#ifndef AH_RUNTIME_MEM_H
#define AH_RUNTIME_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct ah_mem {
    int64_t cap;       /* bytes; 0 = unlimited */
    int64_t live;      /* bytes allocated now */
    int64_t high;      /* high-water mark of live */
    char device[96];   /* for messages: "fast-0:1 (cpu-fast)" */
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
/* Zeroed, 64-byte aligned. `tensor` names it in an out-of-memory message. */
ah_status_t ah_arena_alloc(ah_arena_t *a, int64_t bytes, const char *tensor, void **out,
                           ah_error_t *err);
/* Shorthand for float tensors of n elements. */
ah_status_t ah_arena_floats(ah_arena_t *a, int64_t n, const char *tensor, float **out, ah_error_t *err);
void ah_arena_free(ah_arena_t *a);

/* For a backend that allocates device memory itself (CUDA): ah_arena_reserve checks the cap
 * (with the same out-of-memory message) and makes room to track one more block; after the
 * backend's own allocation succeeds, ah_arena_record counts it. ah_arena_release hands every
 * block to `release` (cudaFree, or free for host blocks) and uncounts it. */
ah_status_t ah_arena_reserve(ah_arena_t *a, int64_t bytes, const char *tensor, ah_error_t *err);
void ah_arena_record(ah_arena_t *a, void *p, int64_t bytes);
void ah_arena_release(ah_arena_t *a, void (*release)(void *));

#endif
