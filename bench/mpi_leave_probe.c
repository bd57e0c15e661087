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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_leave_probe finalize|exit|kill ROUNDS | accept|connect FILE ROUNDS\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    t0 = now_s();
    if (!strcmp(argv[1], "accept") || !strcmp(argv[1], "connect"))
        return join_jobs(argv[1], argv[2], argc > 3 ? atoi(argv[3]) : 5);
    return leave_in_job(argv[1], atoi(argv[2]));
}
