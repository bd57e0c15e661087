/* How the elastic agent reaches the hosts of its jobs: a table of operations and a context (the
 * agent touches no process, file or disk of a host except through it).
 *
 *  - start a training job on the plan's hosts: every rank runs the same trainer command line;
 *  - poll for the job's exit;
 *  - deliver a preemption notice (SIGTERM) to one host's ranks, kill one host's ranks, stop the
 *    whole job;
 *  - read the trainer's metrics as they grow and the files it writes into the run directory
 *    (runtime/protocol.h names them);
 *  - drop a host's disk; ask a host which checkpoint steps its disk holds and whether one
 *    verifies.
 *
 * Hosts are the cluster's node names. Implementations: local (launch_local.c) — every host is
 * this machine, its disk the directory LOCAL_ROOT/HOST/, mpirun starts the ranks, a notice is a
 * signal to the pids of the ranks' rank files; ssh (launch_ssh.c) — node names are host names,
 * reached through a remote command (ssh, or the one Open MPI is given as plm_rsh_agent) for
 * everything: the run directory and LOCAL_ROOT are paths on every host, each host's its own;
 * slurm (launch_ssh.c too) — the ssh launcher with `srun --overlap -w HOST` as its remote
 * command, inside an allocation.
 *
 * Ownership: the launcher owns its context (ah_launcher_free); start borrows the job
 * description only for the call. One job at a time; not thread-safe. Errors say which host and
 * what to check. */
#ifndef AH_ELASTIC_LAUNCHER_H
#define AH_ELASTIC_LAUNCHER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "ckpt/ckpt.h"
#include "core/status.h"
#include "plan/plan.h"

/* One launch. */
typedef struct ah_launch_job {
    const ah_plan_t *plan;        /* its ranks in plan order: rank r on the host the plan gives it */
    const char *plan_path;        /* the plan file train_argv names (written by the agent here) */
    const char *run_dir;          /* created empty (an old one is removed): rank files,
                                     preempted.json and the metrics of this launch go there */
    char *const *train_argv;      /* what every rank runs (autohet train ...), NULL-terminated */
    bool joined;                  /* one mpirun job a host of the plan (its ranks there, -np k), joined
                                     into one world (comm/join.c): jobs numbered in the order of their
                                     hosts' first rank in the plan (ah_launch_hostjobs), each with
                                     AH_WORLD_JOIN=RUN_DIR/join:J:NJOBS and AH_WORLD_RANKS (the plan's
                                     ranks of its host) and --ompi-server of one ompi-server the launcher
                                     starts (stopped by stop and free); what lets ranks leave in place
                                     (runtime/reconfig.h). false: one mpirun for the whole plan */
    double join_wait_s;           /* join_hosts: > 0, the joining jobs' wait for their turn (AH_JOIN_WAIT_S,
                                     comm/join.c; the agent's wait for the join); 0: theirs (60 s) */
    int join_first;               /* join_hosts: the first joining job's number (the agent's count of the
                                     jobs it has started, a withdrawn or failed join's included: the
                                     request's "join_first"); the launcher numbers from it when it is past
                                     its own count, the numbers between taken as gone */
} ah_launch_job_t;

