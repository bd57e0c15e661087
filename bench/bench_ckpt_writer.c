/* The background checkpoint writer's CPU per save, measured on its own thread (getrusage
 * RUSAGE_THREAD: user + system seconds and minor page faults, which other work on the machine
 * changes far less than the wall time): one snapshot shaped like bench_ckpt_overhead.sh's save
 * (GPT-2 blocks' tensors, fp32 weights + AdamW m and v per tensor, as ckpt_io.c's pieces) written
 * with ah_ckpt_snap_write, as the writer thread does, `saves` times, the step directories removed
 * between saves (not timed); the snapshot's tensors in one buffer two ways, one save of each in
 * turn: back to back (as the ranks' copy laid them out before session 19: every byte copied into
 * afile's direct-I/O buffer), and laid out for direct I/O as the ranks' copy does now
 * (runtime/ckpt_async.c, ah_ckpt_piece_start: whole blocks written from where they are). Prints for
 * each the median CPU seconds a save (and per GB, and of them the system's), the minor page faults
 * and the wall time; then the CRC-32C of the same bytes alone (ah_crc32c on this thread, the same
 * clock), the part of the write's CPU that is the checksum; and the ranks' copy of those bytes into
 * a snapshot (ah_crc32c_copy, the CRC taken on the way) against a plain memcpy of them.
 *
 *   bench_ckpt_writer [DIR (default: a new directory under /tmp)] [MB (308)] [FILES (24)] [SAVES (5)]
 *
 * Never run by CTest; never fails on a timing (exits non-zero only when a write fails or the copy's
 * CRC is not the bytes'). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckpt/async.h"
#include "ckpt/crc32c.h"
#include "core/timing.h"

/* A GPT-2 block's parameters at width h: sizes in floats. */
static int block_sizes(int64_t h, int64_t *n) {
    const int64_t s[12] = {h, h, h * 3 * h, 3 * h, h * h, h, h, h, h * 4 * h, 4 * h, 4 * h * h, h};
    memcpy(n, s, sizeof s);
    return 12;
}

/* `files` pieces of a block's 12 parameters x (w, m, v) each, no data yet (place). */
static ah_ckpt_snap_t *make_snap(const char *root, int64_t step, int files, int64_t h) {
    ah_ckpt_snap_t *s = ah_ckpt_snap_new(root, step, 0, "bench", files);
    for (int i = 0; s && i < files; i++) {
        ah_ckpt_piece_t *p = &s->pieces[s->n_pieces++];
        int64_t n[12];
        const int np = block_sizes(h, n);
        p->ts = calloc((size_t)(3 * np), sizeof *p->ts);
        p->names = calloc((size_t)(3 * np), sizeof *p->names);
        p->meta = json_pack("{s:s, s:s}", "format", "autohet-shard", "adam_step", "1");
        snprintf(p->name, sizeof p->name, "block-%03d.tp1-0.safetensors", i);
        for (int j = 0; j < 3 * np; j++) {
            snprintf(p->names[j], sizeof p->names[j], "h.%d.p%d.%s", i, j / 3, (const char *[]){"w", "m", "v"}[j % 3]);
            p->ts[j] = (ah_st_tensor_t){.name = p->names[j], .dtype = AH_DTYPE_F32, .ndim = 1, .shape = {n[j / 3]}};
        }
        p->n = 3 * np;
    }
    return s;
}

static size_t piece_bytes(const ah_ckpt_piece_t *p) {
    size_t b = 0;
    for (int j = 0; j < p->n; j++) b += (size_t)p->ts[j].shape[0] * sizeof(float);
    return b;
}

/* The snapshot's tensors pointed into one buffer (the caller frees it; NULL without memory), every
 * page touched once, as the ranks' copy does: back to back (packed), or as the ranks' snapshot lays
 * them out for direct I/O (ah_ckpt_piece_start: written from where they are); *cap its bytes. */
