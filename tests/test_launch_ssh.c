/* The ssh launcher (src/elastic/launcher.h, launch_ssh.c) alone, without ssh, MPI or a trainer:
 * a stand-in remote command (a script that runs the command here, or fails for host "bad" as
 * ssh does for a key it may not use) and a stand-in "mpirun" (true). Checked: option errors named;
 * a host that fails named with the command's own message, at reachable and at start, and once its
 * test command failed not asked anything else until one answers; each launch's hostfile in the
 * plan's rank order; a notice to one host's ranks by the pid of its rank file, on
 * that host; metrics and the preemption report read through the remote command; a disk dropped
 * and listed there (the real autohet ckpt ls), a step that cannot be verified said why. tests/test_cluster_run.sh runs it over real sshd. */
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

static char root[64], rsh[128], autohet[512], disks[128];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static bool open_ssh(const char *rsh_cmd, const char *local_root, ah_launcher_t *l, ah_error_t *err) {
    const ah_launch_ssh_opts_t o = {.mpirun = "true", .rsh = rsh_cmd, .local_root = local_root, .autohet = autohet};
    return ah_launcher_ssh(&o, l, err) == AH_OK;
}

static void test_options(void) {
    ah_launcher_t l;
    ah_error_t err;
    CHECK(!open_ssh(rsh, NULL, &l, &err) && strstr(err.msg, "needs --local-root PATH"), "no --local-root: %s", err.msg);
    CHECK(!open_ssh(rsh, "/tmp/it's", &l, &err) && strstr(err.msg, "--local-root /tmp/it's: a quote"),
          "a quote in --local-root: %s", err.msg);
    CHECK(!open_ssh("  ", disks, &l, &err) && strstr(err.msg, "give a command"), "a blank --rsh-agent: %s", err.msg);
    CHECK(open_ssh(rsh, disks, &l, &err), "%s", err.msg);
    CHECK(strcmp(l.name, "ssh") == 0, "its name");
    CHECK(l.reachable(l.ctx, "h0", &err) == AH_OK, "h0 answers: %s", err.msg);
    CHECK(l.reachable(l.ctx, "bad", &err) != AH_OK && strstr(err.msg, "host bad: a test command failed") &&
              strstr(err.msg, "exit 255: Permission denied (publickey)."),
          "bad is named with the command's message: %s", err.msg);
    ah_launcher_free(&l);
}

/* A plan of one pipeline of one stage, TP 2, on nodes n0 and n1 (rank 0 on n0, rank 1 on n1). */
typedef struct two_ranks {
    ah_plan_t plan;
    ah_pipeline_t pl;
    ah_stage_t st;
    ah_node_t nodes[3]; /* the third for test_joined's join */
} two_ranks_t;

static void two_ranks(two_ranks_t *t, const char *n0, const char *n1) {
    memset(t, 0, sizeof *t);
    t->plan.pipelines = &t->pl;
    t->plan.n_pipelines = 1;
    t->plan.tp = 2;
    t->pl.stages = &t->st;
    t->pl.n_stages = 1;
    t->st.devices[0] = (ah_device_ref_t){.node = 0, .index = 3};
    t->st.devices[1] = (ah_device_ref_t){.node = 1, .index = 0};
    snprintf(t->nodes[0].name, sizeof t->nodes[0].name, "%s", n0);
    snprintf(t->nodes[1].name, sizeof t->nodes[1].name, "%s", n1);
    t->plan.cluster.nodes = t->nodes;
    t->plan.cluster.n_nodes = 2;
}

static bool wait_exit(ah_launcher_t *l, int *status) {
    const struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000; i++) {
        if (l->poll(l->ctx, status)) return true;
        nanosleep(&ms, NULL);
    }
    return false;
}

static void count_line(void *ctx, json_t *line) {
    (void)line;
    (*(int *)ctx)++;
}

