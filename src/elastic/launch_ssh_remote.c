/* The ssh and slurm launchers' remote command (launch_ssh.h): RSH HOST CMD with a deadline, its output
 * kept, its failure said naming the host; the hosts that did not answer the last test command. */
#include "elastic/launch_ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/timing.h"

int ssh_rsh_argv(const ssh_t *l, const char *host, const char *cmd, char **argv) {
    int n = 0;
    for (int i = 0; i < l->n_rsh; i++) argv[n++] = l->rsh_argv[i];
    argv[n++] = (char *)host;
    if (l->slurm) {
        argv[n++] = "sh";
        argv[n++] = "-c";
    }
    argv[n++] = (char *)cmd;
    argv[n] = NULL;
    return n;
}

/* A path the remote shell gets inside single quotes: refused when it holds one. */
ah_status_t ssh_check_path(const char *what, const char *p, ah_error_t *err) {
    if (strchr(p, '\'') || strchr(p, '\n'))
        return ah_error_set(err, AH_ERR_USAGE, "%s %s: a quote or newline cannot go through the remote command", what, p);
    return AH_OK;
}

/* One read of fd into out (at most cap - 1 bytes kept, NUL-terminated; the rest read and dropped).
 * Returns read's result: 0 at EOF. */
static ssize_t drain(int fd, char *out, size_t cap, size_t *len) {
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return n;
    const size_t keep = *len + (size_t)n < cap ? (size_t)n : cap - 1 - *len;
    memcpy(out + *len, buf, keep);
    *len += keep;
    out[*len] = 0;
    return n;
}

/* host's line in list (lines each ended by a newline), or NULL. */
char *ssh_find_line(char *list, const char *host) {
    const size_t n = strlen(host);
    for (char *p = list; *p; p = strchr(p, '\n') + 1)
        if (strncmp(p, host, n) == 0 && p[n] == '\n') return p;
    return NULL;
}

/* RSH HOST CMD started with stdin from in_path (NULL: /dev/null), its stdout and stderr into *fo and *fe
 * (read ends); the child's pid (leader of its own process group), or -1 when it could not start. */
static pid_t spawn(const ssh_t *l, const char *host, const char *cmd, const char *in_path, int *fo, int *fe) {
    int po[2], pe[2];
    if (pipe(po) != 0) return -1;
    if (pipe(pe) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    char *argv[SSH_MAX_WORDS + 12];
    ssh_rsh_argv(l, host, cmd, argv);
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        const int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
        if (in >= 0) dup2(in, STDIN_FILENO);
        dup2(po[1], STDOUT_FILENO);
        dup2(pe[1], STDERR_FILENO);
        close(po[0]);
        close(pe[0]);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        return -1;
    }
    *fo = po[0];
    *fe = pe[0];
    return pid;
}

