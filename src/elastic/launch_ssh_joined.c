/* The ssh and slurm launchers' joined launches (launcher.h job->joined; launch_ssh.h): one mpirun a host
 * of the plan, started on that host through the remote command, so that a host's job can leave at an
 * in-place change (runtime/reconfig.h) while the others go on.
 *
 *  - start: an ompi-server here (the agent's machine), its URI copied to RUN/ompi-server.uri on every
 *    host; then for each host J of ah_launch_hostjobs (the order of the hosts' first rank): RSH HOST
 *    'cd RUN && echo $$ >mpirun-J.pid && exec env AH_WORLD_JOIN=RUN/join:J:NJOBS AH_WORLD_RANKS=...
 *    mpirun --ompi-server file:RUN/ompi-server.uri -x AH_WORLD_JOIN -x AH_WORLD_RANKS --mca plm
 *    isolated --mca ras ^slurm ... -np K TRAIN_ARGV --check-host', held here as a process of its own
 *    (its exit status is the remote mpirun's). That mpirun runs with its host's environment, not the
 *    agent's: the agent's values of the variables `-x VAR` in --mpirun-args names (the cloud's credentials,
 *    AH_TEST_HOOK) go first to RUN/mpirun-J.env on the host (0600, written through the remote command's
 *    stdin: never on a command line ps shows), which the command sources and removes before mpirun. mpirun runs its K ranks on its own host only (plm
 *    isolated; under Slurm the step's environment names the whole allocation, which ras ^slurm
 *    ignores). The jobs find the world's port and take turns through the ompi-server (comm/join.c:
 *    no file has to reach another host), so RUN/join is only a name;
 *  - poll: every remote command exited (the first non-zero status, else 0), or one exited non-zero
 *    other than a notice's 75 at once; the jobs a "reconfigure" event read names leaving not counted (their
 *    host may die at the end of its grace period: ssh's 255 is not the job's);
 *  - stop / leave_hosts past the wait: the remote command killed here, and on its host mpirun stopped,
 *    its children (the ranks) killed, then it (mpirun-J.pid), as well as the ranks' rank files' pids;
 *  - leave_hosts: the leaving hosts' jobs waited for, forgotten; the ranks are those of the other
 *    hosts, each host's rank files read again (after the change each survivor writes its new rank's
 *    file; a host's older files of the same process are the old world's: the newest file of each pid
 *    counts);
 *  - metrics: from the host of rank 0's job; after a reconfiguration request (put_run_file of
 *    reconfigure.json) also from the host of the new rank 0 it names, which appends to its own
 *    RUN/metrics.jsonl from the change on (the old rank 0's lines before it are read first). */
#include "elastic/launch_ssh.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/timing.h"
#include "runtime/protocol.h"
#include "runtime/reconfig.h"

/* word appended to out (cap) in single quotes, a quote in it as '\'' , then a blank. */
static void quote(char *out, size_t cap, const char *word) {
    size_t n = strlen(out);
    if (n + 3 < cap) out[n++] = '\'';
    for (const char *c = word; *c && n + 6 < cap; c++) {
        if (*c == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *c;
        }
    }
    if (n + 2 < cap) {
        out[n++] = '\'';
        out[n++] = ' ';
    }
    out[n] = 0;
}

