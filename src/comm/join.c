/* The world of separate mpirun jobs (comm_mpi.h ah_comm_join_world): one job a host or a group of
 * hosts, joined through MPI's dynamic process calls into one communicator, so that a job can
 * later leave at a notice without ending the others (docs/elastic.md "Can survivors keep their
 * processes?": on Open MPI 4.1 the jobs' lives are apart, a communicator that no longer holds
 * the leaver's ranks goes on after its host dies).
 *
 * AH_WORLD_JOIN=DIR:JOB:NJOBS. Job 0's first rank opens a port; the world, job 0 first, accepts the
 * other NJOBS - 1 jobs in job order (MPI_Comm_accept / MPI_Comm_connect, each merged with
 * MPI_Intercomm_merge; every job's mpirun needs --ompi-server with the same server): before each accept
 * the world's root publishes "TURN PORT WRITER" at that ompi-server under a name made from DIR
 * (MPI_Publish_name; unpublished once the world is built), and job TURN's first rank, which looks the
 * name up every 0.1 s (MPI_Lookup_name), connects when the turn is its own and sends the port to its
 * job's ranks. Through the server, not a file, since each host has its own filesystem: DIR need not
 * exist anywhere, only be the same string in every job; one job connecting at a time, since two
 * connecting at once hung the join on Open MPI 4.1 under load. A value whose writer, on this host, is
 * no longer alive is an earlier run's and waited past. The world then orders its ranks by job and
 * by rank in the job: job 0's ranks, then job 1's, ... as one mpirun of all of them would number
 * them; or, with AH_WORLD_RANKS=r0,r1,... in every job (one entry per rank of the job: its rank i in
 * its own MPI_COMM_WORLD is world rank r_i), as those say: a plan's ranks need not be host-contiguous
 * while the launcher starts one job a host. AH_WORLD_RANKS in some jobs only, with another count than
 * the job's ranks, or not a permutation of 0..N-1 over the world's N ranks is an AH_ERR_USAGE error on
 * every rank (the keys are gathered over the joined world first, so no rank is left waiting). Collective over every rank of every job; the intermediate communicators are freed
 * (MPI_Comm_free: MPI_Comm_disconnect across mpirun jobs hangs on Open MPI 4.1, a PMIx fence the
 * jobs' servers cannot complete). Errors name the variable, the file or the MPI call.
 *
 * A running world admits more jobs at an in-place join (ah_comm_join_admit; runtime/reconfig.h "join"):
 * its root opens a new port and publishes the next jobs' turns (JOB = the world's NJOBS, then each
 * admission's count added), the same accept loop as at the start; a new job is started exactly as a
 * joining job at the start (AH_WORLD_JOIN=DIR:JOB:NJOBS, NJOBS the count after the admission, and
 * AH_WORLD_RANKS) and learns at the merge that it is late: after every merge the root broadcasts
 * whether the world is starting or admitting, and, admitting, its payload (the request), which the late
 * job keeps (ah_comm_join_late). The merged world is ordered by the running ranks' keys (their new
 * ranks) and the new jobs' AH_WORLD_RANKS, checked as above. An admission's turn asks the job to answer
 * (publish "SVC-ack-JOB", its value the port it saw) before it connects, and the world enters MPI_Comm_accept only
 * once it has, for this admission's port (an answer naming another port is an earlier world's: waited past): a job
 * that does not within the request's join_admit_s (runtime/reconfig.h), else AH_JOIN_ADMIT_S seconds (default 60),
 * ends the admission with an error naming it and what was unpublished (its turn, the port). */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_mpi.h"
#include "core/timing.h"

/* the most jobs (a job's ranks are numbered below JOB_RANKS in the ordering key, which fits an int) */
enum { JOB_RANKS = 1 << 20, MAX_JOBS = INT_MAX / JOB_RANKS };
/* How long a job waits for its turn without a change of the published one: AH_JOIN_WAIT_S (the launchers'
 * join_hosts set it for a joining job: the agent's deadline for the join), else PORT_WAIT_S. */
#define PORT_WAIT_S 60.0
/* the most seconds AH_JOIN_WAIT_S and AH_JOIN_ADMIT_S take (more: this; not a number > 0: the default) */
#define ENV_WAIT_MAX_S 1e6
/* An admission's turn ends with this word: the job answers (publishes ack_name) before it connects, and the
 * running world accepts only once it has, within AH_JOIN_ADMIT_S seconds (default ADMIT_WAIT_S): a job that
 * never comes then ends the admission with an error instead of leaving the world in MPI_Comm_accept for good
 * (Open MPI 4.1's accept has no timeout: pmix_base_exchange_timeout did not bound it here). */