static void test_launch(void) {
    ah_launcher_t l;
    ah_error_t err;
    const bool opened = open_ssh(rsh, disks, &l, &err);
    CHECK(opened, "%s", err.msg);
    if (!opened) return;
    char run_dir[160], plan_path[160], path[256], text[256];
    snprintf(run_dir, sizeof run_dir, "%s/work/launch-0", root);
    snprintf(plan_path, sizeof plan_path, "%s/work/plan-0.json", root);
    ah_fs_mkdirs(run_dir, &err);
    write_file(plan_path, "{}\n");
    char *train[] = {"autohet", "train", NULL};
    two_ranks_t t;
    two_ranks(&t, "h0", "bad");
    ah_launch_job_t job = {.plan = &t.plan, .plan_path = plan_path, .run_dir = run_dir, .train_argv = train};
    CHECK(l.start(l.ctx, &job, &err) != AH_OK && strstr(err.msg, "host bad: preparing the run directory failed"),
          "a plan host that fails is named at start: %s", err.msg);
    two_ranks(&t, "h0", "h1");
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    /* the hostfile: rank 0 on h0 (GPU 3), rank 1 on h1 (GPU 0) */
    snprintf(path, sizeof path, "%s/hosts", run_dir);
    FILE *f = fopen(path, "r");
    char got[512] = "";
    CHECK(f != NULL, "no %s", path);
    if (f) {
        got[fread(got, 1, sizeof got - 1, f)] = 0;
        fclose(f);
    }
    CHECK(strstr(got, "# rank 0: gpu=3\nh0\n# rank 1: gpu=0\nh1\n") != NULL, "hostfile:\n%s", got);
    /* a stand-in rank on h1 */
    const pid_t rank = fork();
    if (rank == 0) {
        alarm(30); /* never outlives a failed test */
        pause();
        _exit(0);
    }
    CHECK_EQ_I64(l.notice(l.ctx, "h1"), 0); /* no rank file yet */
    snprintf(path, sizeof path, "%s/" AH_PROTO_RANK_FILE_FMT, run_dir, 1);
    snprintf(text, sizeof text, "{\n  \"rank\": 1,\n  \"pid\": %d,\n  \"node\": \"h1\"\n}\n", (int)rank);
    write_file(path, text);
    CHECK_EQ_I64(l.notice(l.ctx, "h0"), 0);
    const struct timespec wait = {0, 600000000};
    nanosleep(&wait, NULL); /* a retry waits AH_SSH_POLL_S */
    CHECK_EQ_I64(l.notice(l.ctx, "h1"), 1);
    CHECK_EQ_I64(l.notice(l.ctx, "h1"), 0); /* once */
    int st_rank = 0;
    waitpid(rank, &st_rank, 0);
    CHECK(WIFSIGNALED(st_rank) && WTERMSIG(st_rank) == SIGTERM, "the rank got SIGTERM");
    int status = -1;
    CHECK(wait_exit(&l, &status) && status == 0, "the job ends");
    /* metrics and the report, from rank 0's host: complete lines only */
    snprintf(path, sizeof path, "%s/" AH_PROTO_METRICS_FILE, run_dir);
    write_file(path, "{\"step\": 0}\n{\"step\": 1}\n{\"st");
    int lines = 0;
    l.read_metrics(l.ctx, count_line, &lines);
    CHECK_EQ_I64(lines, 2);
    write_file(path, "{\"step\": 0}\n{\"step\": 1}\n{\"step\": 2}\n");
    l.read_metrics(l.ctx, count_line, &lines);
    CHECK_EQ_I64(lines, 3);
    CHECK(!l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, NULL, &err), "no report yet");
    snprintf(path, sizeof path, "%s/" AH_PROTO_PREEMPTED_FILE, run_dir);
    write_file(path, "{\"step\": 7}");
    json_t *doc = NULL;
    CHECK(l.run_file(l.ctx, AH_PROTO_PREEMPTED_FILE, &doc, &err) && json_integer_value(json_object_get(doc, "step")) == 7,
          "the report read");
    json_decref(doc);
    /* a disk: listed and dropped on its host */
    snprintf(path, sizeof path, "%s/h1/step-00000004", disks);
    ah_fs_mkdirs(path, &err);
    ah_ckpt_step_info_t *steps = NULL;
    int n = -1;
    CHECK(l.list_steps(l.ctx, "h1", &steps, &n, &err) == AH_OK && n == 1 && steps[0].step == 4 && !steps[0].committed,
          "one uncommitted step on h1 (%d): %s", n, err.msg);
    free(steps);
    CHECK(l.list_steps(l.ctx, "h0", &steps, &n, &err) == AH_OK && n == 0, "h0's disk is empty: %s", err.msg);
    free(steps);
    CHECK(l.list_steps(l.ctx, "bad", &steps, &n, &err) != AH_OK && strstr(err.msg, "host bad"), "%s", err.msg);
    int bad = -1;
    CHECK(l.verify_step(l.ctx, "h1", 4, &bad, &err) != AH_OK && strstr(err.msg, "host h1: autohet ckpt verify failed") &&
              strstr(err.msg, "no committed checkpoint step 4 in --local-root"),
          "an uncommitted step does not verify, and says why: %s", err.msg);
    CHECK(l.verify_step(l.ctx, "bad", 4, &bad, &err) != AH_OK && strstr(err.msg, "host bad"), "%s", err.msg);
    CHECK(l.drop_disk(l.ctx, "h1", &err) == AH_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/h1", disks);
    CHECK(access(path, F_OK) != 0, "h1's disk is gone");
    /* a host that did not answer its test command is asked nothing else until it answers one */
    snprintf(path, sizeof path, "%s/down-h0", root);
    write_file(path, "");
    CHECK(l.reachable(l.ctx, "h0", &err) != AH_OK && strstr(err.msg, "Connection refused"), "h0 down: %s", err.msg);
    unlink(path);
    CHECK(l.list_steps(l.ctx, "h0", &steps, &n, &err) != AH_OK && strstr(err.msg, "host h0: autohet ckpt ls not tried"),
          "h0 not asked again: %s", err.msg);
    CHECK(l.reachable(l.ctx, "h0", &err) == AH_OK, "h0 answers again: %s", err.msg);
    CHECK(l.list_steps(l.ctx, "h0", &steps, &n, &err) == AH_OK && n == 0, "h0 asked again: %s", err.msg);
    free(steps);
    ah_launcher_free(&l);
}

