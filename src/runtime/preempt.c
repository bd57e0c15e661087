/* SIGTERM as a preemption notice. */
#include "runtime/preempt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/json.h"
#include "runtime/host_check.h"
#include "runtime/protocol.h"

static volatile sig_atomic_t g_noticed;
static struct timespec g_when; /* written by the handler before it sets g_noticed */

static void on_term(int sig) {
    (void)sig;
    if (!g_noticed) clock_gettime(CLOCK_MONOTONIC, &g_when); /* async-signal-safe */
    g_noticed = 1;
}

ah_status_t ah_preempt_install(ah_error_t *err) {
    /* SIGPIPE ignored: a write to a process gone (a job that left in place exits while this rank's Open MPI still
     * holds its TCP connection: btl/tcp writes with writev, no MSG_NOSIGNAL) returns EPIPE, which Open MPI reports,
     * naming the peer, and closes that endpoint; the run goes on when the peer is not needed and fails with a
     * written error when it is. Before, the default action killed the rank with nothing written (mpirun's exit
     * status 141: test_agent_inplace pkback, session 24). */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return ah_error_set(err, AH_ERR_INTERNAL, "cannot ignore SIGPIPE: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* MPI and file calls carry on; the flag is read at the step boundary */
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        return ah_error_set(err, AH_ERR_INTERNAL, "cannot install the SIGTERM handler: %s", strerror(errno));
    return AH_OK;
}

/* The pid of the mpirun that started this rank where Open MPI's environment gives it: this host's daemon is mpirun
 * itself (the local daemon's URI is the HNP's) and its session directory is ".../pid.N" (Open MPI 4: the HNP's own
 * pid). 0 otherwise (an orted on another host: ".../jf.N", no pid). */
static pid_t launcher_pid(void) {
    const char *hnp = getenv("OMPI_MCA_orte_hnp_uri"), *local = getenv("OMPI_MCA_orte_local_daemon_uri"),
               *dir = getenv("OMPI_MCA_orte_jobfam_session_dir");
    const char *last = dir ? strrchr(dir, '/') : NULL;
    if (!hnp || !local || strcmp(hnp, local) != 0 || !last || strncmp(last, "/pid.", 5) != 0) return 0;
    char *end = NULL;
    const long v = strtol(last + 5, &end, 10);
    return end != last + 5 && !*end && v > 1 ? (pid_t)v : 0;
}

void ah_preempt_die_with_launcher(void) {
    /* A rank outlived a SIGKILLed mpirun (session 25, scripts/chaos-run.sh mpirunkill): its peers' connections
     * are their own, so the old job trained on, wrote checkpoints and metrics the agent no longer read, beside
     * the job the agent relaunched into the same directories (the relaunch resumed past the history it had:
     * "internal error: the trainer exited normally after 22 of 24 steps"). SIGKILL, not SIGTERM (a notice): a
     * job whose launcher is gone is a failed one, and its ranks cannot save collectively once a peer's mpirun
     * is gone with its ranks. Not for a singleton (no mpirun): its parent is a shell, whose end must not end it. */
    if (!getenv("OMPI_COMM_WORLD_SIZE")) return;
    const pid_t launcher = launcher_pid(), parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return;
    /* The death signal covers a parent that dies after prctl. One that died before: when the environment names
     * mpirun (launcher_pid), its absence now, whenever it went and whatever this process's parent is (a wrapper's
     * child too); else (an orted on another host) a parent that died between the read above and prctl. A daemon
     * that died before that read, unseen here, fails this rank's MPI_Init next ("Unreachable": its PMIx server
     * is gone; checked by hand with mpirun -np 1 bash -c 'kill -9 $PPID; sleep 0.5; autohet train ...'). */
    if ((launcher > 0 && kill(launcher, 0) != 0 && errno == ESRCH) || getppid() != parent) raise(SIGKILL);
}

bool ah_preempt_noticed(void) { return g_noticed != 0; }

ah_status_t ah_preempt_poll(ah_comm_t *c, int my_node, int n_nodes, int *node_hit, bool *any,
                            double *elapsed_s, ah_error_t *err) {
    /* One max-reduce: a flag per node, then the microseconds since this rank's notice. */
    int64_t *v = calloc((size_t)n_nodes + 1, sizeof *v);
    if (!v) return ah_error_set(err, AH_ERR_OOM, "no host memory for the preemption poll");
    if (g_noticed) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        v[my_node] = 1;
        v[n_nodes] = (int64_t)(now.tv_sec - g_when.tv_sec) * 1000000 + (now.tv_nsec - g_when.tv_nsec) / 1000;
    }
    ah_status_t s = ah_comm_allreduce_max_i64(c, v, (size_t)n_nodes + 1, err);
    if (s == AH_OK) {
        *any = false;
        for (int i = 0; i < n_nodes; i++) {
            node_hit[i] = v[i] != 0;
            *any = *any || node_hit[i];
        }
        *elapsed_s = (double)v[n_nodes] * 1e-6;
    }
    free(v);
    return s;
}

