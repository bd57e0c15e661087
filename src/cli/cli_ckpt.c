/* autohet ckpt ls|verify|export: what checkpoints exist in which tier, whether their bytes are
 * intact, and a committed step as a Hugging Face model (GPT-2 or LLaMA). */
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/cloud.h"
#include "ckpt/crc32c.h"
#include "ckpt/export_hf.h"
#include "ckpt/replica.h"
#include "ckpt/s3.h"
#include "cli/cli.h"
#include "core/fs.h"
#include "core/str.h"

typedef struct {
    const char *local_root, *cloud, *endpoint, *out, *replica_root;
    int64_t step;
    bool json;
} opts_t;

static void human(uint64_t b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)b;
    int i = 0;
    while (x >= 1024 && i < 4) {
        x /= 1024;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", x, u[i]);
}

static int open_cloud(const opts_t *o, ah_s3_t **s3, ah_s3_url_t *url, ah_error_t *err) {
    ah_s3_config_t cfg;
    if (ah_s3_url_parse(o->cloud, url, err) || ah_s3_config_from_env(&cfg, o->endpoint, err) ||
        ah_s3_open(&cfg, s3, err))
        return 1;
    return 0;
}

/* A local root's tier label: "local" when --local-root DIR is the root itself, "local:NODE" for
 * DIR/NODE/ when DIR is a folder of node roots. */
static void local_tier(char *out, size_t cap, const char *root, const char *dir) {
    const char *slash = strrchr(root, '/');
    if (strcmp(root, dir) != 0) snprintf(out, cap, "local:%.50s", slash ? slash + 1 : root);
    else snprintf(out, cap, "local");
}

/* One row of ls (printed once every tier was listed, so an error leaves no half table). */
static void add_row(json_t *rows, const char *tier, const ah_ckpt_step_info_t *s) {
    json_array_append_new(rows, json_pack("{s:s, s:I, s:b, s:b, s:i, s:I, s:s}", "tier", tier, "step",
                                          (json_int_t)s->step, "committed", s->committed, "damaged", s->damaged,
                                          "files", s->n_files, "bytes", (json_int_t)s->bytes, "note", s->note));
}

static void print_table(const json_t *rows) {
    printf("%-12s %10s  %-10s %6s %12s  %s\n", "tier", "step", "state", "files", "bytes", "note");
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        const bool committed = json_is_true(json_object_get(r, "committed"));
        char b[32];
        human((uint64_t)json_integer_value(json_object_get(r, "bytes")), b, sizeof b);
        printf("%-12s %10lld  %-10s %6d %12s  %s\n", json_string_value(json_object_get(r, "tier")),
               (long long)json_integer_value(json_object_get(r, "step")),
               committed ? "committed" : json_is_true(json_object_get(r, "damaged")) ? "damaged" : "incomplete",
               (int)json_integer_value(json_object_get(r, "files")), b,
               committed ? "" : json_string_value(json_object_get(r, "note")));
    }
}

/* Calls visit(ctx, root, tier, steps, n) for each node root that --local-root names
 * (ah_ckpt_node_roots) with its steps (ah_ckpt_list). Returns AH_OK or the first failure. */
typedef void local_visit_fn(void *ctx, const char *root, const char *tier, const ah_ckpt_step_info_t *s, int n);
static ah_status_t each_local_root(const opts_t *o, local_visit_fn *visit, void *ctx, ah_error_t *err) {
    char(*roots)[AH_CKPT_PATH_MAX];
    int n_roots;
    ah_status_t st = ah_ckpt_node_roots(o->local_root, &roots, &n_roots, err);
    char name[AH_CKPT_PATH_MAX], parent[AH_CKPT_PATH_MAX];
    snprintf(name, sizeof name, "%s", o->local_root);
    snprintf(parent, sizeof parent, "%s", o->local_root);
    const int64_t step = ah_ckpt_parse_step_dir(basename(name));
    if (st == AH_OK && n_roots == 0 && step >= 0) /* a step directory: no step and no node root in it */
        st = ah_error_set(err, AH_ERR_USAGE, "--local-root %s is the directory of step %lld, not a checkpoint root: "
                          "give its root, --local-root %s", o->local_root, (long long)step, dirname(parent));
    for (int r = 0; r < n_roots && st == AH_OK; r++) {
        ah_ckpt_step_info_t *s;
        int n;
        if ((st = ah_ckpt_list(roots[r], &s, &n, err)) != AH_OK) break;
        char tier[64];
        local_tier(tier, sizeof tier, roots[r], o->local_root);
        visit(ctx, roots[r], tier, s, n);
        free(s);
    }
    free(roots);
    return st;
}

