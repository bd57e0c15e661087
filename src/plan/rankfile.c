/* The placement file of a plan for Open MPI's sequential mapper (mpirun --hostfile F --map-by seq):
 * one host line per rank, in the plan's device order (pipeline, device group, CP rank, TP rank: ah_plan_rank_device; an
 * interleaved pipeline's device once), the order
 * autohet train reads it in, each after a comment line "# rank R: gpu=I" with the GPU index the
 * rank opens on that host (the plan's; the trainer opens it from the plan, not from this file).
 * A rankfile's "slot=N" would bind the rank to CPU core N (Open MPI reads slots as cores, and
 * fails when the host has fewer), so this file binds ranks to hosts only.
 * Use: mpirun -np N --hostfile F --map-by seq --bind-to none autohet train --plan P ... */
#include <stdio.h>

#include "plan/plan_out.h"

ah_status_t ah_plan_rankfile_write(const ah_plan_t *p, const char *path, ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    const int n = ah_plan_device_count(p);
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ah_error_set(err, AH_ERR_USAGE, "rankfile path %.200s...: too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: check the directory exists and is writable", path);
    fprintf(f, "# autohet plan for %s: %d ranks; rank R runs on the R-th host line, on its GPU gpu=I.\n"
               "# mpirun -np %d --hostfile THIS_FILE --map-by seq --bind-to none autohet train --plan PLAN ...\n",
            p->model.name, n, n);
    for (int rank = 0; rank < n; rank++) {
        const ah_device_ref_t *d = ah_plan_rank_device(p, rank);
        fprintf(f, "# rank %d: gpu=%d\n%s\n", rank, d->index, c->nodes[d->node].name);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: disk full or directory not writable", path);
    }
    return AH_OK;
}
