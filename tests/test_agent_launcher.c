/* The local launcher (src/elastic/launcher.h, launch_local.c) alone, without MPI or a trainer: a
 * stand-in "mpirun" (true / false) for start and poll, a forked stand-in rank named by its rank
 * file for the notice, the metrics read as they grow (a line split across two reads), the run
 * directory's files, a host's disk dropped and listed; joined mode (one stand-in mpirun a host, the
 * real ompi-server): each job's command line, poll over the jobs, leave_hosts (a host that left and joined
 * again: only its leaving job reaped). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/fs.h"
#include "core/timing.h"
#include "elastic/launcher.h"
#include "harness.h"
#include "runtime/protocol.h"

static char root[64];

static void write_file(const char *path, const char *text, const char *mode) {
    FILE *f = fopen(path, mode);
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Waits up to 5 s for the job's exit; *status as poll gives it. */
static bool wait_exit(ah_launcher_t *l, int *status) {
    const struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000; i++) {
        if (l->poll(l->ctx, status)) return true;
        nanosleep(&ms, NULL);
    }
    return false;
}

/* Starts a job of no ranks and waits for its exit status (the launcher's "mpirun" is the program
 * whose status it is). */
static int run_to_exit(ah_launcher_t *l, const char *run_dir) {
    ah_plan_t plan;
    memset(&plan, 0, sizeof plan);
    char *train[] = {"autohet", "train", NULL};
    const ah_launch_job_t job = {.plan = &plan, .run_dir = run_dir, .train_argv = train};
    ah_error_t err;
    if (l->start(l->ctx, &job, &err) != AH_OK) {
        CHECK(false, "start: %s", err.msg);
        return -100;
    }
    int status = -100;
    CHECK(wait_exit(l, &status), "the job ends");
    return status;
}

/* The local launcher on root/local running `mpirun` (a stand-in command), its run directory
 * root/<launch> into run_dir; false (a failed check) when it does not open. */
static bool open_local(const char *mpirun, const char *launch, ah_launcher_t *l, char *local, char *run_dir,
                       size_t cap) {
    snprintf(local, cap, "%s/local", root);
    snprintf(run_dir, cap, "%s/%s", root, launch);
    ah_error_t err;
    const ah_launch_local_opts_t o = {.mpirun = mpirun, .mpirun_args = "", .local_root = local};
    const bool ok = ah_launcher_local(&o, l, &err) == AH_OK;
    CHECK(ok, "open: %s", err.msg);
    return ok;
}

static void test_start_and_poll(void) {
    char local[128], run_dir[128];
    for (int ok = 0; ok < 2; ok++) {
        ah_launcher_t l;
        if (!open_local(ok ? "true" : "false", "launch-0", &l, local, run_dir, sizeof local)) continue;
        CHECK(strcmp(l.name, "local") == 0, "its name");
        CHECK_EQ_I64(run_to_exit(&l, run_dir), ok ? 0 : 1);
        struct stat st;
        CHECK(stat(run_dir, &st) == 0 && S_ISDIR(st.st_mode), "the run directory is made");
        int status = 42;
        CHECK(l.poll(l.ctx, &status) && status == 42, "an ended job stays ended, the status untouched");
        ah_launcher_free(&l);
    }
}

static void read_line(void *ctx, json_t *line) {
    int64_t *sum = ctx;
    *sum += json_integer_value(json_object_get(line, AH_PROTO_STEP)) + 1;
}