static void ls_visit(void *rows, const char *root, const char *tier, const ah_ckpt_step_info_t *s, int n) {
    (void)root;
    for (int i = 0; i < n; i++) add_row(rows, tier, &s[i]);
}

/* A run's --work-dir given for its checkpoint root (its steps are under WORK/local): says so on
 * stderr. */
static void work_dir_hint(const char *verb, const char *root) {
    char sub[1100];
    if (root && snprintf(sub, sizeof sub, "%s/local", root) < (int)sizeof sub && ah_fs_is_dir(sub))
        fprintf(stderr, "autohet %s: note: if %s is an autohet run --work-dir, its checkpoints are in --local-root %s\n",
                verb, root, sub);
}

/* The memory tier (ckpt/replica.h): a row per step of each BASE/HOLDER/from-SOURCE/ root, tier
 * "memory:HOLDER<-SOURCE". A base that does not exist lists nothing. */
static void ls_memory(const char *base, json_t *rows) {
    DIR *d = opendir(base);
    for (struct dirent *e; d && (e = readdir(d));) {
        char holder[AH_CKPT_PATH_MAX];
        if (!ah_ckpt_name_ok(e->d_name) || ah_replica_holder_root(holder, sizeof holder, base, e->d_name) < 0) continue;
        DIR *h = opendir(holder);
        const size_t pre = strlen(AH_REPLICA_SOURCE_PREFIX);
        for (struct dirent *f; h && (f = readdir(h));) {
            char root[AH_CKPT_PATH_MAX], tier[300];
            ah_ckpt_step_info_t *s;
            int n;
            ah_error_t err;
            if (strncmp(f->d_name, AH_REPLICA_SOURCE_PREFIX, pre) != 0 ||
                ah_replica_source_root(root, sizeof root, holder, f->d_name + pre) < 0 ||
                ah_ckpt_list(root, &s, &n, &err) != AH_OK)
                continue;
            snprintf(tier, sizeof tier, "memory:%.100s<-%.100s", e->d_name, f->d_name + pre);
            for (int i = 0; i < n; i++) add_row(rows, tier, &s[i]);
            free(s);
        }
        if (h) closedir(h);
    }
    if (d) closedir(d);
}

static int cmd_ls(const opts_t *o) {
    ah_error_t err;
    json_t *rows = json_array();
    char base[AH_CKPT_PATH_MAX]; /* the memory tier: --replica-root, or the default of --local-root */
    if (o->replica_root) snprintf(base, sizeof base, "%s", o->replica_root);
    else if (!o->local_root || ah_replica_default_base(base, sizeof base, o->local_root) < 0) base[0] = '\0';
    if (base[0]) ls_memory(base, rows);
    if (o->local_root && each_local_root(o, ls_visit, rows, &err) != AH_OK) {
        json_decref(rows);
        return ah_cli_fail("ckpt ls", &err);
    }
    if (o->cloud) {
        ah_s3_t *s3;
        ah_s3_url_t url;
        ah_ckpt_step_info_t *s;
        int n;
        if (open_cloud(o, &s3, &url, &err)) {
            json_decref(rows);
            return ah_cli_fail("ckpt ls", &err);
        }
        if (ah_ckpt_cloud_scan(s3, &url, NULL, NULL, &s, &n, &err)) {
            ah_s3_close(s3);
            json_decref(rows);
            return ah_cli_fail("ckpt ls", &err);
        }
        for (int i = 0; i < n; i++) add_row(rows, "cloud", &s[i]);
        free(s);
        ah_s3_close(s3);
    }
    if (o->json) {
        char *t = json_dumps(rows, JSON_INDENT(2));
        printf("%s\n", t ? t : "[]");
        free(t);
    } else {
        print_table(rows);
        if (json_array_size(rows) == 0) printf("(no checkpoint steps)\n");
    }
    if (json_array_size(rows) == 0) work_dir_hint("ckpt ls", o->local_root);
    json_decref(rows);
    return 0;
}

