/* autohet profile: measures per-layer forward/backward seconds and activation bytes of the CPU
 * runtime (src/runtime/profile.h) for each (GPU type, TP degree, micro-batch) asked for, and
 * writes them as a profile (src/cost/profile.h) that `autohet evaluate --profile` and `autohet
 * plan --profile` read. An emulated type of --cluster is measured through its emulation.
 *
 * TP > 1 is measured on a real TP group: for each such degree t the command starts `mpirun -np t`
 * of itself with --tp-group, whose ranks run their shards with the group's all-reduces and write
 * their entries to a temporary profile that this process reads back. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernels/cpu/blas_kernel.h"
#include "comm/comm.h"
#include "core/fs.h"
#include "core/str.h"
#include "core/timing.h"
#include "cost/profile.h"
#include "elastic/launcher.h"
#include "runtime/profile.h"
#include "spec/cluster.h"
#include "spec/model.h"

#define VERB "profile"
#define LIST_MAX 16

/* "1,2,4" -> values; false (message printed) on anything else. */
static bool parse_list(const char *flag, const char *s, int64_t max, int64_t *out, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > max || (*end && *end != ',') || *n == LIST_MAX) {
            fprintf(stderr, "autohet %s: %s: expected up to %d integers in 1 .. %lld separated by commas, "
                    "got \"%s\"\n", VERB, flag, LIST_MAX, (long long)max, s);
            return false;
        }
        for (int i = 0; i < *n; i++)
            if (out[i] == v) {
                fprintf(stderr, "autohet %s: %s: %lld appears twice in \"%s\"\n", VERB, flag, v, s);
                return false;
            }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) fprintf(stderr, "autohet %s: %s: empty list\n", VERB, flag);
    return *n > 0;
}

/* The type names to profile: --gpu's comma list, else every type of the cluster, else "cpu".
 * Without --cluster a name only labels this CPU's figures, so a catalog accelerator's name, which
 * the planner would take for that device's own, is refused. */
static ah_status_t gpu_names(const char *gpu_arg, const ah_cluster_t *c, bool have_cluster,
                             char names[][AH_NAME_MAX], int cap, int *n, ah_error_t *err) {
    *n = 0;
    if (!gpu_arg) {
        if (!have_cluster) {
            snprintf(names[(*n)++], AH_NAME_MAX, "cpu");
            return AH_OK;
        }
        if (c->n_types > cap)
            return ah_error_set(err, AH_ERR_USAGE, "the cluster has %d GPU types, more than %d: choose "
                                "some with --gpu", c->n_types, cap);
        for (int i = 0; i < c->n_types; i++) snprintf(names[(*n)++], AH_NAME_MAX, "%s", c->types[i].name);
        return AH_OK;
    }
    for (const char *p = gpu_arg;; p++) {
        const size_t len = strcspn(p, ",");
        if (len == 0 || len >= AH_NAME_MAX)
            return ah_error_set(err, AH_ERR_USAGE, "--gpu \"%s\": expected type names of 1 to %d "
                                "characters separated by commas", gpu_arg, AH_NAME_MAX - 1);
        if (*n == cap) return ah_error_set(err, AH_ERR_USAGE, "--gpu: more than %d types", cap);
        snprintf(names[*n], AH_NAME_MAX, "%.*s", (int)len, p);
        for (int i = 0; i < *n; i++)
            if (strcmp(names[i], names[*n]) == 0)
                return ah_error_set(err, AH_ERR_USAGE, "--gpu: %s appears twice", names[i]);
        if (!have_cluster && ah_gpu_catalog_find(names[*n]))
            return ah_error_set(err, AH_ERR_USAGE, "--gpu %s without --cluster would label this CPU's "
                                "timings as the real %s's; give a --cluster whose %s has an \"emulate\" "
                                "block, or another name", names[*n], names[*n], names[*n]);
        (*n)++;
        p += len;
        if (!*p) return AH_OK;
    }
}

enum { ROUNDS_MAX = 1000 }; /* --rounds */

/* One entry being measured: its request, and its figures in each round so far. */
typedef struct {
    ah_profile_req_t req;
    ah_profile_entry_t *round; /* [--rounds] */
    int rounds;
} job_t;

