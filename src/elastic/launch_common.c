/* What the launchers share (launcher.h): the choice by name, and the line splitting of a trainer's
 * metrics stream. */
#include "elastic/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
