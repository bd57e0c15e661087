/* autohet profile: measures per-layer forward/backward seconds and activation bytes of the CPU
 * runtime (src/runtime/profile.h) for each (GPU type, TP degree, micro-batch) asked for, and
 * writes them as a profile (src/cost/profile.h) that `autohet evaluate --profile` and `autohet
 * plan --profile` read. An emulated type of --cluster is measured through its emulation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cost/profile.h"
#include "runtime/profile.h"
#include "spec/cluster.h"
#include "spec/model.h"

#define VERB "profile"
#define LIST_MAX 16

/* "1,2,4" -> values; false (message printed) on anything else. */
static bool parse_list(const char *flag, const char *s, int64_t *out, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || (*end && *end != ',') || *n == LIST_MAX) {
            fprintf(stderr, "autohet %s: %s: expected up to %d positive integers separated by commas, "
                    "got \"%s\"\n", VERB, flag, LIST_MAX, s);
            return false;
        }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) fprintf(stderr, "autohet %s: %s: empty list\n", VERB, flag);
    return *n > 0;
}

/* The type names to profile: --gpu's comma list, else every type of the cluster, else "cpu". */
static int gpu_names(const char *gpu_arg, const ah_cluster_t *c, bool have_cluster,
                     char names[][AH_NAME_MAX], int cap) {
    int n = 0;
    if (!gpu_arg) {
        if (!have_cluster) {
            snprintf(names[n++], AH_NAME_MAX, "cpu");
            return n;
        }
        for (int i = 0; i < c->n_types && n < cap; i++) snprintf(names[n++], AH_NAME_MAX, "%s", c->types[i].name);
        return n;
    }
    const char *p = gpu_arg;
    while (*p && n < cap) {
        size_t len = strcspn(p, ",");
        snprintf(names[n++], AH_NAME_MAX, "%.*s", (int)(len < AH_NAME_MAX ? len : AH_NAME_MAX - 1), p);
        p += len + (p[len] == ',');
    }
    return n;
}