static ah_status_t add_round(job_t *j, const ah_profile_entry_t *e, int64_t cap, ah_error_t *err) {
    if (!j->round && !(j->round = calloc((size_t)cap, sizeof *j->round)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for %lld rounds of figures", (long long)cap);
    if (j->rounds >= cap) return ah_error_set(err, AH_ERR_INTERNAL, "more rounds than --rounds");
    j->round[j->rounds++] = *e;
    return AH_OK;
}

/* The median of field `at` (a double inside each ah_profile_entry_t) over the job's rounds. */
static double median_over_rounds(const job_t *j, size_t at) {
    double v[ROUNDS_MAX];
    for (int r = 0; r < j->rounds; r++) memcpy(&v[r], (const char *)&j->round[r] + at, sizeof v[r]);
    return ah_median(v, j->rounds);
}

/* The layer figures at `at` (an ah_profile_layer_t inside each entry): the first round's, with the
 * forward and backward times the medians over the rounds; not present unless every round measured
 * them (a round that could not, out of host memory, holds 0 s, which must not pull the median down). */
static ah_profile_layer_t layer_over_rounds(const job_t *j, size_t at) {
    ah_profile_layer_t l;
    memcpy(&l, (const char *)&j->round[0] + at, sizeof l);
    for (int r = 1; r < j->rounds && l.present; r++) {
        ah_profile_layer_t other;
        memcpy(&other, (const char *)&j->round[r] + at, sizeof other);
        l.present = other.present;
    }
    l.fwd_s = median_over_rounds(j, at + offsetof(ah_profile_layer_t, fwd_s));
    l.bwd_s = median_over_rounds(j, at + offsetof(ah_profile_layer_t, bwd_s));
    return l;
}

/* The job's entry: the first round's, with each time the median over the rounds. */
static ah_profile_entry_t job_entry(const job_t *j) {
    ah_profile_entry_t e = j->round[0];
    for (int l = 0; l < 3; l++) e.layer[l] = layer_over_rounds(j, offsetof(ah_profile_entry_t, layer[l]));
    e.optimizer_s_per_param = median_over_rounds(j, offsetof(ah_profile_entry_t, optimizer_s_per_param));
    e.attention = layer_over_rounds(j, offsetof(ah_profile_entry_t, attention));
    for (int k = 1; k < 4; k++) /* the ring kernels at CP 2^k */
        e.ring[k] = layer_over_rounds(j, offsetof(ah_profile_entry_t, ring) + k * sizeof e.ring[0]);
    return e;
}

/* What the ranks of a TP group need to measure the same entries as this process. */
typedef struct {
    const char *model, *cluster, *gpus, *mbs;
    int64_t seq_len, steps, rounds;
} group_args_t;

/* One round of the entries at TP degree t, on a TP group: runs `mpirun -np t` of this program
 * with --tp-group, writing to a temporary profile in dir, and adds each entry it wrote to its job. */
static ah_status_t group_round(const group_args_t *g, int t, const char *dir, job_t *jobs, int n_jobs,
                               ah_error_t *err) {
    char self[1024], np[16], tp[16], seq[32], steps[32], out[600];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return ah_error_set(err, AH_ERR_IO, "cannot find this program (/proc/self/exe): %s", strerror(errno));
    self[n] = '\0';
    snprintf(np, sizeof np, "%d", t);
    snprintf(tp, sizeof tp, "%d", t);
    snprintf(seq, sizeof seq, "%lld", (long long)g->seq_len);
    snprintf(steps, sizeof steps, "%lld", (long long)g->steps);
    snprintf(out, sizeof out, "%s/tp%d.json", dir, t);
    char mpi_flags[] = AH_MPIRUN_ONE_MACHINE;
    char *argv[64];
    int a = 0;
    argv[a++] = "mpirun";
    for (char *save = NULL, *f = strtok_r(mpi_flags, " ", &save); f; f = strtok_r(NULL, " ", &save)) argv[a++] = f;
    char *rest[] = {"-np", np, self, "profile", "--tp-group", "--model", (char *)g->model, "--gpu",
                    (char *)g->gpus, "--tp", tp, "--micro-batch", (char *)g->mbs, "--seq-len", seq,
                    "--steps", steps, "--rounds", "1", "-o", out};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) argv[a++] = rest[i];
    if (g->cluster) {
        argv[a++] = "--cluster";
        argv[a++] = (char *)g->cluster;
    }
    argv[a] = NULL;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) return ah_error_set(err, AH_ERR_IO, "cannot start mpirun: fork: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "autohet profile: cannot run mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return ah_error_set(err, AH_ERR_IO, "measuring tp %d needs a TP group of %d ranks: `mpirun -np %d %s "
                            "profile --tp-group ...` failed (%s %d; its messages are above)", t, t, t, self,
                            WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    ah_profile_t *got = NULL;
    ah_status_t s = ah_profile_load(out, &got, err);
    remove(out);
    if (s != AH_OK) return s;
    for (int i = 0; i < ah_profile_count(got) && s == AH_OK; i++) {
        const ah_profile_entry_t *e = ah_profile_get(got, i);
        for (int j = 0; j < n_jobs && s == AH_OK; j++)
            if (jobs[j].req.tp == e->tp && jobs[j].req.micro_batch == e->micro_batch &&
                strcmp(jobs[j].req.gpu, e->gpu) == 0)
                s = add_round(&jobs[j], e, g->rounds, err);
    }
    ah_profile_free(got);
    return s;
}

/* What the command measures: the types, TP degrees and micro-batches, one job per combination. */
typedef struct {
    ah_model_t model;
    ah_cluster_t cluster;
    const char *cluster_arg; /* NULL: no --cluster */
    char names[LIST_MAX][AH_NAME_MAX];
    int n_gpu;
    int64_t tps[LIST_MAX], mbs[LIST_MAX];
    int n_tp, n_mb;
    job_t jobs[LIST_MAX * LIST_MAX * LIST_MAX];
    int n_jobs;
} measuring_t;

/* With --tp-group: joins the group of mpirun's ranks, which must be --tp of them. Returns 0 to go
 * on (*rank set), else the exit code (the message printed). */
static int join_tp_group(int *argc, char ***argv, int64_t tp, int *rank) {
    ah_error_t err = {0};
    if (ah_comm_init(argc, argv, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    *rank = ah_comm_rank(ah_comm_world());
    if (ah_comm_size(ah_comm_world()) == (int)tp) return 0;
    if (*rank == 0)
        fprintf(stderr, "autohet %s: --tp-group --tp %lld runs as %lld ranks under mpirun, not %d\n", VERB,
                (long long)tp, (long long)tp, ah_comm_size(ah_comm_world()));
    ah_comm_finalize();
    return 2;
}

/* "HOST, CPU runtime, BLAS, OPENBLAS_NUM_THREADS=N": where the figures were measured. */
static void describe_host(char *desc, size_t cap) {
    char host[128] = "unknown host", blas[160];
    gethostname(host, sizeof host - 1);
    const char *threads = getenv("OPENBLAS_NUM_THREADS");
    ah_cpu_blas_describe(blas, sizeof blas);
    snprintf(desc, cap, "%s, CPU runtime, %s, OPENBLAS_NUM_THREADS=%s", host, blas, threads ? threads : "unset");
}

/* The request base for type `name`: its emulation when --cluster has one; a real accelerator of
 * the cluster is refused, since measuring this CPU for it would write figures that are not its. */
static ah_status_t type_request(const measuring_t *m, const char *name, ah_profile_req_t *req, ah_error_t *err) {
    if (!m->cluster_arg) return AH_OK;
    const int ti = ah_cluster_find_type(&m->cluster, name);
    if (ti < 0)
        return ah_error_set(err, AH_ERR_INVALID, "--gpu %s: no such type in cluster %s; name one of its gpu_types",
                            name, m->cluster_arg);
    const ah_gpu_type_t *t = &m->cluster.types[ti];
    if (t->emulate_slowdown <= 0 && t->emulate_memory_mib <= 0)
        return ah_error_set(err, AH_ERR_INVALID, "type %s: cluster %s does not emulate it (no \"emulate\" block), so "
                            "this CPU cannot stand in for it; run autohet profile on that device, give the type an "
                            "emulate block, or name emulated types with --gpu", name, m->cluster_arg);
    req->slowdown = t->emulate_slowdown;
    req->mem_cap_bytes = t->emulate_memory_mib > 0 ? (int64_t)(t->emulate_memory_mib * 1048576.0) : 0;
    return AH_OK;
}

/* The measurements: one job per (type, TP degree, micro-batch), with the type's emulation. */
static ah_status_t plan_jobs(measuring_t *m, int64_t seq_len, int64_t steps, bool tp_group, ah_error_t *err) {
    for (int g = 0; g < m->n_gpu; g++) {
        ah_profile_req_t req = {.model = &m->model, .gpu = m->names[g], .slowdown = 1, .seq_len = seq_len,
                                .reps = (int)steps, .seed = 1337, .tp_group = tp_group ? ah_comm_world() : NULL};
        ah_status_t s = type_request(m, m->names[g], &req, err);
        for (int i = 0; i < m->n_tp && s == AH_OK; i++) {
            if (m->tps[i] > 1 && (s = ah_model_check_tp(&m->model, (int)m->tps[i], err)) != AH_OK) break;
            for (int j = 0; j < m->n_mb; j++) {
                job_t *job = &m->jobs[m->n_jobs++];
                memset(job, 0, sizeof *job);
                job->req = req;
                job->req.tp = (int)m->tps[i];
                job->req.micro_batch = m->mbs[j];
            }
        }
        if (s != AH_OK) return s;
    }
    return AH_OK;
}

/* Rounds: each measures every entry once, in turn, so that a slow spell of the machine (this VM's
 * speed drifts by 10-15 % over seconds) is spread over all entries instead of landing on the one
 * being measured then. An entry's figures are the median over the rounds: a slow spell that lands
 * on one round (one of 6 rounds 50 % slow was seen) then does not count at all, where it moved
 * the mean by 8 %. Entries at TP > 1 are measured by TP groups (group_round) unless this process
 * is one of a group's ranks. */
static ah_status_t measure_rounds(measuring_t *m, const group_args_t *ga, bool tp_group, ah_error_t *err) {
    char dir[] = "/tmp/autohet-profile-XXXXXX";
    const bool need_groups = !tp_group && (m->n_tp > 1 || m->tps[0] > 1);
    if (need_groups && !mkdtemp(dir))
        return ah_error_set(err, AH_ERR_IO, "cannot create a temporary directory %s: %s", dir, strerror(errno));
    ah_status_t s = AH_OK;
    for (int r = 0; r < ga->rounds && s == AH_OK; r++) {
        for (int i = 0; i < m->n_jobs && s == AH_OK; i++) {
            if (m->jobs[i].req.tp > 1 && !tp_group) continue;
            ah_profile_entry_t e;
            if ((s = ah_profile_measure(&m->jobs[i].req, ah_kernels_cpu(), &e, err)) == AH_OK)
                s = add_round(&m->jobs[i], &e, ga->rounds, err);
        }
        for (int i = 0; i < m->n_tp && s == AH_OK && need_groups; i++)
            if (m->tps[i] > 1) s = group_round(ga, (int)m->tps[i], dir, m->jobs, m->n_jobs, err);
    }
    if (need_groups) ah_fs_rm_tree(dir, NULL); /* with whatever a failed group left */
    return s;
}

/* One line per entry: its times, and the spread of one block's forward + backward over the rounds. */
static void print_entry(const job_t *j, const ah_profile_entry_t *e) {
    const double mid = e->layer[AH_LAYER_BLOCK].fwd_s + e->layer[AH_LAYER_BLOCK].bwd_s;
    double lo = 0, hi = 0;
    for (int r = 0; r < j->rounds; r++) {
        const double b = j->round[r].layer[AH_LAYER_BLOCK].fwd_s + j->round[r].layer[AH_LAYER_BLOCK].bwd_s;
        lo = r == 0 || b < lo ? b : lo;
        hi = r == 0 || b > hi ? b : hi;
    }
    printf("%-12s tp %d micro-batch %lld: block %.3f + %.3f ms, embed %.3f + %.3f ms, "
           "head %.3f + %.3f ms (fwd + bwd), AdamW %.2f ns/param; rounds %+.1f .. %+.1f %%%s\n",
           e->gpu, e->tp, (long long)e->micro_batch,
           1e3 * e->layer[AH_LAYER_BLOCK].fwd_s, 1e3 * e->layer[AH_LAYER_BLOCK].bwd_s,
           1e3 * e->layer[AH_LAYER_EMBED].fwd_s, 1e3 * e->layer[AH_LAYER_EMBED].bwd_s,
           1e3 * e->layer[AH_LAYER_HEAD].fwd_s, 1e3 * e->layer[AH_LAYER_HEAD].bwd_s,
           1e9 * e->optimizer_s_per_param, 100 * (lo / mid - 1), 100 * (hi / mid - 1),
           e->includes_tp_comm ? ", TP all-reduces included" : "");
}

/* Adds each job's entry (the medians over its rounds) to prof; prints it unless in a TP group. */
static ah_status_t add_entries(const measuring_t *m, int64_t rounds, bool tp_group, ah_profile_t *prof,
                               ah_error_t *err) {
    for (int i = 0; i < m->n_jobs; i++) {
        const job_t *j = &m->jobs[i];
        if (j->rounds != rounds)
            return ah_error_set(err, AH_ERR_IO, "%s tp %d micro-batch %lld: measured in %d of %lld rounds",
                                j->req.gpu, j->req.tp, (long long)j->req.micro_batch, j->rounds, (long long)rounds);
        const ah_profile_entry_t e = job_entry(j);
        const ah_status_t s = ah_profile_add(prof, &e, err);
        if (s != AH_OK) return s;
        if (!tp_group) print_entry(j, &e);
    }
    return AH_OK;
}

/* Loads the model and cluster, names the types and plans the jobs; then measures them into prof. */
static ah_status_t profile(measuring_t *m, const char *model_arg, const char *gpu_arg, const char *mb_arg,
                           int64_t *seq_len, int64_t steps, int64_t rounds, bool tp_group, ah_profile_t **prof,
                           ah_error_t *err) {
    ah_status_t s = ah_model_load(model_arg, &m->model, err);
    if (s == AH_OK && *seq_len == 0) *seq_len = ah_model_context(&m->model);
    if (s == AH_OK) s = ah_model_check_window(&m->model, *seq_len, "--seq-len", err);
    if (s == AH_OK && m->cluster_arg) s = ah_cluster_open(m->cluster_arg, &m->cluster, err);
    if (s == AH_OK) s = gpu_names(gpu_arg, &m->cluster, m->cluster_arg != NULL, m->names, LIST_MAX, &m->n_gpu, err);
    if (s != AH_OK) return s;
    char gpu_list[LIST_MAX * (AH_NAME_MAX + 1)], desc[400];
    ah_str_t list = ah_str_fixed(gpu_list, sizeof gpu_list);
    for (int g = 0; g < m->n_gpu; g++) ah_str_appendf(&list, "%s%s", g ? "," : "", m->names[g]);
    describe_host(desc, sizeof desc);
    char advice[512];
    if (ah_cpu_blas_advice(advice, sizeof advice)) fprintf(stderr, "autohet %s: warning: %s\n", VERB, advice);
    if (!(*prof = ah_profile_create(desc, &m->model))) return ah_error_set(err, AH_ERR_OOM, "no host memory for a profile");
    const group_args_t ga = {model_arg, m->cluster_arg, gpu_list, mb_arg, *seq_len, steps, rounds};
    s = plan_jobs(m, *seq_len, steps, tp_group, err);
    if (s == AH_OK) s = measure_rounds(m, &ga, tp_group, err);
    if (s == AH_OK) s = add_entries(m, rounds, tp_group, *prof, err);
    return s;
}

int ah_cli_profile(int argc, char **argv) {
    const char *model_arg = NULL, *tp_arg = "1", *mb_arg = "1", *gpu_arg = NULL, *cluster_arg = NULL;
    const char *out_path = NULL;
    int64_t seq_len = 0, steps = 10, rounds = 3;
    bool tp_group = false;
    ah_flag_t flags[] = {
        {"--model", AH_FLAG_STR, &model_arg, "M",
         "preset name or HF config.json, GPT-2 or LLaMA (required)", false},
        {"--tp", AH_FLAG_STR, &tp_arg, "1,2,4",
         "TP degrees to measure (default 1); TP > 1 on a TP group of that many ranks, started with mpirun", false},
        {"--micro-batch", AH_FLAG_STR, &mb_arg, "1,2,4", "micro-batch sizes to measure (default 1)", false},
        {"--seq-len", AH_FLAG_INT_IN(1, AH_CLI_SEQ_MAX), &seq_len, "T", "tokens per sequence (default: the model's context)", false},
        {"--gpu", AH_FLAG_STR, &gpu_arg, "TYPE[,TYPE]",
         "type names for the entries; with --cluster, emulated types of it (default: all of --cluster's types, else "
         "\"cpu\")", false},
        {"--cluster", AH_FLAG_STR, &cluster_arg, "C",
         "cluster JSON or built-in name whose emulate settings apply", false},
        {"--steps", AH_FLAG_INT_IN(1, 100000), &steps, "K",
         "timed repetitions per entry and round, mean taken (default 10)", false},
        {"--rounds", AH_FLAG_INT_IN(1, ROUNDS_MAX), &rounds, "R",
         "passes over all entries, the median taken, so that machine drift spreads evenly and a slow spell does not "
         "count (default 3)", false},
        {"--tp-group", AH_FLAG_BOOL, &tp_group, NULL,
         "measure as the ranks of one TP group of --tp ranks, under mpirun (autohet profile starts these itself)",
         false},
        {"-o", AH_FLAG_STR, &out_path, "profile.json", "profile to write (required)", false},
    };
    int rc = 0;
    if (!ah_cli_parse(VERB, "--model M [--tp 1,2,4] [--micro-batch 1,2,4] -o profile.json [flags]",
                      "Measures one block's, the embedding's and the head's forward and backward seconds per\n"
                      "micro-batch and their activation bytes, through the CPU runtime's own code, for each TP\n"
                      "degree and micro-batch; TP > 1 on a real TP group (mpirun must be on PATH), so the\n"
                      "times include the group's all-reduces. Run it with the thread count training uses\n"
                      "(e.g. OPENBLAS_NUM_THREADS=1).",
                      flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, &rc))
        return rc;
    if (!model_arg || !out_path) {
        fprintf(stderr, "autohet %s: %s is required (autohet %s --help)\n", VERB, !model_arg ? "--model" : "-o", VERB);
        return 2;
    }
    if (!tp_group && !ah_cli_check_out_path(VERB, "-o", out_path)) return 2; /* before minutes of measuring */
    static measuring_t m;
    m.cluster_arg = cluster_arg;
    if (!parse_list("--tp", tp_arg, 1024, m.tps, &m.n_tp) ||
        !parse_list("--micro-batch", mb_arg, AH_CLI_BATCH_MAX, m.mbs, &m.n_mb))
        return 2;
    if (tp_group && (m.n_tp != 1 || m.tps[0] < 2)) {
        fprintf(stderr, "autohet %s: --tp-group measures one TP degree of 2 or more (--tp %s)\n", VERB, tp_arg);
        return 2;
    }
    int rank = 0;
    if (tp_group && (rc = join_tp_group(&argc, &argv, m.tps[0], &rank)) != 0) return rc;
    ah_error_t err = {0};
    ah_profile_t *prof = NULL;
    ah_status_t s = profile(&m, model_arg, gpu_arg, mb_arg, &seq_len, steps, rounds, tp_group, &prof, &err);
    for (int i = 0; i < m.n_jobs; i++) free(m.jobs[i].round);
    /* In a TP group every rank measured the same entries; rank 0 writes them. */
    if (s == AH_OK && rank == 0) s = ah_profile_save(prof, out_path, &err);
    if (s == AH_OK && !tp_group)
        printf("wrote %s: %d entries, seq-len %lld, median of %lld rounds of %lld steps\n", out_path,
               ah_profile_count(prof), (long long)seq_len, (long long)rounds, (long long)steps);
    if (prof) ah_profile_free(prof);
    if (cluster_arg) ah_cluster_free(&m.cluster);
    if (tp_group) {
        if (s != AH_OK) {
            ah_cli_fail(VERB, &err);
            ah_comm_abort(1);
        }
        ah_comm_finalize();
        return 0;
    }
    return s == AH_OK ? 0 : ah_cli_fail(VERB, &err);
}
