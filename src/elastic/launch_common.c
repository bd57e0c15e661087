/* What the launchers share (launcher.h): the choice by name, the line splitting of a trainer's
 * metrics stream, mpirun started, and a joined launch's jobs and ompi-server. */
#include "elastic/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/protocol.h"

void ah_launch_tap_line(void *tap, json_t *line) {
    const ah_launch_tap_t *t = tap;
    const char *ev = json_string_value(json_object_get(line, AH_PROTO_EVENT));
    const json_t *leave = json_object_get(line, "leave");
    for (size_t k = 0; ev && strcmp(ev, AH_PROTO_EV_RECONFIGURE) == 0 && k < json_array_size(leave); k++)
        if (json_is_integer(json_array_get(leave, k)))
            t->leaving(t->ctx, (int)json_integer_value(json_array_get(leave, k)));
    if (ev && strcmp(ev, AH_PROTO_EV_RECONFIGURE) == 0 && json_integer_value(json_object_get(line, "join")) > 0 &&
        t->joined)
        t->joined(t->ctx);
    t->fn(t->fn_ctx, line);
}

ah_status_t ah_launcher_by_name(const char *name, const ah_launch_local_opts_t *lo, const ah_launch_ssh_opts_t *so,
                                ah_launcher_t *out, ah_error_t *err) {
    if (!name || strcmp(name, "local") == 0) return ah_launcher_local(lo, out, err);
    if (strcmp(name, "ssh") == 0) return ah_launcher_ssh(so, out, err);
    if (strcmp(name, "slurm") == 0) return ah_launcher_slurm(so, out, err);
    memset(out, 0, sizeof *out);
    return ah_error_set(err, AH_ERR_USAGE, "--launcher %s: expected local, ssh or slurm", name);
}

void ah_launch_lines_feed(ah_launch_lines_t *lb, const char *buf, size_t n, void (*fn)(void *fn_ctx, json_t *line),
                          void *fn_ctx) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            /* A line longer than the buffer is not one of ours: drop its excess. */
            if (lb->len + 1 < sizeof lb->partial) lb->partial[lb->len++] = buf[i];
            continue;
        }
        lb->partial[lb->len] = 0;
        json_t *line = json_loads(lb->partial, 0, NULL);
        lb->len = 0;
        if (json_is_object(line)) fn(fn_ctx, line);
        json_decref(line);
    }
}

void ah_launch_leavers(const ah_launch_job_view_t *jobs, int n_jobs, const char *const *hosts, int n, bool *leave) {
    for (int j = 0; j < n_jobs; j++) {
        const ah_launch_job_view_t *J = &jobs[j];
        bool listed = false, host_leaving = false, host_joining = false;
        for (int h = 0; h < n; h++) listed = listed || strcmp(J->host, hosts[h]) == 0;
        for (int k = 0; k < n_jobs; k++) {
            const ah_launch_job_view_t *K = &jobs[k];
            host_leaving = host_leaving || (!K->gone && K->leaving && strcmp(K->host, J->host) == 0);
            host_joining = host_joining || (!K->gone && K->joining && strcmp(K->host, J->host) == 0);
        }
        leave[j] = !J->gone && listed && (host_leaving ? J->leaving : host_joining ? J->joining : true);
    }
}

bool ah_launch_reap(pid_t *pid, int *status) {
    if (*pid <= 0) return true;
    int st = 0;
    const pid_t r = waitpid(*pid, &st, WNOHANG);
    if (r == 0) return false;
    *status = r < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    *pid = 0;
    return true;
}

