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

static inline MPI_Comm ah_comm_mpi(const ah_comm_t *c) { return c->c; }

#endif
