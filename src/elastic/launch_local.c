/* The single-machine launcher (launcher.h): mpirun forked in its own process group (joined: one a
 * host of the plan, with an ompi-server), the ranks' pids from their rank files, signals, a /proc walk
 * for ranks still starting, the metrics file tailed, host disks as LOCAL_ROOT/HOST/. */
#include "elastic/launcher.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "ckpt/replica.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/timing.h"
#include "runtime/protocol.h"

#define LOCAL_MAX_RANKS 1024
#define LOCAL_MAX_JOBS 256

/* One mpirun: the whole plan's, or (joined) one host's. */
typedef struct local_job {
    pid_t pid;     /* leader of its own process group; 0 when reaped or killed */
    char host[64]; /* joined: the host whose ranks it runs */
    int n_ranks;
    int status;    /* its exit status once exited */
    bool exited;   /* reaped by poll or leave_hosts */
    bool gone;     /* left in place (leave_hosts): no longer part of the job */
    bool leaving;  /* named by the "reconfigure" event read (ah_launch_tap_line): poll skips it */
    bool joining;  /* started by join_hosts, its join not read yet: a failure is not the job's (poll) */
} local_job_t;

/* One machine (the emulated cluster); -q drops Open MPI's banner about a rank's non-zero exit,
 * which after a notice is the expected 75. */

typedef struct local {
    char mpirun[512];
    char mpirun_args[2048];
    char local_root[600];
    local_job_t job[LOCAL_MAX_JOBS];
    int n_jobs;
    bool joined;
    bool ended;                /* poll said the job exited: it stays so, the status told once */
    pid_t server;              /* joined: the ompi-server the jobs meet through; 0 when none */
    char run_dir[512];
    char metrics_path[600];
    /* ranks, as their rank files appear */
    pid_t rank_pid[LOCAL_MAX_RANKS];
    char rank_node[LOCAL_MAX_RANKS][64];
    bool rank_signalled[LOCAL_MAX_RANKS];
    int n_ranks;               /* ranks the plan has */
    /* metrics tail */
    long offset;
    ah_launch_lines_t lines;
} local_t;

/* The job's rank count and run directory into l, nothing started or read yet. */
static ah_status_t take_job(local_t *l, const ah_launch_job_t *job, ah_error_t *err) {
    const int n_ranks = ah_plan_device_count(job->plan);
    if (n_ranks > LOCAL_MAX_RANKS)
        return ah_error_set(err, AH_ERR_USAGE, "the plan has %d devices; the agent handles at most %d",
                            n_ranks, LOCAL_MAX_RANKS);
    memset(l->job, 0, sizeof l->job);
    l->n_jobs = 0;
    l->joined = job->joined;
    l->ended = false;
    memset(l->rank_pid, 0, sizeof l->rank_pid);
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
    l->offset = 0;
    l->lines.len = 0;
    l->n_ranks = n_ranks;
    snprintf(l->run_dir, sizeof l->run_dir, "%s", job->run_dir);
    snprintf(l->metrics_path, sizeof l->metrics_path, "%s/" AH_PROTO_METRICS_FILE, job->run_dir);
    return AH_OK;
}

static void local_stop(void *ctx);
static void kill_job(pid_t *pid);

/* Joined: job number `j` of `nj` (AH_WORLD_JOIN=RUN_DIR/join:J:NJOBS) for the host of hj, through the ompi-server
 * of RUN_DIR/ompi-server.uri: one mpirun of the host's ranks (AH_WORLD_RANKS), l->job[j]. */