static void test_files_and_metrics(void) {
    char local[128], run_dir[128], path[256];
    ah_error_t err;
    ah_launcher_t l;
    if (!open_local("true", "launch-1", &l, local, run_dir, sizeof local)) return;
    run_to_exit(&l, run_dir);
    /* metrics: two whole lines, then one split across two reads; a line that is not JSON skipped */
    snprintf(path, sizeof path, "%s/" AH_PROTO_METRICS_FILE, run_dir);
    write_file(path, "{\"step\": 0}\nnot json\n{\"step\": 1}\n{\"st", "w");
    int64_t sum = 0;
    l.read_metrics(l.ctx, read_line, &sum);
    CHECK_EQ_I64(sum, 1 + 2);
    write_file(path, "ep\": 2}\n", "a");
    l.read_metrics(l.ctx, read_line, &sum);
    CHECK_EQ_I64(sum, 1 + 2 + 3);
    /* run files */
    json_t *doc = NULL;
    CHECK(!l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, &doc, &err), "no preempted.json yet");
    snprintf(path, sizeof path, "%s/" AH_PROTO_PREEMPTED_FILE, run_dir);
    write_file(path, "{\"step\": 4, \"saved\": true, \"nodes\": [\"slow-1\"]}", "w");
    CHECK(l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, NULL, NULL), "there");
    CHECK(l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, &doc, &err) && doc, "parsed");
    CHECK_EQ_I64(json_integer_value(json_object_get(doc, AH_PROTO_PREEMPTED_STEP)), 4);
    json_decref(doc);
    write_file(path, "{\"step\": 4, ", "w");
    CHECK(l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, &doc, &err) && !doc, "there but unreadable: %s", err.msg);
    /* a host's disk: listed, dropped */
    char disk[256];
    snprintf(disk, sizeof disk, "%s/slow-1/step-00000004", local);
    CHECK(ah_fs_mkdirs(disk, &err) == AH_OK, "%s", err.msg);
    ah_ckpt_step_info_t *steps = NULL;
    int n = -1;
    CHECK(l.list_steps(l.ctx, "slow-1", &steps, &n, &err) == AH_OK && n == 1 && steps[0].step == 4 &&
              !steps[0].committed,
          "one uncommitted step on slow-1 (%d): %s", n, err.msg);
    free(steps);
    CHECK(l.drop_disk(l.ctx, "slow-1", &err) == AH_OK, "%s", err.msg);
    snprintf(disk, sizeof disk, "%s/slow-1", local);
    CHECK(access(disk, F_OK) != 0, "slow-1's disk is gone");
    CHECK(l.drop_disk(l.ctx, "slow-1", &err) == AH_OK, "dropping it again is fine");
    ah_launcher_free(&l);
}