int ah_cli_profile(int argc, char **argv) {
    const char *model_arg = NULL, *tp_arg = "1", *mb_arg = "1", *gpu_arg = NULL, *cluster_arg = NULL;
    const char *out_path = NULL;
    int64_t seq_len = 0, steps = 10;
    ah_flag_t flags[] = {
        {"--model", AH_FLAG_STR, &model_arg, "M", "preset name or HF config.json, GPT-2 architecture (required)", false},
        {"--tp", AH_FLAG_STR, &tp_arg, "1,2,4", "TP degrees to measure (default 1)", false},
        {"--micro-batch", AH_FLAG_STR, &mb_arg, "1,2,4", "micro-batch sizes to measure (default 1)", false},
        {"--seq-len", AH_FLAG_INT, &seq_len, "T", "tokens per sequence (default: the model's context)", false},
        {"--gpu", AH_FLAG_STR, &gpu_arg, "TYPE[,TYPE]", "type names for the entries; with --cluster, emulated types of it (default: all of --cluster's types, else \"cpu\")", false},
        {"--cluster", AH_FLAG_STR, &cluster_arg, "C", "cluster JSON or built-in name whose emulate settings apply", false},
        {"--steps", AH_FLAG_INT, &steps, "K", "timed repetitions per measurement, median taken (default 10)", false},
        {"-o", AH_FLAG_STR, &out_path, "profile.json", "profile to write (required)", false},
    };
    int rc = 0;
    if (!ah_cli_parse(VERB, "--model M [--tp 1,2,4] [--micro-batch 1,2,4] -o profile.json [flags]",
                      "Measures one block's, the embedding's and the head's forward and backward seconds per\n"
                      "micro-batch and their activation bytes, through the CPU runtime's own code, for each TP\n"
                      "degree and micro-batch (TP shards run without communication: the cost model adds it).\n"
                      "Run it with the thread count training uses (e.g. OPENBLAS_NUM_THREADS=1).",
                      flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, &rc))
        return rc;
    if (!model_arg || !out_path) {
        fprintf(stderr, "autohet %s: %s is required (autohet %s --help)\n", VERB, !model_arg ? "--model" : "-o", VERB);
        return 2;
    }
    int64_t tps[LIST_MAX], mbs[LIST_MAX];
    int n_tp, n_mb;
    if (!parse_list("--tp", tp_arg, tps, &n_tp) || !parse_list("--micro-batch", mb_arg, mbs, &n_mb)) return 2;
    if (steps < 1 || steps > 100000) {
        fprintf(stderr, "autohet %s: --steps: expected 1 .. 100000, got %lld\n", VERB, (long long)steps);
        return 2;
    }

    ah_error_t err = {0};
    ah_model_t model;
    ah_cluster_t cluster = {0};
    const bool have_cluster = cluster_arg != NULL;
    if (ah_model_load(model_arg, &model, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    if (seq_len == 0) seq_len = model.max_pos;
    if (have_cluster && ah_cluster_open(cluster_arg, &cluster, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    char names[LIST_MAX][AH_NAME_MAX];
    const int n_gpu = gpu_names(gpu_arg, &cluster, have_cluster, names, LIST_MAX);
    char host[128] = "unknown host";
    gethostname(host, sizeof host - 1);
    char desc[256];
    const char *threads = getenv("OPENBLAS_NUM_THREADS");
    snprintf(desc, sizeof desc, "%s, CPU runtime, OPENBLAS_NUM_THREADS=%s", host, threads ? threads : "unset");
    ah_profile_t *prof = ah_profile_create(desc);
    ah_status_t s = prof ? AH_OK : ah_error_set(&err, AH_ERR_OOM, "no host memory for a profile");
    for (int g = 0; g < n_gpu && s == AH_OK; g++) {
        ah_profile_req_t req = {.model = &model, .gpu = names[g], .slowdown = 1, .seq_len = seq_len,
                                .reps = (int)steps, .seed = 1337};
        if (have_cluster) {
            const int ti = ah_cluster_find_type(&cluster, names[g]);
            if (ti < 0) {
                s = ah_error_set(&err, AH_ERR_INVALID, "--gpu %s: no such type in cluster %s; name "
                                 "one of its gpu_types", names[g], cluster_arg);
                break;
            }
            const ah_gpu_type_t *t = &cluster.types[ti];
            /* Measuring this CPU for a real accelerator would write figures that are not its. */
            if (t->emulate_slowdown <= 0 && t->emulate_memory_mib <= 0) {
                s = ah_error_set(&err, AH_ERR_INVALID, "--gpu %s: cluster %s does not emulate this "
                                 "type (no \"emulate\" block), so this CPU cannot stand in for it; run "
                                 "autohet profile on that device, or give the type an emulate block",
                                 names[g], cluster_arg);
                break;
            }
            req.slowdown = t->emulate_slowdown;
            req.mem_cap_bytes = t->emulate_memory_mib > 0 ? (int64_t)(t->emulate_memory_mib * 1048576.0) : 0;
        }
        for (int i = 0; i < n_tp && s == AH_OK; i++)
            for (int j = 0; j < n_mb && s == AH_OK; j++) {
                req.tp = (int)tps[i];
                req.micro_batch = mbs[j];
                s = ah_profile_measure(&req, ah_kernels_cpu(), prof, &err);
                if (s != AH_OK) break;
                const ah_profile_entry_t *e = ah_profile_get(prof, ah_profile_count(prof) - 1);
                printf("%-12s tp %d micro-batch %lld: block %.3f + %.3f ms, embed %.3f + %.3f ms, "
                       "head %.3f + %.3f ms (fwd + bwd), AdamW %.2f ns/param\n",
                       e->gpu, e->tp, (long long)e->micro_batch,
                       1e3 * e->layer[AH_LAYER_BLOCK].fwd_s, 1e3 * e->layer[AH_LAYER_BLOCK].bwd_s,
                       1e3 * e->layer[AH_LAYER_EMBED].fwd_s, 1e3 * e->layer[AH_LAYER_EMBED].bwd_s,
                       1e3 * e->layer[AH_LAYER_HEAD].fwd_s, 1e3 * e->layer[AH_LAYER_HEAD].bwd_s,
                       1e9 * e->optimizer_s_per_param);
            }
    }
    if (s == AH_OK) s = ah_profile_save(prof, out_path, &err);
    if (s == AH_OK) printf("wrote %s: %d entries, seq-len %lld\n", out_path, ah_profile_count(prof), (long long)seq_len);
    ah_profile_free(prof);
    if (have_cluster) ah_cluster_free(&cluster);
    return s == AH_OK ? 0 : ah_cli_fail(VERB, &err);
}
