/* MPI backend of comm.h. */
#include "comm/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_mpi.h"
#include "core/timing.h"
#ifdef AH_CUDA_EMU
#include <nccl.h> /* the CUDA emulation's: its communicators meet over the world (ahEmuNcclSetWorld) */
#endif

_Static_assert(sizeof(MPI_Request) <= sizeof(((ah_comm_req_t *)0)->h),
               "ah_comm_req_t too small for MPI_Request");

static struct ah_comm g_world = {MPI_COMM_NULL, NULL};
static int g_job = -1; /* AH_WORLD_JOIN's JOB, -1: one mpirun job */

/* Seconds spent inside MPI calls so far, wall clock and the calling thread's CPU time
 * (ah_comm_seconds): MPI_TRY times every call it makes. The thread's, not the process's: every MPI
 * call is on the training thread (no MPI_THREAD_MULTIPLE), and a background thread's CPU in the
 * meantime (the checkpoint writer's) is neither communication nor the device's compute; one clock
 * read a call (ah_cpu_s reads one more per background thread, core/timing.h). */
static double g_in_wall, g_in_cpu;

static int timed(int rc, double wall0, double cpu0) {
    g_in_wall += ah_now_s() - wall0;
    g_in_cpu += ah_cpu_thread_s() - cpu0;
    return rc;
}

void ah_comm_seconds(double *wall, double *cpu) {
    *wall = g_in_wall;
    *cpu = g_in_cpu;
}

static ah_status_t mpi_fail(ah_error_t *err, int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return ah_error_set(err, AH_ERR_COMM, "%s failed: %s (a peer rank may have died; see its "
                        "message above)", what, text);
}
/* Calls an MPI function, timed for ah_comm_seconds; on failure returns an AH_ERR_COMM. */
#define MPI_TRY(call, what)                                                           \
    do {                                                                              \
        const double wall0_ = ah_now_s(), cpu0_ = ah_cpu_thread_s();                  \
        const int rc_ = timed((call), wall0_, cpu0_);                                 \
        if (rc_ != MPI_SUCCESS) return mpi_fail(err, rc_, what);                      \
    } while (0)

/* ---- waiting ----
 * Every call that waits goes through wait_req. MPI_Wait polls until the peer arrives
 * (mpi_yield_when_idle only adds sched_yield, which hands the core only to a process already
 * runnable with less CPU time), so with more ranks than cores (emulation: 6 ranks on 2) a waiting
 * rank takes the core from the ranks it waits for. In AH_COMM_WAIT_SLEEP mode wait_req polls with
 * MPI_Test for SPIN_NS, so an exchange whose peers are all present keeps its latency, then sleeps
 * between tests, SLEEP_MIN_NS doubling up to SLEEP_MAX_NS: a peer that arrives late waits at most
 * SLEEP_MAX_NS more for this rank's next test. Collectives are the non-blocking MPI calls
 * completed the same way, and they advance only inside MPI_Test: a 2-rank all-reduce of a TP
 * group takes several rounds (a rendezvous, the exchange), and each round that found this rank
 * asleep waited for its next test. Hence a long spin, 1 ms, which covers a TP partner that wakes
 * from its emulation sleep a little later, and a short longest sleep, 50 us. With 50 us and
 * 200 us, a pipeline of 3 TP pairs (tp2-16 in docs/benchmarks.md) ran 0.73-0.74 s per step, with
 * 1 ms and 50 us 0.66 s, and TP 1 plans did not change; with 20 us the ranks waiting for the
 * slowest of 4 replicas took the cores from it (+30 %). */
static ah_comm_wait_t g_wait = AH_COMM_WAIT_SLEEP;
enum { SPIN_NS = 1000000, SLEEP_MIN_NS = 5000, SLEEP_MAX_NS = 50000 };

