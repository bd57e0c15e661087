/* Can ranks leave a running mpirun job without ending it? The evidence behind docs/elastic.md
 * "Can survivors keep their processes?" (issue 36), run by bench/mpi_leave_probe.sh.
 *
 *   mpi_leave_probe MODE ROUNDS
 *
 * Every rank but the last LEAVING_RANKS (1) first splits MPI_COMM_WORLD into the ranks that stay
 * (MPI_Comm_split, the leaving rank passing MPI_UNDEFINED), then the leaving rank leaves the way
 * MODE says and the others do ROUNDS all-reduces 0.2 s apart on the split communicator, then
 * finalize. Each rank prints what it did and when (seconds since MPI_Init), so the script can tell
 * whether the leaver was gone before the survivors finished and whether the job survived it:
 *
 *   finalize  the leaver calls MPI_Finalize, then exit(0)
 *   exit      the leaver calls exit(0) without MPI_Finalize
 *   kill      the leaver SIGKILLs itself (a rank killed on a host that stays up)
 *
 *   mpi_leave_probe accept FILE ROUNDS / mpi_leave_probe connect FILE ROUNDS
 *
 * Two separate mpirun jobs joined through MPI's dynamic process calls: the accepting job (one
 * rank) opens a port, writes its name to FILE, accepts; the connecting job (one rank) reads FILE
 * and connects; both merge the intercommunicator and all-reduce once. Then the connecting rank
 * SIGKILLs itself and the accepting one, its error handler MPI_ERRORS_RETURN, tries ROUNDS more
 * all-reduces on the merged communicator and prints what each returned: does a dead peer of
 * another job end the surviving job, or return an error it can handle? */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double t0;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void say(int rank, const char *what) {
    printf("rank %d t=%.2f %s\n", rank, now_s() - t0, what);
    fflush(stdout);
}

static int leave_in_job(const char *mode, int rounds) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int leaving = rank == size - 1;
    MPI_Comm stay;
    MPI_Comm_split(MPI_COMM_WORLD, leaving ? MPI_UNDEFINED : 0, rank, &stay);
    if (leaving) {
        say(rank, mode);
        if (!strcmp(mode, "finalize")) {
            MPI_Finalize();
            say(rank, "finalized, exiting 0");
            exit(0);
        }
        if (!strcmp(mode, "exit")) exit(0);
        raise(SIGKILL);
    }
    MPI_Comm_set_errhandler(stay, MPI_ERRORS_RETURN);
    for (int i = 0; i < rounds; i++) {
        usleep(200000);
        int one = 1, sum = 0;
        const int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, stay);
        char line[96];
        snprintf(line, sizeof line, "allreduce %d on the survivors: rc %d, sum %d", i, rc, sum);
        say(rank, line);
    }
    say(rank, "calling MPI_Finalize");
    MPI_Finalize();
    say(rank, "finalized");
    return 0;
}

static int join_jobs(const char *role, const char *file, int rounds) {
    char port[MPI_MAX_PORT_NAME] = {0};
    MPI_Comm inter, merged;
    const int accepting = !strcmp(role, "accept");
    if (accepting) {
        MPI_Open_port(MPI_INFO_NULL, port);
        FILE *f = fopen(file, "w");
        if (!f) return 1;
        fprintf(f, "%s\n", port);
        fclose(f);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 100 && !(f = fopen(file, "r")); i++) usleep(100000);
        if (!f || !fgets(port, sizeof port, f)) return 1;
        fclose(f);
        port[strcspn(port, "\n")] = 0;
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    }
    MPI_Intercomm_merge(inter, accepting ? 0 : 1, &merged);
    MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    char line[160];
    snprintf(line, sizeof line, "%s: joined, all-reduce over both jobs = %d", role, sum);
    say(0, line);
    if (!accepting) {
        say(0, "connect: SIGKILL to myself");
        raise(SIGKILL);
    }
    for (int i = 0; i < rounds; i++) {
        usleep(200000);
        const int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
        char err[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        if (rc != MPI_SUCCESS) MPI_Error_string(rc, err, &len);
        snprintf(line, sizeof line, "accept: all-reduce %d with the dead job's rank: rc %d %s", i, rc, err);
        say(0, line);
    }
    say(0, "accept: calling MPI_Finalize");
    MPI_Finalize();
    say(0, "accept: finalized");
    return 0;
}