/* A joined launch (launcher.h job->joined) through the stand-in remote command and a stand-in mpirun
 * (ROOT/mpirun: its job's environment and words into RUN/args-J, then as ROOT/act-J says: "sleep", "fail"
 * (exit 3) or exit 0): one mpirun a host, each told its job and world ranks, the ompi-server's URI on its
 * host; poll over the jobs; stop ending a job still running; leave_hosts waiting for one host's job and
 * killing another's past its wait, the ranks then read again from the rank files (the newest of a pid). */
static void act(int job, const char *what) {
    char path[160];
    snprintf(path, sizeof path, "%s/act-%d", root, job);
    write_file(path, what);
}

static int pid_file(const char *run_dir, int job) {
    char path[256], text[64] = "";
    snprintf(path, sizeof path, "%s/mpirun-%d.pid", run_dir, job);
    FILE *f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        fclose(f);
    }
    return atoi(text);
}

static bool alive_pid_file(const char *run_dir, int job) {
    const int pid = pid_file(run_dir, job);
    return pid > 0 && kill(pid, 0) == 0;
}

/* join_hosts: h2 joins the running h0, h1 job as job 2 of 3 (the plan after it: ranks on h0, h1, h2), its
 * command told so and the ompi-server's URI on its host; a host the plan does not use is refused. */
static void test_join_hosts(ah_launcher_t *l, const ah_launch_job_t *job, const two_ranks_t *t, const char *run_dir) {
    char path[256], got[2048] = "", want[400];
    act(0, "sleep");
    act(1, "sleep");
    act(2, "");
    ah_error_t err;
    int status = -1;
    CHECK(l->start(l->ctx, job, &err) == AH_OK, "start: %s", err.msg);
    two_ranks_t t3 = *t;
    t3.plan.pipelines = &t3.pl, t3.pl.stages = &t3.st, t3.plan.cluster.nodes = t3.nodes;
    t3.plan.tp = 3, t3.plan.cluster.n_nodes = 3;
    t3.st.devices[2] = (ah_device_ref_t){.node = 2, .index = 0};
    snprintf(t3.nodes[2].name, sizeof t3.nodes[2].name, "h2");
    ah_launch_job_t job3 = *job;
    job3.plan = &t3.plan;
    const char *h9[] = {"h9"}, *h2[] = {"h2"};
    CHECK(l->join_hosts(l->ctx, &job3, h9, 1, &err) == AH_ERR_USAGE && strstr(err.msg, "host h9 joins but the plan"),
          "h9 refused: %s", err.msg);
    CHECK(l->join_hosts(l->ctx, &job3, h2, 1, &err) == AH_OK, "h2 joins: %s", err.msg);
    snprintf(path, sizeof path, "%s/args-2", run_dir);
    for (int i = 0; i < 500 && !strstr(got, "\n"); i++, nanosleep(&(struct timespec){0, 10000000}, NULL)) {
        FILE *f = fopen(path, "r");
        got[0] = 0;
        if (f) {
            got[fread(got, 1, sizeof got - 1, f)] = 0;
            fclose(f);
        }
    }
    snprintf(want, sizeof want, "%s/join:2:3 2 ", run_dir); /* job 2 of 3, plan rank 2 */
    CHECK(strncmp(got, want, strlen(want)) == 0 && strstr(got, " -np 1 autohet train --check-host\n"), "job 2: %s",
          got);
    CHECK(!l->poll(l->ctx, &status), "h0's and h1's jobs still run");
    l->stop(l->ctx);
    CHECK(!alive_pid_file(run_dir, 0) && !alive_pid_file(run_dir, 1), "stop ended jobs 0 and 1");
    /* the plan after the join makes h2's rank rank 0 (h2, h1, h0): the request still goes to the running world's
     * rank 0's host, h0, last (the one that reads it) */
    CHECK(l->start(l->ctx, job, &err) == AH_OK, "start: %s", err.msg);
    t3.st.devices[0] = (ah_device_ref_t){.node = 2, .index = 0};
    t3.st.devices[2] = (ah_device_ref_t){.node = 0, .index = 3};
    CHECK(l->join_hosts(l->ctx, &job3, h2, 1, &err) == AH_OK, "h2 joins: %s", err.msg);
    snprintf(path, sizeof path, "%s/put.log", root);
    unlink(path);
    CHECK(l->put_run_file(l->ctx, AH_PROTO_RECONFIG_FILE, job->plan_path, &err) == AH_OK, "put: %s", err.msg);
    FILE *f = fopen(path, "r");
    got[0] = 0;
    if (f) {
        got[fread(got, 1, sizeof got - 1, f)] = 0;
        fclose(f);
    }
    const size_t n = strlen(got);
    CHECK(n >= 3 && strcmp(got + n - 3, "h0\n") == 0 && strstr(got, "h2\n"), "the hosts written, h0 last: %s", got);
    l->stop(l->ctx);
}

