/* The ssh and slurm launchers' shared state and helpers (launch_ssh.c, launch_ssh_remote.c,
 * launch_ssh_joined.c; launcher.h is the API). Internal to src/elastic/. */
#ifndef AH_ELASTIC_LAUNCH_SSH_H
#define AH_ELASTIC_LAUNCH_SSH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "elastic/launcher.h"

#define SSH_MAX_RANKS 1024
#define SSH_MAX_WORDS 32
#define AH_SSH_TIMEOUT_S 30.0
#define AH_SSH_POLL_S 0.5
#define SSH_MAX_JOBS 256

/* A joined launch's mpirun on one host (launch_ssh_joined.c). */
typedef struct ssh_job {
    char host[64];
    pid_t pid;   /* the remote command running the host's mpirun, here; 0 once reaped or killed */
    int status;  /* its exit status once exited (the remote mpirun's) */
    bool exited; /* reaped by poll or leave_hosts */
    bool gone;   /* left in place (leave_hosts): no longer part of the job */
    bool leaving; /* named by the "reconfigure" event read (ah_launch_tap_line): poll skips it */
    bool joining; /* started by join_hosts, its join not read yet: a failure is not the job's (poll) */
    long offset; /* bytes of that host's metrics.jsonl consumed */
} ssh_job_t;

typedef struct ssh {
    char mpirun[512], mpirun_args[2048], rsh[1024], local_root[600], autohet[1024];
    char *rsh_argv[SSH_MAX_WORDS + 8]; /* words of rsh (into rsh_words), then BatchMode options */
    char rsh_words[1024];
    int n_rsh;
    bool slurm;          /* srun as RSH (its words are fixed), `sh -c` after the host */
    char alloc[16384];   /* slurm: the allocation's hosts, one per line, each line ended */
    char silent[16384];  /* hosts whose last test command failed, one per line, each line ended */
    pid_t pid; /* mpirun, leader of its own process group; 0 when not running */
    char run_dir[600];
    int n_ranks;
    char rank_host[SSH_MAX_RANKS][64];
    bool rank_signalled[SSH_MAX_RANKS];
    double notice_t;  /* last notice sent while ranks were still unknown */
    double metrics_t; /* last metrics fetch */
    double report_t;  /* last look for the preemption report */
    long offset;      /* bytes of metrics.jsonl consumed (one mpirun for the whole plan) */
    ah_launch_lines_t lines;
    /* joined (launch_ssh_joined.c): one mpirun a host, an ompi-server here */
    bool joined, ended;   /* ended: poll said the job exited (told once, stays so) */
    pid_t server;         /* the ompi-server the jobs meet through; 0 when none */
    int n_jobs;
    ssh_job_t job[SSH_MAX_JOBS];
    int metrics_job;      /* the job whose host holds rank 0, the metrics' writer */
    int next_metrics_job; /* after a reconfiguration request: the new rank 0's job (-1: none pending) */
    bool joining;         /* join_hosts made rank_host the next plan's (its request's new rank 0 is rank_host[0]) */
    char reader[64];      /* joining: the running world's rank 0's host (reads a request), rank_host[0] before */
} ssh_t;


/* launch_ssh_remote.c: the remote command. */
/* A path the remote shell gets inside single quotes: refused when it holds one. */
ah_status_t ssh_check_path(const char *what, const char *p, ah_error_t *err);
/* host's line in list (lines each ended by a newline), or NULL. */
char *ssh_find_line(char *list, const char *host);
/* RSH HOST CMD, stdin from in_path (NULL: /dev/null). out gets its stdout, errout its stderr (both
 * truncated to their capacity). Returns the exit status; -1 when it could not run, -2 when it
 * passed the deadline (killed), -3 when host is silent (not tried). */
int ssh_remote(ssh_t *l, const char *host, const char *cmd, const char *in_path, char *out, size_t out_cap, char *errout,
               size_t err_cap);
/* One remote call of ssh_remote_many: host runs cmd, its stdout into out, its stderr into err (each
 * truncated to its capacity), rc its result as ssh_remote's. */
typedef struct ssh_call {
    const char *host, *cmd;
    char out[8192], err[1024]; /* out: room for a rank a line of every rank of a host */
    int rc;
} ssh_call_t;
/* ssh_remote for n calls at once (a slow or hung host does not hold the others back), each with the
 * same deadline, timeout_s from now, stdin from in_path (NULL: /dev/null). */
void ssh_remote_many(ssh_t *l, ssh_call_t *calls, int n, const char *in_path, double timeout_s);
/* An error for a remote call that failed: names the host, the command's last stderr line. */
ah_status_t ssh_remote_error(const ssh_t *l, const char *host, int rc, const char *what, char *errout, ah_error_t *err);
/* host added to (on) or removed from the silent list. */
void ssh_set_silent(ssh_t *l, const char *host, bool on);
/* The argv of RSH HOST [sh -c] CMD into argv (room for SSH_MAX_WORDS + 12); returns its length. */
int ssh_rsh_argv(const ssh_t *l, const char *host, const char *cmd, char **argv);

/* launch_ssh.c */
/* Whether rank r is the first of its host in the plan's order. */
bool ssh_first_of_host(const ssh_t *l, int r);
/* sig to the ranks on host (NULL: every host), one remote call per host; only_new: those not
 * signalled yet. */
int ssh_signal_ranks(ssh_t *l, const char *host, const char *sig, bool only_new);
/* RUN/name on host, from byte `from` (0: the whole file) into out; the byte count or -1 when it is
 * not there or the host does not answer. */
long ssh_fetch(ssh_t *l, const char *host, const char *name, long from, char *out, size_t cap);
/* launcher.h put_run_file. */
ah_status_t ssh_put_run_file(void *ctx, const char *name, const char *local_path, ah_error_t *err);

/* launch_ssh_joined.c: job->joined (launcher.h). */
/* The ompi-server here, its URI on every host, then one mpirun a host started there through RSH. */
ah_status_t ssh_start_joined(ssh_t *l, const ah_launch_job_t *job, ah_error_t *err);
/* launcher.h poll, over the jobs. */
bool ssh_poll_joined(ssh_t *l, int *status);
/* Every job's remote command and mpirun (on its host) killed, the ompi-server stopped. */
void ssh_stop_joined(ssh_t *l);
/* launcher.h read_metrics: from rank 0's host, and after a reconfiguration request the new rank 0's. */
void ssh_read_metrics_joined(ssh_t *l, void (*fn)(void *fn_ctx, json_t *line), void *fn_ctx);
/* After put_run_file of a reconfiguration request (runtime/reconfig.h) at local_path: the new rank 0's job. */
void ssh_reconfig_requested(ssh_t *l, const char *local_path);
/* launcher.h dead_jobs. */
int ssh_dead_jobs(void *ctx, char *what, size_t what_cap);
/* launcher.h leave_hosts. */
int ssh_leave_hosts(void *ctx, const char *const *hosts, int n, double wait_s);
/* launcher.h join_hosts: each host's run directory made (kept when there), the ompi-server's URI and the plan
 * copied there, its mpirun started as at the start (job numbers after every job so far). */
ah_status_t ssh_join_hosts(void *ctx, const ah_launch_job_t *job, const char *const *hosts, int n, ah_error_t *err);

#endif