static ah_status_t start_host(local_t *l, char *const *train_argv, const ah_launch_hostjob_t *hj, int j, int nj,
                              double wait_s, ah_error_t *err) {
    char uri[620], server_arg[640], join_env[700], wait_env[64];
    snprintf(uri, sizeof uri, "%s/ompi-server.uri", l->run_dir);
    snprintf(server_arg, sizeof server_arg, "file:%s", uri);
    snprintf(join_env, sizeof join_env, "AH_WORLD_JOIN=%s/join:%d:%d", l->run_dir, j, nj);
    snprintf(wait_env, sizeof wait_env, "AH_JOIN_WAIT_S=%.1f", wait_s); /* join_hosts' (wait_s > 0) only */
    char *fixed[] = {"--ompi-server", server_arg, "-x", join_env, "-x", hj->world_ranks, "-x", wait_env};
    local_job_t *J = &l->job[j];
    memset(J, 0, sizeof *J);
    snprintf(J->host, sizeof J->host, "%s", hj->host);
    J->n_ranks = hj->n_ranks;
    const size_t n_fixed = sizeof fixed / sizeof *fixed - (wait_s > 0 ? 0 : 2);
    ah_status_t s = ah_launch_mpirun(l->mpirun, fixed, n_fixed, l->mpirun_args, J->n_ranks, train_argv, NULL, &J->pid,
                                     err);
    if (s == AH_OK) l->n_jobs = j + 1;
    return s;
}

/* Joined: an ompi-server, then one mpirun a host (ah_launch_hostjobs), each told its job and ranks. */
static ah_status_t start_joined(local_t *l, const ah_launch_job_t *job, ah_error_t *err) {
    ah_launch_hostjob_t *hj = NULL;
    int nj = 0;
    ah_status_t s = ah_launch_hostjobs(job->plan, &hj, &nj, err);
    if (s != AH_OK) return s;
    char uri[620];
    snprintf(uri, sizeof uri, "%s/ompi-server.uri", job->run_dir);
    if (nj > LOCAL_MAX_JOBS)
        s = ah_error_set(err, AH_ERR_USAGE, "the plan has %d hosts; the local launcher starts at most %d jobs (one a host)", nj,
                         LOCAL_MAX_JOBS);
    if (s == AH_OK) s = ah_launch_ompi_server(l->mpirun, uri, &l->server, err);
    for (int j = 0; s == AH_OK && j < nj; j++) s = start_host(l, job->train_argv, &hj[j], j, nj, 0, err);
    ah_launch_hostjobs_free(hj, nj);
    if (s != AH_OK) local_stop(l); /* the jobs started wait in their join: none may linger */
    return s;
}

/* launcher.h join_hosts: one more mpirun a host of `hosts` into the running joined job, numbered after every
 * job started so far, with job->plan's ranks on it; the ranks then those of job->plan. */
static ah_status_t local_join_hosts(void *ctx, const ah_launch_job_t *job, const char *const *hosts, int n,
                                    ah_error_t *err) {
    local_t *l = ctx;
    if (!l->joined || !l->server || l->ended)
        return ah_error_set(err, AH_ERR_USAGE, "hosts join only a running joined job (--in-place)");
    const int first = job->join_first > l->n_jobs ? job->join_first : l->n_jobs; /* launcher.h join_first */
    if (first + n > LOCAL_MAX_JOBS) /* the numbers below first that this launcher did not start are gaps, but taken */
        return ah_error_set(err, AH_ERR_USAGE, "the joining job%s would be number%s %d..%d of this launch: the local "
                            "launcher numbers at most %d jobs a launch (every job started in it counts, one that left or "
                            "whose join was withdrawn too)", n == 1 ? "" : "s", n == 1 ? "" : "s", first, first + n - 1,
                            LOCAL_MAX_JOBS);
    for (; l->n_jobs < first; l->n_jobs++) l->job[l->n_jobs] = (local_job_t){.exited = true, .gone = true};
    ah_launch_hostjob_t *hj = NULL;
    int nj = 0, k = -1;
    ah_status_t s = ah_launch_hostjobs(job->plan, &hj, &nj, err);
    for (int h = 0; s == AH_OK && h < n; h++) {
        for (k = nj - 1; k >= 0 && strcmp(hj[k].host, hosts[h]) != 0; k--) {}
        s = k < 0 ? ah_error_set(err, AH_ERR_USAGE, "host %s joins but the plan puts no rank on it", hosts[h])
                  : start_host(l, job->train_argv, &hj[k], first + h, first + n, job->join_wait_s, err);
    }
    ah_launch_hostjobs_free(hj, nj);
    if (s != AH_OK) { /* the ones started would wait for a turn that never comes */
        for (int j = first; j < l->n_jobs; j++) kill_job(&l->job[j].pid), l->job[j].gone = true;
        return s;
    }
    for (int j = first; j < l->n_jobs; j++) l->job[j].joining = true;
    l->n_ranks = ah_plan_device_count(job->plan);
    memset(l->rank_pid, 0, sizeof l->rank_pid);
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
    return AH_OK;
}

