/* One training job: fork/exec of mpirun, its ranks' pids, signals, the metrics tail. */
#include "elastic/job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"

ah_status_t ah_mkdirs(const char *path, ah_error_t *err) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ah_error_set(err, AH_ERR_USAGE, "%s: path too long (at most %zu bytes)", path, sizeof buf - 1);
    for (char *p = buf + 1;; p++) {
        const bool end = *p == 0;
        if (*p != '/' && !end) continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot create the directory: %s", buf, strerror(errno));
        if (end) return AH_OK;
        *p = '/';
    }
}

ah_status_t ah_rm_tree(const char *path, ah_error_t *err) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? AH_OK : ah_error_set(err, AH_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return ah_error_set(err, AH_ERR_IO, "%s: cannot open the directory: %s", path, strerror(errno));
        struct dirent *e;
        ah_status_t s = AH_OK;
        while (s == AH_OK && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char child[1024];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
                s = ah_error_set(err, AH_ERR_IO, "%s/%s: path too long", path, e->d_name);
            else
                s = ah_rm_tree(child, err);
        }
        closedir(d);
        if (s != AH_OK) return s;
        if (rmdir(path) != 0 && errno != ENOENT)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return AH_OK;
    }
    if (unlink(path) != 0 && errno != ENOENT)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return AH_OK;
}

ah_status_t ah_job_start(ah_job_t *j, char *const *argv, const char *run_dir, int n_ranks, ah_error_t *err) {
    memset(j, 0, sizeof *j);
    if (n_ranks > AH_JOB_MAX_RANKS)
        return ah_error_set(err, AH_ERR_USAGE, "the plan has %d devices; the agent handles at most %d",
                            n_ranks, AH_JOB_MAX_RANKS);
    j->n_ranks = n_ranks;
    snprintf(j->run_dir, sizeof j->run_dir, "%s", run_dir);
    snprintf(j->metrics_path, sizeof j->metrics_path, "%s/metrics.jsonl", run_dir);
    ah_status_t s = ah_rm_tree(run_dir, err);
    if (s == AH_OK) s = ah_mkdirs(run_dir, err);
    if (s != AH_OK) return s;
    const pid_t pid = fork();
    if (pid < 0) return ah_error_set(err, AH_ERR_IO, "cannot start %s: fork: %s", argv[0], strerror(errno));
    if (pid == 0) {
        /* Own process group: a terminal's Ctrl-C reaches the agent only, which then stops the job. */
        setpgid(0, 0);
        const int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
        execvp(argv[0], argv);
        /* Only the child reaches this: the parent sees exit status 127 and says what to check. */
        _exit(127);
    }
    setpgid(pid, pid); /* also in the parent, so a signal right after fork reaches the group */
    j->pid = pid;
    return AH_OK;
}

bool ah_job_poll(ah_job_t *j, int *status) {
    if (j->pid <= 0) return true;
    int st = 0;
    const pid_t r = waitpid(j->pid, &st, WNOHANG);
    if (r == 0) return false;
    if (r < 0) {
        *status = -1;
    } else {
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    }
    j->pid = 0;
    return true;
}

void ah_job_scan_ranks(ah_job_t *j) {
    for (int r = 0; r < j->n_ranks; r++) {
        if (j->rank_pid[r] > 0) continue;
        char path[700];
        snprintf(path, sizeof path, "%s/rank-%d.json", j->run_dir, r);
        if (access(path, R_OK) != 0) continue;
        json_t *doc = NULL;
        ah_error_t e;
        /* A file caught half-written fails to parse; it is read again on the next scan. */
        if (ah_json_load_file(path, &doc, &e) != AH_OK) continue;
        int64_t pid = 0;
        char node[64] = "";
        if (ah_json_get_int(doc, path, "pid", true, 1, INT32_MAX, &pid, &e) == AH_OK &&
            ah_json_get_str(doc, path, "node", true, node, sizeof node, &e) == AH_OK) {
            j->rank_pid[r] = (pid_t)pid;
            snprintf(j->rank_node[r], sizeof j->rank_node[r], "%s", node);
            j->n_known++;
        }
        json_decref(doc);
    }
}

int ah_job_signal(ah_job_t *j, const char *node, int sig) {
    ah_job_scan_ranks(j);
    int sent = 0;
    for (int r = 0; r < j->n_ranks; r++) {
        if (j->rank_pid[r] <= 0 || (node && strcmp(j->rank_node[r], node) != 0)) continue;
        if (j->rank_signalled[r] && sig != SIGKILL) continue;
        if (kill(j->rank_pid[r], sig) == 0) sent++;
        j->rank_signalled[r] = true;
    }
    return sent;
}

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

void ah_job_kill(ah_job_t *j) {
    ah_job_signal(j, NULL, SIGKILL);
    if (j->pid <= 0) return;
    /* mpirun puts every rank in a process group of its own, so a signal to mpirun's group misses
     * them: ranks whose rank file has not appeared yet would live on as orphans and train beside
     * the relaunch. Stop mpirun (so it starts no more ranks), kill its children, then it. */
    kill(j->pid, SIGSTOP);
    kill_children(j->pid);
    kill(-j->pid, SIGKILL);
    kill(j->pid, SIGKILL);
    int st;
    waitpid(j->pid, &st, 0);
    j->pid = 0;
}

void ah_job_tail(ah_job_t *j, void (*fn)(void *ctx, json_t *line), void *ctx) {
    FILE *f = fopen(j->metrics_path, "rb");
    if (!f) return;
    if (fseek(f, j->offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        j->offset += (long)n;
        for (size_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                /* A line longer than the buffer is not one of ours: drop its excess. */
                if (j->partial_len + 1 < sizeof j->partial) j->partial[j->partial_len++] = buf[i];
                continue;
            }
            j->partial[j->partial_len] = 0;
            json_t *line = json_loads(j->partial, 0, NULL);
            j->partial_len = 0;
            if (json_is_object(line)) fn(ctx, line);
            json_decref(line);
        }
    }
    fclose(f);
}
