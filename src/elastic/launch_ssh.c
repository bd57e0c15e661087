/* The many-hosts launchers (launcher.h): node names are host names, every host reached through a
 * remote command RSH. Two of them:
 *  - ssh: RSH is ssh (in BatchMode when it is ssh) or the user's command, run as RSH HOST CMD;
 *    Open MPI is given it as plm_rsh_agent too;
 *  - slurm: inside an allocation (salloc, sbatch), RSH is `srun --overlap -N1 -n1 -w HOST sh -c
 *    CMD`, a job step on that node beside the job's own (scancel --signal addresses a job or a
 *    step, never one host's ranks, so notices go this way too); mpirun, started inside the
 *    allocation, reaches the hosts with Open MPI's Slurm launcher (srun), no plm_rsh_agent; a
 *    host that is not in the allocation (SLURM_JOB_NODELIST) does not answer. Every srun the
 *    agent and mpirun start runs with SLURM_OVERLAP=1 (srun --overlap): Open MPI's daemons of a
 *    launch whose host vanished are a step that keeps its CPUs on the survivors until Slurm
 *    declares that host DOWN (SlurmdTimeout, 300 s by default), and the relaunch's daemons would
 *    wait for them.
 * Nothing of a host is touched from here but through RSH:
 *  - start: on each host of the plan, the run directory RUN (the same path on every host, each
 *    its own) made empty and the plan copied to its path; here, RUN/hosts from the plan
 *    (rankfile.c: rank r's host on the r-th line) and mpirun --hostfile RUN/hosts --map-by seq,
 *    every rank with --check-host;
 *  - notice / kill_host: on the host, the pids of its ranks' rank files (RUN/rank-R.json on that
 *    host) signalled there;
 *  - metrics and run files: read from rank 0's host (RUN/metrics.jsonl from the last offset);
 *    once the job has ended, RUN/failed.json from the first host of its ranks that has it (a rank
 *    that stops the job on its own error writes it on its own host);
 *  - disks: rm -r, autohet ckpt ls --json and verify of LOCAL_ROOT/HOST on the host;
 *  - a joined launch (job->joined): one mpirun a host, started there (launch_ssh_joined.c).
 * The remote command itself: launch_ssh_remote.c.
 * Remote calls are synchronous, with a deadline (AH_SSH_TIMEOUT_S); while the job runs, the
 * metrics and the preemption report are fetched at most every AH_SSH_POLL_S, and a notice to
 * ranks still starting is retried as often. A host whose test command (reachable) failed is asked
 * nothing else (a notice, a kill, its disk) until a test command gets an answer again: a hung host
 * costs the remote command's timeout once, not at every call. */
#include "elastic/launch_ssh.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/timing.h"
#include "planner/planner.h"
#include "runtime/protocol.h"

static ah_status_t ssh_reachable(void *ctx, const char *host, ah_error_t *err) {
    ssh_t *l = ctx;
    char out[64], eout[2048];
    if (l->slurm && !ssh_find_line(l->alloc, host))
        return ah_error_set(err, AH_ERR_IO, "host %s is not in the Slurm allocation (SLURM_JOB_NODELIST=%s); "
                            "allocate it (salloc -w) or leave it out of the cluster file", host,
                            getenv("SLURM_JOB_NODELIST") ? getenv("SLURM_JOB_NODELIST") : "");
    ssh_set_silent(l, host, false);
    const int rc = ssh_remote(l, host, "true", NULL, out, sizeof out, eout, sizeof eout);
    ssh_set_silent(l, host, rc != 0);
    return rc == 0 ? AH_OK : ssh_remote_error(l, host, rc, "a test command", eout, err);
}

/* launcher.h reachable_many: a test command on every host at once; those with no answer in timeout_s asked
 * again once, at once. */