/* ssh_remote_many's calls with per-call buffers of any size (outs, errs with their capacities). */
static void remote_many(ssh_t *l, int n, const char *const *hosts, const char *const *cmds, const char *in_path,
                        char *const *outs, size_t out_cap, char *const *errs, size_t err_cap, double timeout_s, int *rc) {
    pid_t *pid = calloc((size_t)n + 1, sizeof *pid);
    struct pollfd *fds = calloc(2 * (size_t)n + 1, sizeof *fds);
    size_t *len = calloc(2 * (size_t)n + 1, sizeof *len);
    int open_fds = 0;
    for (int k = 0; k < n; k++) {
        outs[k][0] = errs[k][0] = 0;
        rc[k] = -1;
        if (!pid || !fds || !len) continue;
        fds[2 * k].fd = fds[2 * k + 1].fd = -1;
        /* a host that did not answer is not waited on again (a hung host: the remote command's whole
         * timeout each time) until a test command (reachable) gets an answer */
        if (ssh_find_line(l->silent, hosts[k])) {
            snprintf(errs[k], err_cap, "not tried: it did not answer the last test command");
            rc[k] = -3;
            continue;
        }
        pid[k] = spawn(l, hosts[k], cmds[k], in_path, &fds[2 * k].fd, &fds[2 * k + 1].fd);
        if (pid[k] < 0) {
            pid[k] = 0;
            continue;
        }
        fds[2 * k].events = fds[2 * k + 1].events = POLLIN;
        open_fds += 2;
    }
    const double deadline = ah_now_s() + timeout_s;
    while (open_fds > 0) {
        const double left = deadline - ah_now_s();
        if (left <= 0 || (poll(fds, 2 * (nfds_t)n, (int)(left * 1000) + 1) < 0 && errno != EINTR)) break;
        for (int i = 0; i < 2 * n; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t got = i % 2 == 0 ? drain(fds[i].fd, outs[i / 2], out_cap, &len[i])
                                           : drain(fds[i].fd, errs[i / 2], err_cap, &len[i]);
            if (got == 0 || (got < 0 && errno != EINTR)) { /* EOF */
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int k = 0; pid && fds && len && k < n; k++) {
        if (pid[k] <= 0) continue;
        const bool late = fds[2 * k].fd >= 0 || fds[2 * k + 1].fd >= 0; /* past the deadline: killed */
        if (late) kill(-pid[k], SIGKILL);
        for (int i = 2 * k; i < 2 * k + 2; i++)
            if (fds[i].fd >= 0) close(fds[i].fd);
        int st = 0;
        waitpid(pid[k], &st, 0);
        rc[k] = late ? -2 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    free(pid);
    free(fds);
    free(len);
}

void ssh_remote_many(ssh_t *l, ssh_call_t *calls, int n, const char *in_path, double timeout_s) {
    const char **hosts = calloc((size_t)n + 1, sizeof *hosts), **cmds = calloc((size_t)n + 1, sizeof *cmds);
    char **outs = calloc((size_t)n + 1, sizeof *outs), **errs = calloc((size_t)n + 1, sizeof *errs);
    int *rc = calloc((size_t)n + 1, sizeof *rc);
    const bool mem = hosts && cmds && outs && errs && rc;
    for (int k = 0; k < n; k++) {
        calls[k].rc = -1;
        calls[k].out[0] = 0;
        snprintf(calls[k].err, sizeof calls[k].err, "%s", mem ? "" : "out of host memory");
        if (!mem) continue;
        hosts[k] = calls[k].host;
        cmds[k] = calls[k].cmd;
        outs[k] = calls[k].out;
        errs[k] = calls[k].err;
    }
    if (mem) remote_many(l, n, hosts, cmds, in_path, outs, sizeof calls->out, errs, sizeof calls->err, timeout_s, rc);
    for (int k = 0; mem && k < n; k++) calls[k].rc = rc[k];
    free(hosts);
    free(cmds);
    free(outs);
    free(errs);
    free(rc);
}

int ssh_remote(ssh_t *l, const char *host, const char *cmd, const char *in_path, char *out, size_t out_cap,
               char *errout, size_t err_cap) {
    int rc;
    remote_many(l, 1, &host, &cmd, in_path, &out, out_cap, &errout, err_cap, AH_SSH_TIMEOUT_S, &rc);
    return rc;
}

/* An error for a remote call that failed: names the host, the command's last stderr line. */
ah_status_t ssh_remote_error(const ssh_t *l, const char *host, int rc, const char *what, char *errout,
                                ah_error_t *err) {
    size_t n = strlen(errout);
    while (n > 0 && (errout[n - 1] == '\n' || errout[n - 1] == '\r')) errout[--n] = 0;
    const char *last = strrchr(errout, '\n');
    last = last ? last + 1 : errout;
    if (rc == -2)
        return ah_error_set(err, AH_ERR_IO, "host %s: no answer to %s within %.0f s (%s %s ...); check the host is up",
                            host, what, AH_SSH_TIMEOUT_S, l->rsh, host);
    if (rc == -3) return ah_error_set(err, AH_ERR_IO, "host %s: %s %s", host, what, errout);
    return ah_error_set(err, AH_ERR_IO, "host %s: %s failed (%s %s: exit %d%s%s); check that it runs without a "
                        "password or host-key prompt (BatchMode)", host, what, l->rsh, host, rc, *last ? ": " : "",
                        last);
}

/* host added to (on) or removed from the silent list. */
void ssh_set_silent(ssh_t *l, const char *host, bool on) {
    const size_t n = strlen(host);
    char *p = ssh_find_line(l->silent, host);
    if (p) {
        if (!on) memmove(p, p + n + 1, strlen(p + n + 1) + 1);
        return;
    }
    const size_t used = strlen(l->silent);
    if (on && used + n + 2 <= sizeof l->silent) snprintf(l->silent + used, sizeof l->silent - used, "%s\n", host);
}

