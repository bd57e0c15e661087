/* The start-up space check of a checkpoint session (ckpt_session.h, ah_ckpt_check_space): a
 * --local-root whose filesystem cannot hold what the run keeps there is refused before the first
 * step, naming the root, the bytes needed and the bytes free.
 *
 * What a node's directory needs: a step of S bytes on that node (its shard files, exactly, from
 * the plan's layout and the filesystem's block size; plus its part files and manifest, bounded
 * above), (keep + 1) times: the --keep newest steps stay while the next one is written; less what
 * committed steps already there hold (they are counted as used, and retention removes them as new
 * steps commit), but never less than one step. Nodes whose directories share a filesystem (one
 * host, one device) add up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "comm/transfer.h"
#include "runtime/ckpt_session.h"
#include "runtime/data.h"

typedef struct {
    char host[64];
    uint64_t dev, need, step, old, avail;
    int32_t node, leader; /* leader: this record is a node leader's (the others are empty) */
} space_rec_t;

static uint64_t round_up(uint64_t b, uint64_t block) {
    return (b + block - 1) / block * block;
}

/* The bytes the newest `keep` committed steps in root hold (listed sizes). */
static uint64_t kept_bytes(const char *root, int keep) {
    ah_ckpt_step_info_t *info;
    int n;
    ah_error_t e;
    uint64_t sum = 0;
    if (ah_ckpt_list(root, &info, &n, &e) != AH_OK) return 0;
    for (int i = n - 1; i >= 0 && keep > 0; i--)
        if (info[i].committed) {
            sum += info[i].bytes;
            keep--;
        }
    free(info);
    return sum;
}

/* This rank's record: the node's need when it is the node's leader (a collective over the node). */
static ah_status_t node_record(ah_ckpt_session_t *s, space_rec_t *r, ah_error_t *err) {
    memset(r, 0, sizeof *r);
    struct statvfs vfs;
    struct stat sb;
    if (statvfs(s->node_root, &vfs) != 0 || stat(s->node_root, &sb) != 0)
        return ah_error_set(err, AH_ERR_IO, "--local-root %s: cannot stat %s", s->o.local_root, s->node_root);
    const uint64_t block = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize ? vfs.f_bsize : 4096;
    uint64_t bytes = 0;
    int files = 0;
    ah_status_t st = ah_ckpt_rank_step_bytes(s, block, &bytes, &files, err);
    /* Its part file (file entries of ~160 bytes) and, for the leader, the manifest: the model and the
     * rest within 4 KiB, the data's shard list and every file of the node. */
    double sum[2] = {(double)(bytes + round_up(256 + 160 * (uint64_t)files, block)), (double)files};
    ah_status_t cs = ah_comm_allreduce_f64(s->node, sum, 2, err);
    if (st == AH_OK) st = cs;
    if (st != AH_OK || s->node_rank != 0) return st;
    r->leader = 1;
    r->node = s->my_node;
    r->dev = (uint64_t)sb.st_dev;
    r->avail = (uint64_t)vfs.f_bavail * (uint64_t)(vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize);
    if (gethostname(r->host, sizeof r->host - 1) != 0) snprintf(r->host, sizeof r->host, "?");
    json_t *list = ah_dataset_describe(s->tr->data);
    char *text = list ? json_dumps(list, JSON_COMPACT) : NULL;
    const uint64_t data = text ? strlen(text) : AH_CKPT_DATA_MAX;
    free(text);
    json_decref(list);
    r->step = (uint64_t)sum[0] + round_up(4096 + data + 160 * (uint64_t)sum[1], block);
    r->old = kept_bytes(s->node_root, s->o.keep);
    const uint64_t all = (uint64_t)(s->o.keep + 1) * r->step;
    r->need = all > r->old + r->step ? all - r->old : r->step;
    return AH_OK;
}

/* The leader's verdict over every leader's record: its filesystem holds the nodes on it. */
static ah_status_t judge(const ah_ckpt_session_t *s, const space_rec_t *recs, int n, const space_rec_t *me,
                         ah_error_t *err) {
    uint64_t need = 0;
    char others[256] = "";
    size_t len = 0;
    int n_others = 0;
    for (int i = 0; i < n; i++) {
        const space_rec_t *r = &recs[i];
        if (!r->leader || r->dev != me->dev || strcmp(r->host, me->host) != 0) continue;
        need += r->need;
        if (r->node != me->node && ++n_others && len + 80 < sizeof others)
            len += (size_t)snprintf(others + len, sizeof others - len, "%s%s", len ? ", " : "",
                                    s->tr->plan->cluster.nodes[r->node].name);
    }
    if (need <= me->avail) return AH_OK;
    char shared[400] = "";
    if (others[0])
        snprintf(shared, sizeof shared, "; node%s %s keep%s checkpoints on the same filesystem: %llu bytes with "
                 "this node's", n_others == 1 ? "" : "s", others, n_others == 1 ? "s its" : " their",
                 (unsigned long long)need);
    return ah_error_set(err, AH_ERR_IO, "--local-root %s cannot hold this run's checkpoints: node %s's %s needs %llu "
                        "bytes (a step is %llu bytes there; --keep %d keeps %d steps while the next is written, less "
                        "the %llu bytes of steps there already)%s, but %llu bytes are free: free space there, lower "
                        "--keep, or point --local-root at a larger disk", s->o.local_root,
                        s->tr->plan->cluster.nodes[me->node].name, s->node_root, (unsigned long long)me->need,
                        (unsigned long long)me->step, s->o.keep, s->o.keep, (unsigned long long)me->old, shared,
                        (unsigned long long)me->avail);
}

ah_status_t ah_ckpt_check_space(ah_ckpt_session_t *s, ah_error_t *err) {
    ah_comm_t *world = ah_comm_world();
    space_rec_t me;
    ah_status_t st = node_record(s, &me, err);
    const int n = ah_comm_size(world);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    char *all = NULL;
    ah_error_t e2;
    ah_status_t gs = lens ? ah_comm_allgather_bytes(world, &me, sizeof me, &all, lens, &e2)
                          : ah_error_set(&e2, AH_ERR_OOM, "no host memory for the space check");
    if (st == AH_OK && gs != AH_OK) {
        st = gs;
        *err = e2;
    }
    if (st == AH_OK && me.leader) st = judge(s, (const space_rec_t *)all, n, &me, err);
    free(all);
    free(lens);
    return ah_comm_agree(world, st, err);
}