static int wait_req(MPI_Request *r) {
    if (g_wait == AH_COMM_WAIT_POLL) return MPI_Wait(r, MPI_STATUS_IGNORE);
    int done = 0, rc;
    const double spin_until = ah_now_s() + 1e-9 * SPIN_NS;
    do {
        if ((rc = MPI_Test(r, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || done) return rc;
    } while (ah_now_s() < spin_until);
    for (long ns = SLEEP_MIN_NS;; ns = ns * 2 < SLEEP_MAX_NS ? ns * 2 : SLEEP_MAX_NS) {
        ah_sleep_s(1e-9 * (double)ns);
        if ((rc = MPI_Test(r, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || done) return rc;
    }
}

void ah_comm_set_wait(ah_comm_wait_t mode) { g_wait = mode; }

ah_status_t ah_comm_init(int *argc, char ***argv, ah_error_t *err) {
    const char *w = getenv("AH_COMM_WAIT");
    if (w && strcmp(w, "poll") == 0) g_wait = AH_COMM_WAIT_POLL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_TRY(MPI_Init(argc, argv), "MPI_Init");
    g_world.c = MPI_COMM_WORLD;
    /* Errors come back as codes, so a failed call gets a message instead of a bare abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *join = getenv("AH_WORLD_JOIN"), *ranks = getenv("AH_WORLD_RANKS");
    if ((!join || !*join) && ranks && *ranks)
        return ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_RANKS=%s is set without AH_WORLD_JOIN (it numbers the ranks "
                            "of a world of joined jobs)", ranks);
    if (join && *join) {
        MPI_Comm joined = MPI_COMM_NULL;
        if (ah_comm_join_world(join, &joined, &g_job, err) != AH_OK) return err->code;
        g_world.c = joined;
        MPI_Comm_set_errhandler(joined, MPI_ERRORS_RETURN);
#ifdef AH_CUDA_EMU
        ahEmuNcclSetWorld(joined);
#endif
    }
    return AH_OK;
}

/* ---- parking (ah_comm_park) ----
 * The job's end: one MPI_Ibarrier on the job's own MPI_COMM_WORLD, which every rank of the job enters
 * exactly once: a parked rank when it parks, every other rank in ah_comm_finalize. No other collective
 * runs on MPI_COMM_WORLD after the start (comm/join.c's connect is over before, and a world's admission
 * is over the joined communicator), so the barrier matches whichever order the ranks come in. A parked
 * rank tests it every PARK_TEST_S, asleep in between: MPI_Finalize's own fence (Open MPI 4.1's
 * lazy wait: opal_progress every 100 us) would keep it busy for as long as its job runs. A parked rank
 * re-admitted (ah_comm_world_readmit) keeps its barrier pending: it parks again on the same one, or
 * completes it in ah_comm_finalize. */
static MPI_Request g_job_end = MPI_REQUEST_NULL;
static bool g_job_end_entered; /* this rank entered the job's end barrier (g_job_end pending until done) */
static int g_wake_from = -1;   /* the job's rank that woke this parked rank (ah_comm_world_readmit's leader) */
#define PARK_TEST_S 0.02

static int job_end_enter(void) {
    if (g_job_end_entered) return MPI_SUCCESS;
    g_job_end_entered = true;
    return MPI_Ibarrier(MPI_COMM_WORLD, &g_job_end);
}

/* At the finalize, the job's end barrier waited for: the job's last rank may come much later (its final save, its
 * upload drain), so after a spin of SPIN_NS (every rank there: no delay) a test every PARK_TEST_S, asleep in
 * between, in either wait mode (AH_COMM_WAIT=poll's MPI_Wait spun a core until then; the sleep mode's 50 us naps
 * took ~20 % of one). */
static int job_end_wait(void) {
    int rc, done = 0;
    const double spin_until = ah_now_s() + 1e-9 * SPIN_NS;
    while ((rc = MPI_Test(&g_job_end, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done)
        if (ah_now_s() >= spin_until) ah_sleep_s(PARK_TEST_S);
    return rc;
}

void ah_comm_finalize(void) {
    free(g_world.counts);
    g_world.counts = NULL;
    int fin = 0, init = 0;
    MPI_Finalized(&fin);
    MPI_Initialized(&init);
    if (!fin && g_world.c != MPI_COMM_WORLD && g_world.c != MPI_COMM_NULL) MPI_Comm_free(&g_world.c);
    /* the job's parked ranks (ah_comm_park) go */
    if (!fin && init && job_end_enter() == MPI_SUCCESS && g_job_end != MPI_REQUEST_NULL) job_end_wait();
    if (!fin) MPI_Finalize();
}

ah_status_t ah_comm_park(double *cpu_s, double *wall_s, void *buf, size_t cap, size_t *len, bool *woken,
                         ah_error_t *err) {
    if (g_world.c != MPI_COMM_NULL)
        return ah_error_set(err, AH_ERR_USAGE, "only a rank that left the world (ah_comm_world_shrink) parks");
    struct timespec c0, c1; /* every thread's CPU (ah_cpu_s leaves background threads out) */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    const double w0 = ah_now_s();
    MPI_Request wake = MPI_REQUEST_NULL;
    MPI_Status ws;
    int rc = job_end_enter(), done = 0, woke = 0;
    if (rc == MPI_SUCCESS) rc = MPI_Irecv(buf, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, AH_COMM_TAG_WAKE, MPI_COMM_WORLD, &wake);
    while (rc == MPI_SUCCESS && !done && !woke) {
        if ((rc = MPI_Test(&g_job_end, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done &&
            (rc = MPI_Test(&wake, &woke, &ws)) == MPI_SUCCESS && !woke)
            ah_sleep_s(PARK_TEST_S);
    }
    if (!woke && wake != MPI_REQUEST_NULL) { /* the job ended: no wake comes */
        MPI_Cancel(&wake);
        MPI_Wait(&wake, MPI_STATUS_IGNORE);
    }
    int n = 0;
    if (woke) MPI_Get_count(&ws, MPI_BYTE, &n);
    *woken = woke != 0, *len = (size_t)n;
    g_wake_from = woke ? ws.MPI_SOURCE : -1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    *cpu_s = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    *wall_s = ah_now_s() - w0;
    return rc == MPI_SUCCESS ? AH_OK : mpi_fail(err, rc, "the parked rank's wait for its job's end (MPI_Ibarrier)");
}

_Noreturn void ah_comm_abort(int code) {
    MPI_Abort(g_world.c != MPI_COMM_NULL ? g_world.c : MPI_COMM_WORLD, code ? code : 1);
    exit(code ? code : 1); /* MPI_Abort does not return; this satisfies _Noreturn */
}

ah_comm_t *ah_comm_world(void) { return &g_world; }

int ah_comm_world_job(void) { return g_job; }

int ah_comm_job_rank(void) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int ah_comm_job_size(void) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

ah_status_t ah_comm_world_shrink(bool stay, int key, ah_error_t *err) {
    int me = 0;
    MPI_Comm_rank(g_world.c, &me);
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_TRY(MPI_Comm_split(g_world.c, stay ? 0 : MPI_UNDEFINED, key >= 0 ? key : me, &nc), "MPI_Comm_split");
    free(g_world.counts);
    g_world.counts = NULL;
    if (g_world.c != MPI_COMM_WORLD) MPI_Comm_free(&g_world.c);
    g_world.c = nc;
    if (nc != MPI_COMM_NULL) MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
#ifdef AH_CUDA_EMU
    if (nc != MPI_COMM_NULL) ahEmuNcclSetWorld(nc);
#endif
    return AH_OK;
}

/* The world's communicator about to be replaced (an admission, a re-admission): the counts of the old one dropped. */
static void world_leaves(void) {
    free(g_world.counts);
    g_world.counts = NULL;
}

/* The world's communicator replaced (st AH_OK): its errors returned as codes, the emulation's NCCL told. */
static ah_status_t world_replaced(ah_status_t st) {
    if (st != AH_OK) return st;
    MPI_Comm_set_errhandler(g_world.c, MPI_ERRORS_RETURN);
#ifdef AH_CUDA_EMU
    ahEmuNcclSetWorld(g_world.c);
#endif
    return AH_OK;
}

ah_status_t ah_comm_world_admit(int njobs, int first, int key, double admit_s, const void *payload, size_t len,
                                ah_error_t *err) {
    if (g_job < 0)
        return ah_error_set(err, AH_ERR_USAGE, "only a world of joined jobs (AH_WORLD_JOIN) admits jobs");
    world_leaves();
    return world_replaced(ah_comm_join_admit(&g_world.c, g_job, njobs, first, key, admit_s, payload, len, err));
}

const void *ah_comm_world_late(size_t *len) { return ah_comm_join_late(len); }

ah_status_t ah_comm_world_readmit(const ah_comm_parked_t *who, int n, int first, int key, const void *payload,
                                  size_t len, ah_error_t *err) {
    world_leaves();
    return world_replaced(ah_comm_readmit_merge(&g_world.c, g_job, who, n, first, first >= 0 ? g_wake_from : -1, key,
                                                payload, len, err));
}

int ah_comm_rank(const ah_comm_t *c) {
    int r = 0;
    if (c->c == MPI_COMM_NULL) return -1; /* a rank that left the world (ah_comm_world_shrink) */
    MPI_Comm_rank(c->c, &r);
    return r;
}

int ah_comm_size(const ah_comm_t *c) {
    int n = 1;
    if (c->c == MPI_COMM_NULL) return 0; /* a rank that left the world (ah_comm_world_shrink) */
    MPI_Comm_size(c->c, &n);
    return n;
}

ah_status_t ah_comm_split(ah_comm_t *parent, int color, int key, ah_comm_t **out, ah_error_t *err) {
    *out = NULL;
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_TRY(MPI_Comm_split(parent->c, color < 0 ? MPI_UNDEFINED : color, key, &nc), "MPI_Comm_split");
    if (nc == MPI_COMM_NULL) return AH_OK;
    ah_comm_t *c = calloc(1, sizeof *c);
    if (!c) {
        MPI_Comm_free(&nc);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for a communicator");
    }
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    c->c = nc;
    *out = c;
    return AH_OK;
}

void ah_comm_free(ah_comm_t **c) {
    if (!*c || *c == &g_world) return;
    MPI_Comm_free(&(*c)->c);
    free((*c)->counts);
    free(*c);
    *c = NULL;
}

/* MPI counts are int: large buffers go in chunks. */
#define CHUNK ((size_t)1 << 30)

static ah_status_t allreduce(ah_comm_t *c, void *buf, size_t n, size_t elt, MPI_Datatype type,
                             MPI_Op op, ah_error_t *err) {
    if (ah_comm_size(c) == 1) return AH_OK;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        MPI_Request r;
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * elt, (int)k, type, op, c->c, &r),
                "MPI_Iallreduce");
        MPI_TRY(wait_req(&r), "MPI_Iallreduce");
    }
    return AH_OK;
}

ah_status_t ah_comm_allreduce_f32(ah_comm_t *c, float *buf, size_t n, ah_error_t *err) {
    return allreduce(c, buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, err);
}

ah_status_t ah_comm_allreduce_f64(ah_comm_t *c, double *buf, size_t n, ah_error_t *err) {
    return allreduce(c, buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, err);
}

ah_status_t ah_comm_allreduce_max_f32(ah_comm_t *c, float *buf, size_t n, ah_error_t *err) {
    return allreduce(c, buf, n, sizeof *buf, MPI_FLOAT, MPI_MAX, err);
}

ah_status_t ah_comm_allreduce_max_i64(ah_comm_t *c, int64_t *buf, size_t n, ah_error_t *err) {
    return allreduce(c, buf, n, sizeof *buf, MPI_INT64_T, MPI_MAX, err);
}

/* counts (one per group rank) as MPI's int counts and displacements in *store (2 x the group's
 * size, allocated when NULL); NULL after an error. */
static int *int_counts(ah_comm_t *c, int **store, const int64_t *counts, int **displs, ah_error_t *err) {
    const int n = ah_comm_size(c);
    if (!*store && !(*store = malloc(2 * (size_t)n * sizeof **store))) {
        ah_error_set(err, AH_ERR_OOM, "no host memory for %d collective counts", n);
        return NULL;
    }
    int *cnt = *store;
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        if (counts[k] < 0 || counts[k] > INT_MAX || at > INT_MAX) {
            ah_error_set(err, AH_ERR_INTERNAL, "a collective part of %lld floats at %lld exceeds MPI's int counts",
                         (long long)counts[k], (long long)at);
            return NULL;
        }
        cnt[k] = (int)counts[k];
        cnt[n + k] = (int)at;
        at += counts[k];
    }
    *displs = cnt + n;
    return cnt;
}

/* A non-blocking uneven collective's start: coll idle, and its MPI counts and displacements in
 * coll's storage (remade when made for a group of another size); *cnt NULL, and nothing to do, in a
 * group of one. */
static ah_status_t coll_begin(ah_comm_t *c, ah_comm_coll_t *coll, const int64_t *counts, int **cnt, int **displs,
                              ah_error_t *err) {
    coll->req.active = 0;
    coll->move_n = 0;
    *cnt = NULL;
    if (ah_comm_size(c) == 1) return AH_OK;
    if (coll->counts && coll->counts_n != ah_comm_size(c)) {
        free(coll->counts);
        coll->counts = NULL;
    }
    coll->counts_n = ah_comm_size(c);
    *cnt = int_counts(c, &coll->counts, counts, displs, err);
    return *cnt ? AH_OK : err->code;
}

ah_status_t ah_comm_ireduce_scatter_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_comm_coll_t *coll,
                                        ah_error_t *err) {
    int *displs, *cnt;
    const ah_status_t begun = coll_begin(c, coll, counts, &cnt, &displs, err);
    if (begun != AH_OK || !cnt) return begun;
    const int me = ah_comm_rank(c);
    MPI_Request r;
    /* In place, MPI leaves this rank's part at the front of buf; it goes to its own place at the
     * completion (ah_comm_coll_test / _wait). */
    MPI_TRY(MPI_Ireduce_scatter(MPI_IN_PLACE, buf, cnt, MPI_FLOAT, MPI_SUM, c->c, &r), "MPI_Ireduce_scatter");
    coll->move_dst = buf + displs[me];
    coll->move_src = buf;
    coll->move_n = (size_t)cnt[me];
    memcpy(&coll->req.h, &r, sizeof r);
    coll->req.active = 1;
    return AH_OK;
}

ah_status_t ah_comm_iallreduce_f32(ah_comm_t *c, float *buf, size_t n, ah_comm_coll_t *coll, ah_error_t *err) {
    coll->req.active = 0;
    coll->move_n = 0;
    if (ah_comm_size(c) == 1) return AH_OK;
    if (n > (size_t)INT_MAX)
        return ah_error_set(err, AH_ERR_INTERNAL, "a non-blocking sum of %zu floats exceeds MPI's int count", n);
    MPI_Request r;
    MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->c, &r), "MPI_Iallreduce");
    memcpy(&coll->req.h, &r, sizeof r);
    coll->req.active = 1;
    return AH_OK;
}

ah_status_t ah_comm_iallgather_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_comm_coll_t *coll,
                                   ah_error_t *err) {
    int *displs, *cnt;
    const ah_status_t begun = coll_begin(c, coll, counts, &cnt, &displs, err);
    if (begun != AH_OK || !cnt) return begun;
    MPI_Request r;
    MPI_TRY(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, displs, MPI_FLOAT, c->c, &r),
            "MPI_Iallgatherv");
    memcpy(&coll->req.h, &r, sizeof r);
    coll->req.active = 1;
    return AH_OK;
}