/* Waits up to 5 s for pid (a child of this process) to have exited, not reaped (a zombie). */
static bool zombie(int pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 500; i++, nanosleep(&(struct timespec){0, 10000000}, NULL)) {
        FILE *f = fopen(path, "r");
        if (!f) return false;
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        fclose(f);
        const char *end = strrchr(text, ')');
        if (end && end[1] == ' ' && end[2] == 'Z') return true;
    }
    return false;
}

/* This process's children named ompi-server that still run (not zombies). */
static int servers_alive(void) {
    int n = 0;
    char path[64], text[512];
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && (e = readdir(proc));) {
        snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
        FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
        if (!f) continue;
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        fclose(f);
        const char *end = strrchr(text, ')');
        char state = 0;
        int ppid = 0;
        if (end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid() && state != 'Z' &&
            strstr(text, "(ompi-server)"))
            n++;
    }
    if (proc) closedir(proc);
    return n;
}

/* A joined launch of h0 and h1 (test_joined): the "reconfigure" event read, h1's job leaving fails (its host
 * gone at the end of its grace period: ssh's 255): not the job's end; leave_hosts reaps it, not counted as
 * exited 0. On the way: a run file put lets the next metrics read through at once; a request that cannot reach
 * one host is not left on rank 0's. */
static void joined_change(const ah_launcher_t *lp, const ah_launch_job_t *job, const char *run_dir, const char *plan_path) {
    const ah_launcher_t l = *lp;
    ah_error_t err;
    char path[256], got[256];
    int status = -1;
    act(0, "sleep");
    act(1, "wait");
    CHECK(l.start(l.ctx, job, &err) == AH_OK, "start: %s", err.msg);
    snprintf(path, sizeof path, "%s/" AH_PROTO_METRICS_FILE, run_dir);
    write_file(path, "{\"event\": \"reconfigure\", \"step\": 3, \"leave\": [1]}\n");
    int lines = 0;
    l.read_metrics(l.ctx, count_line, &lines);
    CHECK_EQ_I64(lines, 1);
    /* a run file put: the next metrics read not held back by the last one's AH_SSH_POLL_S */
    write_file(path, "{\"event\": \"reconfigure\", \"step\": 3, \"leave\": [1]}\n{\"step\": 3}\n");
    CHECK(l.put_run_file(l.ctx, "note.json", plan_path, &err) == AH_OK, "put: %s", err.msg);
    l.read_metrics(l.ctx, count_line, &lines);
    CHECK_EQ_I64(lines, 2);
    /* a request that cannot reach h1 (down) is written nowhere: rank 0's host h0 last (both hosts share one
     * directory here), the error naming the file */
    snprintf(got, sizeof got, "%s/down-h1", root);
    write_file(got, "");
    CHECK(l.put_run_file(l.ctx, AH_PROTO_RECONFIG_FILE, plan_path, &err) != AH_OK &&
              strstr(err.msg, "h1") && strstr(err.msg, AH_PROTO_RECONFIG_FILE), "put: %s", err.msg);
    unlink(got);
    snprintf(got, sizeof got, "%s/" AH_PROTO_RECONFIG_FILE, run_dir);
    CHECK(access(got, F_OK) != 0, "no request on rank 0's host");
    snprintf(path, sizeof path, "%s/go-1", run_dir);
    write_file(path, "");
    CHECK(zombie(pid_file(run_dir, 1)), "h1's job exited");
    const bool ended = l.poll(l.ctx, &status);
    CHECK(!ended, "h1's 255 after the change is not the job's (status %d)", status);
    const char *h1only[] = {"h1"};
    CHECK_EQ_I64(l.leave_hosts(l.ctx, h1only, 1, 5), 0);
    CHECK(!l.poll(l.ctx, &status) && alive_pid_file(run_dir, 0), "h0's job runs on");
    l.stop(l.ctx);
}

/* A joined launch's job over the two-rank plan on h0 and h1 (t filled), its run directory ROOT/work/launch-NAME
 * and plan file ROOT/work/plan-NAME.json written. */
static ah_launch_job_t joined_job(const char *name, two_ranks_t *t, char *run_dir, char *plan_path, size_t cap) {
    static char *train[] = {"autohet", "train", NULL};
    snprintf(run_dir, cap, "%s/work/launch-%s", root, name);
    snprintf(plan_path, cap, "%s/work/plan-%s.json", root, name);
    write_file(plan_path, "{}\n");
    two_ranks(t, "h0", "h1");
    return (ah_launch_job_t){.plan = &t->plan, .plan_path = plan_path, .run_dir = run_dir, .train_argv = train,
                             .joined = true};
}

