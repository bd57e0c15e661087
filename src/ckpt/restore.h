/* Restoring shards from the cheapest tier that has them: local disk, then a replica in a host's
 * memory, then a peer's disk, then the cloud.
 *
 * A catalog gathers the committed manifests of every tier once: the node's local root, the peer
 * tier (hooks the caller provides, ckpt/peer.h: surviving nodes' manifests gathered over MPI, and
 * the files the local tier lacks moved in one exchange), and the cloud (manifest-NODE.json
 * objects). Then:
 *   ah_ckpt_catalog_newest  the newest step for which every needed shard is listed in some tier,
 *                           with that step's data position, RNG state, ...;
 *   ah_ckpt_catalog_fetch   for each needed shard, a verified copy: tried local -> memory -> peer
 *                           -> cloud (policy.h's AH_TIER_ORDER),
 *                           each copy checked (size, CRC-32C, safetensors structure) against the
 *                           manifest that listed it; a missing, truncated or corrupt copy falls
 *                           back to the next tier. Bytes, seconds and files per tier are recorded;
 *   ah_ckpt_catalog_drop    a step with a file no tier holds intact is forgotten, so that newest
 *                           offers the next older one.
 * A tier that cannot be read (cloud down; its listing retried as the sources say) is noted and
 * skipped here: whether that may stop a resume is the caller's rule (runtime/ckpt_resume.c: a
 * cloud that cannot be listed is not an empty cloud). Copies from the peer or the cloud land in
 * staging_dir/step-N/.
 */
#ifndef AH_CKPT_RESTORE_H
#define AH_CKPT_RESTORE_H

#include "ckpt/ckpt.h"
#include "ckpt/policy.h"
#include "ckpt/s3.h"

/* The peer tier, provided by the caller (MPI between nodes: ckpt/peer.h). */
typedef struct ah_ckpt_peer {
    /* Committed manifests the surviving peers hold (malloc'ed array; the catalog takes it and
     * frees it with ah_ckpt_manifests_free). */
    ah_status_t (*manifests)(void *ctx, ah_ckpt_manifest_t **out, int *n, ah_error_t *err);
    /* NULL, or called once by every ah_ckpt_catalog_fetch before the first fetch, with the names
     * the local tier gave no verified copy of (n may be 0): a tier whose transfers are collective
     * moves them all at once into dest_dir (staging_dir/step-N/), and fetch then reports. */
    ah_status_t (*exchange)(void *ctx, int64_t step, const char *const *names, int n, const char *dest_dir,
                            ah_error_t *err);
    /* Puts a peer's copy of file `name` of `step` at dest_path (complete or not at all). */
    ah_status_t (*fetch)(void *ctx, int64_t step, const char *name, const char *dest_path,
                         ah_error_t *err);
    void *ctx;
} ah_ckpt_peer_t;

typedef struct ah_ckpt_sources {
    const char *local_root;     /* NULL: no local tier */
    const ah_ckpt_peer_t *peer; /* NULL: no peer tier */
    /* NULL: no memory tier. The in-memory replicas (ckpt/replica.h), with the same hooks as the
     * peer tier (ckpt/peer.h's ah_ckpt_peer_open_memory): tried after the local disk, before the
     * peers' disks. */
    const ah_ckpt_peer_t *memory;
    ah_s3_t *cloud;             /* NULL: no cloud tier (borrowed) */
    ah_s3_url_t cloud_url;
    const char *staging_dir;    /* needed with a peer or cloud tier */
    /* The cloud's listing is tried cloud_tries times (0: once) before the tier counts as unreadable,
     * waiting k x retry_wait_s before the k-th retry; on_retry (may be NULL) is told of each retry. */
    int cloud_tries;
    double retry_wait_s;
    void (*on_retry)(void *ctx, int retry, int tries, double wait_s, const char *why);
    void *retry_ctx;
} ah_ckpt_sources_t;

typedef struct ah_ckpt_restore_stats {
    uint64_t bytes[AH_TIER_COUNT];
    double seconds[AH_TIER_COUNT]; /* transfer + verification */
    int files[AH_TIER_COUNT];
    int fallbacks;                 /* copies rejected (missing/truncated/corrupt) */
    char last_fallback[512];       /* why the last one was rejected */
    char repaired[1024];           /* each file a rejected copy's another tier replaced: "NAME (WHY): the
                                      TIER tier's copy used", "; " between (cut with "..." when full) */
} ah_ckpt_restore_stats_t;

/* The committed manifests of a node root, every step (a step whose manifest does not load is
 * left out); malloc'ed, free with ah_ckpt_manifests_free. A root that cannot be listed is an
 * error. */
ah_status_t ah_ckpt_load_committed(const char *root, ah_ckpt_manifest_t **out, int *n, ah_error_t *err);
/* The entry for name in the first of ms (n) that is of step and lists it, or NULL. */
const ah_ckpt_file_t *ah_ckpt_manifests_find(const ah_ckpt_manifest_t *ms, int n, int64_t step, const char *name);

typedef struct ah_ckpt_catalog ah_ckpt_catalog_t;

/* Reads the manifests of every tier. Fails only when no tier at all can be read. */
ah_status_t ah_ckpt_catalog_open(const ah_ckpt_sources_t *src, ah_ckpt_catalog_t **out, ah_error_t *err);
/* Why a tier contributed nothing ("" when it was read fine or is not configured). */
const char *ah_ckpt_catalog_note(const ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t);
/* Forgets every manifest of tier t, with why as its note (e.g. another rank could not read it, and
 * every rank must choose from the same tiers). */
void ah_ckpt_catalog_forget_tier(ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t, const char *why);
/* Newest step whose committed manifests, across tiers, list every needed name; meta (may be
 * NULL) gets its data position, RNG state, etc. AH_ERR_INFEASIBLE when no step has them all. */
ah_status_t ah_ckpt_catalog_newest(const ah_ckpt_catalog_t *cat, const char *const *needed, int n,
                                   int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err);
/* The same over tier t's manifests alone (e.g. the newest step the cloud holds complete). */
ah_status_t ah_ckpt_catalog_newest_in(const ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t, const char *const *needed,
                                      int n, int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err);
/* Forgets every tier's manifests of step: a step whose fetch found no intact copy of a file is
 * dropped, and ah_ckpt_catalog_newest then offers the next older one. */
void ah_ckpt_catalog_drop(ah_ckpt_catalog_t *cat, int64_t step);
/* paths[i] gets a verified copy of needed[i], tier by tier: every local copy is checked (once),
 * then the memory tier's exchange moves what is left and those copies are checked, then the peer
 * tier's likewise, then cloud copies are checked. With
 * an exchange hook this is collective wherever the hook is. stats (may be NULL) accumulates; the
 * exchange's time counts for the peer tier when it brought a file. AH_ERR_INVALID, and only then,
 * when a needed file has no intact copy in any tier (the step is damaged: the error names the file
 * and each tier's reason); other codes are failures of the restore itself (memory, MPI, staging). */
ah_status_t ah_ckpt_catalog_fetch(const ah_ckpt_catalog_t *cat, int64_t step, const char *const *needed,
                                  int n, char (*paths)[AH_CKPT_PATH_MAX], ah_ckpt_restore_stats_t *stats,
                                  ah_error_t *err);
void ah_ckpt_catalog_free(ah_ckpt_catalog_t *cat);

#endif