static void test_notice(void) {
    char local[128], run_dir[128], path[256], text[256];
    ah_error_t err;
    ah_launcher_t l;
    if (!open_local("true", "launch-2", &l, local, run_dir, sizeof local)) return;
    /* a plan of two ranks, so that the launcher looks for rank-0.json and rank-1.json */
    ah_plan_t plan;
    memset(&plan, 0, sizeof plan);
    ah_pipeline_t pl;
    memset(&pl, 0, sizeof pl);
    plan.pipelines = &pl;
    plan.n_pipelines = 1;
    plan.tp = 2;
    ah_stage_t st;
    memset(&st, 0, sizeof st);
    pl.stages = &st;
    pl.n_stages = 1;
    char *train[] = {"autohet", "train", NULL};
    const ah_launch_job_t job = {.plan = &plan, .run_dir = run_dir, .train_argv = train};
    CHECK(ah_plan_device_count(&plan) == 2, "two ranks");
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "%s", err.msg);
    /* a stand-in rank on slow-1 */
    const pid_t rank = fork();
    if (rank == 0) {
        alarm(30); /* never outlives a failed test */
        pause();
        _exit(0);
    }
    CHECK_EQ_I64(l.notice(l.ctx, "slow-1"), 0); /* no rank file yet */
    snprintf(path, sizeof path, "%s/" AH_PROTO_RANK_FILE_FMT, run_dir, 1);
    snprintf(text, sizeof text, "{\"rank\": 1, \"pid\": %d, \"node\": \"slow-1\", \"index\": 0}", (int)rank);
    write_file(path, text, "w");
    /* the hang probe: the paused stand-in used no CPU time in 1 s; with its rank file gone (a change in place
     * removes the files past the new world's size: a parked rank's, asleep in its job) it is not probed */
    char hosts[4][64], what[512];
    CHECK_EQ_I64(l.stalled(l.ctx, hosts, 4, what, sizeof what), 1);
    CHECK(strstr(what, "no CPU time used") && !strcmp(hosts[0], "slow-1"), "stalled: %s", what);
    /* both ranks idle, none stopped: no node's fault, none named (before: both nodes lost, their disks dropped) */
    const pid_t rank0 = fork();
    if (rank0 == 0) {
        alarm(30);
        pause();
        _exit(0);
    }
    char path0[256], text0[256];
    snprintf(path0, sizeof path0, "%s/" AH_PROTO_RANK_FILE_FMT, run_dir, 0);
    snprintf(text0, sizeof text0, "{\"rank\": 0, \"pid\": %d, \"node\": \"fast-0\", \"index\": 0}", (int)rank0);
    write_file(path0, text0, "w");
    CHECK_EQ_I64(l.stalled(l.ctx, hosts, 4, what, sizeof what), 1);
    CHECK(!hosts[0][0] && strstr(what, "every rank of the job used no CPU time"), "every rank idle: %s (%s)", what, hosts[0]);
    unlink(path0);
    kill(rank0, SIGKILL);
    waitpid(rank0, NULL, 0);
    unlink(path);
    CHECK_EQ_I64(l.stalled(l.ctx, hosts, 4, what, sizeof what), 0);
    write_file(path, text, "w");
    CHECK_EQ_I64(l.notice(l.ctx, "fast-0"), 0);
    CHECK_EQ_I64(l.notice(l.ctx, "slow-1"), 1);
    CHECK_EQ_I64(l.notice(l.ctx, "slow-1"), 0); /* once */
    int st_rank = 0;
    waitpid(rank, &st_rank, 0);
    CHECK(WIFSIGNALED(st_rank) && WTERMSIG(st_rank) == SIGTERM, "the rank got SIGTERM");
    int status;
    CHECK(wait_exit(&l, &status) && status == 0, "the job ends");
    ah_launcher_free(&l);
}

/* A stand-in mpirun for joined jobs: writes its arguments to ROOT/args-J (J: AH_WORLD_JOIN's job), waits
 * for ROOT/go-J (at most 20 s) and exits with the status in it. */
static void write_joined_mpirun(char *path, size_t cap) {
    snprintf(path, cap, "%s/mpirun-joined", root);
    char text[1024];
    snprintf(text, sizeof text,
             "#!/bin/sh\nfor a; do case $a in AH_WORLD_JOIN=*) j=${a%%:*}; j=${a#*:}; j=${j%%:*};; esac; done\n"
             "echo \"$*\" >%s/args-$j\ni=0\nwhile [ ! -s %s/go-$j ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n"
             "exit $(cat %s/go-$j 2>/dev/null || echo 9)\n", root, root, root);
    write_file(path, text, "w");
    chmod(path, 0755);
}

static void go(int job, int status) {
    char path[128], text[16];
    snprintf(path, sizeof path, "%s/go-%d", root, job);
    snprintf(text, sizeof text, "%d\n", status);
    write_file(path, text, "w");
}

/* Removes ROOT/go-J and ROOT/args-J of jobs 0..n-1 (an earlier case's stand-in mpirun files). */
static void clear_jobs(int n) {
    char path[128];
    for (int j = 0; j < n; j++) {
        snprintf(path, sizeof path, "%s/go-%d", root, j);
        unlink(path);
        snprintf(path, sizeof path, "%s/args-%d", root, j);
        unlink(path);
    }
}

/* Waits up to 5 s for ROOT/args-J; its text into buf. */
static bool job_args(int job, char *buf, size_t cap) {
    char path[128];
    snprintf(path, sizeof path, "%s/args-%d", root, job);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        const size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        if (n > 0 && buf[n - 1] == '\n') return true;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    return false;
}