static ah_status_t save_in(const char *run_dir, const char *name, json_t *doc, ah_error_t *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", run_dir, name) >= (int)sizeof path) {
        json_decref(doc);
        return ah_error_set(err, AH_ERR_IO, "--run-dir %.200s...: path too long", run_dir);
    }
    /* a --run-dir that does not exist yet is made (every rank may race to: mkdir -p is fine with that) */
    ah_status_t s = doc ? ah_fs_mkdirs(run_dir, err) : ah_error_set(err, AH_ERR_OOM, "out of memory");
    if (s == AH_OK) s = ah_json_save_file(doc, path, err);
    json_decref(doc);
    return s;
}

ah_status_t ah_preempt_write_rank_file(const char *run_dir, int rank, const char *node, int index,
                                       ah_error_t *err) {
    char name[64];
    char host[256];
    snprintf(name, sizeof name, AH_PROTO_RANK_FILE_FMT, rank);
    ah_host_name(host, sizeof host);
    return save_in(run_dir, name,
                   json_pack("{s:i, s:I, s:s, s:i, s:s}", AH_PROTO_RANK_RANK, rank, AH_PROTO_RANK_PID,
                             (json_int_t)getpid(), AH_PROTO_RANK_NODE, node, AH_PROTO_RANK_INDEX, index,
                             AH_PROTO_RANK_HOST, host),
                   err);
}

ah_status_t ah_preempt_write_report(const char *run_dir, int64_t step, bool saved,
                                    const char *const *nodes, int n_nodes, ah_error_t *err) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n_nodes; i++) json_array_append_new(arr, json_string(nodes[i]));
    return save_in(run_dir, AH_PROTO_PREEMPTED_FILE,
                   arr ? json_pack("{s:I, s:b, s:o}", AH_PROTO_PREEMPTED_STEP, (json_int_t)step,
                                   AH_PROTO_PREEMPTED_SAVED, saved, AH_PROTO_PREEMPTED_NODES, arr)
                       : NULL,
                   err);
}

/* msg as a JSON string: as it is when it is UTF-8 (jansson checks; JSON can hold nothing else),
 * else with every non-ASCII byte shown as '?' (a path in a message need not be UTF-8). */
static json_t *json_text(const char *msg) {
    json_t *j = json_string(msg);
    if (j) return j;
    char ascii[AH_ERROR_MSG_MAX];
    size_t i = 0;
    for (; msg[i] && i + 1 < sizeof ascii; i++) ascii[i] = (unsigned char)msg[i] < 0x80 ? msg[i] : '?';
    ascii[i] = 0;
    return json_string(ascii);
}

ah_status_t ah_preempt_write_failure(const char *run_dir, int rank, const ah_error_t *failure, ah_error_t *err) {
    return save_in(run_dir, AH_PROTO_FAILED_FILE,
                   json_pack("{s:i, s:s, s:o}", AH_PROTO_FAILED_RANK, rank, AH_PROTO_FAILED_CLASS,
                             ah_status_key(failure->code), AH_PROTO_FAILED_MESSAGE, json_text(failure->msg)),
                   err);
}
