/* The registry of backends (backend.h): the one place that knows which were built. */
#include <string.h>

#include "backend/entries.h"

static const ah_backend_t *const registry[] = {
    &ah_backend_cpu,
#ifdef AH_HAVE_CUDA
    &ah_backend_cuda,
#endif
};

int ah_backend_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

const ah_backend_t *ah_backend_at(int i) { return registry[i]; }

const ah_backend_t *ah_backend_find(const char *name) {
    for (int i = 0; i < ah_backend_count(); i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}