static void ssh_reachable_many(void *ctx, const char *const *hosts, int n, double timeout_s, int *verdict,
                               ah_error_t *errs) {
    ssh_t *l = ctx;
    ssh_call_t *calls = calloc((size_t)n + 1, sizeof *calls);
    int *who = calloc((size_t)n + 1, sizeof *who), m = 0;
    for (int k = 0; k < n; k++) {
        verdict[k] = AH_REACH_NO;
        if (!calls || !who) ah_error_set(&errs[k], AH_ERR_INTERNAL, "out of host memory");
        else if (l->slurm && !ssh_find_line(l->alloc, hosts[k])) ssh_reachable(ctx, hosts[k], &errs[k]);
        else { /* asked whatever the last test command said */
            ssh_set_silent(l, hosts[k], false);
            verdict[k] = AH_REACH_UNKNOWN;
            who[m++] = k;
        }
    }
    for (int pass = 0; pass < 2 && m > 0; pass++) {
        for (int q = 0; q < m; q++) calls[q] = (ssh_call_t){.host = hosts[who[q]], .cmd = "true"};
        ssh_remote_many(l, calls, m, NULL, timeout_s);
        int again = 0;
        for (int q = 0; q < m; q++) {
            const int k = who[q], rc = calls[q].rc;
            ssh_set_silent(l, hosts[k], rc != 0 && (rc != -2 || pass == 1)); /* silent once decided */
            if (rc == -2) { /* no answer in time: asked again once */
                ah_error_set(&errs[k], AH_ERR_IO, "host %s: no answer to a test command within %.3g s, twice (%s %s ...): "
                             "not known to be gone", hosts[k], timeout_s, l->rsh, hosts[k]);
                who[again++] = k;
                continue;
            }
            verdict[k] = rc == 0 ? AH_REACH_YES : AH_REACH_NO;
            if (rc != 0) ssh_remote_error(l, hosts[k], rc, "a test command", calls[q].err, &errs[k]);
        }
        m = again;
    }
    free(calls);
    free(who);
}

/* mpirun [--allow-run-as-root] --mca plm_rsh_agent RSH --hostfile HOSTFILE --map-by seq --bind-to
 * none --mca coll_libnbc_iallreduce_algorithm 1 --mca btl_tcp_{eager_limit,rndv_eager_limit,
 * max_send_size} 4194304 ARGS -np N TRAIN_ARGV --check-host, started (ah_launch_mpirun). */
static ah_status_t start_mpirun(ssh_t *l, char *hostfile, char *const *train_argv, ah_error_t *err) {
    /* the ring all-reduce the cost model counts: Open MPI's own choice for the trainer's
     * non-blocking all-reduce (libnbc) sends twice the buffer from rank 0; and TCP messages up to
     * 4 MiB sent eagerly: over 64 KiB, Open MPI's default, each waits for the receiver's go-ahead,
     * which queues behind the receiver's own outgoing data on a busy link (docs/multi-host.md,
     * "Network terms against shaped links"). ARGS, after these, can override them. */
    char *fixed[] = {"--mca", "plm_rsh_agent", l->rsh, "--hostfile", hostfile, "--map-by", "seq", "--bind-to", "none",
                     "--mca", "coll_libnbc_iallreduce_algorithm", "1", "--mca", "btl_tcp_eager_limit", "4194304",
                     "--mca", "btl_tcp_rndv_eager_limit", "4194304", "--mca", "btl_tcp_max_send_size", "4194304"};
    /* under Slurm, Open MPI finds the allocation itself and starts its daemons with srun */
    const size_t skip = l->slurm ? 3 : 0;
    return ah_launch_mpirun(l->mpirun, fixed + skip, sizeof fixed / sizeof fixed[0] - skip, l->mpirun_args, l->n_ranks,
                            train_argv, "--check-host", &l->pid, err);
}

