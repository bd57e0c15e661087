/* Where a backend's tensors live: a memory space, the allocator and copies of one kind of memory.
 *
 * runtime/mem.h's budgets (arenas, the cap, the high-water mark) take their bytes from a space:
 * the host's by default, a device's on a rank of a GPU backend (backend.h: ah_backend_t.space),
 * so the same accounting is the device's high-water mark there.
 *
 * alloc returns `bytes` zeroed bytes, or NULL with the space's reason in `why`; free takes what
 * alloc returned (or NULL); upload and download are synchronous copies between the space's memory
 * and the host's. Spaces are static and shared by every budget that uses them.
 */
#ifndef AH_BACKEND_MEM_SPACE_H
#define AH_BACKEND_MEM_SPACE_H

#include <stddef.h>

#include "core/status.h"

typedef struct ah_mem_space {
    const char *name; /* for messages: "host", "CUDA device" */
    void *(*alloc)(size_t bytes, char *why, size_t why_len);
    void (*free)(void *p);
    ah_status_t (*upload)(void *dst, const void *host, size_t bytes, ah_error_t *err);
    ah_status_t (*download)(void *host, const void *src, size_t bytes, ah_error_t *err);
} ah_mem_space_t;

/* Host memory (the CPU backend's): 64-byte aligned, copies are memcpy. */
extern const ah_mem_space_t ah_mem_host;

#endif