#define LATE_MARK "late"
#define ADMIT_WAIT_S 60.0

/* AH_WORLD_RANKS of this rank (world_key): absent in the job, or malformed / not one entry a rank */
enum { RANKS_ABSENT = -1, RANKS_BAD = -2 };

/* This rank's entry of AH_WORLD_RANKS (its world rank), RANKS_ABSENT or RANKS_BAD. */
static int world_key(void) {
    const char *v = getenv("AH_WORLD_RANKS");
    if (!v || !*v) return RANKS_ABSENT;
    int rank = 0, size = 0, n = 0, mine = RANKS_BAD;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (const char *p = v;; p++, n++) {
        char *end = NULL;
        if (*p < '0' || *p > '9') return RANKS_BAD;
        errno = 0;
        const long r = strtol(p, &end, 10);
        if (errno || r > INT_MAX - 1 || (*end && *end != ',')) return RANKS_BAD;
        if (n == rank) mine = (int)r;
        if (!*(p = end)) break;
    }
    return n + 1 == size ? mine : RANKS_BAD;
}

/* Every rank of the joined world `w`: the key that orders it in the world (`given`: its AH_WORLD_RANKS entry or
 * RANKS_ABSENT / RANKS_BAD, at an admission a running rank's new rank; job-major when no rank has one), after checking every job's AH_WORLD_RANKS over the world's gathered keys (the same
 * verdict on every rank). */
static ah_status_t order_key(MPI_Comm w, int job, int given, int *key, ah_error_t *err) {
    int rank = 0, n = 0, mine[2] = {job, given};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(w, &n);
    int *all = malloc(2 * (size_t)n * sizeof *all), *seen = calloc((size_t)n, sizeof *seen);
    int rc = all && seen ? MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, w) : MPI_ERR_NO_MEM;
    ah_status_t st = rc == MPI_SUCCESS ? AH_OK
        : ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN: gathering the jobs' AH_WORLD_RANKS failed (MPI error %d)", rc);
    int with = -1, without = -1;
    for (int i = 0; st == AH_OK && i < n; i++) {
        const int j = all[2 * i], r = all[2 * i + 1];
        if (r == RANKS_BAD)
            st = ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_RANKS of job %d: expected one world rank per rank of the "
                              "job (its mpirun's -np), separated by commas", j);
        else if (r == RANKS_ABSENT)
            without = without < 0 ? j : without;
        else if ((with = with < 0 ? j : with), r >= n)
            st = ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_RANKS of job %d: world rank %d is not below the "
                              "world's %d ranks", j, r, n);
        else if (seen[r]++)
            st = ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_RANKS of job %d: world rank %d is given twice in the "
                              "world (a permutation of 0..%d expected)", j, r, n - 1);
    }
    if (st == AH_OK && with >= 0 && without >= 0)
        st = ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_RANKS is set in job %d but not in job %d: set it in every "
                          "job or none", with, without);
    *key = with >= 0 ? mine[1] : job * JOB_RANKS + rank;
    free(all);
    free(seen);
    return st;
}

/* DIR:JOB:NJOBS, DIR itself possibly holding colons */
static ah_status_t join_spec(const char *spec, char *dir, size_t cap, int *job, int *njobs, ah_error_t *err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    char *c2 = strrchr(buf, ':'), *c1 = NULL, *end1 = NULL, *end2 = NULL;
    if (c2) {
        *c2 = 0;
        c1 = strrchr(buf, ':');
        *njobs = (int)strtol(c2 + 1, &end2, 10);
    }
    if (c1) {
        *c1 = 0;
        *job = (int)strtol(c1 + 1, &end1, 10);
    }
    if (!c1 || c1 == buf || strlen(buf) >= cap || end1 == c1 + 1 || *end1 || end2 == c2 + 1 || *end2 ||
        *njobs < 1 || *njobs > MAX_JOBS || *job < 0 || *job >= *njobs)
        return ah_error_set(err, AH_ERR_USAGE, "AH_WORLD_JOIN=%s: expected DIR:JOB:NJOBS, 0 <= JOB < NJOBS <= %d",
                            spec, MAX_JOBS);
    memcpy(dir, buf, strlen(buf) + 1);
    return AH_OK;
}