/* The shell command that runs host job j's mpirun on its host (see the top). */
static void job_command(const ssh_t *l, const ah_launch_hostjob_t *hj, int j, int nj, char *const *train_argv,
                        bool env, double wait_s, char *cmd, size_t cap) {
    char source[64] = "", wait[80] = "";
    if (env) snprintf(source, sizeof source, ". ./mpirun-%d.env && rm -f mpirun-%d.env && ", j, j);
    if (wait_s > 0) snprintf(wait, sizeof wait, "'AH_JOIN_WAIT_S=%.1f' ", wait_s); /* join_hosts' only */
    snprintf(cmd, cap,
             "cd '%s' && echo $$ >mpirun-%d.pid && %sexec env 'AH_WORLD_JOIN=%s/join:%d:%d' %s'%s' '%s' "
             "$([ \"$(id -u)\" = 0 ] && echo --allow-run-as-root) --ompi-server 'file:%s/ompi-server.uri' "
             "-x AH_WORLD_JOIN -x AH_WORLD_RANKS %s--mca plm isolated --mca ras '^slurm' --oversubscribe --bind-to none "
             "--mca coll_libnbc_iallreduce_algorithm 1 --mca btl_tcp_eager_limit 4194304 "
             "--mca btl_tcp_rndv_eager_limit 4194304 --mca btl_tcp_max_send_size 4194304 ",
             l->run_dir, j, source, l->run_dir, j, nj, wait, hj->world_ranks, l->mpirun, l->run_dir,
             wait_s > 0 ? "-x AH_JOIN_WAIT_S " : "");
    char args[sizeof l->mpirun_args];
    snprintf(args, sizeof args, "%s", l->mpirun_args);
    for (char *save = NULL, *tok = strtok_r(args, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
        quote(cmd, cap, tok);
    char np[32];
    snprintf(np, sizeof np, "%d", hj->n_ranks);
    quote(cmd, cap, "-np");
    quote(cmd, cap, np);
    for (int i = 0; train_argv[i]; i++) quote(cmd, cap, train_argv[i]);
    quote(cmd, cap, "--check-host");
}

static void kill_job(ssh_t *l, int j);
static void kill_jobs(ssh_t *l, const int *js, int n);

/* Whether name is a shell variable's name. */
static bool var_name(const char *name) {
    if (!*name || (*name >= '0' && *name <= '9')) return false;
    for (const char *c = name; *c; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) return false;
    return true;
}

/* `export VAR='value'` into f for each `-x VAR` (no "=") of --mpirun-args that the agent's environment sets;
 * how many. */
static int write_env(const ssh_t *l, FILE *f) {
    char args[sizeof l->mpirun_args];
    snprintf(args, sizeof args, "%s", l->mpirun_args);
    int n = 0;
    bool x = false; /* the word before was -x */
    for (char *save = NULL, *tok = strtok_r(args, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        const char *value = x && var_name(tok) ? getenv(tok) : NULL;
        x = strcmp(tok, "-x") == 0;
        if (!value) continue;
        fprintf(f, "export %s='", tok);
        for (const char *c = value; *c; c++) {
            if (*c == '\'') fputs("'\\''", f); /* ' as '\'' */
            else fputc(*c, f);
        }
        fputs("'\n", f);
        n++;
    }
    return n;
}

/* The agent's values of job j's `-x VAR`s into RUN/mpirun-J.env on host (0600), through the remote command's
 * stdin from a 0600 file here, removed after; *any: whether there were any (none: no file). */
static ah_status_t put_env(ssh_t *l, const char *host, int j, bool *any, ah_error_t *err) {
    const char *tmp = getenv("TMPDIR");
    char local[700], cmd[1024], out[256], eout[2048];
    snprintf(local, sizeof local, "%s/autohet-env-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    const int fd = mkstemp(local); /* 0600 */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd), unlink(local);
        return ah_error_set(err, AH_ERR_IO, "cannot write a temporary file for mpirun's environment: %s", local);
    }
    *any = write_env(l, f) > 0;
    const bool written = fclose(f) == 0;
    ah_status_t s = written ? AH_OK : ah_error_set(err, AH_ERR_IO, "cannot write %s", local);
    snprintf(cmd, sizeof cmd, "umask 077 && cd '%s' && rm -f mpirun-%d.env && cat >mpirun-%d.env", l->run_dir, j, j);
    if (s == AH_OK && *any) {
        const int rc = ssh_remote(l, host, cmd, local, out, sizeof out, eout, sizeof eout);
        if (rc != 0) s = ssh_remote_error(l, host, rc, "writing mpirun's environment (-x VAR) to its run directory", eout, err);
    }
    unlink(local);
    return s;
}

/* Job j of nj for the host of hj: its remote command started here (see the top), l->job[j]. */
static ah_status_t start_host(ssh_t *l, const ah_launch_hostjob_t *hj, int j, int nj, char *const *train_argv,
                              double wait_s, ah_error_t *err) {
    static char cmd[65536];
    ssh_job_t *J = &l->job[j];
    memset(J, 0, sizeof *J);
    snprintf(J->host, sizeof J->host, "%s", hj->host);
    cmd[0] = 0;
    bool env = false;
    const ah_status_t put = put_env(l, hj->host, j, &env, err);
    if (put != AH_OK) return put;
    job_command(l, hj, j, nj, train_argv, env, wait_s, cmd, sizeof cmd);
    char **argv = malloc((SSH_MAX_WORDS + 12) * sizeof *argv);
    if (!argv) return ah_error_set(err, AH_ERR_OOM, "no host memory for the remote command's words");
    ssh_rsh_argv(l, J->host, cmd, argv);
    const ah_status_t s = ah_launch_spawn(argv, &J->pid, err);
    if (s == AH_OK) l->n_jobs = j + 1;
    return s;
}

ah_status_t ssh_start_joined(ssh_t *l, const ah_launch_job_t *job, ah_error_t *err) {
    ah_launch_hostjob_t *hj = NULL;
    int nj = 0;
    ah_status_t s = ah_launch_hostjobs(job->plan, &hj, &nj, err);
    if (s != AH_OK) return s;
    char uri[700];
    snprintf(uri, sizeof uri, "%s/ompi-server.uri", l->run_dir);
    if (nj > SSH_MAX_JOBS)
        s = ah_error_set(err, AH_ERR_USAGE, "the plan has %d hosts; the %s launcher joins at most %d jobs", nj,
                         l->slurm ? "slurm" : "ssh", SSH_MAX_JOBS);
    if (s == AH_OK) s = ah_launch_ompi_server(l->mpirun, uri, &l->server, err);
    if (s == AH_OK) s = ssh_put_run_file(l, "ompi-server.uri", uri, err);
    for (int j = 0; s == AH_OK && j < nj; j++) s = start_host(l, &hj[j], j, nj, job->train_argv, 0, err);
    ah_launch_hostjobs_free(hj, nj);
    l->metrics_job = 0; /* the plan's rank 0 is on the first host job's host */
    l->next_metrics_job = -1;
    if (s != AH_OK) ssh_stop_joined(l); /* the jobs started wait in their join: none may linger */
    return s;
}

/* The run directory made on a joining host (kept when there: a --work-dir shared with the running hosts is
 * theirs too) and the ompi-server's URI and job->plan_path copied to it. */
static ah_status_t prepare_joining(ssh_t *l, const ah_launch_job_t *job, const char *host, ah_error_t *err) {
    char cmd[4096], out[256], eout[2048], uri[700];
    snprintf(uri, sizeof uri, "%s/ompi-server.uri", l->run_dir);
    const char *files[2][2] = {{uri, uri}, {job->plan_path, job->plan_path}};
    for (int k = 0; k < 2; k++) {
        const char *slash = strrchr(files[k][1], '/');
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%.*s' && cat > '%s.tmp' && mv '%s.tmp' '%s'", l->run_dir,
                 slash ? (int)(slash - files[k][1]) : 1, slash ? files[k][1] : ".", files[k][1], files[k][1],
                 files[k][1]);
        const int rc = ssh_remote(l, host, cmd, files[k][0], out, sizeof out, eout, sizeof eout);
        if (rc != 0) return ssh_remote_error(l, host, rc, "preparing the joining host's run directory", eout, err);
    }
    return AH_OK;
}

ah_status_t ssh_join_hosts(void *ctx, const ah_launch_job_t *job, const char *const *hosts, int n, ah_error_t *err) {
    ssh_t *l = ctx;
    if (!l->joined || !l->server || l->ended)
        return ah_error_set(err, AH_ERR_USAGE, "hosts join only a running joined job (--in-place)");
    const int first = job->join_first > l->n_jobs ? job->join_first : l->n_jobs; /* launcher.h join_first */
    const int n_ranks = ah_plan_device_count(job->plan);
    if (first + n > SSH_MAX_JOBS || n_ranks > SSH_MAX_RANKS)
        return ah_error_set(err, AH_ERR_USAGE, "the joining job%s would be number%s %d..%d of this launch, with %d "
                            "ranks: the %s launcher numbers at most %d jobs a launch (every job started in it counts, "
                            "one that left or whose join was withdrawn too) and %d ranks", n == 1 ? "" : "s",
                            n == 1 ? "" : "s", first, first + n - 1, n_ranks, l->slurm ? "slurm" : "ssh", SSH_MAX_JOBS,
                            SSH_MAX_RANKS);
    for (; l->n_jobs < first; l->n_jobs++) l->job[l->n_jobs] = (ssh_job_t){.exited = true, .gone = true};
    ah_launch_hostjob_t *hj = NULL;
    int nj = 0, k = -1;
    ah_status_t s = ah_launch_hostjobs(job->plan, &hj, &nj, err);
    for (int h = 0; s == AH_OK && h < n; h++) {
        for (k = nj - 1; k >= 0 && strcmp(hj[k].host, hosts[h]) != 0; k--) {}
        if (k < 0) s = ah_error_set(err, AH_ERR_USAGE, "host %s joins but the plan puts no rank on it", hosts[h]);
        if (s == AH_OK) s = prepare_joining(l, job, hosts[h], err);
        if (s == AH_OK) s = start_host(l, &hj[k], first + h, first + n, job->train_argv, job->join_wait_s, err);
    }
    ah_launch_hostjobs_free(hj, nj);
    if (s != AH_OK) { /* the ones started would wait for a turn that never comes */
        for (int j = first; j < l->n_jobs; j++) kill_job(l, j), l->job[j].gone = true;
        return s;
    }
    for (int j = first; j < l->n_jobs; j++) l->job[j].joining = true;
    if (!l->joining) snprintf(l->reader, sizeof l->reader, "%s", l->n_ranks > 0 ? l->rank_host[0] : "");
    l->n_ranks = n_ranks; /* the new plan's ranks by host: the new rank 0's host writes the metrics after */
    for (int r = 0; r < n_ranks; r++) {
        const ah_device_ref_t *d = ah_plan_rank_device(job->plan, r);
        snprintf(l->rank_host[r], sizeof l->rank_host[r], "%s", d ? job->plan->cluster.nodes[d->node].name : "?");
    }
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
    l->joining = true;
    return AH_OK;
}

/* Whether job J's remote command has exited (reaped now or before). */
static bool reaped(ssh_job_t *J) { return J->exited || (J->exited = ah_launch_reap(&J->pid, &J->status)); }

bool ssh_poll_joined(ssh_t *l, int *status) {
    int running = 0, done = 0, verdict = 0; /* verdict: the first non-zero status, else 0 */
    for (int j = 0; !l->ended && j < l->n_jobs; j++) {
        ssh_job_t *J = &l->job[j];
        if (J->gone || J->leaving) continue; /* a leaving job's exit (its host gone: 255) is not the job's */
        if (!reaped(J)) {
            running++;
        } else if (J->joining && J->status != 0) { /* it never joined: the world gives up on it */
            J->gone = true;
        } else if (J->status != 0 && J->status != AH_PROTO_EXIT_PREEMPTED) { /* a failure: the job is over */
            *status = J->status;
            l->ended = true;
        } else if (done++ == 0 || verdict == 0) {
            verdict = J->status;
        }
    }
    if (l->ended) return true;
    if (running == 0 && done > 0) *status = verdict;
    return l->ended = running == 0;
}

/* Jobs js (n) ended at once: each one's remote command here, and on its host its mpirun stopped, mpirun's
 * children (the ranks, still starting ones too) killed, then mpirun; every host asked at once. */
static void kill_jobs(ssh_t *l, const int *js, int n) {
    ssh_call_t *calls = calloc((size_t)n + 1, sizeof *calls);
    char(*cmds)[1024] = calloc((size_t)n + 1, sizeof *cmds);
    for (int q = 0; q < n; q++) {
        ssh_job_t *J = &l->job[js[q]];
        if (J->pid > 0) {
            kill(-J->pid, SIGKILL);
            int st;
            waitpid(J->pid, &st, 0);
            J->pid = 0;
        }
        J->exited = true; /* asked once: a later stop does not reach for its host (or a reused pid) again */
        J->status = -SIGKILL;
        if (!calls || !cmds) continue;
        snprintf(cmds[q], sizeof cmds[q],
                 "m=$(cat '%s/mpirun-%d.pid' 2>/dev/null) || exit 0; kill -STOP $m 2>/dev/null; pkill -KILL -P $m; "
                 "kill -KILL $m 2>/dev/null; exit 0", l->run_dir, js[q]);
        calls[q] = (ssh_call_t){.host = J->host, .cmd = cmds[q]};
    }
    if (calls && cmds && n > 0) ssh_remote_many(l, calls, n, NULL, AH_SSH_TIMEOUT_S);
    free(calls);
    free(cmds);
}

static void kill_job(ssh_t *l, int j) { kill_jobs(l, &j, 1); }

int ssh_dead_jobs(void *ctx, char *what, size_t what_cap) {
    ssh_t *l = ctx;
    ssh_call_t *calls = calloc(SSH_MAX_JOBS, sizeof *calls);
    char(*cmds)[1024] = calloc(SSH_MAX_JOBS, sizeof *cmds);
    int who[SSH_MAX_JOBS], m = 0, n = 0;
    what[0] = 0;
    for (int j = 0; calls && cmds && l->joined && !l->ended && j < l->n_jobs; j++) {
        ssh_job_t *J = &l->job[j];
        if (J->gone || J->leaving || J->joining || reaped(J))
            continue; /* joining: its pid file may not be written yet; the world gives up on it (AH_JOIN_ADMIT_S) */
        /* alive: the pid's command line names this launch's ompi-server file (job_command's mpirun, or a
         * --mpirun wrapper given the same arguments), so neither a reused pid nor a --mpirun not called
         * "mpirun" is misread */
        snprintf(cmds[m], sizeof cmds[m], "m=$(cat '%s/mpirun-%d.pid' 2>/dev/null) && [ -n \"$m\" ] && "
                 "grep -qaF 'file:%s/ompi-server.uri' /proc/$m/cmdline 2>/dev/null && echo running; exit 0",
                 l->run_dir, j, l->run_dir);
        calls[m] = (ssh_call_t){.host = J->host, .cmd = cmds[m]};
        who[m++] = j;
    }
    if (m > 0) ssh_remote_many(l, calls, m, NULL, AH_SSH_TIMEOUT_S); /* every host at once */
    for (int q = 0; q < m; q++) {
        if (calls[q].rc != 0 || strstr(calls[q].out, "running"))
            continue; /* running, or no answer: not this question's (the hang's reachable asks) */
        kill_job(l, who[q]);
        const size_t used = strlen(what);
        snprintf(what + used, what_cap - used, "%s%s", n ? ", " : "", l->job[who[q]].host);
        n++;
    }
    free(calls);
    free(cmds);
    return n;
}

void ssh_stop_joined(ssh_t *l) {
    int js[SSH_MAX_JOBS], n = 0;
    for (int j = 0; j < l->n_jobs; j++)
        if (!l->job[j].gone && !l->job[j].exited) js[n++] = j;
    kill_jobs(l, js, n); /* every host at once: a slow one does not hold the others' stop back */
    ah_launch_ompi_server_stop(&l->server);
    l->ended = true; /* poll: exited, the status untouched */
}

/* The job whose host is `host` (not gone), or -1. */
static int job_of_host(const ssh_t *l, const char *host) {
    for (int j = 0; j < l->n_jobs; j++)
        if (!l->job[j].gone && strcmp(l->job[j].host, host) == 0) return j;
    return -1;
}

void ssh_reconfig_requested(ssh_t *l, const char *local_path) {
    static ah_reconfig_req_t req; /* 32 KiB of ranks */
    static char text[65536];
    ah_error_t e;
    FILE *f = fopen(local_path, "r");
    const size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    if (ah_reconfig_parse(text, &req, &e) != AH_OK) return; /* the trainer refuses it too: rank 0 stays */
    if (req.join && l->joining) { /* join_hosts made the ranks the new plan's already: its rank 0's host */
        l->joining = false;
        l->next_metrics_job = job_of_host(l, l->rank_host[0]);
        return;
    }
    int to = -1; /* the old world's rank that becomes rank 0: "ranks"' 0, else the first staying rank */
    for (int r = 0; r < l->n_ranks && to < 0; r++) {
        const int j = job_of_host(l, l->rank_host[r]);
        bool leaves = false;
        for (int k = 0; k < req.n_leave; k++) leaves = leaves || req.leave[k] == j;
        if (req.n_ranks ? r < req.n_ranks && req.ranks[r] == 0 : !leaves) to = r;
    }
    if (to >= 0) l->next_metrics_job = job_of_host(l, l->rank_host[to]);
}

/* Complete new lines of job j's host's metrics into buf (its offset advanced); their length, 0 when none. */
static size_t new_lines(ssh_t *l, int j, char *buf, size_t cap) {
    ssh_job_t *J = &l->job[j];
    const long n = ssh_fetch(l, J->host, AH_PROTO_METRICS_FILE, J->offset, buf, cap);
    size_t take = n > 0 ? (size_t)n : 0;
    while (take > 0 && buf[take - 1] != '\n') take--; /* a line still being written comes whole next time */
    J->offset += (long)take;
    return take;
}

/* ah_launch_tap_t's leaving: job j leaves at the change in place the metrics just said. */
static void leaving(void *ctx, int j) {
    ssh_t *l = ctx;
    if (j >= 0 && j < l->n_jobs) l->job[j].leaving = true;
}

/* ah_launch_tap_t's joined: the jobs join_hosts started are in the world. */
static void joined(void *ctx) {
    ssh_t *l = ctx;
    for (int j = 0; j < l->n_jobs; j++) l->job[j].joining = false;
}

void ssh_read_metrics_joined(ssh_t *l, void (*fn)(void *fn_ctx, json_t *line), void *fn_ctx) {
    static char buf[1 << 20], next[1 << 20];
    ah_launch_tap_t tap = {.fn = fn, .fn_ctx = fn_ctx, .leaving = leaving, .joined = joined, .ctx = l};
    if (l->n_jobs <= 0 || (!l->ended && ah_now_s() - l->metrics_t < AH_SSH_POLL_S)) return;
    l->metrics_t = ah_now_s();
    const int nx = l->next_metrics_job;
    size_t got = nx >= 0 && nx != l->metrics_job ? new_lines(l, nx, next, sizeof next) : 0;
    /* the old rank 0 wrote its last lines before the new one's first: read after those, so read first */
    size_t old = new_lines(l, l->metrics_job, buf, sizeof buf);
    if (old) ah_launch_lines_feed(&l->lines, buf, old, ah_launch_tap_line, &tap);
    if (!got) return;
    l->lines.len = 0;
    ah_launch_lines_feed(&l->lines, next, got, ah_launch_tap_line, &tap);
    l->metrics_job = nx; /* the new rank 0 writes from now on */
    l->next_metrics_job = -1;
}

/* Each remaining host's rank files, newest first, the newest of each pid taken: rank_host and n_ranks. */
static void rescan_ranks(ssh_t *l) {
    static char out[1 << 16];
    char cmd[1024], eout[1024];
    int n = 0;
    snprintf(cmd, sizeof cmd,
             "cd '%s' 2>/dev/null || exit 0; for f in $(ls -t rank-*.json 2>/dev/null); do p=$(sed -n "
             "'s/.*\"%s\": *\\([0-9][0-9]*\\).*/\\1/p' $f); echo \"${f#rank-} $p\"; done; exit 0",
             l->run_dir, AH_PROTO_RANK_PID);
    for (int r = 0; r < SSH_MAX_RANKS; r++) l->rank_host[r][0] = 0;
    for (int j = 0; j < l->n_jobs; j++) {
        if (l->job[j].gone || ssh_remote(l, l->job[j].host, cmd, NULL, out, sizeof out, eout, sizeof eout) != 0) continue;
        long seen[SSH_MAX_RANKS];
        int n_seen = 0;
        for (char *save = NULL, *tok = strtok_r(out, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
            int r = -1;
            long pid = -1;
            if (sscanf(tok, "%d.json %ld", &r, &pid) != 2 || r < 0 || r >= SSH_MAX_RANKS) continue;
            bool older = false;
            for (int k = 0; k < n_seen; k++) older = older || seen[k] == pid;
            if (older) continue;
            if (n_seen < SSH_MAX_RANKS) seen[n_seen++] = pid;
            snprintf(l->rank_host[r], sizeof l->rank_host[r], "%s", l->job[j].host);
            if (r + 1 > n) n = r + 1;
        }
    }
    for (int r = 0; r < n; r++)
        if (!l->rank_host[r][0]) snprintf(l->rank_host[r], sizeof l->rank_host[r], "?");
    l->n_ranks = n;
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
}

int ssh_leave_hosts(void *ctx, const char *const *hosts, int n, double wait_s) {
    ssh_t *l = ctx;
    bool leave[SSH_MAX_JOBS] = {false};
    ah_launch_job_view_t view[SSH_MAX_JOBS];
    for (int j = 0; j < l->n_jobs; j++)
        view[j] = (ah_launch_job_view_t){l->job[j].host, l->job[j].gone, l->job[j].leaving, l->job[j].joining};
    if (l->joined) ah_launch_leavers(view, l->n_jobs, hosts, n, leave);
    for (const double until = ah_now_s() + wait_s;; nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL)) {
        int left = 0;
        for (int j = 0; j < l->n_jobs; j++) left += leave[j] && !reaped(&l->job[j]);
        if (!left || ah_now_s() >= until) break;
    }
    int ok = 0;
    for (int j = 0; j < l->n_jobs; j++) {
        if (!leave[j]) continue;
        if (!l->job[j].exited) kill_job(l, j); /* still running at wait_s */
        else if (l->job[j].status == 0) ok++;
        l->job[j].gone = true;
    }
    rescan_ranks(l);
    const int m = l->n_ranks > 0 ? job_of_host(l, l->rank_host[0]) : -1;
    if (m >= 0 && m != l->metrics_job) l->next_metrics_job = m; /* rank 0 moved, its first lines not read yet */
    return ok;
}