/* coll's request has completed: this rank's part of a reduce-scatter to its place. */
static void coll_done(ah_comm_coll_t *coll) {
    coll->req.active = 0;
    if (coll->move_n && coll->move_dst != coll->move_src)
        memmove(coll->move_dst, coll->move_src, coll->move_n * sizeof *coll->move_src);
    coll->move_n = 0;
}

ah_status_t ah_comm_coll_test(ah_comm_coll_t *coll, int *done, ah_error_t *err) {
    int flag = !coll->req.active;
    if (coll->req.active) {
        MPI_Request r;
        memcpy(&r, &coll->req.h, sizeof r);
        MPI_TRY(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        memcpy(&coll->req.h, &r, sizeof r);
        if (flag) coll_done(coll);
    }
    if (done) *done = flag;
    return AH_OK;
}

ah_status_t ah_comm_coll_wait(ah_comm_coll_t *coll, ah_error_t *err) {
    if (!coll->req.active) return AH_OK;
    MPI_Request r;
    memcpy(&r, &coll->req.h, sizeof r);
    MPI_TRY(wait_req(&r), "MPI_Wait");
    coll_done(coll);
    return AH_OK;
}

void ah_comm_coll_free(ah_comm_coll_t *coll) {
    free(coll->counts);
    memset(coll, 0, sizeof *coll);
}

ah_status_t ah_comm_reduce_scatter_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_error_t *err) {
    /* the non-blocking form waited at once, on the group's own counts storage */
    ah_comm_coll_t coll = {.counts = c->counts, .counts_n = ah_comm_size(c)};
    ah_status_t s = ah_comm_ireduce_scatter_f32(c, buf, counts, &coll, err);
    c->counts = coll.counts;
    return s == AH_OK ? ah_comm_coll_wait(&coll, err) : s;
}