typedef enum { PACKED, IN_PLACE, N_LAYOUTS } layout_t;
static const char *const LAYOUT_NAME[N_LAYOUTS] = {"back to back (copied through the 4 MiB buffer)",
                                                   "laid out for direct I/O (written in place)"};

static char *place(ah_ckpt_snap_t *s, layout_t layout, size_t *bytes, size_t *cap) {
    *bytes = 0;
    for (int i = 0; i < s->n_pieces; i++) *bytes += piece_bytes(&s->pieces[i]);
    *cap = *bytes + (layout == PACKED ? 0 : (size_t)s->n_pieces * AH_CKPT_SNAP_PAD);
    char *buf = malloc(*cap);
    if (!buf) return NULL;
    uintptr_t at = (uintptr_t)buf;
    for (int i = 0; i < s->n_pieces; i++) {
        ah_error_t err;
        if (layout != PACKED && ah_ckpt_piece_start(&s->pieces[i], at, &at, &err) != AH_OK) {
            fprintf(stderr, "bench_ckpt_writer: %s\n", err.msg);
            exit(1);
        }
        for (int j = 0; j < s->pieces[i].n; j++) {
            ah_st_tensor_t *t = &s->pieces[i].ts[j];
            t->data = (void *)at;
            at += (size_t)t->shape[0] * sizeof(float);
        }
    }
    memset(buf, 0x5a, *cap);
    return buf;
}

