/* What a plan costs, by the price rule of spec/cluster.h ("Prices"; docs/planner.md "Prices"):
 * the $/h of the GPUs it uses plus its egress (the bytes it sends across zones and regions each
 * iteration, plan_links.c, at its rate) and $ per million tokens at its rate, or "unpriced" when a
 * node it uses has no usd_per_gpu_hour; "egress unpriced" when bytes cross a zone or region
 * boundary on a link the cluster gives no $/GB for (counted $0). One wording for every verb that shows a plan's price (plan,
 * evaluate). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_out.h"
#include "spec/cluster.h"

double ah_plan_usd_per_hour(const ah_plan_t *p) {
    double usd = 0;
    for (int i = 0; i < p->n_pipelines; i++) /* each device once: an interleaved one holds several stages */
        for (int k = 0, P = ah_pipeline_groups(&p->pipelines[i]); k < P; k++)
            for (int d = 0, n = ah_stage_devices(&p->pipelines[i], p->tp); d < n; d++) /* a CP group's nodes */
                usd += p->cluster.nodes[p->pipelines[i].stages[k].devices[d].node].usd_per_gpu_hour;
    return usd;
}

double ah_plan_priced_iteration_s(const ah_eval_t *e, bool overlap) {
    return overlap ? e->iteration_overlap_s : e->pred.iteration_s;
}

double ah_usd_per_hour_at(double usd_per_iteration, double iteration_s) {
    return iteration_s > 0 && isfinite(iteration_s) ? usd_per_iteration * 3600.0 / iteration_s : 0;
}

double ah_plan_usd_per_hour_at(const ah_plan_t *p, const ah_plan_traffic_t *t, double iteration_s,
                               double *egress_usd_per_hour) {
    const double egress = ah_usd_per_hour_at(t->egress_usd, iteration_s);
    if (egress_usd_per_hour) *egress_usd_per_hour = egress;
    return ah_plan_usd_per_hour(p) + egress;
}

ah_plan_price_t ah_plan_price(const ah_plan_t *p, double iteration_s) {
    ah_plan_price_t pr = {0};
    const ah_cluster_t *c = &p->cluster;
    bool *used = calloc((size_t)(c->n_nodes > 0 ? c->n_nodes : 1), sizeof *used); /* NULL: every node counts */
    for (int i = 0; i < p->n_pipelines && used; i++)
        for (int k = 0; k < p->pipelines[i].n_stages; k++)
            for (int d = 0, n = ah_stage_devices(&p->pipelines[i], p->tp); d < n; d++)
                used[p->pipelines[i].stages[k].devices[d].node] = true;
    pr.priced = ah_cluster_unpriced(c, used, pr.unpriced, sizeof pr.unpriced) == 0;
    free(used);
    ah_plan_traffic(p, &pr.traffic);
    pr.egress_unpriced = pr.traffic.unpriced_bytes > 0;
    if (!pr.priced) return pr;
    const double tokens_per_iteration = (double)p->train.global_batch * (double)p->train.seq_len;
    pr.iteration_s = iteration_s;
    pr.iterations_per_hour = ah_usd_per_hour_at(1, iteration_s);
    pr.usd_per_hour = ah_plan_usd_per_hour_at(p, &pr.traffic, iteration_s, &pr.egress_usd_per_hour);
    pr.usd_per_mtoken = pr.iterations_per_hour > 0 ? pr.usd_per_hour / pr.iterations_per_hour / tokens_per_iteration * 1e6 : 0;
    return pr;
}

const char *ah_plan_price_str(const ah_plan_price_t *pr, char *buf, size_t cap) {
    char egress[96] = "";
    if (pr->priced && pr->egress_usd_per_hour > 0)
        snprintf(egress, sizeof egress, " (egress $%.2f/h)", pr->egress_usd_per_hour);
    if (pr->egress_unpriced)
        snprintf(egress + strlen(egress), sizeof egress - strlen(egress), ", egress unpriced");
    if (pr->priced)
        snprintf(buf, cap, "$%.2f/h, $%.4f per million tokens%s, at %.4f s per iteration", pr->usd_per_hour,
                 pr->usd_per_mtoken, egress, pr->iteration_s);
    else
        snprintf(buf, cap, "unpriced ($/h and $ per million tokens unknown: no usd_per_gpu_hour for %s)%s",
                 pr->unpriced, egress);
    return buf;
}

const char *ah_plan_traffic_str(const ah_plan_price_t *pr, char *buf, size_t cap) {
    const ah_plan_traffic_t *t = &pr->traffic;
    char hourly[2][48] = {"", ""}; /* inter-zone's and inter-region's egress $/h, where known */
    for (int k = 0; k < 2 && pr->priced; k++)
        if (t->egress_usd_by[AH_LINK_INTER_ZONE + k] > 0)
            snprintf(hourly[k], sizeof hourly[k], " ($%.2f/h)", t->egress_usd_by[AH_LINK_INTER_ZONE + k] * pr->iterations_per_hour);
    snprintf(buf, cap, "traffic per iteration: intra-node %.3f GB, inter-node %.3f GB, inter-zone %.3f GB%s, "
             "inter-region %.3f GB%s; egress $%.4f per iteration%s%s", t->bytes[AH_LINK_INTRA] / 1e9,
             t->bytes[AH_LINK_INTER_NODE] / 1e9, t->bytes[AH_LINK_INTER_ZONE] / 1e9, hourly[0],
             t->bytes[AH_LINK_INTER_REGION] / 1e9, hourly[1], t->egress_usd, pr->egress_unpriced ? " (egress unpriced)" : "",
             t->public_bytes > 0 ? " (bytes cross regions on links not marked private)" : "");
    return buf;
}

