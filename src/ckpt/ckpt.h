/* Checkpoints on a node-local disk: step directories, manifests, atomic commit, lookup,
 * verification and garbage collection (ckpt.c; the manifest's JSON form, load and save in manifest.c).
 *
 * Layout of a node's checkpoint root (one root per node; see docs/checkpoints.md):
 *   ROOT/step-00000200/block-003.tp2-0.safetensors   weights + AdamW m, v of block 3, TP 2 rank 0
 *   ROOT/step-00000200/embed.tp2-0.safetensors       token/position embeddings (stage 0)
 *   ROOT/step-00000200/head.tp2-0.safetensors        final norm (+ head if untied) (last stage)
 *   ROOT/step-00000200/manifest.json                 written last: the commit point
 * Files are named by what they hold, never by who wrote them, so a different plan can find them.
 *
 * Writing a step from several ranks of one node:
 *   every rank:  ah_ckpt_writer_begin -> ah_ckpt_write_shard ... -> ah_ckpt_writer_finish_part(r)
 *   caller:      a barrier among the node's ranks (MPI in the trainer)
 *   one rank:    ah_ckpt_commit(root, meta, n_parts)   merges part-0..part-(n-1) into manifest.json
 * Each shard and part file is written to a temp name, fsynced and renamed, and the directory is
 * fsynced before the manifest is written the same way; so a step counts (ah_ckpt_latest) only
 * once manifest.json exists, and then every file it lists is complete on disk. A crash anywhere
 * leaves the previous committed step untouched.
 * Adding files to a committed step (another plan's pieces of the same state: ah_ckpt_writer_extend,
 * ah_ckpt_commit_more): the new files are unlisted until the manifest is replaced atomically by one
 * listing old and new; a listed file is never rewritten.
 *
 * Ownership: ah_ckpt_manifest_t owns its file array (ah_ckpt_manifest_free); list results are
 * malloc'ed arrays the caller frees with free().
 */
#ifndef AH_CKPT_CKPT_H
#define AH_CKPT_CKPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt/safetensors.h"
#include "core/status.h"
#include "spec/model.h"

#define AH_CKPT_NAME_MAX 128 /* file and node names */
#define AH_CKPT_RNG_MAX 256  /* bytes of opaque RNG state */
#define AH_CKPT_DATA_MAX 16384 /* bytes of the data's shard list (compact JSON) */
#define AH_CKPT_MANIFEST "manifest.json"

typedef struct ah_ckpt_file {
    char name[AH_CKPT_NAME_MAX];
    uint64_t bytes;
    uint32_t crc32c;
} ah_ckpt_file_t;

/* What the trainer needs to resume besides the tensors. */
typedef struct ah_ckpt_meta {
    int64_t step;          /* updates done; iteration `step` (from 0) resumes */
    int64_t data_position; /* index of the next global sample */
    /* Tokens per sample T (a sample reads T + 1): data_position counts samples of this length, so a
     * resume must use the same; 0 when not recorded (a manifest of an older autohet). */
    int64_t seq_len;
    uint8_t rng[AH_CKPT_RNG_MAX]; /* opaque RNG state, stored as hex */
    int rng_len;
    char plan_hash[128];   /* of the plan that wrote the step (informative on resume) */
    char node[AH_CKPT_NAME_MAX]; /* node whose files the manifest lists */
    bool has_model;
    ah_model_t model;
    /* The training data's shard list as compact JSON ("data" in the manifest, opaque here; the
     * trainer's, runtime/data.h), or "" when none was kept. */
    char data[AH_CKPT_DATA_MAX];
    /* The learning-rate schedule the step was trained under ("schedule": {"steps", "warmup", "lr"};
     * runtime/trainer.h: warmup, then cosine to 0.1 lr at step sched_steps), which a resume keeps
     * (runtime/ckpt_io.h); sched_steps 0: not recorded (a manifest of an older autohet). */
    int64_t sched_steps, sched_warmup;
    double sched_lr;
} ah_ckpt_meta_t;

typedef struct ah_ckpt_manifest {
    ah_ckpt_meta_t meta;
    int n_files;
    ah_ckpt_file_t *files; /* sorted by name */
} ah_ckpt_manifest_t;

/* --- names ---------------------------------------------------------------------------------- */