ah_status_t ah_comm_allgather_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_error_t *err) {
    if (ah_comm_size(c) == 1) return AH_OK;
    int *displs, *cnt = int_counts(c, &c->counts, counts, &displs, err);
    if (!cnt) return err->code;
    MPI_Request r;
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, displs, MPI_FLOAT, c->c, &r);
    const double wall0 = ah_now_s(), cpu0 = ah_cpu_thread_s();
    if (rc == MPI_SUCCESS) rc = timed(wait_req(&r), wall0, cpu0);
    return rc == MPI_SUCCESS ? AH_OK : mpi_fail(err, rc, "MPI_Iallgatherv");
}

ah_status_t ah_comm_allgather_i64(ah_comm_t *c, int64_t v, int64_t *out, ah_error_t *err) {
    MPI_Request r;
    MPI_TRY(MPI_Iallgather(&v, 1, MPI_INT64_T, out, 1, MPI_INT64_T, c->c, &r), "MPI_Iallgather");
    MPI_TRY(wait_req(&r), "MPI_Iallgather");
    return AH_OK;
}

ah_status_t ah_comm_allgather_f64(ah_comm_t *c, const double *v, int n, double *out, ah_error_t *err) {
    MPI_Request r;
    MPI_TRY(MPI_Iallgather(v, n, MPI_DOUBLE, out, n, MPI_DOUBLE, c->c, &r), "MPI_Iallgather");
    MPI_TRY(wait_req(&r), "MPI_Iallgather");
    return AH_OK;
}