static void test_joined(void) {
    char mpirun[160], script[1024], run_dir[160], plan_path[160], path[256], got[2048];
    snprintf(mpirun, sizeof mpirun, "%s/mpirun", root);
    snprintf(script, sizeof script, "#!/bin/sh\nj=${AH_WORLD_JOIN##*join:}; j=${j%%%%:*}\n"
             "echo \"$AH_WORLD_JOIN $AH_WORLD_RANKS $*\" >args-$j\n[ -s ompi-server.uri ] && echo uri >>args-$j\n"
             "case $(cat '%s'/act-$j 2>/dev/null) in sleep) exec sleep 30;; fail) exit 3;; wait) while [ ! -e go-$j ]; do sleep 0.02; done; exit 255;; esac\nexit 0\n", root);
    write_file(mpirun, script);
    chmod(mpirun, 0755);
    const ah_launch_ssh_opts_t o = {.mpirun = mpirun, .rsh = rsh, .local_root = disks, .autohet = autohet};
    ah_launcher_t l;
    ah_error_t err;
    CHECK(ah_launcher_ssh(&o, &l, &err) == AH_OK && l.leave_hosts, "%s", err.msg);
    two_ranks_t t;
    ah_launch_job_t job = joined_job("1", &t, run_dir, plan_path, sizeof run_dir);
    act(0, "");
    act(1, "");
    int status = -1;
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    CHECK(wait_exit(&l, &status) && status == 0, "both jobs exit 0: %d", status);
    for (int j = 0; j < 2; j++) {
        snprintf(path, sizeof path, "%s/args-%d", run_dir, j);
        FILE *f = fopen(path, "r");
        got[0] = 0;
        if (f) {
            got[fread(got, 1, sizeof got - 1, f)] = 0;
            fclose(f);
        }
        char want[400];
        snprintf(want, sizeof want, "%s/join:%d:2 %d ", run_dir, j, j); /* its job, its plan rank */
        CHECK(strncmp(got, want, strlen(want)) == 0, "job %d: %s", j, got);
        snprintf(want, sizeof want, "--ompi-server file:%s/ompi-server.uri -x AH_WORLD_JOIN -x AH_WORLD_RANKS "
                 "--mca plm isolated", run_dir);
        CHECK(strstr(got, want) && strstr(got, " -np 1 autohet train --check-host\nuri\n"), "job %d: %s", j, got);
    }
    /* one job fails: the job has exited at once, the other still running until stop */
    act(0, "sleep");
    act(1, "fail");
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    CHECK(wait_exit(&l, &status) && status == 3, "job 1's 3 at once: %d", status);
    /* job 0's stand-in writes its pid file when it starts, which can be after job 1 has failed (load) */
    for (int i = 0; i < 200 && !alive_pid_file(run_dir, 0); i++) nanosleep(&(struct timespec){0, 50000000}, NULL);
    CHECK(alive_pid_file(run_dir, 0), "job 0 runs on");
    /* started again without stop (the agent's relaunch after a job that exited at once): the first launch's
     * job 0 and ompi-server ended */
    const int first = pid_file(run_dir, 0);
    act(1, "sleep");
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    CHECK(first > 0 && kill(first, 0) != 0, "the first launch's job 0 (pid %d) ended at the relaunch", first);
    CHECK_EQ_I64(servers_alive(), 1);
    l.stop(l.ctx);
    CHECK(!alive_pid_file(run_dir, 0) && !alive_pid_file(run_dir, 1), "stop ended both jobs");
    CHECK_EQ_I64(servers_alive(), 0);
    joined_change(&l, &job, run_dir, plan_path);
    /* leave_hosts: h1's job exits 0 within the wait; then h0's, still running, is killed past it */
    act(1, "");
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    const pid_t rank = fork();
    if (rank == 0) {
        alarm(30);
        pause();
        _exit(0);
    }
    snprintf(path, sizeof path, "%s/" AH_PROTO_RANK_FILE_FMT, run_dir, 1); /* the old world's file of that pid */
    snprintf(got, sizeof got, "{\"rank\": 1, \"pid\": %d}\n", (int)rank);
    write_file(path, got);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    snprintf(path, sizeof path, "%s/" AH_PROTO_RANK_FILE_FMT, run_dir, 0); /* its new one, newer */
    snprintf(got, sizeof got, "{\"rank\": 0, \"pid\": %d}\n", (int)rank);
    write_file(path, got);
    const char *h1[] = {"h1"}, *h0[] = {"h0"};
    CHECK_EQ_I64(l.leave_hosts(l.ctx, h1, 1, 10), 1);
    CHECK(!l.poll(l.ctx, &status), "h0's job still runs");
    CHECK_EQ_I64(l.notice(l.ctx, "h0"), 1); /* rank 0 now, once: its older rank-1.json is not another rank */
    int st_rank = 0;
    waitpid(rank, &st_rank, 0);
    CHECK(WIFSIGNALED(st_rank) && WTERMSIG(st_rank) == SIGTERM, "the rank got SIGTERM");
    const double t0 = ah_now_s();
    CHECK_EQ_I64(l.leave_hosts(l.ctx, h0, 1, 0.3), 0);
    CHECK(ah_now_s() - t0 < 5 && !alive_pid_file(run_dir, 0), "h0's job killed past the wait");
    test_join_hosts(&l, &job, &t, run_dir);
    ah_launcher_free(&l);
}