typedef struct ah_launcher {
    const char *name; /* "local", "ssh" */
    void *ctx;
    ah_status_t (*start)(void *ctx, const ah_launch_job_t *job, ah_error_t *err);
    /* Non-blocking: true when the job has exited; *status is its exit status, or -signal. A job
     * that stop() ended reads as exited, *status untouched. Joined (job->joined): when every mpirun has
     * exited (the first non-zero status, else 0), or at once when one exits non-zero other than a
     * notice's AH_PROTO_EXIT_PREEMPTED (75: the others save with it and exit 75 too); the others are
     * then still running until stop(). The jobs that leave at a change in place, once read_metrics has
     * read its "reconfigure" event, are not counted (ah_launch_tap_line); nor is a job join_hosts started that exits
     * non-zero before read_metrics has read the "reconfigure" event with "join" (it never joined: forgotten, as
     * leave_hosts would; the running world gives up on it, comm.h ah_comm_world_admit). */
    bool (*poll)(void *ctx, int *status);
    /* SIGTERM to the ranks on `host` (NULL: every host) not noticed yet; ranks still starting
     * get it on a later call, once they are known. Returns how many got it now. */
    int (*notice)(void *ctx, const char *host);
    /* SIGKILL to every known rank on `host` (the machine is gone); returns how many. */
    int (*kill_host)(void *ctx, const char *host);
    /* Ends every process of the job at once, ranks still starting included, and reaps it. */
    void (*stop)(void *ctx);
    /* Calls fn for each complete new line of the job's metrics (parsed; lines that are not JSON
     * objects are skipped); fn may keep a reference. */
    void (*read_metrics)(void *ctx, void (*fn)(void *fn_ctx, json_t *line), void *fn_ctx);
    /* The run directory's file `name` (runtime/protocol.h), rank 0's (after the job has ended,
     * failed.json from the first host of its ranks that has one): false when it is not there; else
     * true, and *doc (when doc is not NULL) gets its parse, or NULL with *err set. */
    bool (*run_file)(void *ctx, const char *name, json_t **doc, ah_error_t *err);
    /* The local file local_path copied, atomically, to the run directory's file `name` on every host
     * of the running job (the next plan at a notice: runtime/protocol.h). */
    ah_status_t (*put_run_file)(void *ctx, const char *name, const char *local_path, ah_error_t *err);
    /* rm -r of host's checkpoint disk (no error when it is empty already). */
    ah_status_t (*drop_disk)(void *ctx, const char *host, ah_error_t *err);
    /* The step directories on host's disk (ah_ckpt_list); *steps is malloc'ed. */
    ah_status_t (*list_steps)(void *ctx, const char *host, ah_ckpt_step_info_t **steps, int *n, ah_error_t *err);
    /* ah_ckpt_verify of step on host's disk: *bad gets the files that do not verify. */
    ah_status_t (*verify_step)(void *ctx, const char *host, int64_t step, int *bad, ah_error_t *err);
    /* Takes over a job this launcher did not start, one an earlier agent (killed) launched with
     * `job` (its run directory is kept, nothing is started): read_metrics then reads its metrics
     * from their start and run_file its files. The local launcher first waits up to wait_s for the
     * job's ranks still alive on this machine (a notice from the agent's death lets them save), then
     * kills them; *waited gets the seconds spent (0 elsewhere). */
    ah_status_t (*adopt)(void *ctx, const ah_launch_job_t *job, double wait_s, double *waited, ah_error_t *err);
    /* After the step timeout (no metrics line for long): the ranks that stopped progressing, as far
     * as this machine can tell (NULL: it cannot; the ssh and slurm launchers ask hosts instead,
     * `reachable`): stopped by a signal (SIGSTOP, a debugger), or, when none is, using no CPU
     * time in 1 s (the peers of a stopped rank wait for it, and may sleep through a second while
     * they do). Each is said in what ("rank 2 on slow-1 (pid 123):
     * stopped by a signal (state T)", "; " between), its host into hosts[k] (cap hosts); returns
     * how many. A mpirun of the local launcher stopped by a signal goes first: 1, hosts[0] "" (no node
     * lost; the job is stopped and relaunched). */
    int (*stalled)(void *ctx, char (*hosts)[64], int cap, char *what, size_t what_cap);
    /* Joined jobs only (NULL: the launcher cannot start them; the agent then never changes in place):
     * after an in-place change that let `hosts` leave (runtime/reconfig.h), waits up to wait_s for
     * their mpiruns to exit, kills those still running then, reaps them and forgets them. Of a host's
     * jobs: those leaving (named by a "reconfigure" event read) when one is, else those joining
     * (join_hosts', not in the world yet) when one is, else all. A host that left in place and is joining
     * again has two jobs, the one that left and the new one, which stays (before, the leaver's reap took
     * the new one too, waited for it and killed it: session 25, test_agent_inplace pkback's flake). Not
     * told apart: dropping the joiner of such a host before its leaver is reaped takes the leaver, and
     * the joiner, left running, gives up on its turn by itself (AH_JOIN_ADMIT_S; then poll forgets it). Poll,
     * notice, kill_host, stop, stalled no longer touch them, and the ranks are those of the other
     * jobs, renumbered as their rank files now say. Returns how many of those mpiruns exited with 0
     * (fewer than the hosts' jobs: some failed or were killed). */
    int (*leave_hosts)(void *ctx, const char *const *hosts, int n, double wait_s);
    /* Joined jobs only (NULL: the launcher cannot; the agent then relaunches at a join): starts one more
     * mpirun for each of `hosts` (n) into the running joined job, the ranks job->plan (the plan after the
     * join) puts on it, with AH_WORLD_JOIN=RUN_DIR/join:J:NJOBS (J the next job numbers: every job started
     * in this launch counted, the ones that left too; NJOBS the count after these) and AH_WORLD_RANKS (their
     * ranks in job->plan), through the job's ompi-server: they wait for their turn (at most 60 s quiet)
     * until the trainer takes a request with "join": n (runtime/reconfig.h). From then on poll, notice,
     * kill_host, stop and stalled cover them and the ranks are job->plan's. An error (a host the plan
     * puts no rank on, no running joined job) starts none (those started are killed). */
    ah_status_t (*join_hosts)(void *ctx, const ah_launch_job_t *job, const char *const *hosts, int n,
                              ah_error_t *err);
    /* Joined jobs only (NULL: the launcher sees each mpirun's end itself): at a hang with every host
     * answering, asks each host whose mpirun this launcher still holds as running whether it still runs
     * there; one that does not (its pid file's process gone, or its run directory wiped: every process
     * of the host died while the host stayed up) is taken as ended, killed (-SIGKILL), so that poll
     * reports the job's failure. Under Slurm `srun -w HOST` does not exit when the step's slurmstepd is
     * killed with the ranks, and the other hosts' ranks, in jobs of their own, wait on the dead ones
     * forever. Each such host said in what (its name, ", " between); returns how many. */
    int (*dead_jobs)(void *ctx, char *what, size_t what_cap);
    /* Whether host answers at all (NULL: every host does): AH_OK, or an error naming it and why
     * (no answer, a password or host key asked in BatchMode). The agent plans such a host out. */
    ah_status_t (*reachable)(void *ctx, const char *host, ah_error_t *err);
    /* reachable for n hosts asked at once (NULL: the agent asks reachable one host at a time), each
     * given timeout_s: verdict[k] AH_REACH_YES, AH_REACH_NO (a failure, errs[k] naming it as reachable
     * does) or AH_REACH_UNKNOWN (no answer within timeout_s, and none when asked again once, at once:
     * errs[k] says so): a slow or hung ssh is not a host that is gone. */
    void (*reachable_many)(void *ctx, const char *const *hosts, int n, double timeout_s, int *verdict,
                           ah_error_t *errs);
    void (*free)(void *ctx);
} ah_launcher_t;