ah_status_t ah_comm_bcast(ah_comm_t *c, void *buf, size_t bytes, int root, ah_error_t *err) {
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
        MPI_Request r;
        MPI_TRY(MPI_Ibcast((char *)buf + off, (int)k, MPI_BYTE, root, c->c, &r), "MPI_Ibcast");
        MPI_TRY(wait_req(&r), "MPI_Ibcast");
    }
    return AH_OK;
}

ah_status_t ah_comm_barrier(ah_comm_t *c, ah_error_t *err) {
    MPI_Request r;
    MPI_TRY(MPI_Ibarrier(c->c, &r), "MPI_Ibarrier");
    MPI_TRY(wait_req(&r), "MPI_Ibarrier");
    return AH_OK;
}

static ah_status_t check_count(size_t n, ah_error_t *err) {
    if (n > (size_t)INT_MAX)
        return ah_error_set(err, AH_ERR_INTERNAL, "point-to-point message of %zu floats exceeds "
                            "MPI's int count", n);
    return AH_OK;
}

/* The request of a transfer just started, kept in req for ah_comm_wait. */
static ah_status_t keep_request(ah_comm_req_t *req, MPI_Request r) {
    memcpy(&req->h, &r, sizeof r);
    req->active = 1;
    return AH_OK;
}