static ah_status_t crc_sink(void *ctx, const void *data, size_t n, ah_error_t *err) {
    (void)err;
    *(uint32_t *)ctx = ah_crc32c(*(uint32_t *)ctx, data, n);
    return AH_OK;
}

/* Streams each file of a cloud manifest and checks its size and CRC-32C. Returns failures. */
static int verify_cloud_manifest(ah_s3_t *s3, const ah_s3_url_t *url, const ah_ckpt_manifest_t *m) {
    int bad = 0;
    for (int i = 0; i < m->n_files; i++) {
        const ah_ckpt_file_t *f = &m->files[i];
        char key[2048];
        ah_error_t err;
        uint32_t crc = 0;
        uint64_t bytes = 0;
        const ah_status_t st =
            ah_ckpt_cloud_key(key, sizeof key, url, m->meta.step, f->name) < 0
                ? ah_error_set(&err, AH_ERR_USAGE, "the object key is longer than %zu bytes", sizeof key)
                : ah_s3_get(s3, url->bucket, key, crc_sink, &crc, &bytes, &err);
        if (st != AH_OK) {
            printf("cloud  step %lld: %s: FAILED: %s\n", (long long)m->meta.step, f->name, err.msg);
            bad++;
        } else if (bytes != f->bytes || crc != f->crc32c) {
            printf("cloud  step %lld: %s: FAILED: %llu bytes, CRC-32C %08x; manifest-%s.json says %llu "
                   "bytes, %08x\n",
                   (long long)m->meta.step, f->name, (unsigned long long)bytes, crc, m->meta.node,
                   (unsigned long long)f->bytes, f->crc32c);
            bad++;
        }
    }
    return bad;
}

typedef struct {
    int64_t step; /* --step, or -1: every committed step */
    int checked, failed;
    ah_str_t others; /* the committed steps --step left out, for the message when none matched */
} verify_ctx_t;

static void verify_visit(void *ctx, const char *root, const char *tier, const ah_ckpt_step_info_t *s, int n) {
    verify_ctx_t *v = ctx;
    for (int i = 0; i < n; i++) {
        if (s[i].committed && v->step >= 0 && s[i].step != v->step)
            ah_str_appendf(&v->others, "%s%s %lld", v->others.len ? ", " : "", tier, (long long)s[i].step);
        if (!(s[i].committed || s[i].damaged) || (v->step >= 0 && s[i].step != v->step)) continue;
        int bad;
        ah_error_t err;
        v->checked++;
        if (s[i].damaged) { /* a manifest that does not load: the step is lost, not being written */
            printf("%-6s step %lld: FAILED: the manifest is damaged: %s\n", tier, (long long)s[i].step, s[i].note);
            v->failed++;
        } else if (ah_ckpt_verify(root, s[i].step, &bad, &err) == AH_OK) {
            printf("%-6s step %lld: ok (%d files)\n", tier, (long long)s[i].step, s[i].n_files);
        } else {
            printf("%-6s step %lld: FAILED: %s\n", tier, (long long)s[i].step, err.msg);
            v->failed++;
        }
    }
}

