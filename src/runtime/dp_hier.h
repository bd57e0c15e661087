/* The hierarchical gradient sync of a DP group whose members span regions (or zones): plan.json
 * "dp_sync": "hierarchical" (plan.h ah_dp_sync_t; docs/runtime.md "Hierarchical gradient sync").
 * A bucket is summed in three phases: a reduce-scatter inside each domain (region, else zone:
 * spec/cluster.h ah_cluster_domains), an all-reduce of each piece across the domains (one holder
 * per domain), an all-gather inside each domain. The bucket is cut into P pieces, P the largest
 * domain's member count; member j of a domain of r holds pieces [j P / r, (j + 1) P / r), so a
 * small domain's members hold several. A sharded group's bucket is summed whole the same way (each
 * member keeps its part of it: the all-gather inside the domain is the price of the hierarchy).
 *
 * Ownership: an ah_dp_hier_t (trainer.h, per DP group id) owns its communicators; a bucket's
 * counts and cross requests are the bucket's (dp_sync.c frees them). Errors: ah_error_t.
 * Collectives: ah_dp_hier_open is collective over the group (an all-gather of the members' nodes,
 * then 2 + P splits), ah_dp_hier_attach and ah_dp_hier_sum over its members too. A bucket's phases are non-blocking; on each of the domain's two
 * communicators and each piece's one, the buckets' collectives are issued in the bucket list's
 * order (ah_dp_hier_advance's cap), the same on every member, so MPI matches them. */
#ifndef AH_RUNTIME_DP_HIER_H
#define AH_RUNTIME_DP_HIER_H

#include "runtime/trainer.h"

struct ah_dp_hier {
    ah_group_t rs, ag;  /* the group's members in this rank's domain: phase 1's and phase 3's
                         * communicators (two, so their collectives never interleave on one) */
    ah_group_t *cross;  /* per piece this rank holds, [piece1 - piece0]: its holders, one per domain */
    int domains;        /* how many (>= 2) */
    int pieces;         /* P */
    int piece0, piece1; /* this rank's pieces */
    int member, members; /* this rank's place in its domain, the domain's member count */
};

/* Collective over DP group id's members (this rank is one): *out the group's hierarchy, or NULL
 * when the group is inside one zone (the ring then). */
ah_status_t ah_dp_hier_open(ah_trainer_t *tr, int id, ah_dp_hier_t **out, ah_error_t *err);
void ah_dp_hier_close(ah_dp_hier_t **h);
/* On a GPU rank, collective over the group's members: the device communicators (NCCL) of each
 * domain and piece communicator, domain ones first, then the pieces in order. */
ah_status_t ah_dp_hier_attach(const ah_device_t *d, ah_dp_hier_t *h, ah_error_t *err);
/* A GPU rank's bucket buf[0 .. n) (the backend's memory) summed hierarchically through the device
 * communicators (dp_sync.c): the three phases in order on the compute stream (done NULL), or on the
 * communication stream, done recorded after the last (device.h ah_group_sum). */
ah_status_t ah_dp_hier_sum(ah_dp_hier_t *h, float *buf, int64_t n, ah_dcomm_event_t *done, ah_error_t *err);
/* The start-up line's words for this rank's DP groups (tr set up): how many sum hierarchically and
 * over how many domains at most, into buf; false when none does. */
bool ah_dp_hier_describe(const ah_trainer_t *tr, char *buf, size_t cap);

/* Makes bucket b (n floats) hierarchical over h: its per-domain-member counts and cross requests. */
ah_status_t ah_dp_hier_bucket(const ah_dp_hier_t *h, ah_dp_bucket_t *b, ah_error_t *err);
void ah_dp_hier_bucket_free(ah_dp_bucket_t *b);
/* Phase 1 of b over the gradients g (the stage's flat buffer). */
ah_status_t ah_dp_hier_start(ah_dp_bucket_t *b, float *g, ah_error_t *err);
/* Moves b on: each phase whose collectives are complete (wait: waited for) issues the next, up to
 * phase `cap` (the lowest phase of the buckets before b in the list: none of b's collectives may
 * be issued before theirs of the same phase). b->phase: 1 reduce-scatter, 2 cross all-reduces,
 * 3 all-gather issued, 4 complete. */
ah_status_t ah_dp_hier_advance(ah_dp_bucket_t *b, float *g, int cap, bool wait, ah_error_t *err);

#endif
