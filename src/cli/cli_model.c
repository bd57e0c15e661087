/* autohet model: what a model costs, layer kind by layer kind, under the cost model's accounting
 * (parameters per TP rank, matmul FLOPs, activation bytes kept for backward), and a CP rank's
 * activation bytes per context-parallel degree. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cost/cost.h"
#include "spec/model.h"

typedef struct {
    const char *kind;  /* "embedding", "block", "head" */
    ah_layer_kind_t k;
    int64_t count;     /* how many of them the model has */
    int64_t params;    /* per TP rank, vocabulary padding included */
    int64_t content;   /* the layer's own parameters: whole tensors, no padding */
    double fwd, bwd;   /* FLOPs per micro-batch per TP rank */
    int64_t act, act_recompute;
} row_t;

/* Activation bytes of one CP rank per CP degree (context parallelism: T/cp tokens of each sequence;
 * ah_layer_act_bytes_cp, ah_cp_ring_bytes): the degrees 1, 2, 4, 8 that split seq_len evenly
 * into 2 cp chunks (the causal load balance). */
#define CP_DEGREES 4
typedef struct {
    int cp;
    int64_t block, block_rc; /* one block's, without and with recomputation */
    int64_t model, model_rc; /* every block, the embedding and the head */
    int64_t ring;            /* ring attention's buffers, once per device */
} cp_row_t;

static int fill_cp_rows(const ah_model_t *m, const ah_train_t *tr, int t, cp_row_t out[CP_DEGREES]) {
    int n = 0;
    for (int cp = 1; cp <= 8; cp *= 2) {
        if (tr->seq_len % (2 * cp) != 0 && cp > 1) continue;
        cp_row_t *r = &out[n++];
        const int64_t b = tr->micro_batch, T = tr->seq_len;
        r->cp = cp;
        r->block = ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, cp, tr->precision, false);
        r->block_rc = ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, cp, tr->precision, true);
        const int64_t ends = ah_layer_act_bytes_cp(m, AH_LAYER_EMBED, t, b, T, cp, tr->precision, false) +
                             ah_layer_act_bytes_cp(m, AH_LAYER_HEAD, t, b, T, cp, tr->precision, false);
        r->model = m->n_layer * r->block + ends;
        r->model_rc = m->n_layer * r->block_rc + ends;
        r->ring = ah_cp_ring_bytes(m, t, b, T, cp, tr->precision);
    }
    return n;
}

static void fill_rows(const ah_model_t *m, const ah_train_t *tr, int t, row_t rows[3]) {
    static const struct { const char *name; ah_layer_kind_t k; } kinds[3] = {
        {"embedding", AH_LAYER_EMBED}, {"block", AH_LAYER_BLOCK}, {"head", AH_LAYER_HEAD}};
    for (int i = 0; i < 3; i++) {
        row_t *r = &rows[i];
        r->kind = kinds[i].name;
        r->k = kinds[i].k;
        r->count = r->k == AH_LAYER_BLOCK ? m->n_layer : 1;
        r->params = ah_layer_params(m, r->k, t);
        r->content = ah_layer_content_params(m, r->k);
        r->fwd = ah_layer_fwd_flops(m, r->k, t, tr->micro_batch, tr->seq_len);
        r->bwd = ah_layer_bwd_flops(m, r->k, t, tr->micro_batch, tr->seq_len);
        r->act = ah_layer_act_bytes(m, r->k, t, tr->micro_batch, tr->seq_len, tr->precision, false);
        r->act_recompute = ah_layer_act_bytes(m, r->k, t, tr->micro_batch, tr->seq_len, tr->precision, true);
    }
}

/* x in the largest unit[] (each `base` times the one before) that keeps it >= 1: two decimals,
 * none in the first unit. */
static const char *scaled(double x, double base, const char *const unit[], int n_units, char *buf, size_t cap) {
    int u = 0;
    while (x >= base && u < n_units - 1) {
        x /= base;
        u++;
    }
    snprintf(buf, cap, u ? "%.2f%s" : "%.0f%s", x, unit[u]);
    return buf;
}