typedef enum { AH_SHARD_EMBED, AH_SHARD_BLOCK, AH_SHARD_HEAD } ah_shard_kind_t;

/* "embed.tp2-0.safetensors", "block-003.tp2-1.safetensors", "head.tp1-0.safetensors".
 * Returns the length, or -1 if it does not fit or the arguments are out of range. */
int ah_ckpt_shard_name(char *buf, size_t cap, ah_shard_kind_t kind, int layer, int tp, int tp_index);
/* Inverse of ah_ckpt_shard_name; false for any other name. layer is -1 for embed/head. */
bool ah_ckpt_shard_parse(const char *name, ah_shard_kind_t *kind, int *layer, int *tp, int *tp_index);
/* Names that may become paths: 1..127 bytes of [A-Za-z0-9._-], not starting with '.'. */
bool ah_ckpt_name_ok(const char *name);
/* "ROOT/step-00000200" */
int ah_ckpt_step_dir(char *buf, size_t cap, const char *root, int64_t step);
/* "step-00000200" -> 200; -1 for anything else (only the canonical 8+ digit form counts). */
int64_t ah_ckpt_parse_step_dir(const char *name);

/* --- manifest ------------------------------------------------------------------------------- */

json_t *ah_ckpt_manifest_to_json(const ah_ckpt_manifest_t *m);
ah_status_t ah_ckpt_manifest_from_json(const json_t *doc, const char *where, ah_ckpt_manifest_t *out,
                                       ah_error_t *err);
ah_status_t ah_ckpt_manifest_load(const char *path, ah_ckpt_manifest_t *out, ah_error_t *err);
/* Serialises and writes atomically (temp, fsync, rename, fsync dir). */
ah_status_t ah_ckpt_manifest_save(const ah_ckpt_manifest_t *m, const char *path, ah_error_t *err);
/* Sorts m's files by name, the order ah_ckpt_manifest_find and manifest.json keep. */
void ah_ckpt_manifest_sort(ah_ckpt_manifest_t *m);
const ah_ckpt_file_t *ah_ckpt_manifest_find(const ah_ckpt_manifest_t *m, const char *name);
void ah_ckpt_manifest_free(ah_ckpt_manifest_t *m);

/* --- writing a step ------------------------------------------------------------------------- */

typedef struct ah_ckpt_writer ah_ckpt_writer_t;

/* Creates ROOT and ROOT/step-N as needed. Fails if step N is already committed there. */
ah_status_t ah_ckpt_writer_begin(const char *root, int64_t step, ah_ckpt_writer_t **out,
                                 ah_error_t *err);
/* Begins adding files to step N committed in ROOT (the resumed step written behind under another
 * plan, its node's disk holding the old plan's files of it; runtime/ckpt_resume.c): a shard the
 * committed manifest lists is written to a temp file, compared (size, CRC-32C) with the listed one,
 * which is verified on the disk, and the temp removed, so nothing listed is ever rewritten (other
 * contents, or a damaged listed file, fail the write); other shards are written beside the listed
 * ones, unlisted (so ignored) until ah_ckpt_commit_more lists them. Fails if step N is not committed. */
ah_status_t ah_ckpt_writer_extend(const char *root, int64_t step, ah_ckpt_writer_t **out, ah_error_t *err);
/* Writes one safetensors shard atomically and records its size and CRC-32C. Several threads may
 * write a writer's shards at once (different names); begin, finish_part and free are one thread's. */
ah_status_t ah_ckpt_write_shard(ah_ckpt_writer_t *w, const char *name, const ah_st_tensor_t *tensors,
                                int n, const json_t *metadata, ah_error_t *err);
/* Makes this writer's files durable and lists them in part-<part>.json for the committer. */
ah_status_t ah_ckpt_writer_finish_part(ah_ckpt_writer_t *w, int part, ah_error_t *err);
/* Bytes of the shards written so far (what the part lists). */
uint64_t ah_ckpt_writer_bytes(const ah_ckpt_writer_t *w);
void ah_ckpt_writer_free(ah_ckpt_writer_t *w);

/* Merges part-0 .. part-(n_parts-1) of step meta->step and commits manifest.json. Every part
 * must be there, every listed file present with its size, and a name listed twice must have the
 * same checksum. */
ah_status_t ah_ckpt_commit(const char *root, const ah_ckpt_meta_t *meta, int n_parts,
                           ah_error_t *err);