static int cmd_verify(const opts_t *o) {
    ah_error_t err;
    char others[512] = "";
    verify_ctx_t v = {.step = o->step, .others = ah_str_fixed(others, sizeof others)};
    if (o->local_root && each_local_root(o, verify_visit, &v, &err) != AH_OK) return ah_cli_fail("ckpt verify", &err);
    int failed = v.failed, checked = v.checked;
    if (o->cloud) {
        ah_s3_t *s3;
        ah_s3_url_t url;
        ah_ckpt_manifest_t *ms;
        int n;
        if (open_cloud(o, &s3, &url, &err)) return ah_cli_fail("ckpt verify", &err);
        if (ah_ckpt_cloud_scan(s3, &url, &ms, &n, NULL, NULL, &err)) {
            ah_s3_close(s3);
            return ah_cli_fail("ckpt verify", &err);
        }
        for (int i = 0; i < n; i++) {
            if (o->step >= 0 && ms[i].meta.step != o->step) {
                ah_str_appendf(&v.others, "%scloud %lld", v.others.len ? ", " : "", (long long)ms[i].meta.step);
                continue;
            }
            checked++;
            int bad = verify_cloud_manifest(s3, &url, &ms[i]);
            if (bad) failed++;
            else printf("cloud  step %lld: ok (%d files, manifest-%s.json)\n", (long long)ms[i].meta.step,
                        ms[i].n_files, ms[i].meta.node);
        }
        ah_ckpt_manifests_free(ms, n);
        ah_s3_close(s3);
    }
    if (checked == 0) {
        char where[1200], step[48] = "";
        ah_str_t w = ah_str_fixed(where, sizeof where);
        if (o->local_root) ah_str_appendf(&w, "--local-root %s", o->local_root);
        if (o->cloud) ah_str_appendf(&w, "%s--cloud %s", o->local_root ? " or " : "", o->cloud);
        if (o->step >= 0) snprintf(step, sizeof step, " %lld", (long long)o->step);
        ah_str_t e = ah_str_fixed(err.msg, sizeof err.msg);
        ah_str_appendf(&e, "no committed checkpoint step%s in %s", step, where);
        if (others[0]) ah_str_appendf(&e, " (committed there: %s)", others);
        err.code = AH_ERR_IO;
        const int rc = ah_cli_fail("ckpt verify", &err);
        work_dir_hint("ckpt verify", o->local_root);
        return rc;
    }
    if (failed) {
        fprintf(stderr, "autohet ckpt verify: %d of %d checked steps have damaged or missing files\n", failed,
                checked);
        return 1;
    }
    return 0;
}

static int cmd_export(const opts_t *o) {
    ah_error_t err;
    int64_t step;
    char skipped[AH_ERROR_MSG_MAX];
    if (ah_ckpt_export_hf(o->local_root, o->step, o->out, &step, skipped, sizeof skipped, &err) != AH_OK)
        return ah_cli_fail("ckpt export", &err);
    if (skipped[0])
        fprintf(stderr, "autohet ckpt export: warning: newer steps skipped (%s); exporting step %lld\n", skipped,
                (long long)step);
    printf("autohet ckpt export: step %lld -> %s/model.safetensors, %s/config.json (Hugging Face)\n",
           (long long)step, o->out, o->out);
    return 0;
}