/* Waits up to 5 s for a child of this process to have exited, not reaped (a zombie). */
static bool child_zombie(void) {
    char path[300], text[512];
    for (int i = 0; i < 500; i++, nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL)) {
        DIR *proc = opendir("/proc");
        bool found = false;
        for (struct dirent *e; proc && !found && (e = readdir(proc));) {
            snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
            FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
            if (!f) continue;
            text[fread(text, 1, sizeof text - 1, f)] = 0;
            fclose(f);
            const char *end = strrchr(text, ')');
            char state = 0;
            int ppid = 0;
            found = end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid() && state == 'Z';
        }
        if (proc) closedir(proc);
        if (found) return true;
    }
    return false;
}

/* The joined cases' plan of three ranks, A B A (ranks 0 and 2 on host A): job 0 is A's two ranks, job 1 B's one. */
typedef struct {
    ah_node_t nodes[2];
    ah_stage_t st[3];
    ah_pipeline_t pl;
    ah_plan_t plan;
} aba_t;

static void aba_plan(aba_t *a) {
    memset(a, 0, sizeof *a);
    snprintf(a->nodes[0].name, sizeof a->nodes[0].name, "A");
    snprintf(a->nodes[1].name, sizeof a->nodes[1].name, "B");
    a->st[1].devices[0].node = 1;
    a->st[2].devices[0].index = 1;
    a->pl = (ah_pipeline_t){.micro_batches = 1, .n_stages = 3, .stages = a->st};
    a->plan = (ah_plan_t){.pipelines = &a->pl, .n_pipelines = 1, .tp = 1, .cluster = {.nodes = a->nodes, .n_nodes = 2}};
}

/* Joined: a plan of three ranks, A B A (ranks 0 and 2 on host A): job 0 is A's two ranks, job 1 B's one. */
static void test_joined(void) {
    if (system("command -v ompi-server >/dev/null 2>&1") != 0) {
        printf("  no ompi-server: joined mode not tested\n");
        return;
    }
    char mpirun[128], local[128], run_dir[128], args[2048], want[512];
    write_joined_mpirun(mpirun, sizeof mpirun);
    aba_t aba;
    aba_plan(&aba);
    ah_plan_t plan = aba.plan;
    char *train[] = {"autohet", "train", NULL};
    for (int round = 0; round < 4; round++) {
        ah_launcher_t l;
        char launch[32];
        snprintf(launch, sizeof launch, "launch-j%d", round);
        if (!open_local(mpirun, launch, &l, local, run_dir, sizeof local)) return;
        clear_jobs(2);
        const ah_launch_job_t job = {.plan = &plan, .run_dir = run_dir, .train_argv = train, .joined = true};
        ah_error_t err;
        CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start joined: %s", err.msg);
        for (int j = 0; j < 2; j++) {
            CHECK(job_args(j, args, sizeof args), "job %d started", j);
            snprintf(want, sizeof want, "--ompi-server file:%s/ompi-server.uri -x AH_WORLD_JOIN=%s/join:%d:2 -x "
                     "AH_WORLD_RANKS=%s -np %d autohet train", run_dir, run_dir, j, j ? "1" : "0,2", j ? 1 : 2);
            CHECK(strstr(args, want) != NULL, "job %d's command line: %s (wanted %s)", j, args, want);
        }
        int status = -100;
        CHECK(!l.poll(l.ctx, &status), "running");
        if (round == 0) { /* B leaves in place (exit 0), then A ends with a notice's 75 */
            go(1, 0);
            const char *b[] = {"B"};
            CHECK_EQ_I64(l.leave_hosts(l.ctx, b, 1, 5.0), 1);
            CHECK(!l.poll(l.ctx, &status), "A still runs after B left");
            go(0, AH_PROTO_EXIT_PREEMPTED);
            CHECK(wait_exit(&l, &status) && status == AH_PROTO_EXIT_PREEMPTED, "A's 75 (%d)", status);
        } else if (round == 1) { /* B fails: poll says so at once, A still running until stop */
            go(1, 3);
            CHECK(wait_exit(&l, &status) && status == 3, "B's 3 at once (%d)", status);
            l.stop(l.ctx);
        } else if (round == 3) { /* the "reconfigure" event read, B's leaving job fails: not the job's end */
            snprintf(args, sizeof args, "%s/" AH_PROTO_METRICS_FILE, run_dir);
            write_file(args, "{\"event\": \"reconfigure\", \"step\": 3, \"leave\": [1]}\n", "w");
            int64_t sum = 0;
            l.read_metrics(l.ctx, read_line, &sum);
            CHECK_EQ_I64(sum, 4);
            go(1, 3);
            CHECK(child_zombie(), "B's job exited");
            const bool ended = l.poll(l.ctx, &status);
            CHECK(!ended, "B's 3 after the change is not the job's (status %d)", status);
            const char *b[] = {"B"};
            CHECK_EQ_I64(l.leave_hosts(l.ctx, b, 1, 5.0), 0);
            go(0, 0);
            CHECK(wait_exit(&l, &status) && status == 0, "A's 0 (%d)", status);
        } else { /* B does not leave within the wait: killed, not counted */
            const char *b[] = {"B"};
            CHECK_EQ_I64(l.leave_hosts(l.ctx, b, 1, 0.2), 0);
            go(0, 0);
            CHECK(wait_exit(&l, &status) && status == 0, "A's 0 (%d)", status);
        }
        ah_launcher_free(&l);
    }
}

