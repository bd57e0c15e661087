/* Communication between ranks: the only module that includes mpi.h (NCCL's device communicators,
 * comm/nccl.h, are built on its groups).
 *
 * A group (ah_comm_t) is a set of ranks that run collectives together: the world, a TP group, a
 * per-segment data-parallel group. Groups are created once at start-up by ah_comm_split, which is
 * collective over its parent; a rank that is in no group of a split gets NULL. Point-to-point
 * transfers between pipeline stages are non-blocking (ah_comm_isend / ah_comm_irecv +
 * ah_comm_wait), so a 1F1B schedule never deadlocks on a send.
 *
 * Errors: start-up failures are agreed on by all ranks with ah_comm_agree, so rank 0 can print
 * the first failing rank's message and every rank exits non-zero. A failure inside the step loop
 * (a lost peer) is reported as AH_ERR_COMM; the caller aborts the job with ah_comm_abort.
 *
 * Ownership: the caller owns every ah_comm_t it gets from ah_comm_split (ah_comm_free); the
 * world group is static.
 */
#ifndef AH_COMM_COMM_H
#define AH_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct ah_comm ah_comm_t;

/* A pending non-blocking transfer. Opaque storage for the backend's request handle. */
typedef struct ah_comm_req {
    union {
        void *p;
        int64_t i;
    } h;
    int active;
} ah_comm_req_t;

/* How a rank waits for its peers. POLL: MPI's own wait, which keeps the core busy until the
 * peer arrives. SLEEP (the default): poll for a few tens of microseconds, then sleep between
 * polls, so a waiting rank leaves the core to the ranks it waits for when ranks outnumber cores
 * (device emulation on a CPU). The environment variable AH_COMM_WAIT=poll selects POLL at
 * ah_comm_init. */
typedef enum { AH_COMM_WAIT_SLEEP = 0, AH_COMM_WAIT_POLL = 1 } ah_comm_wait_t;
void ah_comm_set_wait(ah_comm_wait_t mode);

/* Seconds this process has spent inside the backend's calls so far, by the wall clock and in the
 * calling (training) thread's CPU time (device emulation takes them out of a compute phase:
 * runtime/emulate.h). */
void ah_comm_seconds(double *wall, double *cpu);

/* Starts the backend (MPI_Init). Works without mpirun too: a single rank. The world is the job's
 * ranks (MPI_COMM_WORLD), or, with AH_WORLD_JOIN=DIR:JOB:NJOBS set, the ranks of NJOBS separate
 * mpirun jobs joined through MPI's dynamic process calls (comm/join.c; collective over all of
 * them), numbered job by job as one mpirun of them all would. */
ah_status_t ah_comm_init(int *argc, char ***argv, ah_error_t *err);
void ah_comm_finalize(void);
/* Ends the whole job (the world) at once with exit code `code` (MPI_Abort). Does not return. */
_Noreturn void ah_comm_abort(int code);

ah_comm_t *ah_comm_world(void);
/* This process's JOB of AH_WORLD_JOIN=DIR:JOB:NJOBS (the mpirun job it was started in), -1 when the
 * world is one mpirun job. */
int ah_comm_world_job(void);
/* The in-place reconfiguration's new world (runtime/reconfig.h; docs/elastic.md "In-place
 * reconfiguration"): collective over the world, every rank alive. The ranks that stay split the
 * world (MPI_Comm_split ordered by `key`, the rank in the new world when the staying ranks' keys are
 * 0..stay-1; key < 0 on every rank: kept in their order; the others pass MPI_UNDEFINED), the old world's
 * communicator is freed (MPI_Comm_free: MPI_Comm_disconnect across joined jobs hangs on Open MPI
 * 4.1), and the split becomes ah_comm_world(); a rank that leaves then has no world (size 0) and
 * only calls ah_comm_finalize. Every other communicator split from the old world must be freed by
 * the caller before (the trainer's groups, the checkpoint session's), so that no one uses a
 * communicator that holds a leaving process after it is gone. A rank that does not stay either leaves
 * with its whole job (a world of joined jobs, AH_WORLD_JOIN: the job's ranks then finalize together) or
 * parks (ah_comm_park: some ranks of a job that goes on; a rank of one mpirun job cannot end before the
 * job, its MPI_Finalize being a fence over the job). */