/* The driver tests/test_cluster_inplace.sh runs (a joined launch over real hosts, without the agent):
 *   test_launch_ssh joined RSH LOCAL_ROOT "MPIRUN_ARGS" PLAN RUN_DIR REQUEST LEAVE_HOST METRICS_OUT TRAIN_ARGV...
 * (RSH "slurm": the slurm launcher, inside an allocation) starts PLAN joined, puts REQUEST as the run's reconfigure.json, copies every metrics line to METRICS_OUT, and
 * at the "reconfigure" event lets LEAVE_HOST leave (leave_hosts, 60 s); then waits for the job's end. Exit 0
 * when it ended 0 and LEAVE_HOST's job exited 0 by itself; says what it saw on stdout. */
typedef struct drive {
    FILE *out;
    bool reconfigured;
} drive_t;

static void drive_line(void *ctx, json_t *line) {
    drive_t *d = ctx;
    char *text = json_dumps(line, JSON_COMPACT);
    if (text) fprintf(d->out, "%s\n", text);
    fflush(d->out);
    free(text);
    const char *ev = json_string_value(json_object_get(line, AH_PROTO_EVENT));
    d->reconfigured = d->reconfigured || (ev && strcmp(ev, AH_PROTO_EV_RECONFIGURE) == 0);
}

static int drive(int argc, char **argv) {
    if (argc < 11) {
        fprintf(stderr, "usage: test_launch_ssh joined RSH LOCAL_ROOT MPIRUN_ARGS PLAN RUN_DIR REQUEST LEAVE_HOST "
                "METRICS_OUT TRAIN_ARGV...\n");
        return 2;
    }
    const bool slurm = strcmp(argv[2], "slurm") == 0; /* the slurm launcher, inside an allocation */
    const ah_launch_ssh_opts_t o = {.mpirun = "mpirun", .rsh = slurm ? NULL : argv[2], .local_root = argv[3],
                                    .mpirun_args = argv[4], .autohet = "autohet"};
    ah_launcher_t l;
    ah_plan_t plan;
    ah_error_t err;
    drive_t d = {.out = fopen(argv[9], "w")};
    if (!d.out || ah_plan_load(argv[5], NULL, &plan, &err) != AH_OK ||
        (slurm ? ah_launcher_slurm(&o, &l, &err) : ah_launcher_ssh(&o, &l, &err)) != AH_OK) {
        fprintf(stderr, "drive: %s\n", d.out ? err.msg : "cannot write the metrics copy");
        return 1;
    }
    const ah_launch_job_t job = {.plan = &plan, .plan_path = argv[5], .run_dir = argv[6], .train_argv = argv + 10,
                                 .joined = true};
    int status = -1, left = strcmp(argv[8], "-") == 0 ? 1 : -1; /* "-": no host leaves */
    bool ended = false;
    /* AH_DRIVE_JOIN=HOST:PLAN: HOST joins (join_hosts, PLAN the plan after the join) before the request is put */
    const char *jv = getenv("AH_DRIVE_JOIN"), *jplan = jv ? strchr(jv, ':') : NULL;
    char jhost[64] = "";
    ah_plan_t plan2;
    bool have2 = false;
    if (jplan) snprintf(jhost, sizeof jhost, "%.*s", (int)(jplan - jv), jv);
    const char *joining[] = {jhost};
    ah_launch_job_t job2 = job;
    job2.plan = &plan2, job2.plan_path = jplan ? jplan + 1 : NULL;
    if (l.start(l.ctx, &job, &err) != AH_OK ||
        (jplan && ((have2 = ah_plan_load(jplan + 1, NULL, &plan2, &err) == AH_OK) == false ||
                   l.join_hosts(l.ctx, &job2, joining, 1, &err) != AH_OK)) ||
        l.put_run_file(l.ctx, AH_PROTO_RECONFIG_FILE, argv[7], &err) != AH_OK) {
        fprintf(stderr, "drive: %s\n", err.msg);
        ah_launcher_free(&l);
        return 1;
    }
    const char *leave[] = {argv[8]};
    for (const double t0 = ah_now_s(); !ended && ah_now_s() - t0 < 400; nanosleep(&(struct timespec){0, 50000000}, NULL)) {
        ended = l.poll(l.ctx, &status);
        l.read_metrics(l.ctx, drive_line, &d);
        if (d.reconfigured && left < 0 && strcmp(argv[8], "-") != 0) {
            left = l.leave_hosts(l.ctx, leave, 1, 60);
            printf("drive: the reconfigure event read; %s's job left: %d exited 0\n", argv[8], left);
        }
    }
    l.read_metrics(l.ctx, drive_line, &d);
    printf("drive: the job %s, status %d\n", ended ? "ended" : "did not end in 400 s", status);
    fclose(d.out);
    ah_launcher_free(&l);
    ah_plan_free(&plan);
    if (have2) ah_plan_free(&plan2);
    return ended && status == 0 && left == 1 ? 0 : 1;
}

