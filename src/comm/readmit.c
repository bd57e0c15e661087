/* A parked rank taken back into the running world (comm.h ah_comm_world_readmit; docs/elastic.md "Parked
 * ranks", re-admission). A parked rank is out of the joined world but still in its own mpirun job's
 * MPI_COMM_WORLD, where its job's active ranks are too: the world's lowest rank of that job (the leader) wakes
 * it there (point to point, tag AH_COMM_TAG_WAKE: the payload; the parked rank has a receive posted while it
 * waits, comm.c ah_comm_park), then the world and the parked rank build an intercommunicator with
 * MPI_Intercomm_create over that MPI_COMM_WORLD as the peer (the leaders are in it: the world's the leader, the
 * parked rank its own) and merge it (MPI_Intercomm_merge: the world low, the parked rank high). One parked
 * rank at a time, in the request's order (two parked ranks share no communicator but MPI_COMM_WORLD, whose
 * collectives are kept for the job's end: comm.c), a woken rank taking part in the merges after its own; then
 * the merged world is split in the keys' order (the new world's ranks). No port, no ompi-server: the
 * processes know each other since their jobs joined. Point to point only on MPI_COMM_WORLD, so the job's end
 * barrier (comm.c) still matches whichever order its ranks come in. */
#include <mpi.h>
#include <stdlib.h>

#include "comm/comm_mpi.h"

/* The lowest rank of w in AH_WORLD_JOIN job `job` (every rank's job gathered; mine this rank's), -1 when none. */
static int leader_of(MPI_Comm w, int mine, int job, int *leader) {
    int n = 0;
    MPI_Comm_size(w, &n);
    int *jobs = malloc((size_t)n * sizeof *jobs);
    if (!jobs) return MPI_ERR_NO_MEM;
    const int rc = MPI_Allgather(&mine, 1, MPI_INT, jobs, 1, MPI_INT, w);
    *leader = -1;
    for (int r = 0; rc == MPI_SUCCESS && r < n && *leader < 0; r++)
        if (jobs[r] == job) *leader = r;
    free(jobs);
    return rc;
}

/* w (freed) and the intercommunicator inter (freed) merged into *out; high: this side is the parked rank. */
static int merge(MPI_Comm *w, MPI_Comm inter, int high) {
    MPI_Comm m = MPI_COMM_NULL;
    const int rc = MPI_Intercomm_merge(inter, high, &m);
    MPI_Comm_free(&inter);
    if (rc != MPI_SUCCESS) return rc;
    if (*w != MPI_COMM_NULL) MPI_Comm_free(w);
    *w = m;
    return MPI_SUCCESS;
}

ah_status_t ah_comm_readmit_merge(MPI_Comm *world, int job, const ah_comm_parked_t *who, int n, int first,
                                  int wake_from, int key, const void *payload, size_t len, ah_error_t *err) {
    MPI_Comm w = *world, inter = MPI_COMM_NULL;
    int rc = MPI_SUCCESS, i = first >= 0 ? first : 0, leader = -1, me = 0;
    if (first >= 0) { /* this rank is who[first], woken by wake_from (its job's rank in the world) */
        rc = MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, wake_from, AH_COMM_TAG_READMIT, &inter);
        if (rc == MPI_SUCCESS) rc = merge(&w, inter, 1);
        i++;
    }
    for (; rc == MPI_SUCCESS && i < n; i++) {
        if ((rc = leader_of(w, job, who[i].job, &leader)) != MPI_SUCCESS) break;
        if (leader < 0) { /* the same on every rank: nothing was sent */
            *world = w;
            return ah_error_set(err, AH_ERR_USAGE, "re-admitting job %d's rank %d: no rank of its job is in the "
                                "world to wake it", who[i].job, who[i].rank);
        }
        MPI_Comm_rank(w, &me);
        if (me == leader &&
            (rc = MPI_Send(payload, (int)len, MPI_BYTE, who[i].rank, AH_COMM_TAG_WAKE, MPI_COMM_WORLD)) != MPI_SUCCESS)
            break;
        rc = MPI_Intercomm_create(w, leader, MPI_COMM_WORLD, who[i].rank, AH_COMM_TAG_READMIT, &inter);
        if (rc == MPI_SUCCESS) rc = merge(&w, inter, 0);
    }
    MPI_Comm out = MPI_COMM_NULL;
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(w, 0, key, &out);
    if (rc == MPI_SUCCESS) rc = ah_comm_join_next_agree(out); /* the admissions it missed while parked */
    if (w != MPI_COMM_NULL) MPI_Comm_free(&w);
    *world = out;
    if (rc != MPI_SUCCESS)
        return ah_error_set(err, AH_ERR_COMM, "re-admitting %d parked rank%s into the world failed at job %d's rank "
                            "%d (MPI error %d)", n, n == 1 ? "" : "s", who[i < n ? i : n - 1].job,
                            who[i < n ? i : n - 1].rank, rc);
    return AH_OK;
}