ah_status_t ah_comm_world_shrink(bool stay, int key, ah_error_t *err);
/* A rank that left the world (ah_comm_world_shrink) while others of its mpirun job go on: waits, asleep
 * (a test every 20 ms, no spinning), until every other rank of its job has entered ah_comm_finalize (the
 * job's end: the run's end, or its host's job leaving at a later change; *woken false), then returns; the caller then
 * calls ah_comm_finalize, which returns with the others'. Or until the running world wakes it to take it back
 * (ah_comm_world_readmit; *woken true): the world's payload, *len bytes (at most cap), in buf; the caller then calls
 * ah_comm_world_readmit as the woken rank. *cpu_s and *wall_s: the process's CPU seconds
 * (every thread's) and the wall seconds of the wait. Every rank's ah_comm_finalize takes part in the
 * job's end (one barrier over the job's ranks), parked ranks or not; a rank killed ends the job as ever. */
ah_status_t ah_comm_park(double *cpu_s, double *wall_s, void *buf, size_t cap, size_t *len, bool *woken,
                         ah_error_t *err);
/* A parked rank by its AH_WORLD_JOIN job and its rank in that job's own mpirun (ah_comm_job_rank). */
typedef struct {
    int job, rank;
} ah_comm_parked_t;
/* Re-admission of parked ranks (runtime/reconfig.h "readmit"; comm/readmit.c): collective over the world (every
 * other communicator freed as for ah_comm_world_shrink; first -1) and the parked ranks who[0..n-1] (each woken
 * by ah_comm_park, first its index in who). The world is the new (post-split) one: each parked rank in turn is
 * woken by that world's lowest rank of its job, sent payload (len bytes, the same on every rank of the world) and
 * merged into it; the merged world, ordered by key (this rank's rank in it), becomes ah_comm_world(). AH_ERR_USAGE
 * when a parked rank's job has no rank in the world (nothing sent to that rank; those before it in who are merged
 * in already, so ah_comm_world() is then that merge, unordered: the run cannot go on; runtime/reconfig.c refuses
 * such a request before), AH_ERR_COMM when MPI fails (the run cannot go on). */
ah_status_t ah_comm_world_readmit(const ah_comm_parked_t *who, int n, int first, int key, const void *payload,
                                  size_t len, ah_error_t *err);
/* This process's rank in its own mpirun job (MPI_COMM_WORLD), and that job's ranks. */
int ah_comm_job_rank(void);
int ah_comm_job_size(void);
/* An in-place join (runtime/reconfig.h "join"): collective over the world of joined jobs, every rank alive and
 * every other communicator freed as for ah_comm_world_shrink. The world accepts the next njobs mpirun jobs
 * (started with AH_WORLD_JOIN=DIR:JOB:NJOBS, DIR the world's, JOB its next numbers, NJOBS the count after
 * them, and AH_WORLD_RANKS their ranks in the new world; comm/join.c), sends them the root's payload (len
 * bytes) and becomes the merged world ordered by key (this rank's rank in it). A job is accepted only once it
 * answered its turn: one that has not within admit_s seconds (<= 0: AH_JOIN_ADMIT_S, default 60; not started, or failed before
 * it connected) ends the admission with AH_ERR_COMM naming it (the world then cannot go on: the caller ends the
 * run), never a wait for good in MPI_Comm_accept. The numbers start at `first` when it is past the world's next
 * (the jobs of a withdrawn or failed join took numbers the world never admitted: every rank passes the same). */
ah_status_t ah_comm_world_admit(int njobs, int first, int key, double admit_s, const void *payload, size_t len,
                                ah_error_t *err);
/* The admission's wait for a job's answer: AH_JOIN_ADMIT_S (seconds > 0, at most 1e6), else 60. No MPI call: the agent
 * reads it too, to set its deadline for a join in place. */
double ah_comm_join_admit_s(void);
/* In a job that joined a running world (ah_comm_world_admit's new jobs): the payload it was sent, its size in
 * *len; NULL in a job that started with the world. */
const void *ah_comm_world_late(size_t *len);
int ah_comm_rank(const ah_comm_t *c);
int ah_comm_size(const ah_comm_t *c);

/* Collective over `parent`: ranks passing the same color >= 0 form one group, ordered by key;
 * a rank passing color < 0 gets *out = NULL. */
ah_status_t ah_comm_split(ah_comm_t *parent, int color, int key, ah_comm_t **out, ah_error_t *err);
void ah_comm_free(ah_comm_t **c);

/* In-place sums over the group (a group of one returns at once). */
ah_status_t ah_comm_allreduce_f32(ah_comm_t *c, float *buf, size_t n, ah_error_t *err);
ah_status_t ah_comm_allreduce_f64(ah_comm_t *c, double *buf, size_t n, ah_error_t *err);
/* In-place maxima: floats (a vocabulary-parallel softmax's row maxima), int64 (timings and memory
 * high-water marks). */