/* mpirun's flags for ranks that share one machine (the emulated cluster): no ssh, and ranks may
 * outnumber cores and must then yield. `autohet profile` starts its TP groups with them too. */
#define AH_MPIRUN_ONE_MACHINE "--oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated"
/* The local launcher's flags before -np when none are given. */
#define AH_MPIRUN_LOCAL_DEFAULT_ARGS "-q " AH_MPIRUN_ONE_MACHINE " -x OPENBLAS_NUM_THREADS=1"

enum { AH_REACH_YES = 0, AH_REACH_NO, AH_REACH_UNKNOWN }; /* launcher.h reachable_many's verdicts */

typedef struct ah_launch_local_opts {
    const char *mpirun;      /* "mpirun" or a path */
    const char *mpirun_args; /* space-separated flags before -np; NULL: -q, AH_MPIRUN_ONE_MACHINE and
                                -x OPENBLAS_NUM_THREADS=1 */
    const char *local_root;  /* host X's disk is LOCAL_ROOT/X/ */
} ah_launch_local_opts_t;

typedef struct ah_launch_ssh_opts {
    const char *mpirun;      /* "mpirun" or a path, on this machine */
    const char *mpirun_args; /* space-separated flags before -np, after the launcher's own (NULL: none) */
    const char *rsh;         /* the remote command, space-separated words ("ssh", "ssh -F cfg", a
                                script): run as RSH HOST SHELL-COMMAND; also Open MPI's plm_rsh_agent */
    const char *local_root;  /* on every host: host X's disk is LOCAL_ROOT/X/ there */
    const char *autohet;     /* the autohet binary, the same path on every host (ckpt ls / verify) */
} ah_launch_ssh_opts_t;

/* The many-hosts launcher over a remote command (launch_ssh.c). */
ah_status_t ah_launcher_ssh(const ah_launch_ssh_opts_t *o, ah_launcher_t *out, ah_error_t *err);
/* The same inside a Slurm allocation (launch_ssh.c): hosts reached with srun -w HOST (o->rsh must
 * be NULL), mpirun under Slurm; hosts outside SLURM_JOB_NODELIST do not answer. Refused outside
 * an allocation. */
ah_status_t ah_launcher_slurm(const ah_launch_ssh_opts_t *o, ah_launcher_t *out, ah_error_t *err);

/* The launcher `name` names (NULL or "local": ah_launcher_local(lo); "ssh": ah_launcher_ssh(so);
 * "slurm": ah_launcher_slurm(so));
 * another name is a usage error listing the choices (launch_common.c). */
ah_status_t ah_launcher_by_name(const char *name, const ah_launch_local_opts_t *lo, const ah_launch_ssh_opts_t *so,
                                ah_launcher_t *out, ah_error_t *err);

/* A metrics stream's unfinished line, for the launchers: ah_launch_lines_feed calls fn for each
 * complete line of buf that is a JSON object (parsed; freed after fn). */