static ah_status_t local_start(void *ctx, const ah_launch_job_t *job, ah_error_t *err) {
    local_t *l = ctx;
    for (int j = 0; j < l->n_jobs; j++) /* a joined job's mpiruns left running by an exit poll took at once */
        if (!l->job[j].gone) kill_job(&l->job[j].pid);
    ah_launch_ompi_server_stop(&l->server);
    ah_status_t s = take_job(l, job, err);
    if (s != AH_OK) return s;
    s = ah_fs_rm_tree(job->run_dir, err);
    if (s == AH_OK) s = ah_fs_mkdirs(job->run_dir, err);
    if (s != AH_OK) return s;
    if (job->joined) return start_joined(l, job, err);
    l->job[0].n_ranks = l->n_ranks;
    s = ah_launch_mpirun(l->mpirun, NULL, 0, l->mpirun_args, l->n_ranks, job->train_argv, NULL, &l->job[0].pid, err);
    if (s == AH_OK) l->n_jobs = 1;
    return s;
}

/* /proc/PID/NAME into buf (NUL-terminated, cut at cap - 1); its length, or -1 when pid is gone. */
static long read_proc(pid_t pid, const char *name, char *buf, size_t cap) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, name);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    const size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return (long)n;
}

/* Whether pid is alive and runs with the argument `arg` (a rank of the job whose --run-dir it is, not
 * another process that got its pid since). */
static bool runs_with(pid_t pid, const char *arg) {
    char buf[8192];
    const long n = read_proc(pid, "cmdline", buf, sizeof buf);
    for (long i = 0; i < n; i += (long)strlen(buf + i) + 1)
        if (strcmp(buf + i, arg) == 0) return true;
    return false;
}

static void scan_ranks(local_t *l);

/* launcher.h: an earlier agent's job in job->run_dir; its ranks still alive (they got SIGTERM when
 * that agent died, and may be saving) are waited for, then killed. */