/* Who published a port: "HOST PIDNS PID" (PIDNS: /proc/self/ns/pid's link, "-" unknown). */
static void writer_id(char *id, size_t cap) {
    char host[256] = "-", ns[64] = "-";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "-");
    const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 1] = 0;
    for (char *c = ns; *c; c++)
        if (*c == ' ') *c = '_';
    snprintf(id, cap, "%.200s %.60s %ld", host, ns, (long)getpid());
}

/* The name the world's port is published under at the jobs' ompi-server: DIR's (FNV-1a), the same on every
 * host (the launchers give every job the same DIR path, each host's own directory or none). */
static void service_name(const char *dir, char *svc, size_t cap) {
    unsigned long long h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)dir; *p; p++) h = (h ^ *p) * 1099511628211ull;
    snprintf(svc, cap, "autohet-join-%016llx", h);
}

/* The name job `job` publishes when it has seen its turn at an admission (its answer). */
static void ack_name(const char *svc, int job, char *name, size_t cap) { snprintf(name, cap, "%s-ack-%d", svc, job); }

/* The world's root: "TURN PORT WRITER" published (overwriting the last turn): job TURN may connect now; at an
 * admission (late) with " late" after it, which asks the job to answer first (ack_name). A failure is said (the
 * job whose turn it is then waits and fails after its wait, port_wait_s, naming it). */
static void publish_turn(const char *svc, const char *port, int turn, bool late) {
    char value[MPI_MAX_PORT_NAME], id[300];
    writer_id(id, sizeof id);
    const int len = snprintf(value, sizeof value, "%d %s %s%s", turn, port, id, late ? " " LATE_MARK : "");
    if (len >= (int)sizeof value) {
        fprintf(stderr, "autohet: AH_WORLD_JOIN: job %d's turn (%d bytes: the port and the writer \"%s\") is too long "
                "to publish (at most %d)\n", turn, len, id, (int)sizeof value - 1);
        return;
    }
    const int rc = MPI_Publish_name(svc, MPI_INFO_NULL, value);
    if (rc != MPI_SUCCESS)
        fprintf(stderr, "autohet: AH_WORLD_JOIN: publishing job %d's turn as %s at the ompi-server failed (MPI error "
                "%d)\n", turn, svc, rc);
}

/* Whether a published port's writer (writer_id's "HOST PIDNS PID") is a process of this host's PID namespace
 * that is no longer alive: a port left by an earlier run (one that ended before its world was built) with
 * the same DIR on the same ompi-server. A writer on another host cannot be checked: its port counts. */