/* Whether rank r is the first of its host in the plan's order. */
bool ssh_first_of_host(const ssh_t *l, int r) {
    for (int q = 0; q < r; q++)
        if (strcmp(l->rank_host[q], l->rank_host[r]) == 0) return false;
    return true;
}

/* The run directory made empty on every host of the plan, the plan copied to its path there. */
static ah_status_t prepare_hosts(ssh_t *l, const ah_launch_job_t *job, ah_error_t *err) {
    char cmd[4096], out[256], eout[2048];
    const char *slash = strrchr(job->plan_path, '/');
    const int dir_len = slash ? (int)(slash - job->plan_path) : 1;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' '%.*s' && cat > '%s.tmp' && mv '%s.tmp' '%s'", l->run_dir,
             l->run_dir, dir_len, slash ? job->plan_path : ".", job->plan_path, job->plan_path, job->plan_path);
    for (int r = 0; r < l->n_ranks; r++) {
        if (!ssh_first_of_host(l, r)) continue;
        const int rc = ssh_remote(l, l->rank_host[r], cmd, job->plan_path, out, sizeof out, eout, sizeof eout);
        if (rc != 0) return ssh_remote_error(l, l->rank_host[r], rc, "preparing the run directory", eout, err);
    }
    return AH_OK;
}

/* The job's ranks, hosts and run directory into l, nothing started or read yet (an earlier joined launch
 * ended). */
static ah_status_t take_job(ssh_t *l, const ah_launch_job_t *job, ah_error_t *err) {
    /* an earlier joined launch's mpiruns (a poll that took one job's failure at once leaves the others
     * running) and its ompi-server end first, as the local launcher's start does */
    if (l->joined) ssh_stop_joined(l);
    const ah_plan_t *p = job->plan;
    const int n_ranks = ah_plan_device_count(p);
    if (n_ranks > SSH_MAX_RANKS)
        return ah_error_set(err, AH_ERR_USAGE, "the plan has %d devices; the agent handles at most %d", n_ranks,
                            SSH_MAX_RANKS);
    ah_status_t s;
    if ((s = ssh_check_path("run directory", job->run_dir, err)) != AH_OK ||
        (s = ssh_check_path("plan", job->plan_path, err)) != AH_OK)
        return s;
    l->pid = 0;
    l->n_ranks = n_ranks;
    l->offset = 0;
    l->lines.len = 0;
    l->notice_t = l->metrics_t = l->report_t = 0;
    l->joined = l->ended = l->joining = false;
    l->n_jobs = 0;
    memset(l->rank_signalled, 0, sizeof l->rank_signalled);
    snprintf(l->run_dir, sizeof l->run_dir, "%s", job->run_dir);
    for (int r = 0; r < n_ranks; r++) {
        const ah_device_ref_t *d = ah_plan_rank_device(p, r);
        snprintf(l->rank_host[r], sizeof l->rank_host[r], "%s", d ? p->cluster.nodes[d->node].name : "?");
    }
    return AH_OK;
}

/* launcher.h: an earlier agent's job, its ranks on other hosts (not waited for). */
static ah_status_t ssh_adopt(void *ctx, const ah_launch_job_t *job, double wait_s, double *waited, ah_error_t *err) {
    (void)wait_s;
    *waited = 0;
    return take_job(ctx, job, err);
}

static ah_status_t ssh_start(void *ctx, const ah_launch_job_t *job, ah_error_t *err) {
    ssh_t *l = ctx;
    const ah_plan_t *p = job->plan;
    ah_status_t s = take_job(l, job, err);
    if (s != AH_OK) return s;
    char hostfile[700];
    snprintf(hostfile, sizeof hostfile, "%s/hosts", job->run_dir);
    /* the hosts' run directories before the hostfile here: with a --work-dir shared between the
     * hosts and this machine, emptying theirs empties this one too */
    if ((s = ah_fs_rm_tree(job->run_dir, err)) != AH_OK || (s = prepare_hosts(l, job, err)) != AH_OK ||
        (s = ah_fs_mkdirs(job->run_dir, err)) != AH_OK || (s = ah_plan_rankfile_write(p, hostfile, err)) != AH_OK)
        return s;
    if ((l->joined = job->joined)) return ssh_start_joined(l, job, err);
    return start_mpirun(l, hostfile, job->train_argv, err);
}