int ah_cli_ckpt(int argc, char **argv) {
    /* each subcommand's --help shows its own usage line, job and flags */
    enum { LS = 1, VERIFY = 2, EXPORT = 4 };
    static const struct { const char *name, *synopsis, *about; unsigned bit; } SUBS[] = {
        {"ls", "[--local-root DIR] [--replica-root DIR] [--cloud s3://BUCKET/PREFIX [--s3-endpoint URL]] [--json]",
         "List checkpoint steps per tier (local, memory, cloud): committed or not, files, bytes.", LS},
        {"verify", "[--local-root DIR] [--cloud s3://BUCKET/PREFIX [--s3-endpoint URL]] [--step N]",
         "Check every file of committed steps against its manifest (size, CRC-32C).", VERIFY},
        {"export", "--local-root DIR -o OUT_DIR [--step N]",
         "Write a committed step as a Hugging Face model.safetensors + config.json (GPT-2 or LLaMA).", EXPORT},
    };
    const int n_subs = (int)(sizeof SUBS / sizeof SUBS[0]);
    int sub = 0;
    while (argc >= 2 && sub < n_subs && strcmp(SUBS[sub].name, argv[1]) != 0) sub++;
    if (argc < 2 || sub == n_subs) {
        const bool help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
        FILE *f = help ? stdout : stderr;
        if (argc >= 2 && !help) fprintf(f, "autohet ckpt: unknown subcommand \"%s\"\n", argv[1]);
        fprintf(f, "usage: autohet ckpt ls|verify|export [flags]\n\n");
        for (int k = 0; k < n_subs; k++) fprintf(f, "  %-7s %s\n", SUBS[k].name, SUBS[k].about);
        fprintf(f, "\nautohet ckpt SUB --help lists its flags.\n");
        return help ? 0 : 2;
    }
    opts_t o = {.step = -1};
    static const char LOCAL_ONLY[] = "export reads only the local root; restore the cloud tier first with "
                                     "autohet train --resume";
    /* Every flag of ckpt, with the subcommands that take it (subs) and, for the others, why not. */
    const struct {
        ah_flag_t flag;
        unsigned subs;
        const char *why_not;
    } all[] = {
        {{"--local-root", AH_FLAG_STR, &o.local_root, "DIR", "a node's checkpoint root, or a folder of them "
                                                              "(DIR/NODE/, as autohet train --local-root)", false},
         LS | VERIFY | EXPORT, NULL},
        {{"--cloud", AH_FLAG_STR, &o.cloud, "s3://BUCKET/PREFIX", "cloud tier (credentials: AWS_* env)", false},
         LS | VERIFY, LOCAL_ONLY},
        {{"--s3-endpoint", AH_FLAG_STR, &o.endpoint, "URL", "S3-compatible endpoint (default: AWS)", false},
         LS | VERIFY, LOCAL_ONLY},
        {{"--step", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX), &o.step, "N",
          SUBS[sub].bit == VERIFY ? "only this step (default: all committed)" : "this step (default: the newest complete)",
          false},
         VERIFY | EXPORT, NULL},
        {{"-o", AH_FLAG_STR, &o.out, "OUT_DIR", "write model.safetensors and config.json here", false}, EXPORT, NULL},
        {{"--json", AH_FLAG_BOOL, &o.json, NULL, "JSON output", false}, LS, NULL},
        {{"--replica-root", AH_FLAG_STR, &o.replica_root, "DIR", "the in-memory replicas' base, as autohet train "
          "--replica-root (default: the one train derives from --local-root); rows memory:HOLDER<-SOURCE", false},
         LS, NULL},
    };
    const int n_all = (int)(sizeof all / sizeof all[0]);
    ah_flag_t every[sizeof all / sizeof all[0]], own[sizeof all / sizeof all[0]];
    int n_own = 0;
    for (int k = 0; k < n_all; k++) {
        every[k] = all[k].flag;
        if (all[k].subs & SUBS[sub].bit) own[n_own++] = all[k].flag;
    }
    char verb[32];
    snprintf(verb, sizeof verb, "ckpt %s", argv[1]);
    /* --help lists the subcommand's own flags; any other line is parsed against every flag of ckpt,
     * so that another subcommand's flag is refused as such below rather than called unknown. */
    bool help = false;
    for (int i = 2; i < argc; i++) help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    ah_flag_t *flags = help ? own : every;
    const int n_flags = help ? n_own : n_all;
    int rc;
    if (!ah_cli_parse(verb, SUBS[sub].synopsis, SUBS[sub].about, flags, n_flags, argc - 1, argv + 1, &rc))
        return rc;
    for (int k = 0; k < n_all; k++)
        if (every[k].seen && !(all[k].subs & SUBS[sub].bit)) {
            fprintf(stderr, "autohet %s: %s is not a flag of ckpt %s%s%s (autohet %s --help)\n", verb,
                    all[k].flag.name, argv[1], all[k].why_not ? ": " : "", all[k].why_not ? all[k].why_not : "",
                    verb);
            return 2;
        }
    const bool export = SUBS[sub].bit == EXPORT;
    if (export ? !o.local_root || !o.out : !o.local_root && !o.cloud && !o.replica_root) {
        fprintf(stderr, "autohet %s: give %s\n", verb,
                export ? "--local-root DIR and -o OUT_DIR" : "--local-root DIR and/or --cloud s3://BUCKET/PREFIX");
        return 2;
    }
    if (o.endpoint && !o.cloud) {
        fprintf(stderr, "autohet %s: --s3-endpoint needs --cloud s3://BUCKET/PREFIX\n", verb);
        return 2;
    }
    switch (SUBS[sub].bit) {
    case LS: return cmd_ls(&o);
    case VERIFY: return cmd_verify(&o);
    default: return cmd_export(&o);
    }
}