static bool stale_writer(const char *line) {
    char mine[300], host[256], ns[64], my_host[256], my_ns[64];
    long pid = 0, my_pid = 0;
    writer_id(mine, sizeof mine);
    if (sscanf(line, "%255s %63s %ld", host, ns, &pid) != 3 || sscanf(mine, "%255s %63s %ld", my_host, my_ns, &my_pid) != 3)
        return false;
    if (strcmp(host, my_host) != 0 || strcmp(ns, my_ns) != 0 || strcmp(ns, "-") == 0 || pid <= 0) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Seconds from environment variable name: a number > 0, at most ENV_WAIT_MAX_S (more takes that: an agent's wait
 * for a join past it is still a long one, not the default's 60 s); else dflt. */
static double env_seconds(const char *name, double dflt) {
    const char *v = getenv(name);
    char *end = NULL;
    const double s = v && *v ? strtod(v, &end) : 0;
    return !end || *end || !(s > 0) ? dflt : s < ENV_WAIT_MAX_S ? s : ENV_WAIT_MAX_S;
}

/* A joining job's wait for its turn without a change of the published one (AH_JOIN_WAIT_S, else 60 s), said
 * into said ("60 s" / "75 s (AH_JOIN_WAIT_S)"). */
static double port_wait_s(char *said, size_t cap) {
    const double told = env_seconds("AH_JOIN_WAIT_S", 0);
    snprintf(said, cap, "%g s%s", told > 0 ? told : PORT_WAIT_S, told > 0 ? " (AH_JOIN_WAIT_S)" : "");
    return told > 0 ? told : PORT_WAIT_S;
}

/* A joining job's first rank: the port, once the published turn is this job's; waiting while it is another's
 * or its writer, on this host, is no longer alive (an earlier run's, ended before its world was built, on
 * the same ompi-server and DIR); port_wait_s without a change of the published value end the wait. */
static ah_status_t wait_turn(const char *svc, int job, char *port, ah_error_t *err) {
    char value[MPI_MAX_PORT_NAME], last[MPI_MAX_PORT_NAME] = "", said[64];
    bool stale = false;
    int seen = -1;
    const double wait_s = port_wait_s(said, sizeof said);
    for (double since = ah_now_s(); ah_now_s() - since < wait_s; ah_sleep_s(0.1)) {
        if (MPI_Lookup_name(svc, MPI_INFO_NULL, value) != MPI_SUCCESS) continue;
        if (strcmp(value, last) != 0) since = ah_now_s();
        snprintf(last, sizeof last, "%s", value);
        int turn = -1, at = 0;
        const char *sp = sscanf(value, "%d %n", &turn, &at) == 1 ? strchr(value + at, ' ') : NULL;
        if (!sp || (stale = stale_writer(sp + 1))) continue;
        if ((seen = turn) != job) continue;
        snprintf(port, MPI_MAX_PORT_NAME, "%.*s", (int)(sp - value - at), value + at);
        const size_t vl = strlen(value), ml = strlen(" " LATE_MARK);
        if (vl > ml && strcmp(value + vl - ml, " " LATE_MARK) == 0) { /* an admission: answer, then connect */
            if (getenv("AH_TEST_JOIN_NO_ANSWER")) { /* test-only: a joining job that fails before it answers */
                fprintf(stderr, "autohet: AH_TEST_JOIN_NO_ANSWER: job %d (its wait for its turn %s) exits at its "
                        "turn without answering\n", job, said);
                _exit(3);
            }
            char ack[96];
            ack_name(svc, job, ack, sizeof ack);
            const int rc = MPI_Publish_name(ack, MPI_INFO_NULL, port); /* the answer names the port it saw */
            if (rc != MPI_SUCCESS)
                return ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN: job %d could not answer its turn as %s at the "
                                    "ompi-server (MPI error %d)", job, ack, rc);
        }
        return AH_OK;
    }
    if (stale)
        return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: only a stale port published as %s, its writer no longer "
                            "alive, for %s", svc, said);
    if (seen < 0)
        return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: nothing published as %s for %s (job 0 publishes its "
                            "port; every job's mpirun needs --ompi-server of the same ompi-server)", svc, said);
    return ah_error_set(err, AH_ERR_IO, "AH_WORLD_JOIN: job %d's turn published for %s, not this job's (%d): the "
                        "jobs connect in order", seen, said, job);
}

/* The job's first rank waits for its turn (wait_turn) and sends the port to the job's other ranks, so that
 * the job's ranks connect, or fail, together. */
static ah_status_t job_reads_port(const char *svc, int job, char *port, ah_error_t *err) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ah_status_t st = rank == 0 ? wait_turn(svc, job, port, err) : AH_OK;
    if (rank == 0 && st != AH_OK) port[0] = 0;
    MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (st == AH_OK && !port[0])
        st = ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN: the job's first rank found no turn to connect (its "
                          "message above)");
    return st;
}

/* One more job into *world: accepted by the world (root 0) or, from a job not yet in it, connected;
 * *joined (the world root's count of jobs in it) sent to every rank. */
static int merge_one(MPI_Comm *world, int accepting, const char *port, int *joined) {
    MPI_Comm inter, merged;
    int rc = accepting ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, *world, &inter)
                       : MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Intercomm_merge(inter, accepting ? 0 : 1, &merged);
    MPI_Comm_free(&inter);
    if (rc != MPI_SUCCESS) return rc;
    if (*world != MPI_COMM_WORLD) MPI_Comm_free(world);
    *world = merged;
    int me = 0;
    MPI_Comm_rank(merged, &me);
    if (me == 0) (*joined)++;
    return MPI_Bcast(joined, 1, MPI_INT, 0, merged);
}

/* How long the running world waits for a joining job's answer at an admission: AH_JOIN_ADMIT_S, else
 * ADMIT_WAIT_S. */
double ah_comm_join_admit_s(void) { return env_seconds("AH_JOIN_ADMIT_S", ADMIT_WAIT_S); }

/* The world's root at an admission, job's turn published with `port`: whether job answered (ack_name) within
 * wait_s, its answer naming this port (an answer naming another is an earlier world's turn's, left at the same
 * ompi-server under the same DIR: waited past, never taken for this one). */