static bool ssh_poll(void *ctx, int *status) {
    ssh_t *l = ctx;
    return l->joined ? ssh_poll_joined(l, status) : ah_launch_reap(&l->pid, status);
}

/* The remote command that sends sig to the pids of the rank files of `ranks` (those of them that exist),
 * echoing each rank signalled. */
static void signal_cmd(const ssh_t *l, const bool *ranks, const char *sig, char *cmd, size_t cap) {
    int n = snprintf(cmd, cap, "cd '%s' 2>/dev/null || exit 0; for r in", l->run_dir);
    for (int r = 0; r < l->n_ranks && n < (int)cap - 256; r++)
        if (ranks[r]) n += snprintf(cmd + n, cap - (size_t)n, " %d", r);
    snprintf(cmd + n, cap - (size_t)n,
             "; do f=rank-$r.json; [ -r $f ] || continue; p=$(sed -n 's/.*\"%s\": *\\([0-9][0-9]*\\).*/\\1/p' $f);"
             " [ -n \"$p\" ] && kill -%s $p 2>/dev/null && echo $r; done; exit 0", AH_PROTO_RANK_PID, sig);
}

/* sig to the ranks on host (NULL: every host), one remote call per host, every host at once (a slow host
 * does not hold the others' signal back); only_new: those not signalled yet. The ranks signalled are
 * marked; returns how many. */
int ssh_signal_ranks(ssh_t *l, const char *host, const char *sig, bool only_new) {
    static bool want[SSH_MAX_RANKS];
    ssh_call_t *calls = calloc((size_t)l->n_ranks + 1, sizeof *calls);
    char(*cmds)[8192] = calloc((size_t)l->n_ranks + 1, sizeof *cmds);
    int m = 0, sent = 0;
    for (int r = 0; calls && cmds && r < l->n_ranks; r++) {
        const char *h = l->rank_host[r];
        if ((host && strcmp(h, host) != 0) || !ssh_first_of_host(l, r)) continue;
        int k = 0;
        for (int q = 0; q < l->n_ranks; q++)
            k += want[q] = strcmp(l->rank_host[q], h) == 0 && !(only_new && l->rank_signalled[q]);
        if (!k) continue;
        signal_cmd(l, want, sig, cmds[m], sizeof cmds[m]);
        calls[m] = (ssh_call_t){.host = h, .cmd = cmds[m]};
        m++;
    }
    if (m > 0) ssh_remote_many(l, calls, m, NULL, AH_SSH_TIMEOUT_S);
    for (int q = 0; q < m; q++)
        for (char *save = NULL, *tok = calls[q].rc == 0 ? strtok_r(calls[q].out, "\n", &save) : NULL; tok;
             tok = strtok_r(NULL, "\n", &save)) {
            const int r = atoi(tok);
            if (r < 0 || r >= l->n_ranks) continue;
            l->rank_signalled[r] = true;
            sent++;
        }
    free(calls);
    free(cmds);
    return sent;
}

static int ssh_notice(void *ctx, const char *host) {
    ssh_t *l = ctx;
    bool pending = false;
    for (int r = 0; r < l->n_ranks; r++)
        if (!l->rank_signalled[r] && (!host || strcmp(l->rank_host[r], host) == 0)) pending = true;
    if (!pending) return 0;
    /* ranks still starting: asked again, but not at every call of the agent's loop */
    if (l->notice_t > 0 && ah_now_s() - l->notice_t < AH_SSH_POLL_S) return 0;
    l->notice_t = ah_now_s();
    return ssh_signal_ranks(l, host, "TERM", true);
}

