/* Checkpoints in object storage, and the background uploader.
 *
 * Cloud layout under s3://BUCKET/PREFIX:
 *   PREFIX/step-00000200/block-003.tp2-0.safetensors   one copy of each shard
 *   PREFIX/step-00000200/manifest-NODE.json             per uploading node, written last
 * A node's cloud manifest lists exactly the files that node uploaded (with the CRC-32C of its
 * local manifest), so it commits them: a reader trusts a cloud file only when a manifest lists it.
 * Nodes never coordinate in the cloud: the cloud holds step N in full once the union of its
 * manifests covers what a restore needs (see restore.h).
 *
 * One copy of each shard: the caller passes the names this node uploads (e.g. shards for which
 * it holds the lowest rank among their holders); the uploader does not decide.
 */
#ifndef AH_CKPT_CLOUD_H
#define AH_CKPT_CLOUD_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "ckpt/s3.h"

/* "PREFIX/step-00000200/NAME" (no leading '/' when PREFIX is empty). -1 if it does not fit. */
int ah_ckpt_cloud_key(char *buf, size_t cap, const ah_s3_url_t *url, int64_t step, const char *name);

/* Uploads the named files of a committed local step (all of them when names is NULL), each
 * verified against the local manifest first so a damaged file is never spread, then
 * manifest-NODE.json. bytes (may be NULL) gets the bytes sent. */
ah_status_t ah_ckpt_cloud_upload_step(ah_s3_t *s3, const ah_s3_url_t *url, const char *local_root,
                                      int64_t step, const char *const *names, int n_names,
                                      uint64_t *bytes, ah_error_t *err);

/* All committed cloud manifests (any step, any node), and a per-step summary like ah_ckpt_list:
 * a step is committed when at least one manifest lists files; objects no manifest lists are
 * counted as uncommitted. Either output may be NULL. Arrays are malloc'ed; free manifests with
 * ah_ckpt_manifests_free. */
ah_status_t ah_ckpt_cloud_scan(ah_s3_t *s3, const ah_s3_url_t *url, ah_ckpt_manifest_t **manifests,
                               int *n_manifests, ah_ckpt_step_info_t **steps, int *n_steps,
                               ah_error_t *err);
void ah_ckpt_manifests_free(ah_ckpt_manifest_t *m, int n);
/* Retention: node's committed steps before `below` leave the cloud, each uncommitted first (its
 * manifest-NODE.json deleted), then the files that manifest listed (the files this node uploaded).
 * Other nodes' objects are theirs to remove. *removed (may be NULL): the steps removed. */
ah_status_t ah_ckpt_cloud_prune(ah_s3_t *s3, const ah_s3_url_t *url, const char *node, int64_t below, int *removed,
                                ah_error_t *err);

/* Background uploads (one pthread with its own S3 connection). submit() returns at once;
 * a job submitted while an older one still waits replaces it (only the newest step matters);
 * wait() blocks until the queue is empty and returns the first failure since the last wait (or
 * take_error). */
typedef struct ah_ckpt_uploader ah_ckpt_uploader_t;

typedef struct ah_ckpt_upload_stats {
    int64_t last_step; /* newest step fully uploaded (manifest included), -1 if none */
    int steps, skipped; /* uploaded; replaced by a newer job before they started */
    uint64_t bytes;
    double seconds;
} ah_ckpt_upload_stats_t;

ah_status_t ah_ckpt_uploader_start(const ah_s3_config_t *cfg, const ah_s3_url_t *url,
                                   ah_ckpt_uploader_t **out, ah_error_t *err);
ah_status_t ah_ckpt_uploader_submit(ah_ckpt_uploader_t *u, const char *local_root, int64_t step,
                                    const char *const *names, int n_names, ah_error_t *err);
ah_status_t ah_ckpt_uploader_wait(ah_ckpt_uploader_t *u, ah_error_t *err);
/* wait() without taking the failure (take_error does). */
void ah_ckpt_uploader_drain(ah_ckpt_uploader_t *u);
ah_ckpt_upload_stats_t ah_ckpt_uploader_stats(ah_ckpt_uploader_t *u);
/* The newest step this uploader finished (manifest included) that is <= bound, -1 when none among
 * the last AH_CKPT_UPLOAD_HISTORY it finished: a step is complete in the cloud when every uploading
 * node finished it, and a node may have skipped a step another finished. */
#define AH_CKPT_UPLOAD_HISTORY 64
int64_t ah_ckpt_uploader_newest_upto(ah_ckpt_uploader_t *u, int64_t bound);
/* The steps this uploader finished (manifest included), the last AH_CKPT_UPLOAD_HISTORY of them at
 * most, in no order, into steps (cap entries); returns how many. */
int ah_ckpt_uploader_done(ah_ckpt_uploader_t *u, int64_t *steps, int cap);
/* Asks for retention (ah_ckpt_cloud_prune of node's steps before `below`), done on the uploader's
 * thread once no upload waits; drain(), wait() and stop() wait for it too, cancel() drops it. A
 * lower bound than one asked before changes nothing. A failure is taken as an upload's. */
void ah_ckpt_uploader_prune(ah_ckpt_uploader_t *u, const char *node, int64_t below);
/* The first failure since the last take or wait, without waiting (AH_OK when none); clears it. */
ah_status_t ah_ckpt_uploader_take_error(ah_ckpt_uploader_t *u, ah_error_t *err);
/* The step being uploaded now (-1 when idle): garbage collection must not remove it. */
int64_t ah_ckpt_uploader_busy_step(ah_ckpt_uploader_t *u);
/* The newest step queued or being uploaded (-1 when none): what a cancel would drop. */
int64_t ah_ckpt_uploader_pending_step(ah_ckpt_uploader_t *u);
/* Finishes queued work, joins the thread, frees. */
void ah_ckpt_uploader_stop(ah_ckpt_uploader_t *u);
/* Drops the queued job and cuts the upload in flight (its step never gets this node's manifest, so
 * the cloud keeps only the steps it already had), joins the thread, frees. */
void ah_ckpt_uploader_cancel(ah_ckpt_uploader_t *u);

#endif
