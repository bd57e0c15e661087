/* Open MPI rankfile and hostfile for a plan. Rank order is the plan's device order (pipeline,
 * stage, TP rank), the order autohet train reads it in:
 *   rankfile:  "rank R=HOST slot=I" — rank R on node HOST, local GPU index I;
 *   hostfile:  "HOST slots=K" — each node the plan uses, in order of its first rank, with the
 *              number of ranks on it (mpirun needs every rankfile host in its host list).
 * Use: mpirun -np N --hostfile F.hosts --rankfile F autohet train ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"

static ah_status_t close_into(FILE *f, const char *tmp, const char *path, ah_error_t *err) {
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: disk full or directory not writable", path);
    }
    return AH_OK;
}

ah_status_t ah_plan_rankfile_write(const ah_plan_t *p, const char *rankfile_path, const char *hostfile_path,
                                   ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    char hosts_path[4096], tmp[4100];
    if (!hostfile_path) {
        snprintf(hosts_path, sizeof hosts_path, "%s.hosts", rankfile_path);
        hostfile_path = hosts_path;
    }
    int *ranks_on = calloc((size_t)c->n_nodes, sizeof(int));
    int *first_rank = malloc(sizeof(int) * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    if (!ranks_on || !first_rank) {
        free(ranks_on);
        free(first_rank);
        return ah_error_set(err, AH_ERR_OOM, "out of host memory writing %s", rankfile_path);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", rankfile_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(ranks_on);
        free(first_rank);
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: check the directory exists and is writable",
                            rankfile_path);
    }
    fprintf(f, "# autohet plan for %s: %d ranks in (pipeline, stage, tp rank) order\n", p->model.name,
            ah_plan_device_count(p));
    int rank = 0;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++)
            for (int r = 0; r < p->tp; r++, rank++) {
                const ah_device_ref_t *d = &p->pipelines[i].stages[s].devices[r];
                fprintf(f, "rank %d=%s slot=%d\n", rank, c->nodes[d->node].name, d->index);
                if (ranks_on[d->node]++ == 0) first_rank[d->node] = rank;
            }
    ah_status_t st = close_into(f, tmp, rankfile_path, err);
    if (st == AH_OK) {
        snprintf(tmp, sizeof tmp, "%s.tmp", hostfile_path);
        f = fopen(tmp, "w");
        if (!f) {
            st = ah_error_set(err, AH_ERR_IO, "cannot write %s: check the directory exists and is writable",
                              hostfile_path);
        } else {
            /* nodes by their first rank */
            for (int want = 0; want < rank; want++)
                for (int n = 0; n < c->n_nodes; n++)
                    if (ranks_on[n] && first_rank[n] == want) fprintf(f, "%s slots=%d\n", c->nodes[n].name, ranks_on[n]);
            st = close_into(f, tmp, hostfile_path, err);
        }
    }
    free(ranks_on);
    free(first_rank);
    return st;
}