static int ssh_kill_host(void *ctx, const char *host) { return ssh_signal_ranks(ctx, host, "KILL", false); }

static void ssh_stop(void *ctx) {
    ssh_t *l = ctx;
    if (l->pid > 0) {
        /* mpirun gone, its ssh sessions close and each host's Open MPI daemon ends its ranks; a
         * SIGTERM would be forwarded to the ranks as a preemption notice instead */
        kill(-l->pid, SIGKILL);
        int st;
        waitpid(l->pid, &st, 0);
        l->pid = 0;
    }
    if (l->joined) ssh_stop_joined(l);
    ssh_signal_ranks(l, NULL, "KILL", false);
}

/* RUN/name on host, from byte `from` (0: the whole file) into out; the byte count or -1 when it is
 * not there or the host does not answer. */
long ssh_fetch(ssh_t *l, const char *host, const char *name, long from, char *out, size_t cap) {
    char cmd[1024], eout[1024];
    snprintf(cmd, sizeof cmd, "f='%s/%s'; [ -r \"$f\" ] || exit 3; tail -c +%ld \"$f\"", l->run_dir, name, from + 1);
    if (ssh_remote(l, host, cmd, NULL, out, cap, eout, sizeof eout) != 0) return -1;
    return (long)strlen(out);
}

static void ssh_read_metrics(void *ctx, void (*fn)(void *fn_ctx, json_t *line), void *fn_ctx) {
    ssh_t *l = ctx;
    if (l->joined) {
        ssh_read_metrics_joined(l, fn, fn_ctx);
        return;
    }
    if (l->pid > 0 && ah_now_s() - l->metrics_t < AH_SSH_POLL_S) return;
    l->metrics_t = ah_now_s();
    static char buf[1 << 20];
    const long n = l->n_ranks > 0 ? ssh_fetch(l, l->rank_host[0], AH_PROTO_METRICS_FILE, l->offset, buf, sizeof buf) : -1;
    if (n <= 0) return; /* rank 0 writes the metrics */
    /* complete lines only: a line still being written comes whole next time */
    size_t take = (size_t)n;
    while (take > 0 && buf[take - 1] != '\n') take--;
    if (take == 0) return;
    l->offset += (long)take;
    ah_launch_lines_feed(&l->lines, buf, take, fn, fn_ctx);
}

/* put_run_file: through each host's remote command, as the plan at the start (prepare_hosts), and the running
 * world's rank 0's host last (after join_hosts, l->reader: rank_host is the next plan's): rank 0 reads a
 * reconfiguration request, so one that fails on another host is not taken while the agent falls back. The next
 * metrics read is not held back (a request's answer comes there). */
ah_status_t ssh_put_run_file(void *ctx, const char *name, const char *local_path, ah_error_t *err) {
    ssh_t *l = ctx;
    char cmd[2048], out[256], eout[2048], what[300];
    snprintf(cmd, sizeof cmd, "cat > '%s/%s.tmp' && mv '%s/%s.tmp' '%s/%s'", l->run_dir, name, l->run_dir, name,
             l->run_dir, name);
    snprintf(what, sizeof what, "writing the run directory's %s", name);
    const char *last = l->joining ? l->reader : l->n_ranks > 0 ? l->rank_host[0] : "";
    for (int r = 0; r <= l->n_ranks; r++) {
        if (r < l->n_ranks && (!ssh_first_of_host(l, r) || strcmp(l->rank_host[r], last) == 0)) continue;
        const char *host = r < l->n_ranks ? l->rank_host[r] : last;
        const int rc = host[0] ? ssh_remote(l, host, cmd, local_path, out, sizeof out, eout, sizeof eout) : 0;
        if (rc != 0) return ssh_remote_error(l, host, rc, what, eout, err);
    }
    l->metrics_t = 0;
    if (l->joined && strcmp(name, AH_PROTO_RECONFIG_FILE) == 0) ssh_reconfig_requested(l, local_path);
    return AH_OK;
}