ah_status_t ah_comm_allreduce_max_f32(ah_comm_t *c, float *buf, size_t n, ah_error_t *err);
ah_status_t ah_comm_allreduce_max_i64(ah_comm_t *c, int64_t *buf, size_t n, ah_error_t *err);
/* Uneven reduce-scatter and all-gather, in place (the sharded optimizer): buf holds the group's
 * whole space, counts[k] (one per group rank) the length of rank k's part, parts in rank order.
 * reduce_scatter leaves the group's sum of this rank's part in its place (the rest of buf is
 * undefined after it); allgather fills every other rank's part from its owner. */
ah_status_t ah_comm_reduce_scatter_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_error_t *err);
ah_status_t ah_comm_allgather_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_error_t *err);
/* Non-blocking forms of the in-place sum and the uneven reduce-scatter above (the overlapped
 * gradient sync, runtime/dp_groups.h): started now, finished by ah_comm_coll_wait; the caller
 * leaves buf alone until then. Open MPI moves a non-blocking collective only inside MPI calls:
 * ah_comm_coll_test (any MPI call) progresses it. The same call, blocking or not, gives the same
 * bits (the blocking forms are these, waited at once). n fits an int. coll carries the MPI counts
 * of a reduce-scatter (allocated on its first use of a group, kept for the next; ah_comm_coll_free)
 * and, until it completes, where this rank's part goes. A group of one completes at once. */
typedef struct ah_comm_coll {
    ah_comm_req_t req;
    int *counts;        /* reduce-scatter: MPI counts then displacements (2 x size), or NULL */
    int counts_n;       /* the group size counts was made for */
    float *move_dst, *move_src; /* reduce-scatter: this rank's part, moved at completion */
    size_t move_n;
} ah_comm_coll_t;
ah_status_t ah_comm_iallreduce_f32(ah_comm_t *c, float *buf, size_t n, ah_comm_coll_t *coll, ah_error_t *err);
ah_status_t ah_comm_ireduce_scatter_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_comm_coll_t *coll,
                                        ah_error_t *err);
/* The uneven all-gather's non-blocking form (the hierarchical sync's last phase, runtime/dp_hier.h). */
ah_status_t ah_comm_iallgather_f32(ah_comm_t *c, float *buf, const int64_t *counts, ah_comm_coll_t *coll,
                                   ah_error_t *err);
/* Progresses coll (and every other pending MPI operation); *done (may be NULL) when it is complete. */
ah_status_t ah_comm_coll_test(ah_comm_coll_t *coll, int *done, ah_error_t *err);
/* Waits for coll (no-op when none is pending). */
ah_status_t ah_comm_coll_wait(ah_comm_coll_t *coll, ah_error_t *err);
void ah_comm_coll_free(ah_comm_coll_t *coll);
/* Gathers one int64 per rank to every rank: out has ah_comm_size(c) entries. */
ah_status_t ah_comm_allgather_i64(ah_comm_t *c, int64_t v, int64_t *out, ah_error_t *err);
/* Gathers n doubles per rank to every rank: out has n x ah_comm_size(c) entries, rank k's at k x n. */
ah_status_t ah_comm_allgather_f64(ah_comm_t *c, const double *v, int n, double *out, ah_error_t *err);
ah_status_t ah_comm_bcast(ah_comm_t *c, void *buf, size_t bytes, int root, ah_error_t *err);
ah_status_t ah_comm_barrier(ah_comm_t *c, ah_error_t *err);

/* Non-blocking float transfers with a rank of group c; n floats fit an int. */
ah_status_t ah_comm_isend_f32(ah_comm_t *c, const float *buf, size_t n, int dst, int tag,
                              ah_comm_req_t *req, ah_error_t *err);
ah_status_t ah_comm_irecv_f32(ah_comm_t *c, float *buf, size_t n, int src, int tag,
                              ah_comm_req_t *req, ah_error_t *err);
/* Waits for req (no-op when it is not active). */
ah_status_t ah_comm_wait(ah_comm_req_t *req, ah_error_t *err);
/* Whether req is done (*done; then it is inactive, as after ah_comm_wait); not waiting. Like any
 * call into the backend it also progresses the process's other transfers. */
ah_status_t ah_comm_test(ah_comm_req_t *req, int *done, ah_error_t *err);

/* Collective: every rank passes its own status and error. If any rank failed, every rank gets
 * the error of the lowest failing rank (message prefixed with "rank R: ", R its world rank,
 * unless every rank failed with that same message or it names a rank already) and its code is
 * returned everywhere; otherwise AH_OK. */
ah_status_t ah_comm_agree(ah_comm_t *c, ah_status_t local, ah_error_t *err);

#endif