static ah_status_t local_adopt(void *ctx, const ah_launch_job_t *job, double wait_s, double *waited, ah_error_t *err) {
    local_t *l = ctx;
    const ah_status_t s = take_job(l, job, err);
    if (s != AH_OK) return s;
    const int n_ranks = l->n_ranks;
    scan_ranks(l);
    const double t0 = ah_now_s();
    for (;;) {
        int alive = 0;
        for (int r = 0; r < n_ranks; r++)
            if (l->rank_pid[r] > 0 && runs_with(l->rank_pid[r], job->run_dir)) {
                alive++;
                if (ah_now_s() - t0 >= wait_s) kill(l->rank_pid[r], SIGKILL);
            }
        if (!alive || ah_now_s() - t0 >= wait_s + 1) break;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    *waited = ah_now_s() - t0;
    return AH_OK;
}

/* launcher.h: every mpirun exited (the first non-zero status, else 0), or (joined) one exited non-zero,
 * not a notice's 75, at once; the jobs that leave at a change in place read (leaving) not counted. A job that
 * stop() killed reads as exited, *status untouched. */
static bool local_poll(void *ctx, int *status) {
    local_t *l = ctx;
    bool all = true, any = false;
    int first = 0;
    if (l->ended) return true;
    for (int j = 0; j < l->n_jobs; j++) {
        local_job_t *J = &l->job[j];
        if (J->gone || J->leaving) continue; /* a leaving job's exit, even a failure, is not the job's */
        if (!J->exited && J->pid > 0) {
            if (!ah_launch_reap(&J->pid, &J->status)) {
                all = false;
                continue;
            }
            J->exited = true;
            if (J->joining && J->status != 0) { /* it never joined: the world gives up on it */
                J->gone = true;
                continue;
            }
            if (l->joined && J->status != 0 && J->status != AH_PROTO_EXIT_PREEMPTED) {
                *status = J->status;
                return l->ended = true;
            }
        }
        if (J->exited && (!any || !first)) first = J->status;
        any = any || J->exited;
    }
    if (all && any) *status = first;
    return l->ended = all;
}

/* Reads the rank files not read yet. */
/* run_file: RUN_DIR/name exists; *doc (when doc is not NULL) gets it parsed, or NULL. */
static bool local_run_file(void *ctx, const char *name, json_t **doc, ah_error_t *err) {
    const local_t *l = ctx;
    char path[700];
    snprintf(path, sizeof path, "%s/%s", l->run_dir, name);
    if (access(path, doc ? R_OK : F_OK) != 0) return false;
    if (doc && ah_json_load_file(path, doc, err) != AH_OK) *doc = NULL;
    return true;
}

/* put_run_file: every host is this machine, the run directory one. */
static ah_status_t local_put_run_file(void *ctx, const char *name, const char *local_path, ah_error_t *err) {
    const local_t *l = ctx;
    char path[700];
    snprintf(path, sizeof path, "%s/%s", l->run_dir, name);
    FILE *in = fopen(local_path, "rb");
    if (!in) return ah_error_set(err, AH_ERR_IO, "%s: %s", local_path, strerror(errno));
    ah_afile_t af;
    ah_status_t st = ah_afile_open(&af, path, err);
    char buf[65536];
    size_t n;
    while (st == AH_OK && (n = fread(buf, 1, sizeof buf, in)) > 0) st = ah_afile_write(&af, buf, n, err);
    if (st == AH_OK && ferror(in)) st = ah_error_set(err, AH_ERR_IO, "%s: read error", local_path);
    fclose(in);
    if (st == AH_OK) return ah_afile_commit(&af, false, err);
    ah_afile_abort(&af);
    return st;
}

static void scan_ranks(local_t *l) {
    for (int r = 0; r < l->n_ranks; r++) {
        if (l->rank_pid[r] > 0) continue;
        char name[32];
        snprintf(name, sizeof name, AH_PROTO_RANK_FILE_FMT, r);
        json_t *doc = NULL;
        ah_error_t e;
        /* A file caught half-written fails to parse; it is read again on the next scan. */
        if (!local_run_file(l, name, &doc, &e) || !doc) continue;
        int64_t pid = 0;
        char node[64] = "";
        if (ah_json_get_int(doc, name, AH_PROTO_RANK_PID, true, 1, INT32_MAX, &pid, &e) == AH_OK &&
            ah_json_get_str(doc, name, AH_PROTO_RANK_NODE, true, node, sizeof node, &e) == AH_OK) {
            l->rank_pid[r] = (pid_t)pid;
            snprintf(l->rank_node[r], sizeof l->rank_node[r], "%s", node);
        }
        json_decref(doc);
    }
}

/* Sends sig to the ranks on `host` (NULL: every rank) not signalled yet (SIGKILL: all of them);
 * returns how many were sent now. */
static int signal_ranks(local_t *l, const char *host, int sig) {
    scan_ranks(l);
    int sent = 0;
    for (int r = 0; r < l->n_ranks; r++) {
        if (l->rank_pid[r] <= 0 || (host && strcmp(l->rank_node[r], host) != 0)) continue;
        if (l->rank_signalled[r] && sig != SIGKILL) continue;
        if (kill(l->rank_pid[r], sig) == 0) sent++;
        l->rank_signalled[r] = true;
    }
    return sent;
}

static int local_notice(void *ctx, const char *host) { return signal_ranks(ctx, host, SIGTERM); }
static int local_kill_host(void *ctx, const char *host) { return signal_ranks(ctx, host, SIGKILL); }

/* SIGKILLs every direct child of `parent` (found through /proc). */
static void kill_children(pid_t parent) {
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the
         * last ')' */
        const char *rp = strrchr(buf, ')');
        char state;
        long ppid;
        if (rp && sscanf(rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == (long)parent)
            kill((pid_t)pid, SIGKILL);
    }
    closedir(d);
}

/* A rank's state letter and CPU ticks (user + system) from /proc/PID/stat; false when it is gone. */
static bool rank_stat(pid_t pid, char *state, unsigned long long *ticks) {
    char buf[1024];
    if (read_proc(pid, "stat", buf, sizeof buf) < 0) return false;
    const char *rp = strrchr(buf, ')'); /* after comm, which may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!rp || sscanf(rp + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", state, &ut, &st) != 3)
        return false;
    *ticks = ut + st;
    return true;
}

/* A mpirun of the job stopped by a signal (state T): its ranks train on without it but cannot end (MPI_Finalize
 * waits for it), so the run hung at its last step with every rank running (session 25, scripts/chaos-run.sh
 * mpirunstop). Said in what, hosts[0] "" (no node is lost: mpirun runs on this machine, not on a node's host):
 * the job is stopped and relaunched on the same nodes. */
static bool stopped_mpirun(const local_t *l, char (*hosts)[64], int cap, char *what, size_t what_cap) {
    for (int j = 0; j < l->n_jobs; j++) {
        const local_job_t *J = &l->job[j];
        char state;
        unsigned long long ticks;
        if (J->exited || J->gone || J->pid <= 0 || !rank_stat(J->pid, &state, &ticks) || (state != 'T' && state != 't'))
            continue;
        if (cap > 0) hosts[0][0] = 0;
        snprintf(what, what_cap, "mpirun (pid %ld%s%s) stopped by a signal (state T: SIGSTOP or a debugger): its ranks "
                 "cannot end", (long)J->pid, J->host[0] ? ", the job of " : "", J->host);
        return true;
    }
    return false;
}

/* launcher.h: the ranks stopped by a signal; when none is, those that used no CPU time in 1 s. A
 * rank stopped by a signal explains its peers' idling: they wait for it in sleeps between their
 * tests (comm.h AH_COMM_WAIT_SLEEP), which at load 20+ on 2 cores used no tick of CPU in 1 s, so
 * they were named too and every node left as lost (test_agent_stop's stalled rank). Every rank idle
 * and none stopped is no node's fault (they wait on something else: a joining job killed before its
 * turn, session 25's chaos-run joinmove): 1, hosts[0] "", the job stopped and relaunched on the same
 * nodes; before, every node left as lost and its disk, every checkpoint, with it. */
static int local_stalled(void *ctx, char (*hosts)[64], int cap, char *what, size_t what_cap) {
    local_t *l = ctx;
    if (stopped_mpirun(l, hosts, cap, what, what_cap)) return 1;
    /* the ranks as their files say now: a change in place renumbers them and removes the files past the new
     * world's size (a parked rank's: asleep in its job until it ends, no CPU time, not stalled) before
     * leave_hosts reads them again */
    memset(l->rank_pid, 0, sizeof l->rank_pid);
    scan_ranks(l);
    static unsigned long long before[LOCAL_MAX_RANKS];
    static bool seen[LOCAL_MAX_RANKS];
    static char how[LOCAL_MAX_RANKS]; /* 's' stopped by a signal, 'i' no CPU time, 0 progressing */
    char state;
    for (int r = 0; r < l->n_ranks; r++)
        seen[r] = l->rank_pid[r] > 0 && rank_stat(l->rank_pid[r], &state, &before[r]);
    nanosleep(&(struct timespec){1, 0}, NULL);
    bool any_stopped = false;
    for (int r = 0; r < l->n_ranks; r++) {
        unsigned long long now;
        how[r] = 0;
        if (!seen[r] || !rank_stat(l->rank_pid[r], &state, &now)) continue;
        if (state == 'T' || state == 't') how[r] = 's', any_stopped = true;
        else if (now <= before[r]) how[r] = 'i';
    }
    int idle = 0;
    for (int r = 0; r < l->n_ranks; r++) idle += how[r] == 'i';
    if (!any_stopped && l->n_ranks > 1 && idle == l->n_ranks) { /* all waiting: on something, not on a node */
        if (cap > 0) hosts[0][0] = 0;
        snprintf(what, what_cap, "every rank of the job used no CPU time in 1 s, none stopped: the job waits on "
                 "something outside it, no node's fault");
        return 1;
    }
    int n = 0;
    size_t len = 0;
    what[0] = 0;
    for (int r = 0; r < l->n_ranks; r++) {
        if (how[r] == 0 || (any_stopped && how[r] != 's')) continue;
        if (n < cap) snprintf(hosts[n], 64, "%s", l->rank_node[r]);
        n++;
        const int w = snprintf(what + len, what_cap - len, "%srank %d on %s (pid %ld): %s", len ? "; " : "", r,
                               l->rank_node[r], (long)l->rank_pid[r],
                               how[r] == 's' ? "stopped by a signal (state T: SIGSTOP or a debugger)"
                                             : "no CPU time used in 1 s (blocked outside MPI)");
        if (w > 0 && (size_t)w < what_cap - len) len += (size_t)w;
    }
    return n;
}

/* One mpirun and its ranks ended at once, reaped: mpirun puts every rank in a process group of its
 * own, so a signal to mpirun's group misses them: ranks whose rank file has not appeared yet would live
 * on as orphans and train beside the relaunch. Stop mpirun (so it starts no more ranks), kill its
 * children, then it. */
static void kill_job(pid_t *pid) {
    if (*pid <= 0) return;
    kill(*pid, SIGSTOP);
    kill_children(*pid);
    kill(-*pid, SIGKILL);
    kill(*pid, SIGKILL);
    int st;
    waitpid(*pid, &st, 0);
    *pid = 0;
}

static void local_stop(void *ctx) {
    local_t *l = ctx;
    signal_ranks(l, NULL, SIGKILL);
    for (int j = 0; j < l->n_jobs; j++)
        if (!l->job[j].gone) kill_job(&l->job[j].pid);
    ah_launch_ompi_server_stop(&l->server);
}

/* launcher.h: the jobs of `hosts` waited for up to wait_s, killed past it, forgotten; the ranks rescanned
 * as the other jobs' rank files now number them. */
static int local_leave_hosts(void *ctx, const char *const *hosts, int n, double wait_s) {
    local_t *l = ctx;
    bool leave[LOCAL_MAX_JOBS] = {false};
    ah_launch_job_view_t view[LOCAL_MAX_JOBS];
    for (int j = 0; j < l->n_jobs; j++)
        view[j] = (ah_launch_job_view_t){l->job[j].host, l->job[j].gone, l->job[j].leaving, l->job[j].joining};
    if (l->joined) ah_launch_leavers(view, l->n_jobs, hosts, n, leave);
    const double t0 = ah_now_s();
    for (bool waiting = true; waiting;) {
        waiting = false;
        for (int j = 0; j < l->n_jobs; j++) {
            local_job_t *J = &l->job[j];
            if (leave[j] && !J->exited && J->pid > 0 && !(J->exited = ah_launch_reap(&J->pid, &J->status))) waiting = true;
        }
        if (waiting && ah_now_s() - t0 >= wait_s) break;
        if (waiting) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    int ok = 0, ranks = 0;
    for (int j = 0; j < l->n_jobs; j++) {
        local_job_t *J = &l->job[j];
        if (leave[j]) {
            if (J->pid > 0) kill_job(&J->pid); /* still running at wait_s */
            else if (J->exited && J->status == 0) ok++;
            J->gone = true;
        }
        if (!J->gone) ranks += J->n_ranks;
    }
    l->n_ranks = ranks;
    memset(l->rank_pid, 0, sizeof l->rank_pid);
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
    scan_ranks(l);
    return ok;
}

/* ah_launch_tap_t's leaving: job j leaves at the change in place the metrics just said. */
static void local_leaving(void *ctx, int j) {
    local_t *l = ctx;
    if (l->joined && j >= 0 && j < l->n_jobs) l->job[j].leaving = true;
}

/* ah_launch_tap_t's joined: the jobs join_hosts started are in the world. */
static void local_joined(void *ctx) {
    local_t *l = ctx;
    for (int j = 0; j < l->n_jobs; j++) l->job[j].joining = false;
}

static void local_read_metrics(void *ctx, void (*fn)(void *fn_ctx, json_t *line), void *fn_ctx) {
    local_t *l = ctx;
    ah_launch_tap_t tap = {.fn = fn, .fn_ctx = fn_ctx, .leaving = local_leaving, .joined = local_joined, .ctx = l};
    FILE *f = fopen(l->metrics_path, "rb");
    if (!f) return;
    if (fseek(f, l->offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        l->offset += (long)n;
        ah_launch_lines_feed(&l->lines, buf, n, ah_launch_tap_line, &tap);
    }
    fclose(f);
}

static void disk_of(const local_t *l, const char *host, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", l->local_root, host);
}

/* A dropped host loses its disk and its RAM: its directory of in-memory replicas under the default
 * base goes too (ckpt/replica.h; one given with --replica-root is the user's to clear). */
static ah_status_t local_drop_disk(void *ctx, const char *host, ah_error_t *err) {
    const local_t *l = ctx;
    char dir[800], base[AH_CKPT_PATH_MAX], mem[AH_CKPT_PATH_MAX];
    disk_of(l, host, dir, sizeof dir);
    if (ah_replica_default_base(base, sizeof base, l->local_root) >= 0 &&
        ah_replica_holder_root(mem, sizeof mem, base, host) >= 0)
        ah_fs_rm_tree(mem, NULL);
    return ah_fs_rm_tree(dir, err);
}

static ah_status_t local_list_steps(void *ctx, const char *host, ah_ckpt_step_info_t **steps, int *n,
                                    ah_error_t *err) {
    char root[800];
    disk_of(ctx, host, root, sizeof root);
    return ah_ckpt_list(root, steps, n, err);
}

static ah_status_t local_verify_step(void *ctx, const char *host, int64_t step, int *bad, ah_error_t *err) {
    char root[800];
    disk_of(ctx, host, root, sizeof root);
    return ah_ckpt_verify(root, step, bad, err);
}

static void local_free(void *ctx) {
    local_t *l = ctx;
    bool running = false;
    for (int j = 0; j < l->n_jobs; j++) running = running || (!l->job[j].gone && l->job[j].pid > 0);
    if (running) local_stop(l);
    ah_launch_ompi_server_stop(&l->server);
    free(l);
}

ah_status_t ah_launcher_local(const ah_launch_local_opts_t *o, ah_launcher_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    local_t *l = calloc(1, sizeof *l);
    if (!l) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    snprintf(l->mpirun, sizeof l->mpirun, "%s", o->mpirun);
    snprintf(l->mpirun_args, sizeof l->mpirun_args, "%s", o->mpirun_args ? o->mpirun_args : AH_MPIRUN_LOCAL_DEFAULT_ARGS);
    snprintf(l->local_root, sizeof l->local_root, "%s", o->local_root);
    *out = (ah_launcher_t){.name = "local", .ctx = l, .start = local_start, .poll = local_poll,
                           .notice = local_notice, .kill_host = local_kill_host, .stop = local_stop,
                           .read_metrics = local_read_metrics, .adopt = local_adopt, .run_file = local_run_file,
                           .put_run_file = local_put_run_file,
                           .stalled = local_stalled, .leave_hosts = local_leave_hosts, .join_hosts = local_join_hosts,
                           .drop_disk = local_drop_disk, .list_steps = local_list_steps,
                           .verify_step = local_verify_step, .free = local_free};
    return AH_OK;
}

void ah_launcher_free(ah_launcher_t *l) {
    if (l && l->free) l->free(l->ctx);
    if (l) memset(l, 0, sizeof *l);
}