/* "124.44 M", "6.74 G": SI for counts and FLOPs. */
static const char *si(double x, char *buf, size_t cap) {
    static const char *const unit[] = {"", " k", " M", " G", " T", " P", " E"};
    return scaled(x, 1000, unit, 7, buf, cap);
}

/* "1.50 GiB": binary units for bytes. */
static const char *bytes_str(double x, char *buf, size_t cap) {
    static const char *const unit[] = {" B", " KiB", " MiB", " GiB", " TiB"};
    return scaled(x, 1024, unit, 5, buf, cap);
}

static void print_human(const ah_model_t *m, const ah_train_t *tr, int t, const row_t rows[3],
                        int64_t total, double flops_per_token) {
    char a[32], b[32], c[32], d[32], e[32], f[32];
    int64_t N = tr->micro_batch * tr->seq_len;
    char window[64] = "", scaling[96] = "";
    if (m->sliding_window)
        snprintf(window, sizeof window, " (sliding window %lld)", (long long)m->sliding_window);
    if (m->rope_scaling.factor > 0) /* LLaMA 3.1: the context is the scaled one */
        snprintf(scaling, sizeof scaling, " (rotary scaled x%g from %lld, llama3)", m->rope_scaling.factor,
                 (long long)m->rope_scaling.original_max_pos);
    printf("model %s (%s): %lld layers, d_model %lld, %lld heads (%lld kv), d_ff %lld, vocab %lld, "
           "context %lld%s%s, %s head\n",
           m->name, ah_arch_name(m->arch), (long long)m->n_layer, (long long)m->d_model,
           (long long)m->n_head, (long long)m->n_kv_head, (long long)m->d_ff, (long long)m->vocab,
           (long long)m->max_pos, window, scaling, m->tied ? "tied" : "untied");
    printf("micro-batch %lld x seq-len %lld = %lld tokens, tp %d, %s\n\n", (long long)tr->micro_batch,
           (long long)tr->seq_len, (long long)N, t, ah_precision_name(tr->precision));
    printf("parameters          %s (%lld)\n", si((double)total, a, sizeof a), (long long)total);
    printf("FLOPs per token     %s (forward + backward, all layers, no recompute)\n",
           si(flops_per_token, b, sizeof b));
    printf("state per parameter %lld bytes (weights + gradients + AdamW m, v%s) = %s for the model\n\n",
           (long long)ah_param_state_bytes(tr->precision),
           tr->precision != AH_PREC_FP32 ? " + fp32 master" : "",
           bytes_str((double)total * (double)ah_param_state_bytes(tr->precision), c, sizeof c));
    printf("per TP rank (t = %d), per layer:\n", t);
    printf("%-10s %6s %12s %12s %12s %12s %12s %12s\n", "layer", "count", "params", "fwd FLOP/mb",
           "bwd FLOP/mb", "FLOP/token", "act/mb", "act/mb rc");
    for (int i = 0; i < 3; i++) {
        const row_t *r = &rows[i];
        printf("%-10s %6lld %12s %12s %12s %12s %12s %12s\n", r->kind, (long long)r->count,
               si((double)r->params, a, sizeof a), si(r->fwd, b, sizeof b), si(r->bwd, c, sizeof c),
               si((r->fwd + r->bwd) / (double)N, d, sizeof d), bytes_str((double)r->act, e, sizeof e),
               bytes_str((double)r->act_recompute, f, sizeof f));
    }
    printf("\nparams: per TP rank, vocabulary padding included (V %lld padded to %lld, a multiple of "
           "128 x t;\n        the rank holds %lld rows of the embedding%s); the total above is the "
           "model's own, no padding.\n",
           (long long)m->vocab, (long long)ah_vocab_padded(m, t), (long long)(ah_vocab_padded(m, t) / t),
           m->tied ? "" : " and of the LM head");
    printf("act/mb: activation bytes kept from forward to backward per micro-batch; rc: with "
           "recomputation.\nFLOP/token: (fwd + bwd) per micro-batch / tokens per micro-batch.\n");
    cp_row_t cps[CP_DEGREES];
    const int n_cp = fill_cp_rows(m, tr, t, cps);
    printf("\nper CP rank (context parallelism: seq-len / cp tokens of each sequence), per micro-batch:\n");
    printf("%-4s %12s %12s %12s %12s %12s %12s\n", "cp", "tokens/rank", "block act", "block rc", "model act",
           "model rc", "ring");
    for (int i = 0; i < n_cp; i++)
        printf("%-4d %12lld %12s %12s %12s %12s %12s\n", cps[i].cp, (long long)(N / cps[i].cp),
               bytes_str((double)cps[i].block, a, sizeof a), bytes_str((double)cps[i].block_rc, b, sizeof b),
               bytes_str((double)cps[i].model, c, sizeof c), bytes_str((double)cps[i].model_rc, d, sizeof d),
               bytes_str((double)cps[i].ring, e, sizeof e));
    printf("model: every block, the embedding and the head; a CP rank's attention keeps ring attention's "
           "logsumexp,\nnot the probabilities; ring: its key/value blocks, their gradients, the softmax's "
           "accumulator\n(once per device). Degrees that split seq-len into 2 cp chunks only.\n");
}