/* The "jobs" mode: one mpirun job a host, joined into one world and left again while everyone is
 * alive. JOIN_AT > 0: the last job joins at that round (the others accept it at the round's
 * boundary, where it asked through DIR/join-request, once the others wrote DIR/started); else every
 * job joins at the start. */
typedef struct {
    const char *dir;
    int job, njobs, leaver, detach, join_at, leave_at, rounds;
    MPI_Comm world;        /* every joined job's ranks, merged */
    MPI_Comm held[16];     /* every communicator that spans jobs (the world's history), to disconnect */
    int nheld;
    int wrank;             /* the rank in world */
    int rank;              /* the rank in the job's own MPI_COMM_WORLD */
} jobs_t;

static void jobs_say(const jobs_t *j, const char *what) {
    printf("job %d rank %d t=%.2f %s\n", j->job, j->rank, now_s() - t0, what);
    fflush(stdout);
}

static int file_exists(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

/* one more job into the world: the world accepts (collective, root 0 holds the port) or this job,
 * not in a world yet, connects (collective over its MPI_COMM_WORLD); both merge, the world's ranks
 * first. *joined, the number of jobs in the world, is the world's root's, sent to every rank. */
static void jobs_merge(jobs_t *j, int accepting, const char *port, int *joined) {
    MPI_Comm inter, merged;
    if (accepting) MPI_Comm_accept(port, MPI_INFO_NULL, 0, j->world, &inter);
    else MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    MPI_Intercomm_merge(inter, accepting ? 0 : 1, &merged);
    j->held[j->nheld++] = inter;
    j->held[j->nheld++] = merged;
    j->world = merged;
    MPI_Comm_set_errhandler(j->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(j->world, &j->wrank);
    if (j->wrank == 0) (*joined)++;
    MPI_Bcast(joined, 1, MPI_INT, 0, j->world);
}

static void jobs_read_port(const jobs_t *j, char *port) {
    char path[512];
    snprintf(path, sizeof path, "%s/port", j->dir);
    FILE *f = NULL;
    for (int i = 0; i < 600 && !(f = fopen(path, "r")); i++) usleep(100000);
    if (!f || !fgets(port, MPI_MAX_PORT_NAME, f)) {
        jobs_say(j, "no port file");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fclose(f);
    port[strcspn(port, "\n")] = 0;
}

/* job 0 opens the port and accepts the jobs that join at the start, in whatever order they come
 * (each joined job accepts the rest with it); the late joiner only reads the port */
static void jobs_join_start(jobs_t *j, char *port) {
    const int at_start = j->njobs - (j->join_at > 0);
    int joined = 1;
    j->world = MPI_COMM_WORLD;
    MPI_Comm_rank(MPI_COMM_WORLD, &j->rank);
    j->wrank = j->rank;
    if (j->job == 0) {
        if (j->wrank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            char text[MPI_MAX_PORT_NAME + 2];
            snprintf(text, sizeof text, "%s\n", port);
            write_file(j->dir, "port", text);
        }
    } else {
        jobs_read_port(j, port);
        if (j->job >= at_start) return;
        jobs_merge(j, 0, port, &joined);
    }
    while (joined < at_start) jobs_merge(j, 1, port, &joined);
    if (j->wrank == 0) write_file(j->dir, "started", "1\n"); /* a late joiner's connect waits for it */
    jobs_say(j, "joined at the start");
}

/* the notice: the survivors split the world, then every rank (all alive) lets go of every
 * communicator that spans jobs, the world's history included, the way DETACH says: 0 keeps them,
 * 1 MPI_Comm_disconnect, 2 MPI_Comm_free. The leaver then waits for its host's end. */
static MPI_Comm jobs_leave(jobs_t *j) {
    static const char *how[] = {"kept its communicators", "disconnected", "freed its communicators"};
    const int leaving = j->job == j->leaver;
    MPI_Comm stay;
    MPI_Comm_split(j->world, leaving ? MPI_UNDEFINED : 0, j->wrank, &stay);
    jobs_say(j, j->detach == 1 ? "calling MPI_Comm_disconnect" : "split");
    for (int i = j->nheld - 1; i >= 0 && j->detach; i--) {
        const int rc = j->detach == 1 ? MPI_Comm_disconnect(&j->held[i]) : MPI_Comm_free(&j->held[i]);
        if (rc != MPI_SUCCESS) jobs_say(j, "letting go of a communicator failed");
    }
    char line[96];
    snprintf(line, sizeof line, "%s: %s", leaving ? "leaver" : "survivor", how[j->detach]);
    jobs_say(j, line);
    if (leaving) for (;;) pause();
    MPI_Comm_set_errhandler(stay, MPI_ERRORS_RETURN);
    return stay;
}

static void jobs_round_say(const jobs_t *j, const char *on, int round, int rc, int sum) {
    char line[200];
    snprintf(line, sizeof line, "all-reduce %d on %s: rc %d, sum %d%s", round, on, rc, sum,
             file_exists(j->dir, "dead") ? " (after the death)" : "");
    jobs_say(j, line);
}

static int jobs_run(jobs_t *j) {
    char port[MPI_MAX_PORT_NAME] = {0};
    int round = 0, joined = j->njobs - (j->join_at > 0);
    jobs_join_start(j, port);
    if (j->world == MPI_COMM_WORLD) { /* the late joiner: one port, so it must not be taken for a starter */
        while (!file_exists(j->dir, "started")) usleep(100000);
        write_file(j->dir, "join-request", "1\n");
        jobs_merge(j, 0, port, &joined);
        MPI_Bcast(&round, 1, MPI_INT, 0, j->world);
        jobs_say(j, "joined the running world");
    }
    for (; round < j->leave_at; round++) {
        usleep(200000);
        const int join = j->wrank == 0 && joined < j->njobs && round >= j->join_at &&
                         file_exists(j->dir, "join-request");
        int in[2] = {1, join}, out[2];
        const int rc = MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, j->world);
        jobs_round_say(j, "the world", round, rc, out[0]);
        if (out[1]) { /* a job asked to join: accepted at this round's boundary */
            jobs_merge(j, 1, port, &joined);
            int next = round + 1;
            MPI_Bcast(&next, 1, MPI_INT, 0, j->world);
        }
    }
    MPI_Comm stay = jobs_leave(j);
    for (; round < j->rounds; round++) {
        usleep(200000);
        int one = 1, sum = 0;
        const int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, stay);
        jobs_round_say(j, "the survivors", round, rc, sum);
    }
    jobs_say(j, "survivor: calling MPI_Finalize");
    MPI_Finalize();
    jobs_say(j, "survivor: finalized");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_leave_probe finalize|exit|kill ROUNDS | accept|connect FILE ROUNDS |\n"
                        "       jobs DIR JOB NJOBS LEAVER DETACH JOIN_AT LEAVE_AT ROUNDS\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    t0 = now_s();
    if (!strcmp(argv[1], "jobs") && argc == 10) {
        jobs_t j = {.dir = argv[2], .job = atoi(argv[3]), .njobs = atoi(argv[4]), .leaver = atoi(argv[5]),
                    .detach = atoi(argv[6]), .join_at = atoi(argv[7]), .leave_at = atoi(argv[8]),
                    .rounds = atoi(argv[9])};
        return jobs_run(&j);
    }
    if (!strcmp(argv[1], "accept") || !strcmp(argv[1], "connect"))
        return join_jobs(argv[1], argv[2], argc > 3 ? atoi(argv[3]) : 5);
    return leave_in_job(argv[1], atoi(argv[2]));
}