/* A joined launch's remote mpirun runs with its host's environment (here: the stand-in remote command clears
 * it, as ssh does): the agent's values of `-x VAR` in --mpirun-args reach it (a quote in one), an unset one and
 * `-x VAR=value` are left to mpirun, and no value is on the remote command's line (ps) nor left on the host. */
static void read_text(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    out[f ? fread(out, 1, cap - 1, f) : 0] = 0;
    if (f) fclose(f);
}

static void test_joined_env(void) {
    char path[256], script[1024], run_dir[160], plan_path[160], got[512];
    snprintf(path, sizeof path, "%s/rsh-clean", root);
    snprintf(script, sizeof script, "#!/bin/sh\nshift\necho \"$*\" >>'%s/rsh-clean.log'\n"
             "exec env -i PATH=\"$PATH\" sh -c \"$*\"\n", root);
    write_file(path, script);
    chmod(path, 0755);
    char mpirun[160];
    snprintf(mpirun, sizeof mpirun, "%s/mpirun-env", root);
    write_file(mpirun, "#!/bin/sh\nj=${AH_WORLD_JOIN##*join:}; j=${j%%:*}\n"
               "echo \"$AH_TEST_SECRET|$AH_TEST_UNSET|$AH_TEST_GIVEN\" >env-$j\n");
    chmod(mpirun, 0755);
    setenv("AH_TEST_SECRET", "s3cr'et $HOME value", 1);
    unsetenv("AH_TEST_UNSET");
    const ah_launch_ssh_opts_t o = {.mpirun = mpirun, .rsh = path, .local_root = disks, .autohet = autohet,
                                    .mpirun_args = "-q -x AH_TEST_SECRET -x AH_TEST_UNSET -x AH_TEST_GIVEN=1"};
    ah_launcher_t l;
    ah_error_t err;
    CHECK(ah_launcher_ssh(&o, &l, &err) == AH_OK, "%s", err.msg);
    two_ranks_t t;
    const ah_launch_job_t job = joined_job("env", &t, run_dir, plan_path, sizeof run_dir);
    int status = -1;
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    CHECK(wait_exit(&l, &status) && status == 0, "both jobs exit 0: %d", status);
    for (int j = 0; j < 2; j++) {
        snprintf(path, sizeof path, "%s/env-%d", run_dir, j);
        read_text(path, got, sizeof got);
        CHECK(strcmp(got, "s3cr'et $HOME value||\n") == 0, "job %d's mpirun's environment: %s", j, got);
        snprintf(path, sizeof path, "%s/mpirun-%d.env", run_dir, j);
        CHECK(access(path, F_OK) != 0, "job %d's %s removed", j, path);
    }
    snprintf(path, sizeof path, "%s/rsh-clean.log", root);
    static char log[1 << 16];
    read_text(path, log, sizeof log);
    CHECK(strstr(log, "mpirun-0.env") && !strstr(log, "s3cr"), "no value on a remote command line: %s", log);
    unsetenv("AH_TEST_SECRET");
    ah_launcher_free(&l);
}

/* dead_jobs over a --mpirun not called "mpirun" (a site's wrapper, mpiexec): both jobs running are left
 * running (before: its command line did not say "mpirun", so every live job was killed as dead); job 1
 * whose pid file names an ended process is found, named and killed as the job's end. */
static void test_dead_jobs(void) {
    char mpirun[160], run_dir[160], plan_path[160], path[160], what[128];
    snprintf(mpirun, sizeof mpirun, "%s/site-launch", root);
    write_file(mpirun, "#!/bin/sh\nj=${AH_WORLD_JOIN##*join:}; j=${j%%:*}\n"
               "while [ ! -e go-$j ]; do sleep 0.02; done\n");
    chmod(mpirun, 0755);
    const ah_launch_ssh_opts_t o = {.mpirun = mpirun, .rsh = rsh, .local_root = disks, .autohet = autohet};
    ah_launcher_t l;
    ah_error_t err;
    CHECK(ah_launcher_ssh(&o, &l, &err) == AH_OK && l.dead_jobs, "%s", err.msg);
    two_ranks_t t;
    const ah_launch_job_t job = joined_job("dead", &t, run_dir, plan_path, sizeof run_dir);
    CHECK(l.start(l.ctx, &job, &err) == AH_OK, "start: %s", err.msg);
    for (int i = 0; i < 200 && !(alive_pid_file(run_dir, 0) && alive_pid_file(run_dir, 1)); i++)
        nanosleep(&(struct timespec){0, 50000000}, NULL);
    CHECK_EQ_I64(l.dead_jobs(l.ctx, what, sizeof what), 0);
    CHECK(alive_pid_file(run_dir, 0) && alive_pid_file(run_dir, 1), "both jobs still run");
    /* h1's process gone while its remote command lingers (srun -w after slurmstepd died): its pid file
     * names a process that has ended */
    const pid_t gone = fork();
    if (gone == 0) _exit(0);
    waitpid(gone, NULL, 0);
    snprintf(path, sizeof path, "%s/mpirun-1.pid", run_dir);
    snprintf(what, sizeof what, "%d\n", (int)gone);
    write_file(path, what);
    int status = -1;
    CHECK_EQ_I64(l.dead_jobs(l.ctx, what, sizeof what), 1);
    CHECK(strcmp(what, "h1") == 0 && alive_pid_file(run_dir, 0), "h1 named (%s), h0's job runs on", what);
    CHECK(wait_exit(&l, &status) && status != 0, "the job ended with h1's: %d", status);
    for (int j = 0; j < 2; j++) {
        snprintf(path, sizeof path, "%s/go-%d", run_dir, j);
        write_file(path, "");
    }
    l.stop(l.ctx);
    ah_launcher_free(&l);
}