static double seconds(struct timeval t) {
    return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

/* This thread's CPU seconds (user + system) so far; *sys (may be NULL) the system's, *faults the
 * minor page faults. */
static double thread_cpu_s(double *sys, long *faults) {
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    if (sys) *sys = seconds(r.ru_stime);
    if (faults) *faults = r.ru_minflt;
    return seconds(r.ru_utime) + seconds(r.ru_stime);
}

static double load_avg(void) {
    double l[1] = {0};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

typedef struct {
    double cpu_s, sys_s, wall_s;
    long faults;
} one_save_t;

/* One write of s (the step directory removed after it, not counted). */
static one_save_t save_once(ah_ckpt_snap_t *s, const char *dir) {
    one_save_t o;
    double sys0;
    long faults0;
    const double cpu0 = thread_cpu_s(&sys0, &faults0), t0 = ah_now_s();
    ah_error_t err = {0};
    if (ah_ckpt_snap_write(s, NULL, &err) != AH_OK) {
        fprintf(stderr, "bench_ckpt_writer: %s\n", err.msg);
        exit(1);
    }
    o.wall_s = ah_now_s() - t0;
    o.cpu_s = thread_cpu_s(&o.sys_s, &o.faults) - cpu0;
    o.sys_s -= sys0;
    o.faults -= faults0;
    char cmd[AH_CKPT_PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/step-*", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_ckpt_writer: could not clean %s\n", dir);
    return o;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    char dir[AH_CKPT_PATH_MAX] = "/tmp/bench_ckpt_writer.XXXXXX";
    if (argc > 1 && argv[1][0]) snprintf(dir, sizeof dir, "%s", argv[1]);
    else if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    const double mb = argc > 2 ? atof(argv[2]) : 308;
    const int files = argc > 3 ? atoi(argv[3]) : 24, saves = argc > 4 ? atoi(argv[4]) : 5;
    int64_t h = 8; /* the width whose block pieces (12 h^2 + 13 h floats x 3 each) come nearest mb */
    while ((12 * (h + 1) * (h + 1) + 13 * (h + 1)) * 3 * 4 * files < mb * 1e6) h++;
    ah_ckpt_snap_t *snap[N_LAYOUTS];
    char *buf[N_LAYOUTS];
    size_t bytes = 0, cap = 0;
    for (int l = 0; l < N_LAYOUTS; l++) {
        snap[l] = make_snap(dir, 1, files, h);
        buf[l] = snap[l] ? place(snap[l], (layout_t)l, &bytes, &cap) : NULL;
        if (!buf[l]) return fprintf(stderr, "bench_ckpt_writer: no memory\n"), 1;
    }
    printf("bench_ckpt_writer: %d saves of %.1f MB in %d files (blocks of width %lld, 36 tensors each) into %s, "
           "each snapshot layout in turn; load %.2f\n", saves, (double)bytes / 1e6, files, (long long)h, dir, load_avg());
    enum { MAX_SAVES = 64 };
    double cpu[N_LAYOUTS][MAX_SAVES], sys[N_LAYOUTS][MAX_SAVES], wall[N_LAYOUTS][MAX_SAVES],
        faults[N_LAYOUTS][MAX_SAVES], crc[MAX_SAVES], copy[2][MAX_SAVES];
    char *to = malloc(bytes); /* the snapshot copy's destination, its own (the written snapshots stay as they are) */
    if (!to) return fprintf(stderr, "bench_ckpt_writer: no memory\n"), 1;
    memset(to, 0, bytes); /* its pages in place before the first copy, as the ranks' kept buffer's are */
    const int n = saves < 1 ? 1 : saves < MAX_SAVES ? saves : MAX_SAVES;
    uint32_t sum = 0;
    int wrong = 0;
    for (int r = 0; r < n; r++) {
        for (int l = 0; l < N_LAYOUTS; l++) {
            const one_save_t o = save_once(snap[l], dir);
            cpu[l][r] = o.cpu_s;
            sys[l][r] = o.sys_s;
            wall[l][r] = o.wall_s;
            faults[l][r] = (double)o.faults;
        }
        const double c0 = thread_cpu_s(NULL, NULL);
        const uint32_t c = ah_crc32c(0, buf[PACKED], bytes);
        const double c1 = thread_cpu_s(NULL, NULL);
        wrong += ah_crc32c_copy(to, buf[PACKED], bytes) != c; /* the copy's CRC is the same bytes' */
        sum ^= c;
        const double c2 = thread_cpu_s(NULL, NULL);
        memcpy(to, buf[PACKED], bytes);
        crc[r] = c1 - c0;
        copy[0][r] = c2 - c1;
        copy[1][r] = thread_cpu_s(NULL, NULL) - c2;
    }
    for (int l = 0; l < N_LAYOUTS; l++) {
        const double c = median(cpu[l], n);
        printf("write, %s: CPU %.3f s a save (%.3f s/GB; system %.3f s), minor faults %.0f, wall %.2f s (medians of "
               "%d)\n", LAYOUT_NAME[l], c, c / ((double)bytes / 1e9), median(sys[l], n), median(faults[l], n),
               median(wall[l], n), n);
    }
    printf("CRC-32C of the same bytes alone: %.3f CPU-s (%s; checksum %08x)\n", median(crc, n),
           ah_crc32c_hardware() ? "SSE4.2's crc32 instruction" : "tables", sum);
    /* The ranks' copy into the snapshot (ah_crc32c_copy: the CRC taken on the way, stores around the
     * caches) against a plain memcpy of the same bytes (glibc's, around the caches at this size): the
     * gap is what taking the CRC costs beyond moving the bytes (docs/checkpoints.md "Not done yet",
     * session 21). */
    const double cc = median(copy[0], n), mc = median(copy[1], n);
    printf("the snapshot copy of the same bytes (ah_crc32c_copy, CRC taken): %.3f CPU-s (%.1f GB/s); memcpy of "
           "them at once: %.3f CPU-s (%.1f GB/s)%s\n", cc, (double)bytes / 1e9 / cc, mc, (double)bytes / 1e9 / mc,
           wrong ? "; THE COPY'S CRC DIFFERED" : "");
    printf("load at the end %.2f\n", load_avg());
    free(to);
    for (int l = 0; l < N_LAYOUTS; l++) {
        ah_ckpt_snap_free(snap[l]);
        free(buf[l]);
    }
    if (argc <= 1 || !argv[1][0]) rmdir(dir);
    return wrong != 0;
}
