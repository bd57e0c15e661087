/* A rank's host against its plan (host_check.h). */
#include "runtime/host_check.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ah_host_name(char *out, size_t cap) {
    if (gethostname(out, cap) != 0 || cap == 0) {
        if (cap > 1) snprintf(out, cap, "?");
        return;
    }
    out[cap - 1] = 0;
}

/* a and b name the same host: equal, or equal up to the first '.' when only one has one. */
static bool same_host(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return true;
    const char *da = strchr(a, '.'), *db = strchr(b, '.');
    if ((da != NULL) == (db != NULL)) return false;
    const size_t n = da ? (size_t)(da - a) : (size_t)(db - b);
    return strlen(da ? b : a) == n && strncmp(a, b, n) == 0;
}

ah_status_t ah_host_check(const ah_plan_t *plan, int rank, bool strict, ah_error_t *err) {
    const ah_device_ref_t *d = ah_plan_rank_device(plan, rank);
    if (!d) return AH_OK; /* more ranks than devices: the trainer says so */
    const ah_cluster_t *c = &plan->cluster;
    const char *want = c->nodes[d->node].name;
    char here[256];
    ah_host_name(here, sizeof here);
    if (same_host(here, want)) return AH_OK;
    for (int n = 0; n < c->n_nodes; n++)
        if (same_host(here, c->nodes[n].name))
            return ah_error_set(err, AH_ERR_USAGE, "the plan puts rank %d on host %s (GPU %d), but it runs on "
                                "host %s: start it with the plan's rankfile (autohet plan --rankfile F; "
                                "mpirun --hostfile F --map-by seq)", rank, want, d->index, here);
    if (strict)
        return ah_error_set(err, AH_ERR_USAGE, "--check-host: the plan puts rank %d on host %s (GPU %d), but it "
                            "runs on host %s, which is none of the plan's nodes: the cluster file's node names "
                            "must be the hosts' names", rank, want, d->index, here);
    return AH_OK;
}