static bool job_answered(const char *svc, int job, const char *port, double wait_s) {
    char ack[96], value[MPI_MAX_PORT_NAME];
    ack_name(svc, job, ack, sizeof ack);
    for (const double t0 = ah_now_s(); ah_now_s() - t0 < wait_s; ah_sleep_s(0.05))
        if (MPI_Lookup_name(ack, MPI_INFO_NULL, value) == MPI_SUCCESS && strcmp(value, port) == 0) return true;
    return false;
}

/* The world's side of the turns (at start-up and at an admission): until *joined reaches `upto`, its root
 * publishes the next job's turn and the world accepts it (every rank of the world, the jobs already in). At an
 * admission (late) the world accepts a job only once it answered its turn: *missing gets the job that did not
 * within wait_s (its turn withdrawn: unpublished; the world as it was after the jobs before it), else stays -1. */
static int accept_jobs(MPI_Comm *world, bool root, const char *svc, const char *port, int *joined, int upto, bool late,
                       double wait_s, int *missing) {
    int rc = MPI_SUCCESS;
    *missing = -1;
    while (rc == MPI_SUCCESS && *joined < upto) {
        if (root) publish_turn(svc, port, *joined, late); /* jobs join in order */
        int answered = !late || (root && job_answered(svc, *joined, port, wait_s));
        if (late && (rc = MPI_Bcast(&answered, 1, MPI_INT, 0, *world)) != MPI_SUCCESS) break;
        if (!answered) {
            if (root) MPI_Unpublish_name(svc, MPI_INFO_NULL, port); /* a job that comes later finds no turn */
            *missing = *joined;
            break;
        }
        rc = merge_one(world, 1, port, joined);
    }
    return rc;
}

/* The merged world `w`, every rank: whether it was joined at start-up or admitted into a running world
 * (late: the running world's root sends `payload`, which a late job keeps for ah_comm_join_late), then
 * the order (order_key, `given` this rank's key) and *out split from w (w freed). */
static char *g_late; /* a late job's payload from the running world (NULL: joined at start-up) */
static size_t g_late_len;
static char g_svc[64]; /* the world's service name at the ompi-server (its DIR's) */
static int g_next_job; /* the job number the next admitted job gets (NJOBS of the world, then each admission's) */

static ah_status_t settle(MPI_Comm w, int job, int given, int late, const void *payload, size_t len, MPI_Comm *out,
                          ah_error_t *err) {
    int me = 0, key = 0, rc = MPI_SUCCESS;
    unsigned long long n = len;
    MPI_Comm_rank(w, &me);
    MPI_Bcast(&late, 1, MPI_INT, 0, w);
    if (late) rc = MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, w);
    char *buf = NULL; /* the root sends its payload; a late job keeps what it gets, a running rank drops it */
    if (late && rc == MPI_SUCCESS) {
        buf = me == 0 ? (char *)payload : malloc(n ? n : 1);
        rc = buf ? MPI_Bcast(buf, (int)n, MPI_BYTE, 0, w) : MPI_ERR_NO_MEM;
    }
    if (late && me != 0 && !payload) {
        free(g_late);
        g_late = buf, g_late_len = n;
    } else if (late && me != 0) {
        free(buf);
    }
    ah_status_t st = rc == MPI_SUCCESS ? order_key(w, job, given, &key, err)
        : ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN: the running world's request did not reach the new job "
                       "(MPI error %d)", rc);
    if (st == AH_OK && (rc = MPI_Comm_split(w, 0, key, out)) != MPI_SUCCESS)
        st = ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN: ordering the joined world failed (MPI error %d)", rc);
    MPI_Comm_free(&w);
    return st;
}