static bool ssh_run_file(void *ctx, const char *name, json_t **doc, ah_error_t *err) {
    ssh_t *l = ctx;
    /* while the job runs, a look for the preemption report at most every AH_SSH_POLL_S */
    const bool running = l->joined ? !l->ended : l->pid > 0;
    if (!doc && running) {
        if (ah_now_s() - l->report_t < AH_SSH_POLL_S) return false;
        l->report_t = ah_now_s();
    }
    /* rank 0's host (the reports' writer); once the job has ended, failed.json from every host of its
     * ranks in rank order: a rank that stops the job on its own error writes it on its own host */
    const int hosts = !running && strcmp(name, AH_PROTO_FAILED_FILE) == 0 ? l->n_ranks : 1;
    static char buf[65536];
    for (int r = 0; r < hosts; r++) {
        if (!ssh_first_of_host(l, r) || ssh_fetch(l, l->rank_host[r], name, 0, buf, sizeof buf) < 0) continue;
        if (doc) {
            json_error_t je;
            *doc = json_loads(buf, 0, &je);
            if (!*doc)
                ah_error_set(err, AH_ERR_INVALID, "host %s: %s/%s: line %d: %s", l->rank_host[r], l->run_dir, name,
                             je.line, je.text);
        }
        return true;
    }
    return false;
}