static int print_json(const ah_model_t *m, const ah_train_t *tr, int t, const row_t rows[3],
                      int64_t total, double flops_per_token) {
    json_t *layers = json_array();
    double N = (double)(tr->micro_batch * tr->seq_len);
    for (int i = 0; i < 3; i++) {
        const row_t *r = &rows[i];
        json_array_append_new(
            layers, json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:I}", "kind", r->kind,
                              "count", (json_int_t)r->count, "params_per_rank", (json_int_t)r->params,
                              "params_content", (json_int_t)r->content,
                              "fwd_flops_per_mb", r->fwd, "bwd_flops_per_mb", r->bwd,
                              "fwd_flops_per_token", r->fwd / N, "bwd_flops_per_token", r->bwd / N,
                              "flops_per_token", (r->fwd + r->bwd) / N, "act_bytes_per_mb",
                              (json_int_t)r->act, "act_bytes_per_mb_recompute",
                              (json_int_t)r->act_recompute));
    }
    cp_row_t cps[CP_DEGREES];
    const int n_cp = fill_cp_rows(m, tr, t, cps);
    json_t *cpj = json_array();
    for (int i = 0; i < n_cp; i++)
        json_array_append_new(
            cpj, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "cp", cps[i].cp, "tokens_per_rank",
                           (json_int_t)(tr->micro_batch * tr->seq_len / cps[i].cp), "block_act_bytes_per_mb",
                           (json_int_t)cps[i].block, "block_act_bytes_per_mb_recompute", (json_int_t)cps[i].block_rc,
                           "model_act_bytes_per_mb", (json_int_t)cps[i].model, "model_act_bytes_per_mb_recompute",
                           (json_int_t)cps[i].model_rc, "ring_bytes", (json_int_t)cps[i].ring));
    json_t *doc = json_pack("{s:o, s:I, s:f, s:I, s:i, s:I, s:I, s:I, s:s, s:o, s:o}", "model", ah_model_to_json(m),
                            "params_total", (json_int_t)total, "flops_per_token", flops_per_token,
                            "state_bytes_per_param", (json_int_t)ah_param_state_bytes(tr->precision),
                            "tp", t, "vocab_padded", (json_int_t)ah_vocab_padded(m, t), "seq_len",
                            (json_int_t)tr->seq_len, "micro_batch",
                            (json_int_t)tr->micro_batch, "precision", ah_precision_name(tr->precision),
                            "layers", layers, "cp", cpj);
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(doc);
    return rc == 0 ? 0 : 1;
}