typedef struct ah_launch_lines {
    char partial[65536];
    size_t len;
} ah_launch_lines_t;
void ah_launch_lines_feed(ah_launch_lines_t *lb, const char *buf, size_t n, void (*fn)(void *fn_ctx, json_t *line),
                          void *fn_ctx);
/* For the joined launchers' read_metrics, as fn of ah_launch_lines_feed (tap: an ah_launch_tap_t): each line
 * passed on to tap->fn; when it is the trainer's "reconfigure" event (an in-place change taken), first
 * tap->leaving(tap->ctx, J) for each job J of its "leave" (AH_WORLD_JOIN's numbers): from then on their
 * exits, whatever their status, are no longer the job's (poll skips them; leave_hosts reaps them). */
typedef struct ah_launch_tap {
    void (*fn)(void *fn_ctx, json_t *line);
    void *fn_ctx;
    void (*leaving)(void *ctx, int job);
    void (*joined)(void *ctx); /* a "reconfigure" event with "join": join_hosts' jobs are in the world now */
    void *ctx;
} ah_launch_tap_t;
void ah_launch_tap_line(void *tap, json_t *line);

/* For the joined launchers' leave_hosts: one job as its rule sees it, and the rule (launch_common.c):
 * leave[j] (n_jobs of them) set to whether leave_hosts(hosts, n) takes job j — a job not gone on a listed
 * host that is, of its host's jobs not gone, a leaving one when one is, else a joining one when one is,
 * else any. */
typedef struct ah_launch_job_view {
    const char *host;
    bool gone, leaving, joining;
} ah_launch_job_view_t;
void ah_launch_leavers(const ah_launch_job_view_t *jobs, int n_jobs, const char *const *hosts, int n, bool *leave);

/* For the launchers: starts argv (malloc'ed, NULL-terminated; freed here, its strings borrowed)
 * as the leader of its own process group with stdin from /dev/null; *pid gets it. The child gets
 * SIGTERM if this process dies (PR_SET_PDEATHSIG). An exec that fails says why on stderr and exits
 * 127 in the child (launch_common.c). */
ah_status_t ah_launch_spawn(char **argv, pid_t *pid, ah_error_t *err);
/* For the launchers' poll: whether the job *pid (0: none) is over, without waiting; then *status is
 * its exit status (-SIGNAL when killed, -1 unknown) and *pid 0. */
bool ah_launch_reap(pid_t *pid, int *status);
/* For the launchers: ah_launch_spawn of mpirun [--allow-run-as-root, when root and
 * OMPI_ALLOW_RUN_AS_ROOT is not set] FIXED[0 .. n_fixed - 1] ARGS (split at blanks) -np N_RANKS
 * TRAIN_ARGV [TAIL, when not NULL]. */
ah_status_t ah_launch_mpirun(const char *mpirun, char *const *fixed, size_t n_fixed, const char *args, int n_ranks,
                             char *const *train_argv, const char *tail, pid_t *pid, ah_error_t *err);

/* A joined launch's jobs (launch_common.c): one a host of the plan, in the order of the hosts' first
 * rank; rank r of the plan is rank k of its host's job when it is that host's k-th rank. */
typedef struct ah_launch_hostjob {
    char host[64];
    int n_ranks;
    char *world_ranks; /* "AH_WORLD_RANKS=r0,r1,...": the plan ranks of the job's local ranks (malloc'ed) */
} ah_launch_hostjob_t;
/* *jobs (malloc'ed; ah_launch_hostjobs_free) and *n_jobs from p. */
ah_status_t ah_launch_hostjobs(const ah_plan_t *p, ah_launch_hostjob_t **jobs, int *n_jobs, ah_error_t *err);
void ah_launch_hostjobs_free(ah_launch_hostjob_t *jobs, int n_jobs);
/* For the launchers: starts `ompi-server --no-daemonize -r URI_PATH` (the one beside mpirun when mpirun
 * is a path, else from PATH) and waits up to 10 s for it to write URI_PATH; *pid gets it (stop it with
 * ah_launch_ompi_server_stop). */
ah_status_t ah_launch_ompi_server(const char *mpirun, const char *uri_path, pid_t *pid, ah_error_t *err);
void ah_launch_ompi_server_stop(pid_t *pid);

/* The single-machine launcher (launch_local.c). */
ah_status_t ah_launcher_local(const ah_launch_local_opts_t *o, ah_launcher_t *out, ah_error_t *err);
/* Stops a job still running and frees the context (NULL or an empty launcher is fine). */
void ah_launcher_free(ah_launcher_t *l);

#endif