/* ah_ckpt_commit for a step committed already, written by ah_ckpt_writer_extend: its manifest is
 * replaced, atomically (temp, fsync, rename, fsync dir), by one listing its files and the parts'
 * (a name in both with the same size and checksum), meta's plan hash; a kill at any moment leaves
 * the old manifest or the new one, each listing only verified, complete files. Refused when meta's
 * data position or sequence length differs from the committed step's (not the same state). */
ah_status_t ah_ckpt_commit_more(const char *root, const ah_ckpt_meta_t *meta, int n_parts, ah_error_t *err);
/* The files in committed step N's directory that its manifest does not list removed (shards and
 * parts of an ah_ckpt_writer_extend nobody committed, temp files); the committed files stay. */
ah_status_t ah_ckpt_unlisted_remove(const char *root, int64_t step, ah_error_t *err);

/* Removes an uncommitted step directory after a failed write (e.g. a full disk), so its partial
 * shards free their space. Refuses a committed step. Call it on one rank, after the others stop. */
ah_status_t ah_ckpt_abandon(const char *root, int64_t step, ah_error_t *err);

/* Takes back a step whose save did not complete on every node (another node's write or commit
 * failed): removed whether this node committed it or not (manifest first, directory synced, then
 * the files, then the root synced), so no listing (ah_ckpt_list) and no resume shows it committed
 * anywhere. Call it on one rank of the node. A step that is not there is fine. */
ah_status_t ah_ckpt_rollback(const char *root, int64_t step, ah_error_t *err);

/* --- reading, checking, cleaning ------------------------------------------------------------ */

typedef struct ah_ckpt_step_info {
    int64_t step;
    bool committed;  /* manifest.json present and valid */
    bool damaged;    /* manifest.json present but unreadable: a lost step, not one being written */
    int n_files;     /* listed in the manifest, or shard files present when not committed */
    uint64_t bytes;  /* of those files */
    char note[256];  /* why not committed ("no manifest", or the damaged manifest's error) */
} ah_ckpt_step_info_t;

/* Every step directory under root, ascending. A missing root is an empty list. */
ah_status_t ah_ckpt_list(const char *root, ah_ckpt_step_info_t **out, int *n, ah_error_t *err);
/* Newest committed step, or -1 if none (half-written directories are ignored). */
ah_status_t ah_ckpt_latest(const char *root, int64_t *step, ah_error_t *err);
ah_status_t ah_ckpt_load(const char *root, int64_t step, ah_ckpt_manifest_t *out, ah_error_t *err);
/* Checks that a file has the size and CRC-32C the manifest entry gives (and is valid
 * safetensors when it is a .safetensors file). The message names the file and both values. */
ah_status_t ah_ckpt_verify_file(const char *path, const ah_ckpt_file_t *want, ah_error_t *err);
/* Verifies every file of a committed step; *n_bad (may be NULL) gets the number that fail. */
ah_status_t ah_ckpt_verify(const char *root, int64_t step, int *n_bad, ah_error_t *err);
/* Uncommits step (its manifest removed, the directory synced), then deletes its directory; a
 * committed step too. For steps no restore can use (ckpt_io.h: a resume drops those newer than the
 * step it restored). Not the root's fsync (the caller's, after its last removal). */
ah_status_t ah_ckpt_remove_step(const char *root, int64_t step, ah_error_t *err);
/* Renames root's step directory to STEPDIR.superseded-<unix time>-<pid> (into to), atomically, and syncs
 * root: an earlier timeline's step kept, not deleted, out of every listing (the name is no step's), so a
 * run that saves that step anew is not refused. Retention and `ckpt ls` do not see it. */
ah_status_t ah_ckpt_set_aside(const char *root, int64_t step, char *to, size_t cap, ah_error_t *err);
/* Keeps the `keep` newest committed steps; removes older committed steps and any uncommitted
 * directory older than the newest committed step (a newer one may still be being written).
 * A step is uncommitted (manifest removed, directory synced) before its files go. */
ah_status_t ah_ckpt_gc(const char *root, int keep, int *removed, ah_error_t *err);
/* The same, but committed step `pinned` stays whatever its age (e.g. the step an uploader is
 * still reading; -1: none). */
ah_status_t ah_ckpt_gc_pinned(const char *root, int keep, int64_t pinned, int *removed, ah_error_t *err);

#endif