static ah_status_t ssh_drop_disk(void *ctx, const char *host, ah_error_t *err) {
    ssh_t *l = ctx;
    char cmd[1024], out[64], eout[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", l->local_root, host);
    const int rc = ssh_remote(l, host, cmd, NULL, out, sizeof out, eout, sizeof eout);
    return rc == 0 ? AH_OK : ssh_remote_error(l, host, rc, "dropping its disk", eout, err);
}

static ah_status_t ssh_list_steps(void *ctx, const char *host, ah_ckpt_step_info_t **steps, int *n, ah_error_t *err) {
    ssh_t *l = ctx;
    char cmd[2048], eout[2048];
    static char out[1 << 20];
    *steps = NULL;
    *n = 0;
    /* a disk with nothing yet is an empty list (ckpt ls of a missing root fails, naming it) */
    snprintf(cmd, sizeof cmd, "d='%s/%s'; [ -d \"$d\" ] || { echo '[]'; exit 0; }; '%s' ckpt ls --local-root \"$d\" --json",
             l->local_root, host, l->autohet);
    const int rc = ssh_remote(l, host, cmd, NULL, out, sizeof out, eout, sizeof eout);
    if (rc != 0) return ssh_remote_error(l, host, rc, "autohet ckpt ls", eout, err);
    json_error_t je;
    json_t *rows = json_loads(out, 0, &je);
    if (!json_is_array(rows)) {
        json_decref(rows);
        return ah_error_set(err, AH_ERR_INVALID, "host %s: autohet ckpt ls --json printed no JSON list", host);
    }
    const size_t k = json_array_size(rows);
    *steps = calloc(k ? k : 1, sizeof **steps);
    if (!*steps) {
        json_decref(rows);
        return ah_error_set(err, AH_ERR_OOM, "out of host memory");
    }
    for (size_t i = 0; i < k; i++) {
        json_t *row = json_array_get(rows, i);
        const char *tier = json_string_value(json_object_get(row, "tier"));
        if (!tier || strncmp(tier, "local", 5) != 0) continue;
        ah_ckpt_step_info_t *s = &(*steps)[(*n)++];
        s->step = json_integer_value(json_object_get(row, "step"));
        s->committed = json_is_true(json_object_get(row, "committed"));
        s->n_files = (int)json_integer_value(json_object_get(row, "files"));
        s->bytes = (uint64_t)json_integer_value(json_object_get(row, "bytes"));
        snprintf(s->note, sizeof s->note, "%s", json_string_value(json_object_get(row, "note")) ? json_string_value(json_object_get(row, "note")) : "");
    }
    json_decref(rows);
    return AH_OK;
}

static ah_status_t ssh_verify_step(void *ctx, const char *host, int64_t step, int *bad, ah_error_t *err) {
    ssh_t *l = ctx;
    char cmd[2048], out[65536], eout[2048];
    snprintf(cmd, sizeof cmd, "'%s' ckpt verify --local-root '%s/%s' --step %lld", l->autohet, l->local_root, host,
             (long long)step);
    const int rc = ssh_remote(l, host, cmd, NULL, out, sizeof out, eout, sizeof eout);
    *bad = 0;
    if (rc == 0) return AH_OK;
    /* exit 1 with "step N: FAILED: what" lines: the step is damaged; anything else did not check */
    const char *failed = strstr(out, "FAILED: ");
    if (rc != 1 || !failed) return ssh_remote_error(l, host, rc, "autohet ckpt verify", eout, err);
    for (const char *p = failed; (p = strstr(p, "FAILED: ")); p++) (*bad)++;
    const size_t n = strcspn(failed, "\n");
    ah_error_set(err, AH_ERR_INVALID, "host %s: step %lld: %.*s", host, (long long)step, (int)(n < 300 ? n : 300), failed);
    return AH_OK;
}

static void ssh_free(void *ctx) {
    ssh_t *l = ctx;
    if (l->pid > 0) ssh_stop(l);
    if (l->joined) ssh_stop_joined(l);
    free(l);
}

/* The launcher over the remote command rsh (space-separated words), named `name` in errors. */
static ah_status_t remote_launcher(const char *name, const ah_launch_ssh_opts_t *o, const char *rsh, ssh_t **lp,
                                   ah_launcher_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    ah_status_t s;
    if (!o->local_root || !*o->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "--launcher %s needs --local-root PATH: a path on every host, each "
                            "host's disk its own", name);
    if ((s = ssh_check_path("--local-root", o->local_root, err)) != AH_OK || (s = ssh_check_path("autohet", o->autohet, err)) != AH_OK)
        return s;
    ssh_t *l = calloc(1, sizeof *l);
    if (!l) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    snprintf(l->mpirun, sizeof l->mpirun, "%s", o->mpirun);
    snprintf(l->mpirun_args, sizeof l->mpirun_args, "%s", o->mpirun_args ? o->mpirun_args : "");
    snprintf(l->rsh, sizeof l->rsh, "%s", rsh);
    snprintf(l->local_root, sizeof l->local_root, "%s", o->local_root);
    snprintf(l->autohet, sizeof l->autohet, "%s", o->autohet);
    snprintf(l->rsh_words, sizeof l->rsh_words, "%s", l->rsh);
    for (char *save = NULL, *tok = strtok_r(l->rsh_words, " \t", &save); tok && l->n_rsh < SSH_MAX_WORDS;
         tok = strtok_r(NULL, " \t", &save))
        l->rsh_argv[l->n_rsh++] = tok;
    if (l->n_rsh == 0) {
        free(l);
        return ah_error_set(err, AH_ERR_USAGE, "--rsh-agent \"%s\": give a command, e.g. ssh", rsh);
    }
    *lp = l;
    *out = (ah_launcher_t){.name = name, .ctx = l, .start = ssh_start, .poll = ssh_poll, .notice = ssh_notice,
                           .kill_host = ssh_kill_host, .stop = ssh_stop, .read_metrics = ssh_read_metrics,
                           .adopt = ssh_adopt, .run_file = ssh_run_file,
                           .put_run_file = ssh_put_run_file, .drop_disk = ssh_drop_disk,
                           .list_steps = ssh_list_steps,
                           .verify_step = ssh_verify_step, .reachable = ssh_reachable, .reachable_many = ssh_reachable_many,
                           .leave_hosts = ssh_leave_hosts, .join_hosts = ssh_join_hosts, .dead_jobs = ssh_dead_jobs,
                           .free = ssh_free};
    return AH_OK;
}

ah_status_t ah_launcher_ssh(const ah_launch_ssh_opts_t *o, ah_launcher_t *out, ah_error_t *err) {
    ssh_t *l;
    ah_status_t s = remote_launcher("ssh", o, o->rsh && *o->rsh ? o->rsh : "ssh", &l, out, err);
    if (s != AH_OK) return s;
    /* plain ssh: never a prompt, and a host that does not answer fails in seconds */
    const char *base = strrchr(l->rsh_argv[0], '/');
    if (strcmp(base ? base + 1 : l->rsh_argv[0], "ssh") == 0) {
        char *opts[] = {"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"};
        for (int i = 0; i < 4; i++) l->rsh_argv[l->n_rsh++] = opts[i];
    }
    return AH_OK;
}

/* The allocation's hosts (scontrol show hostnames of SLURM_JOB_NODELIST), one per line, into
 * alloc. */
static ah_status_t allocation_hosts(char *alloc, size_t cap, ah_error_t *err) {
    const char *list = getenv("SLURM_JOB_NODELIST");
    if (!list || !*list || strchr(list, '\'') || strchr(list, '\n'))
        return ah_error_set(err, AH_ERR_USAGE, "--launcher slurm: SLURM_JOB_NODELIST is %s; run autohet run inside "
                            "the allocation (salloc, sbatch)", list && *list ? "not a node list" : "not set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "scontrol show hostnames '%s'", list);
    FILE *p = popen(cmd, "r");
    if (!p) return ah_error_set(err, AH_ERR_IO, "--launcher slurm: cannot run scontrol: %s", strerror(errno));
    size_t n = 0;
    alloc[0] = 0;
    char line[256];
    while (fgets(line, sizeof line, p)) {
        const size_t k = strcspn(line, "\r\n");
        if (k == 0 || n + k + 2 > cap) continue;
        memcpy(alloc + n, line, k);
        n += k;
        alloc[n++] = '\n';
        alloc[n] = 0;
    }
    const int rc = pclose(p);
    if (rc != 0 || n == 0)
        return ah_error_set(err, AH_ERR_IO, "--launcher slurm: `%s` gave no host (exit %d): is scontrol (slurm-client) "
                            "installed here?", cmd, rc);
    return AH_OK;
}

ah_status_t ah_launcher_slurm(const ah_launch_ssh_opts_t *o, ah_launcher_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (o->rsh && *o->rsh)
        return ah_error_set(err, AH_ERR_USAGE, "--rsh-agent is for --launcher ssh; --launcher slurm reaches a host "
                            "with srun -w HOST inside the allocation");
    if (!getenv("SLURM_JOB_ID"))
        return ah_error_set(err, AH_ERR_USAGE, "--launcher slurm runs inside a Slurm allocation (no SLURM_JOB_ID): "
                            "salloc -N K --ntasks-per-node=G autohet run ..., or an sbatch script "
                            "(docs/multi-host.md)");
    char alloc[sizeof ((ssh_t *)0)->alloc];
    ah_status_t s = allocation_hosts(alloc, sizeof alloc, err);
    ssh_t *l;
    /* a step beside the job's own (--overlap), one task on that node, no MPI plugin of its own */
    if (s == AH_OK) s = remote_launcher("slurm", o, "srun --overlap --mpi=none -N1 -n1 --quiet -w", &l, out, err);
    if (s != AH_OK) return s;
    l->slurm = true;
    memcpy(l->alloc, alloc, sizeof alloc);
    /* Open MPI's daemons too, as a step beside any left over from a launch that lost a host */
    setenv("SLURM_OVERLAP", "1", 1);
    return AH_OK;
}