ah_status_t ah_launch_mpirun(const char *mpirun, char *const *fixed, size_t n_fixed, const char *args, int n_ranks,
                             char *const *train_argv, const char *tail, pid_t *pid, ah_error_t *err) {
    char np[32];
    snprintf(np, sizeof np, "%d", n_ranks);
    size_t n_train = 0;
    while (train_argv[n_train]) n_train++;
    char *words = strdup(args ? args : ""); /* split in place; the argv's words point into it */
    /* mpirun, --allow-run-as-root, fixed, at most one word per two bytes of ARGS, -np N, the trainer's, tail */
    char **argv = words ? malloc((2 + n_fixed + strlen(words) / 2 + 1 + 2 + n_train + 2) * sizeof *argv) : NULL;
    if (!argv) {
        free(words);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for mpirun's command line");
    }
    int n = 0;
    argv[n++] = (char *)mpirun;
    /* Open MPI refuses root unless told; the agent is the one launching, so it says so. */
    if (geteuid() == 0 && !getenv("OMPI_ALLOW_RUN_AS_ROOT")) argv[n++] = "--allow-run-as-root";
    for (size_t i = 0; i < n_fixed; i++) argv[n++] = fixed[i];
    for (char *save = NULL, *tok = strtok_r(words, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
        argv[n++] = tok;
    argv[n++] = "-np";
    argv[n++] = np;
    for (size_t i = 0; i < n_train; i++) argv[n++] = train_argv[i];
    if (tail) argv[n++] = (char *)tail;
    argv[n] = NULL;
    const ah_status_t s = ah_launch_spawn(argv, pid, err); /* the child has its copy: words go */
    free(words);
    return s;
}

ah_status_t ah_launch_spawn(char **argv, pid_t *pid, ah_error_t *err) {
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
        ah_status_t s = ah_error_set(err, AH_ERR_IO, "cannot start %s: fork: %s", argv[0], strerror(errno));
        free(argv);
        return s;
    }
    if (child == 0) {
        /* Own process group: a terminal's Ctrl-C reaches the agent only, which then stops the job. */
        setpgid(0, 0);
        /* An agent killed outright (SIGKILL, OOM) cannot stop its job: the kernel sends the job
         * SIGTERM, which mpirun passes to its ranks, so no orphan keeps writing checkpoints into
         * the work directory a new agent takes over. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1); /* the agent died before prctl */
        const int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
        execvp(argv[0], argv);
        /* Only the child reaches this: it says why, the parent sees exit status 127. */
        char msg[600];
        const int n = snprintf(msg, sizeof msg, "autohet run: cannot run %.400s: %s\n", argv[0], strerror(errno));
        if (n > 0 && write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) _exit(127);
        _exit(127);
    }
    free(argv);
    setpgid(child, child); /* also in the parent, so a signal right after fork reaches the group */
    *pid = child;
    return AH_OK;
}

void ah_launch_hostjobs_free(ah_launch_hostjob_t *jobs, int n_jobs) {
    for (int j = 0; jobs && j < n_jobs; j++) free(jobs[j].world_ranks);
    free(jobs);
}

ah_status_t ah_launch_hostjobs(const ah_plan_t *p, ah_launch_hostjob_t **jobs, int *n_jobs, ah_error_t *err) {
    const int n = ah_plan_device_count(p);
    int *job_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *job_of);
    ah_launch_hostjob_t *js = calloc((size_t)(n > 0 ? n : 1), sizeof *js);
    int nj = 0;
    ah_status_t s = job_of && js ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for %d ranks' jobs", n);
    for (int r = 0; s == AH_OK && r < n; r++) { /* each rank's job: its host's, in order of first rank */
        const ah_device_ref_t *d = ah_plan_rank_device(p, r);
        const char *host = d ? p->cluster.nodes[d->node].name : "?";
        int j = 0;
        while (j < nj && strcmp(js[j].host, host) != 0) j++;
        if (j == nj) snprintf(js[nj++].host, sizeof js->host, "%s", host);
        js[j].n_ranks++;
        job_of[r] = j;
    }
    for (int j = 0; s == AH_OK && j < nj; j++) {
        const size_t cap = sizeof "AH_WORLD_RANKS=" + (size_t)js[j].n_ranks * 12;
        if (!(js[j].world_ranks = malloc(cap))) {
            s = ah_error_set(err, AH_ERR_OOM, "no host memory for AH_WORLD_RANKS");
            break;
        }
        size_t len = (size_t)snprintf(js[j].world_ranks, cap, "AH_WORLD_RANKS=");
        for (int r = 0, k = 0; r < n; r++)
            if (job_of[r] == j) len += (size_t)snprintf(js[j].world_ranks + len, cap - len, "%s%d", k++ ? "," : "", r);
    }
    free(job_of);
    if (s != AH_OK) {
        ah_launch_hostjobs_free(js, nj);
        return s;
    }
    *jobs = js;
    *n_jobs = nj;
    return AH_OK;
}

ah_status_t ah_launch_ompi_server(const char *mpirun, const char *uri_path, pid_t *pid, ah_error_t *err) {
    char server[600] = "ompi-server";
    const char *slash = strrchr(mpirun, '/');
    if (slash && snprintf(server, sizeof server, "%.*s/ompi-server", (int)(slash - mpirun), mpirun) > 0 &&
        access(server, X_OK) != 0)
        snprintf(server, sizeof server, "ompi-server");
    unlink(uri_path);
    char **argv = malloc(5 * sizeof *argv);
    if (!argv) return ah_error_set(err, AH_ERR_OOM, "no host memory for ompi-server's command line");
    argv[0] = server;
    argv[1] = "--no-daemonize";
    argv[2] = "-r";
    argv[3] = (char *)uri_path;
    argv[4] = NULL;
    ah_status_t s = ah_launch_spawn(argv, pid, err);
    if (s != AH_OK) return s;
    struct stat sb;
    for (int i = 0; i < 1000; i++) { /* 10 s */
        if (stat(uri_path, &sb) == 0 && sb.st_size > 0) return AH_OK;
        int st;
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            return ah_error_set(err, AH_ERR_IO, "%s exited (status %d) without writing %s: is Open MPI's ompi-server "
                                "installed beside mpirun?", server, WIFEXITED(st) ? WEXITSTATUS(st) : -1, uri_path);
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    ah_launch_ompi_server_stop(pid);
    return ah_error_set(err, AH_ERR_IO, "%s wrote no %s in 10 s", server, uri_path);
}

void ah_launch_ompi_server_stop(pid_t *pid) {
    if (*pid <= 0) return;
    kill(*pid, SIGKILL);
    int st;
    waitpid(*pid, &st, 0);
    *pid = 0;
}