/* reachable_many: every host asked at once; a failure named as reachable names it, a host that does not
 * answer in time asked again once, at once: answering then, it answers; silent twice, unknown (a slow or
 * hung ssh is not a host gone; before, the quiet-spell probe asked one host at a time and dropped it). */
static void test_reachable_many(void) {
    ah_launcher_t l;
    ah_error_t err, errs[5];
    CHECK(open_ssh(rsh, disks, &l, &err) && l.reachable_many, "%s", err.msg);
    char path[160];
    const char *mark[] = {"hang-h2", "hang-h3", "hang-once-h4"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", root, mark[k]);
        write_file(path, "");
    }
    const char *hosts[] = {"h0", "bad", "h2", "h3", "h4"};
    int v[5];
    const double t0 = ah_now_s();
    l.reachable_many(l.ctx, hosts, 5, 0.6, v, errs);
    const double took = ah_now_s() - t0;
    CHECK(v[0] == AH_REACH_YES && v[1] == AH_REACH_NO && v[2] == AH_REACH_UNKNOWN && v[3] == AH_REACH_UNKNOWN &&
              v[4] == AH_REACH_YES, "verdicts %d %d %d %d %d", v[0], v[1], v[2], v[3], v[4]);
    CHECK(strstr(errs[1].msg, "host bad: a test command failed") && strstr(errs[1].msg, "Permission denied"), "%s",
          errs[1].msg);
    CHECK(strstr(errs[2].msg, "host h2: no answer to a test command within 0.6 s, twice"), "%s", errs[2].msg);
    /* at once: two tries of 0.6 s (one host at a time: 0.6 x 2 for h2, for h3, and 0.6 for h4) */
    CHECK(took < 2.2, "asked at once: %.2f s", took);
    printf("reachable_many: 5 hosts, two silent twice and one once at 0.6 s a try, in %.2f s\n", took);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", root, mark[k]);
        unlink(path);
    }
    CHECK(l.reachable(l.ctx, "h2", &err) == AH_OK, "h2 answers again: %s", err.msg);
    ah_launcher_free(&l);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "joined") == 0) return drive(argc, argv);
    snprintf(root, sizeof root, "/tmp/ah_test_launch_ssh_XXXXXX");
    if (!mkdtemp(root)) {
        CHECK(false, "mkdtemp");
        return ah_test_finish();
    }
    const char *build = getenv("AH_BUILD_DIR");
    snprintf(autohet, sizeof autohet, "%s/autohet", build ? build : "build");
    snprintf(disks, sizeof disks, "%s/disks", root);
    snprintf(rsh, sizeof rsh, "%s/rsh", root);
    /* RSH HOST COMMAND: COMMAND here, as a remote shell would run it; host bad refuses the key, a
     * host H with a file ROOT/down-H does not answer */
    char script[1024];
    snprintf(script, sizeof script, "#!/bin/sh\nhost=$1\nshift\n[ \"$host\" = bad ] && { echo 'Permission denied "
             "(publickey).' >&2; exit 255; }\n[ -e '%s'/down-$host ] && { echo 'Connection refused' >&2; exit 255; }\n"
             "[ -e '%s'/hang-once-$host ] && { rm '%s'/hang-once-$host; exec sleep 30; }\n"
             "[ -e '%s'/hang-$host ] && exec sleep 30\n"
             "case \"$*\" in *reconfigure.json.tmp*) echo $host >>'%s'/put.log;; esac\nexec sh -c \"$*\"\n", root, root, root,
             root, root);
    write_file(rsh, script);
    chmod(rsh, 0755);
    test_options();
    test_launch();
    test_joined();
    test_joined_env();
    test_dead_jobs();
    test_reachable_many();
    ah_error_t err;
    ah_fs_rm_tree(root, &err);
    return ah_test_finish();
}
