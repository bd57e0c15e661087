/* The CPU backend (backend.h): kernels/cpu's fp32 table, host memory, MPI for the group sums. */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/entries.h"

enum { HUGE_MIN = 4 << 20 }; /* blocks from this size on are worth huge pages */

/* Zeroed and 64-byte aligned. calloc, not aligned_alloc + memset: a large block comes as fresh
 * zero pages from the kernel, untouched until first written, so a stage of 1 GB does not pay a
 * pass over its memory (and every page fault) before its initialisation or restore writes it.
 * The block calloc returned is kept just below the aligned pointer for host_free. */
static void *host_alloc(size_t bytes, char *why, size_t why_len) {
    const size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    char *raw = calloc(1, rounded + 64 + sizeof(void *));
    if (!raw) {
        snprintf(why, why_len, "the host has no memory left");
        return NULL;
    }
    char *p = (char *)(((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    if (rounded >= HUGE_MIN) {
        /* Transparent huge pages where the system leaves them to madvise: a first touch faults
         * in 2 MiB instead of 4 KiB. Page faults were ~20% of the samples of a 1 GB resume on
         * this VM (perf), the memset before calloc another 25%. A hint: failure changes nothing. */
        const uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + rounded) & ~(uintptr_t)4095;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
    return p;
}

static void host_free(void *p) {
    if (!p) return;
    void *raw;
    memcpy(&raw, (char *)p - sizeof raw, sizeof raw);
    free(raw);
}

static ah_status_t host_copy(void *dst, const void *src, size_t bytes, ah_error_t *err) {
    (void)err;
    memcpy(dst, src, bytes);
    return AH_OK;
}

const ah_mem_space_t ah_mem_host = {"host", host_alloc, host_free, host_copy, host_copy};

/* Nothing to start, no device; bf16 and fp16 never reach here (the backend does not train in them). */
static ah_status_t cpu_open(int index, int precision, const ah_kernels_t **kernels, int *device,
                            ah_error_t *err) {
    (void)index, (void)precision, (void)err;
    *kernels = ah_kernels_cpu();
    *device = -1;
    return AH_OK;
}

/* For the CPU device types, fp32 only; no per-step check (its kernels are synchronous and cannot
 * fail) and no device communication (its buffers are host memory: groups sum with MPI). A
 * snapshot's copies are made off the training thread (cpu_snapshot.c) into ordinary host memory. */
const ah_backend_t ah_backend_cpu = {.name = "cpu", .title = "CPU backend", .space = &ah_mem_host,
                                     .open = cpu_open, .snap_copy_create = ah_cpu_snap_create,
                                     .snap_copy_free = ah_cpu_snap_free, .snap_copy = ah_cpu_snap_copy,
                                     .snap_copy_wait = ah_cpu_snap_wait, .snap_copy_fence = ah_cpu_snap_fence};
