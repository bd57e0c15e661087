/* The agent's handle on one training job (internal to src/elastic/): the mpirun process, the
 * ranks it started (from RUN_DIR/rank-R.json), the trainer's metrics file read as it grows, and
 * the file-system helpers the agent needs. */
#ifndef AH_ELASTIC_JOB_H
#define AH_ELASTIC_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/status.h"

#define AH_JOB_MAX_RANKS 1024

typedef struct ah_job {
    pid_t pid;                 /* mpirun, leader of its own process group; 0 when not running */
    char run_dir[512];
    char metrics_path[600];
    /* ranks, as their rank files appear */
    pid_t rank_pid[AH_JOB_MAX_RANKS];
    char rank_node[AH_JOB_MAX_RANKS][64];
    bool rank_signalled[AH_JOB_MAX_RANKS];
    int n_ranks;               /* ranks the plan has */
    int n_known;               /* rank files read so far */
    /* metrics tail */
    long offset;
    char partial[65536];
    size_t partial_len;
} ah_job_t;

/* Starts argv (argv[0] looked up in PATH) in its own process group, stdin from /dev/null.
 * run_dir is created empty (an old one is removed). */
ah_status_t ah_job_start(ah_job_t *j, char *const *argv, const char *run_dir, int n_ranks,
                         ah_error_t *err);
/* Non-blocking: true when the job has exited; *status is its exit status, or -signal. */
bool ah_job_poll(ah_job_t *j, int *status);
/* Reads rank files not read yet. */
void ah_job_scan_ranks(ah_job_t *j);
/* Sends sig to the ranks on `node` (NULL: every rank) not signalled yet (SIGKILL: all of them);
 * returns how many were sent now. */
int ah_job_signal(ah_job_t *j, const char *node, int sig);
/* SIGKILL to every known rank and to mpirun's process group, then reaps mpirun. */
void ah_job_kill(ah_job_t *j);
/* Calls fn for each complete new line of the trainer's metrics file (parsed; lines that are not
 * JSON objects are skipped). */
void ah_job_tail(ah_job_t *j, void (*fn)(void *ctx, json_t *line), void *ctx);

/* mkdir -p. */
ah_status_t ah_mkdirs(const char *path, ah_error_t *err);
/* rm -r (no error when absent). */
ah_status_t ah_rm_tree(const char *path, ah_error_t *err);

#endif