int ah_cli_model(int argc, char **argv) {
    const char *model_name = NULL, *precision = "bf16";
    int64_t seq_len = 0, micro_batch = 1, tp = 1;
    bool json = false;
    ah_flag_t flags[] = {
        {"--model", AH_FLAG_STR, &model_name, "M", "preset name or path to a HF config.json (required)", false},
        {"--seq-len", AH_FLAG_INT_IN(1, AH_CLI_SEQ_MAX), &seq_len, "T", "tokens per sequence (default: the model's context length)", false},
        {"--micro-batch", AH_FLAG_INT_IN(1, AH_CLI_BATCH_MAX), &micro_batch, "b", "sequences per micro-batch (default 1)", false},
        {"--tp", AH_FLAG_INT_IN(1, 1024), &tp, "t", "tensor-parallel degree for the per-rank figures (default 1)", false},
        {"--precision", AH_FLAG_STR, &precision, "P", "fp32, bf16 or fp16 (default bf16)", false},
        {"--json", AH_FLAG_BOOL, &json, NULL, "print JSON: {\"params_total\" (no padding), \"vocab_padded\", "
         "\"layers\": [{\"params_per_rank\" (padding included), \"params_content\", ...}], ...}", false},
    };
    int rc;
    if (!ah_cli_parse("model", "--model M [--seq-len T] [--micro-batch b] [--tp t] [--precision P] [--json]",
                      "Parameters, FLOPs and activation memory of a model, per layer kind and per "
                      "TP rank, as the cost model counts them.",
                      flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, &rc))
        return rc;
    ah_error_t err;
    if (!model_name) {
        ah_error_set(&err, AH_ERR_USAGE, "--model is required (a preset such as gpt2-124m, or a config.json path)");
        return ah_cli_fail("model", &err);
    }
    ah_model_t m;
    if (ah_model_load(model_name, &m, &err) != AH_OK) return ah_cli_fail("model", &err);
    ah_train_t tr = {.global_batch = micro_batch, .seq_len = seq_len ? seq_len : ah_model_context(&m),
                     .micro_batch = micro_batch, .precision = AH_PREC_BF16};
    if (!ah_precision_parse(precision, &tr.precision)) {
        ah_error_set(&err, AH_ERR_USAGE, "--precision: expected " AH_PRECISION_VALUES ", got \"%s\"", precision);
        return ah_cli_fail("model", &err);
    }
    if (tr.seq_len < 1 || tr.seq_len > m.max_pos) {
        ah_error_set(&err, AH_ERR_USAGE, "--seq-len: expected 1 .. %lld (model %s's context), got %lld",
                     (long long)m.max_pos, m.name, (long long)tr.seq_len);
        return ah_cli_fail("model", &err);
    }
    if (ah_model_check_window(&m, tr.seq_len, "--seq-len", &err) != AH_OK) return ah_cli_fail("model", &err);
    if (ah_model_check_tp(&m, (int)tp, &err) != AH_OK) return ah_cli_fail("model", &err);

    row_t rows[3];
    fill_rows(&m, &tr, (int)tp, rows);
    /* Whole-model FLOPs per token: one replica (t = 1), every block, embedding and head. */
    row_t whole[3];
    fill_rows(&m, &tr, 1, whole);
    double flops = 0;
    for (int i = 0; i < 3; i++) flops += (double)whole[i].count * (whole[i].fwd + whole[i].bwd);
    double flops_per_token = flops / (double)(tr.micro_batch * tr.seq_len);
    int64_t total = ah_model_params_total(&m);
    if (json) return print_json(&m, &tr, (int)tp, rows, total, flops_per_token);
    print_human(&m, &tr, (int)tp, rows, total, flops_per_token);
    char dropout[128];
    if (ah_model_unapplied_dropout(model_name, dropout, sizeof dropout) > 0)
        printf("\nnote: dropout is not applied: autohet trains without it (config: %s)\n", dropout);
    return 0;
}