/* Joined, then host C joins in place (join_hosts): the plan after it is A B A C, so C's job is job 2 of 3 with
 * plan rank 3; a host the plan does not use is refused and starts nothing; poll then waits for all three. */
static void test_join_hosts(void) {
    if (system("command -v ompi-server >/dev/null 2>&1") != 0) return;
    char mpirun[128], local[128], run_dir[128], args[2048], want[512];
    write_joined_mpirun(mpirun, sizeof mpirun);
    ah_node_t nodes[3];
    memset(nodes, 0, sizeof nodes);
    for (int k = 0; k < 3; k++) snprintf(nodes[k].name, sizeof nodes[k].name, "%c", 'A' + k);
    ah_stage_t st[4];
    memset(st, 0, sizeof st);
    st[1].devices[0].node = 1;
    st[2].devices[0].index = 1;
    st[3].devices[0].node = 2;
    ah_pipeline_t pl = {.micro_batches = 1, .n_stages = 3, .stages = st};
    ah_plan_t plan;
    memset(&plan, 0, sizeof plan);
    plan.pipelines = &pl;
    plan.n_pipelines = 1;
    plan.tp = 1;
    plan.cluster.nodes = nodes;
    plan.cluster.n_nodes = 3;
    char *train[] = {"autohet", "train", NULL};
    ah_launcher_t l;
    if (!open_local(mpirun, "launch-join", &l, local, run_dir, sizeof local)) return;
    clear_jobs(3);
    const ah_launch_job_t job = {.plan = &plan, .run_dir = run_dir, .train_argv = train, .joined = true};
    ah_error_t err;
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start joined: %s", err.msg);
    CHECK(job_args(0, args, sizeof args) && job_args(1, args, sizeof args), "jobs 0 and 1 started");
    pl.n_stages = 4; /* the plan after the join */
    const char *d[] = {"D"}, *c[] = {"C"};
    CHECK(l.join_hosts(l.ctx, &job, d, 1, &err) == AH_ERR_USAGE && strstr(err.msg, "host D joins but the plan"),
          "D refused: %s", err.msg);
    ah_launch_job_t far = job; /* the agent's numbering past the launcher's cap: refused, naming the numbers */
    far.join_first = 300;
    CHECK(l.join_hosts(l.ctx, &far, c, 1, &err) == AH_ERR_USAGE && strstr(err.msg, "the joining job would be number "
          "300..300 of this launch: the local launcher numbers at most 256 jobs a launch"), "job 300 refused: %s", err.msg);
    CHECK(l.join_hosts(l.ctx, &job, c, 1, &err) == AH_OK, "C joins: %s", err.msg);
    CHECK(job_args(2, args, sizeof args), "job 2 started");
    snprintf(want, sizeof want, "--ompi-server file:%s/ompi-server.uri -x AH_WORLD_JOIN=%s/join:2:3 -x "
             "AH_WORLD_RANKS=3 -np 1 autohet train", run_dir, run_dir);
    CHECK(strstr(args, want) != NULL, "job 2's command line: %s (wanted %s)", args, want);
    int status = -100;
    go(0, 0);
    go(1, 0);
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    CHECK(!l.poll(l.ctx, &status), "C's job still runs after A's and B's ended");
    go(2, 0);
    CHECK(wait_exit(&l, &status) && status == 0, "all three 0 (%d)", status);
    ah_launcher_free(&l);
}