ah_status_t ah_comm_isend_f32(ah_comm_t *c, const float *buf, size_t n, int dst, int tag,
                              ah_comm_req_t *req, ah_error_t *err) {
    MPI_Request r;
    if (check_count(n, err) != AH_OK) return AH_ERR_INTERNAL;
    MPI_TRY(MPI_Isend(buf, (int)n, MPI_FLOAT, dst, tag, c->c, &r), "MPI_Isend");
    return keep_request(req, r);
}

ah_status_t ah_comm_irecv_f32(ah_comm_t *c, float *buf, size_t n, int src, int tag,
                              ah_comm_req_t *req, ah_error_t *err) {
    MPI_Request r;
    if (check_count(n, err) != AH_OK) return AH_ERR_INTERNAL;
    MPI_TRY(MPI_Irecv(buf, (int)n, MPI_FLOAT, src, tag, c->c, &r), "MPI_Irecv");
    return keep_request(req, r);
}

ah_status_t ah_comm_test(ah_comm_req_t *req, int *done, ah_error_t *err) {
    int flag = !req->active;
    if (req->active) {
        MPI_Request r;
        memcpy(&r, &req->h, sizeof r);
        MPI_TRY(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        memcpy(&req->h, &r, sizeof r);
        if (flag) req->active = 0;
    }
    if (done) *done = flag;
    return AH_OK;
}

ah_status_t ah_comm_wait(ah_comm_req_t *req, ah_error_t *err) {
    if (!req->active) return AH_OK;
    MPI_Request r;
    memcpy(&r, &req->h, sizeof r);
    req->active = 0;
    MPI_TRY(wait_req(&r), "MPI_Wait");
    return AH_OK;
}

/* Whether msg starts by naming a rank ("rank 3: ..."): agreed on before, in a nested call. */
static bool names_a_rank(const char *msg) {
    int end = 0;
    sscanf(msg, "rank %*d:%n", &end);
    return end > 0;
}

ah_status_t ah_comm_agree(ah_comm_t *c, ah_status_t local, ah_error_t *err) {
    int me = ah_comm_rank(c), n = ah_comm_size(c);
    int first = local != AH_OK ? me : n;
    ah_status_t s = allreduce(c, &first, 1, sizeof first, MPI_INT, MPI_MIN, err);
    if (s != AH_OK) return s;
    if (first == n) return AH_OK;
    /* The failing rank's code and its rank in the world, which is what mpirun and the user see
     * (in a node's group its rank there would name another process). */
    int code_rank[2] = {(int)local, ah_comm_rank(ah_comm_world())};
    char msg[AH_ERROR_MSG_MAX];
    if (me == first) snprintf(msg, sizeof msg, "%s", err ? err->msg : "failed");
    if ((s = ah_comm_bcast(c, code_rank, sizeof code_rank, first, err)) != AH_OK) return s;
    if ((s = ah_comm_bcast(c, msg, sizeof msg, first, err)) != AH_OK) return s;
    /* No rank is named when every rank failed with this message (the same file missing
     * everywhere, or an error agreed on by a nested call), nor when the message names one
     * already: "rank 0: rank 1: ..." said rank 0 failed, and named a rank twice. */
    int same = local != AH_OK && err && strcmp(err->msg, msg) == 0;
    if ((s = allreduce(c, &same, 1, sizeof same, MPI_INT, MPI_MIN, err)) != AH_OK) return s;
    const ah_status_t code = (ah_status_t)code_rank[0];
    if (n == 1 || same || names_a_rank(msg)) return ah_error_set(err, code, "%s", msg);
    return ah_error_set(err, code, "rank %d: %s", code_rank[1], msg);
}