ah_status_t ah_comm_join_world(const char *spec, MPI_Comm *out, int *job_out, ah_error_t *err) {
    char dir[PATH_MAX], port[MPI_MAX_PORT_NAME] = {0}, svc[64];
    int job = 0, njobs = 1, rank = 0, joined = 1, rc = MPI_SUCCESS;
    if (join_spec(spec, dir, sizeof dir, &job, &njobs, err) != AH_OK) return err->code;
    *job_out = job;
    g_next_job = njobs;
    service_name(dir, svc, sizeof svc);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN); /* a name not published yet is no abort */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm world = MPI_COMM_WORLD;
    ah_status_t st = AH_OK;
    if (job == 0) { /* the port is its first rank's; the others hear whether it was opened */
        if (rank == 0) rc = MPI_Open_port(MPI_INFO_NULL, port);
        int failed = rank == 0 && rc != MPI_SUCCESS;
        MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (failed)
            return ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN=%s: job 0's first rank could not open the port "
                                "(MPI error %d on it)", spec, rc);
    } else {
        st = job_reads_port(svc, job, port, err);
    }
    if (st == AH_OK && job != 0) rc = merge_one(&world, 0, port, &joined);
    if (st == AH_OK && rc == MPI_SUCCESS) rc = accept_jobs(&world, job == 0 && rank == 0, svc, port, &joined, njobs, false, 0,
                                                             &(int){0});
    if (st != AH_OK) return st;
    if (job == 0 && rank == 0 && port[0]) { /* every job is in: a rerun with this DIR must not find the port */
        if (njobs > 1) MPI_Unpublish_name(svc, MPI_INFO_NULL, port);
        MPI_Close_port(port);
    }
    if (rc != MPI_SUCCESS) {
        if (world != MPI_COMM_WORLD) MPI_Comm_free(&world);
        return ah_error_set(err, AH_ERR_COMM, "AH_WORLD_JOIN=%s: joining the jobs failed (MPI error %d; "
                            "every job's mpirun needs --ompi-server of one ompi-server)", spec, rc);
    }
    if (world == MPI_COMM_WORLD) MPI_Comm_dup(MPI_COMM_WORLD, &world); /* one job: settle frees its own */
    snprintf(g_svc, sizeof g_svc, "%s", svc);
    return settle(world, job, world_key(), 0, NULL, 0, out, err);
}

ah_status_t ah_comm_join_admit(MPI_Comm *world, int job, int njobs, int first, int key, double admit_s,
                               const void *payload, size_t len, ah_error_t *err) {
    if (first > g_next_job) g_next_job = first; /* numbers taken by jobs never admitted (comm.h) */
    const bool asked = admit_s > 0; /* the request's (the agent's), else this process's AH_JOIN_ADMIT_S */
    if (!asked) admit_s = ah_comm_join_admit_s();
    char port[MPI_MAX_PORT_NAME] = {0};
    int me = 0, joined = g_next_job, rc = MPI_SUCCESS;
    MPI_Comm_rank(*world, &me);
    if (me == 0) rc = MPI_Open_port(MPI_INFO_NULL, port);
    int failed = me == 0 && rc != MPI_SUCCESS;
    MPI_Bcast(&failed, 1, MPI_INT, 0, *world);
    if (failed)
        return ah_error_set(err, AH_ERR_COMM, "admitting %d job%s: the world's first rank could not open a port (MPI "
                            "error %d on it)", njobs, njobs == 1 ? "" : "s", rc);
    MPI_Comm w = *world;
    int missing = -1;
    rc = accept_jobs(&w, me == 0, g_svc, port, &joined, g_next_job + njobs, true, admit_s, &missing);
    if (me == 0) {
        if (missing < 0) MPI_Unpublish_name(g_svc, MPI_INFO_NULL, port);
        MPI_Close_port(port);
    }
    if (rc == MPI_SUCCESS && missing >= 0) { /* the world's communicator may be a merged one now: the run ends */
        *world = w;
        return ah_error_set(err, AH_ERR_COMM, "admitting jobs %d..%d into the running world: job %d did not answer "
                            "its turn within %.0f s (%s): not started, or it failed before connecting; its turn "
                            "unpublished (%s at the ompi-server, port %.60s); the in-place join is given up",
                            g_next_job, g_next_job + njobs - 1, missing, admit_s,
                            asked ? "the request's join_admit_s" : "AH_JOIN_ADMIT_S", g_svc, port);
    }
    if (rc != MPI_SUCCESS) /* the world's communicator may be freed already: the run cannot go on */
        return ah_error_set(err, AH_ERR_COMM, "admitting jobs %d..%d into the running world failed (MPI error %d)",
                            g_next_job, g_next_job + njobs - 1, rc);
    g_next_job += njobs;
    *world = MPI_COMM_NULL; /* merge_one freed it */
    return settle(w, job, key, 1, payload, len, world, err);
}

int ah_comm_join_next_agree(MPI_Comm w) { return MPI_Allreduce(MPI_IN_PLACE, &g_next_job, 1, MPI_INT, MPI_MAX, w); }

const void *ah_comm_join_late(size_t *len) {
    *len = g_late_len;
    return g_late;
}