/* Joined A B A; B leaves in place (the "reconfigure" event read: job 1 leaving) and exits 0, then joins again (job 2
 * on B, in the world once the join's event is read); the leaver reaped (leave_hosts B) while job 2 is joining, as
 * the agent does after a change it adopted, is job 1 alone: B's new job runs on to its own end. Before, B's new
 * job was taken too, waited for the whole wait, killed and forgotten (test_agent_inplace pkback's "mpirun exit
 * status 141": the survivors' next writes to its rank got EPIPE). */
static void test_rejoin_host(void) {
    if (system("command -v ompi-server >/dev/null 2>&1") != 0) return;
    char mpirun[128], local[128], run_dir[128], path[256];
    write_joined_mpirun(mpirun, sizeof mpirun);
    aba_t aba;
    aba_plan(&aba);
    ah_plan_t plan = aba.plan;
    char *train[] = {"autohet", "train", NULL};
    ah_launcher_t l;
    if (!open_local(mpirun, "launch-rejoin", &l, local, run_dir, sizeof local)) return;
    clear_jobs(3);
    const ah_launch_job_t job = {.plan = &plan, .run_dir = run_dir, .train_argv = train, .joined = true};
    ah_error_t err;
    char args[2048];
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start joined: %s", err.msg);
    CHECK(job_args(0, args, sizeof args) && job_args(1, args, sizeof args), "jobs 0 and 1 started");
    snprintf(path, sizeof path, "%s/" AH_PROTO_METRICS_FILE, run_dir);
    write_file(path, "{\"event\": \"reconfigure\", \"step\": 3, \"leave\": [1]}\n", "w");
    int64_t sum = 0;
    l.read_metrics(l.ctx, read_line, &sum);
    go(1, 0);
    CHECK(child_zombie(), "B's leaving job exited");
    const char *b[] = {"B"};
    CHECK(l.join_hosts(l.ctx, &job, b, 1, &err) == AH_OK, "B joins again: %s", err.msg);
    CHECK(job_args(2, args, sizeof args), "job 2 started on B");
    const double t0 = ah_now_s(); /* the agent's order: the leaver reaped while B's new job is still joining */
    CHECK_EQ_I64(l.leave_hosts(l.ctx, b, 1, 2.0), 1);
    CHECK(ah_now_s() - t0 < 1.5, "the leaver reaped at once, B's new job not waited for (%.2f s)", ah_now_s() - t0);
    write_file(path, "{\"event\": \"reconfigure\", \"step\": 5, \"join\": 1}\n", "a");
    l.read_metrics(l.ctx, read_line, &sum);
    CHECK_EQ_I64(sum, 4 + 6);
    go(0, 0);
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    int status = -100;
    CHECK(!l.poll(l.ctx, &status), "B's new job still runs after A's end (status %d)", status);
    go(2, 0);
    CHECK(wait_exit(&l, &status) && status == 0, "A's and B's new job's 0 (%d)", status);
    ah_launcher_free(&l);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/ah_test_launcher_XXXXXX");
    if (!mkdtemp(root)) {
        CHECK(false, "mkdtemp");
        return ah_test_finish();
    }
    test_start_and_poll();
    test_files_and_metrics();
    test_notice();
    test_joined();
    test_join_hosts();
    test_rejoin_host();
    ah_error_t err;
    ah_fs_rm_tree(root, &err);
    return ah_test_finish();
}