const char *ah_plan_ckpt_str(const ah_plan_price_t *pr, char *buf, size_t cap) {
    const ah_plan_traffic_t *t = &pr->traffic;
    const double *b = t->kind_bytes[AH_TRAFFIC_CKPT];
    if (t->ckpt_every <= 0)
        snprintf(buf, cap, "checkpoint traffic: not counted (no --ckpt-every: give train's --ckpt-every K, and its "
                 "--replica-memory-gb G and --cloud URL where the run takes them)");
    else if (b[AH_LINK_INTER_NODE] + b[AH_LINK_INTER_ZONE] + b[AH_LINK_INTER_REGION] <= 0)
        snprintf(buf, cap, "checkpoint traffic per iteration (a save every %lld): none (no --replica-memory-gb, no "
                 "--cloud: each node writes its own disk)", (long long)t->ckpt_every);
    else {
        char hourly[48] = "";
        if (pr->priced && t->kind_usd[AH_TRAFFIC_CKPT] > 0)
            snprintf(hourly, sizeof hourly, " ($%.2f/h)", t->kind_usd[AH_TRAFFIC_CKPT] * pr->iterations_per_hour);
        snprintf(buf, cap, "checkpoint traffic per iteration (a save every %lld, counted above): inter-node %.3f GB, "
                 "inter-zone %.3f GB, inter-region %.3f GB; egress $%.4f per iteration%s; the replication to the "
                 "partners blocks training %.4f s per iteration (in the iteration time)", (long long)t->ckpt_every, b[AH_LINK_INTER_NODE] / 1e9,
                 b[AH_LINK_INTER_ZONE] / 1e9, b[AH_LINK_INTER_REGION] / 1e9, t->kind_usd[AH_TRAFFIC_CKPT], hourly,
                 t->ckpt_blocked_s);
    }
    return buf;
}

void ah_plan_price_json(const ah_plan_price_t *pr, json_t *doc) {
    json_object_set_new(doc, "usd_per_hour", pr->priced ? json_real(pr->usd_per_hour) : json_null());
    json_object_set_new(doc, "usd_per_mtoken", pr->priced ? json_real(pr->usd_per_mtoken) : json_null());
    json_object_set_new(doc, "unpriced", pr->priced ? json_null() : json_string(pr->unpriced));
    json_object_set_new(doc, "priced_iteration_s", pr->priced ? json_real(pr->iteration_s) : json_null());
    json_t *bytes = json_object();
    for (int k = 0; k < AH_N_LINK_CLASSES; k++)
        json_object_set_new(bytes, ah_link_class_name((ah_link_t)k), json_real(pr->traffic.bytes[k]));
    json_object_set_new(doc, "bytes_per_iteration", bytes);
    json_t *hourly = json_object(); /* egress $/h by the classes that cross a boundary */
    for (int k = AH_LINK_INTER_ZONE; k < AH_N_LINK_CLASSES; k++)
        json_object_set_new(hourly, ah_link_class_name((ah_link_t)k),
                            pr->priced && !pr->egress_unpriced
                                ? json_real(pr->traffic.egress_usd_by[k] * pr->iterations_per_hour) : json_null());
    json_object_set_new(doc, "egress_usd_per_hour_by_link", hourly);
    json_object_set_new(doc, "egress_usd_per_hour",
                        pr->priced && !pr->egress_unpriced ? json_real(pr->egress_usd_per_hour) : json_null());
    json_object_set_new(doc, "egress_unpriced", json_boolean(pr->egress_unpriced));
    json_t *kinds = json_object();
    for (int kind = 0; kind < AH_N_TRAFFIC_KINDS; kind++) {
        json_t *by = json_object();
        for (int k = 0; k < AH_N_LINK_CLASSES; k++)
            json_object_set_new(by, ah_link_class_name((ah_link_t)k), json_real(pr->traffic.kind_bytes[kind][k]));
        json_object_set_new(kinds, ah_traffic_kind_name((ah_traffic_kind_t)kind), by);
    }
    json_object_set_new(doc, "bytes_per_iteration_by_kind", kinds);
    const ah_plan_traffic_t *t = &pr->traffic;
    const double usd = t->kind_usd[AH_TRAFFIC_CKPT];
    json_object_set_new(doc, "checkpoint", json_pack("{s:o, s:f, s:o, s:f}", "every",
                                                     t->ckpt_every > 0 ? json_integer(t->ckpt_every) : json_null(),
                                                     "egress_usd_per_iteration", usd, "egress_usd_per_hour",
                                                     pr->priced ? json_real(usd * pr->iterations_per_hour) : json_null(),
                                                     "blocked_s_per_iteration", t->ckpt_blocked_s));
}

void ah_plan_crossings_json(const ah_plan_t *p, const ah_plan_traffic_t *t, json_t *doc) {
    json_t *list = json_array();
    for (int k = 0; k < t->n_crossings; k++) {
        const ah_plan_crossing_t *x = &t->crossings[k];
        const ah_net_link_t *o = x->override >= 0 ? &p->cluster.net.links[x->override] : NULL;
        json_t *bytes = json_object();
        for (int kind = 0; kind < AH_N_TRAFFIC_KINDS; kind++)
            json_object_set_new(bytes, ah_traffic_kind_name((ah_traffic_kind_t)kind), json_real(x->bytes[kind]));
        json_array_append_new(list, json_pack("{s:[s, s], s:b, s:o}", "between",
                                              o ? o->a : p->cluster.nodes[x->node_a].region,
                                              o ? o->b : p->cluster.nodes[x->node_b].region, "private",
                                              x->private_link, "bytes_per_iteration", bytes));
    }
    json_object_set_new(doc, "region_crossings", list);
}

