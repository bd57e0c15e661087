/* Inside the MPI backend only (the .c files of src/comm): what an ah_comm_t is. */
#ifndef AH_COMM_COMM_MPI_H
#define AH_COMM_COMM_MPI_H

#include <mpi.h>

#include "comm/comm.h"

struct ah_comm {
    MPI_Comm c;
    int *counts; /* 2 x size ints: an uneven collective's counts and displacements, allocated on
                  * the first one (comm.c int_counts) and kept, so a step allocates nothing */
};

/* The world of separate mpirun jobs that AH_WORLD_JOIN=DIR:JOB:NJOBS names (join.c), in *out, and
 * this process's JOB in *job: collective over every rank of every job. */
ah_status_t ah_comm_join_world(const char *spec, MPI_Comm *out, int *job, ah_error_t *err);
/* The running joined world *world (every rank; this rank's AH_WORLD_JOIN job `job`) admits the next njobs jobs by
 * their turns (from `first` when it is past the next number: comm.h), sends them payload (len bytes, the root's),
 * and is replaced by the merged world ordered by `key` (this rank's rank in it; the new jobs' by their
 * AH_WORLD_RANKS) (join.c). */
ah_status_t ah_comm_join_admit(MPI_Comm *world, int job, int njobs, int first, int key, double admit_s,
                               const void *payload, size_t len, ah_error_t *err);
/* Parked ranks re-admitted (readmit.c; comm.h ah_comm_world_readmit): on the world's ranks (*world, first -1) or on
 * the woken parked rank who[first] (*world MPI_COMM_NULL; wake_from: its job's rank that woke it), job this rank's
 * AH_WORLD_JOIN job; *world becomes the merged world ordered by key. */
ah_status_t ah_comm_readmit_merge(MPI_Comm *world, int job, const ah_comm_parked_t *who, int n, int first,
                                  int wake_from, int key, const void *payload, size_t len, ah_error_t *err);
/* Every rank of w takes the highest next job number any holds (a parked rank re-admitted missed the admissions made
 * while it was out of the world: join.c's count); an MPI error code. */
int ah_comm_join_next_agree(MPI_Comm w);
/* Point-to-point tags on a job's MPI_COMM_WORLD: a parked rank's wake (its payload) and the intercommunicator's. */
enum { AH_COMM_TAG_WAKE = 0x4157, AH_COMM_TAG_READMIT = 0x4152 };
/* A job admitted into a running world: the payload it was sent (NULL: this job joined at start-up). */
const void *ah_comm_join_late(size_t *len);

static inline MPI_Comm ah_comm_mpi(const ah_comm_t *c) { return c->c; }

#endif
