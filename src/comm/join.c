/* The world of separate mpirun jobs (comm_mpi.h ah_comm_join_world): one job a host or a group of
 * hosts, joined through MPI's dynamic process calls into one communicator, so that a job can
 * later leave at a notice without ending the others (docs/elastic.md "Can survivors keep their
 * processes?": on Open MPI 4.1 the jobs' lives are apart, a communicator that no longer holds
 * the leaver's ranks goes on after its host dies).
 *
 * AH_WORLD_JOIN=DIR:JOB:NJOBS. Job 0's first rank opens a port and writes its name to DIR/port
 * (written whole, then renamed); the world, job 0 first, accepts the other NJOBS - 1 jobs in the
 * order they connect (MPI_Comm_accept / MPI_Comm_connect, each merged with MPI_Intercomm_merge;
 * every job's mpirun needs --ompi-server with the same server), then orders its ranks by job and
 * by rank in the job: job 0's ranks, then job 1's, ... as one mpirun of all of them would number
 * them. Collective over every rank of every job; the intermediate communicators are freed
 * (MPI_Comm_free: MPI_Comm_disconnect across mpirun jobs hangs on Open MPI 4.1, a PMIx fence the
 * jobs' servers cannot complete). Errors name the variable, the file or the MPI call. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi.h"
#include "core/timing.h"

/* how long a job waits for job 0's port file (60 s); the most jobs (a job's ranks are numbered
 * below JOB_RANKS in the ordering key, which fits an int) */
enum { PORT_WAIT_TENTHS = 600, JOB_RANKS = 1 << 20, MAX_JOBS = INT_MAX / JOB_RANKS };

/* DIR:JOB:NJOBS, DIR itself possibly holding colons */
static ah_status_t join_spec(const char *spec, char *dir, size_t cap, int *job, int *njobs, ah_error_t *err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    char *c2 = strrchr(buf, ':'), *c1 = NULL, *end1 = NULL, *end2 = NULL;
    if (c2) {
        *c2 = 0;
        c1 = strrchr(buf, ':');
        *njobs = (int)strtol(c2 + 1, &end2, 10);
    }
    if (c1) {
        *c1 = 0;
        *job = (int)strtol(c1 + 1, &end1, 10);
    }
    if (!c1 || c1 == buf || strlen(buf) >= cap || end1 == c1 + 1 || *end1 || end2 == c2 + 1 || *end2 ||
        *njobs < 1 || *njobs > MAX_JOBS || *job < 0 || *job >= *njobs)
        return ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_JOIN=%s: expected DIR:JOB:NJOBS, 0 <= JOB < NJOBS <= %d",
                            spec, MAX_JOBS);
    memcpy(dir, buf, strlen(buf) + 1);
    return AH_OK;
}

static ah_status_t publish_port(const char *dir, const char *port, ah_error_t *err) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/port", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: cannot write %s", tmp);
    const int ok = fprintf(f, "%s\n", port) > 0;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0)
        return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: cannot write %s", path);
    return AH_OK;
}

static ah_status_t read_port(const char *dir, char *port, ah_error_t *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/port", dir);
    FILE *f = NULL;
    for (int i = 0; i < PORT_WAIT_TENTHS && !(f = fopen(path, "r")); i++) ah_sleep_s(0.1);
    if (!f) return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: no %s after 60 s (job 0 opens the port)", path);
    const int ok = fgets(port, MPI_MAX_PORT_NAME, f) != NULL;
    fclose(f);
    if (!ok) return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: %s is empty", path);
    port[strcspn(port, "\n")] = 0;
    return AH_OK;
}

/* One more job into *world: accepted by the world (root 0) or, from a job not yet in it, connected;
 * *joined (the world root's count of jobs in it) sent to every rank. */
static int merge_one(MPI_Comm *world, int accepting, const char *port, int *joined) {
    MPI_Comm inter, merged;
    int rc = accepting ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, *world, &inter)
                       : MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Intercomm_merge(inter, accepting ? 0 : 1, &merged);
    MPI_Comm_free(&inter);
    if (rc != MPI_SUCCESS) return rc;
    if (*world != MPI_COMM_WORLD) MPI_Comm_free(world);
    *world = merged;
    int me = 0;
    MPI_Comm_rank(merged, &me);
    if (me == 0) (*joined)++;
    return MPI_Bcast(joined, 1, MPI_INT, 0, merged);
}

ah_status_t ah_comm_join_world(const char *spec, MPI_Comm *out, ah_error_t *err) {
    char dir[PATH_MAX], port[MPI_MAX_PORT_NAME] = {0};
    int job = 0, njobs = 1, rank = 0, joined = 1, rc = MPI_SUCCESS;
    if (join_spec(spec, dir, sizeof dir, &job, &njobs, err) != AH_OK) return err->code;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm world = MPI_COMM_WORLD;
    ah_status_t st = AH_OK;
    if (job == 0) { /* the port is its first rank's; the others hear whether it was published */
        if (rank == 0 && (rc = MPI_Open_port(MPI_INFO_NULL, port)) == MPI_SUCCESS) st = publish_port(dir, port, err);
        int failed = rank == 0 && (rc != MPI_SUCCESS || st != AH_OK);
        MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (failed && rank != 0)
            return ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN=%s: job 0's first rank could not open or publish "
                                "the port (its message above)", spec);
    } else {
        st = read_port(dir, port, err);
    }
    if (rc == MPI_SUCCESS && st == AH_OK && job != 0) rc = merge_one(&world, 0, port, &joined);
    while (rc == MPI_SUCCESS && st == AH_OK && joined < njobs) rc = merge_one(&world, 1, port, &joined);
    if (st != AH_OK) return st;
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(world, 0, job * JOB_RANKS + rank, out);
    if (world != MPI_COMM_WORLD) MPI_Comm_free(&world);
    if (job == 0 && rank == 0 && port[0]) MPI_Close_port(port);
    if (rc != MPI_SUCCESS)
        return ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN=%s: joining the jobs failed (MPI error %d; "
                            "every job's mpirun needs --ompi-server of one ompi-server)", spec, rc);
    return AH_OK;
}
