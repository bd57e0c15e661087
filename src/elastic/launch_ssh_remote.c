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

/* RSH HOST CMD, stdin from in_path (NULL: /dev/null). out gets its stdout, errout its stderr (both
 * truncated to their capacity). Returns the exit status; -1 when it could not run, -2 when it
 * passed the deadline (killed), -3 when host is silent (not tried). */

int ssh_remote(ssh_t *l, const char *host, const char *cmd, const char *in_path, char *out, size_t out_cap,
                  char *errout, size_t err_cap) {
    int po[2], pe[2];
    out[0] = errout[0] = 0;
    /* a host that did not answer is not waited on again (a hung host: the remote command's whole
     * timeout each time) until a test command (reachable) gets an answer */
    if (ssh_find_line(l->silent, host)) {
        snprintf(errout, err_cap, "not tried: it did not answer the last test command");
        return -3;
    }
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
    size_t lo = 0, le = 0;
    const double deadline = ah_now_s() + AH_SSH_TIMEOUT_S;
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    int open_fds = 2;
    bool late = false;
    while (open_fds > 0) {
        const double left = deadline - ah_now_s();
        if (left <= 0) {
            late = true;
            break;
        }
        if (poll(fds, 2, (int)(left * 1000) + 1) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t got = i == 0 ? drain(po[0], out, out_cap, &lo) : drain(pe[0], errout, err_cap, &le);
            if (got == 0 || (got < 0 && errno != EINTR)) { /* EOF */
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    if (late) kill(-pid, SIGKILL);
    close(po[0]);
    close(pe[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (late) return -2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

