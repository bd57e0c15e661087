/* Cluster spec: GPU types (from the built-in catalog or given in full), nodes, network.
 *
 * JSON form (DESIGN.md "Exact names"):
 *   {"gpu_types": {NAME: {"memory_gib", "tflops": {"bf16","fp16","fp32"}, "mem_bw_gb_s",
 *                         "intra_node_gb_s", "efficiency", "sm_count",
 *                         "attention": "fused" | "unfused", "base": CATALOG_NAME,
 *                         "emulate": {"slowdown", "memory_mib"}}},
 *    "nodes": [{"name", "gpu", "count", "zone", "region", "spot", "usd_per_gpu_hour",
 *               "host_memory_gib"}],
 *    "network": {"inter_node_gb_s", "inter_zone_gb_s", "latency_us", "cloud_gb_s",
 *                "inter_region_gb_s", "inter_region_latency_us",
 *                "egress_usd_per_gb": {"inter_zone", "inter_region"},
 *                "links": [{"between": [A, B], "gb_s", "latency_us", "usd_per_gb", "private",
 *                           "total_gb_s"}], ...}}
 * Zones belong to regions: a node without "region" is in its zone's region (that of another node
 * of the zone that names one, else "default"); a zone named in two regions is refused. A link
 * names two zones or two regions (docs/cost-model.md "Links").
 * A type needs the rates ("tflops") only of the precisions it runs: one left out, or null
 * (which removes a catalog type's), is 0 here and means the type cannot run that precision (the
 * planner leaves it out, plan validation refuses it). Bandwidths are GB/s (10^9 bytes), memory GiB. A node's "gpu" may name a catalog type without
 * listing it in gpu_types; an entry in gpu_types with the name (or "base") of a catalog type
 * overrides only the fields it gives.
 *
 * Ownership: ah_cluster_t owns its arrays; free with ah_cluster_free. Types and nodes are
 * referred to by index everywhere else (plan, planner, cost model).
 */
#ifndef AH_SPEC_CLUSTER_H
#define AH_SPEC_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define AH_NAME_MAX 64

typedef struct ah_gpu_type {
    char name[AH_NAME_MAX];
    double memory_gib;      /* device memory */
    double tflops_bf16;     /* dense peak, TFLOP/s; 0: cannot run this precision */
    double tflops_fp16;
    double tflops_fp32;
    double mem_bw_gb_s;     /* device memory bandwidth */
    double intra_node_gb_s; /* per-GPU bandwidth to its node peers (NVLink or PCIe) */
    double efficiency;      /* (0, 1]: with sm_count, the ceiling of the GEMM curve (the fraction
                               of peak the largest matmuls reach, cost/kernel_time.h); without,
                               the fraction of peak the flat roofline gives every matmul */
    double reserved_gib;    /* per-device constant: CUDA context, allocator slack */
    double emulate_slowdown;   /* > 0: a CPU rank emulating this type stretches compute k x */
    double emulate_memory_mib; /* > 0: that rank's allocator cap */
    int sm_count;           /* streaming multiprocessors; 0 (unknown): priced by the flat roofline */
    bool attention_unfused; /* priced as unfused attention (T x T scores in memory), not fused */
} ah_gpu_type_t;

typedef struct ah_node {
    char name[AH_NAME_MAX];
    int type;               /* index into ah_cluster_t.types */
    int count;              /* GPUs in the node */
    char zone[AH_NAME_MAX];
    char region[AH_NAME_MAX]; /* "default" unless given (or given to another node of the zone) */
    bool spot;
    double usd_per_gpu_hour; /* 0 when no_price */
    bool no_price;          /* the file leaves "usd_per_gpu_hour" out: the price is unknown, not $0
                               (ah_cluster_require_prices, ah_cluster_unpriced) */
    double host_memory_gib; /* the node's host memory, GiB (optional; 0: not given, not checked):
                               holds the asynchronous checkpoints' snapshots (ckpt/host_memory.h) */
} ah_node_t;

/* A per-pair override of the network ("links"): A and B are two zones, or two regions. A field
 * the file leaves out is negative here and means the class's figure (the pair's inter-zone or
 * inter-region bandwidth, latency, egress price). */
#define AH_MAX_NET_LINKS 64
typedef struct ah_net_link {
    char a[AH_NAME_MAX], b[AH_NAME_MAX];
    bool regions;        /* a and b name regions (else zones) */
    double gb_s;         /* per GPU; < 0: the class's */
    double latency_us;   /* < 0: the class's */
    double usd_per_gb;   /* < 0: the class's egress price */
    double total_gb_s;   /* the pair's whole capacity, shared by the flows crossing it; 0: none */
    bool private_link;   /* a VPN or cloud peering: traffic on it is not on the open internet */
} ah_net_link_t;

typedef struct ah_network {
    double inter_node_gb_s;  /* per-GPU bandwidth between nodes of one zone */
    double inter_zone_gb_s;  /* per-GPU bandwidth between zones */
    double latency_us;       /* per message, between nodes */
    double inter_zone_latency_us;
    double intra_latency_us; /* per message inside a node */
    double cloud_gb_s;       /* object storage bandwidth, per node */
    double inter_region_gb_s; /* per-GPU bandwidth between regions */
    double inter_region_latency_us;
    bool egress_priced;      /* "egress_usd_per_gb" given; false: egress is unpriced ($0, said) */
    double egress_inter_zone_usd_per_gb;
    double egress_inter_region_usd_per_gb;
    int n_links;
    ah_net_link_t links[AH_MAX_NET_LINKS];
} ah_network_t;

typedef struct ah_cluster {
    ah_gpu_type_t *types;
    int n_types;
    ah_node_t *nodes;
    int n_nodes;
    ah_network_t net;
} ah_cluster_t;

/* The network part of the document (spec/cluster_net.c): parses "network" (NULL: defaults) for
 * the nodes already in c, resolves nodes' regions and refuses a zone in two regions; and writes
 * it back (fields added for regions only where they mean something, so clusters without them
 * write what they wrote before). */
struct json_t;
ah_status_t ah_cluster_parse_network(const struct json_t *net, const char *doc, ah_cluster_t *c,
                                     ah_error_t *err);
struct json_t *ah_network_to_json(const ah_cluster_t *c);
/* How many distinct regions the nodes are in. */
int ah_cluster_region_count(const ah_cluster_t *c);
/* The domains of a hierarchical sync over the n nodes nodes[] (indices into c->nodes, repeats
 * allowed): their regions when they span two or more, else their zones; domain[m] (0 .. k-1, in
 * the order of first appearance) for each, and k, the count (1: one zone, no hierarchy). */
int ah_cluster_domains(const ah_cluster_t *c, const int *nodes, int n, int *domain);

/* The built-in catalog (figures and their sources in catalog.c). */
int ah_gpu_catalog_count(void);
const ah_gpu_type_t *ah_gpu_catalog_get(int i);
const ah_gpu_type_t *ah_gpu_catalog_find(const char *name); /* NULL if unknown */

ah_status_t ah_cluster_load(const char *path, ah_cluster_t *c, ah_error_t *err);
/* `where` names the document in messages (a file name, or "plan.json: cluster"). */
struct json_t;
ah_status_t ah_cluster_from_json(const struct json_t *doc, const char *where, ah_cluster_t *c,
                                 ah_error_t *err);
/* Full form: every type written out, so the document stands alone. */
struct json_t *ah_cluster_to_json(const ah_cluster_t *c);
ah_status_t ah_cluster_copy(const ah_cluster_t *src, ah_cluster_t *dst, ah_error_t *err);
void ah_cluster_free(ah_cluster_t *c);

/* Lookups; -1 when absent. */
int ah_cluster_find_node(const ah_cluster_t *c, const char *name);
int ah_cluster_find_type(const ah_cluster_t *c, const char *name);
int ah_cluster_gpu_count(const ah_cluster_t *c);
int ah_cluster_type_gpus(const ah_cluster_t *c, int type); /* the GPUs of nodes of that type */

/* Device memory capacity in bytes (memory_gib, or emulate.memory_mib when emulated). */
int64_t ah_gpu_capacity_bytes(const ah_gpu_type_t *g);
/* Peak FLOP/s for a precision index: 0 fp32, 1 bf16, 2 fp16 (ah_precision_t in cost/cost.h);
 * 0 where the type gives no rate for it (it cannot run that precision). */
double ah_gpu_peak_flops(const ah_gpu_type_t *g, int precision);

/* Prices: one rule for every verb (docs/planner.md "Prices"). A node may leave
 * "usd_per_gpu_hour" out; it is then unpriced (no_price), never $0 ("usd_per_gpu_hour": 0 is a
 * price: GPUs that cost nothing). Where a price is used to decide or total something
 * (--objective cost, --budget, simulate's $ figures), a cluster with an unpriced node is refused:
 * ah_cluster_require_prices. Where a $ figure is only shown (plan's and evaluate's $/h and $ per
 * million tokens), it is shown as "unpriced" when a node it pays for has no price:
 * ah_cluster_unpriced. */

/* Refuses (AH_ERR_INVALID) a cluster with an unpriced node: "<use> needs every node's price:
 * <where>: no "usd_per_gpu_hour" for nodes h20-0, h20-1 (2 of 3 nodes); give each node its price
 * ..." (node lists summarised as core/names.h does; ", or leave <use> out" when use is a flag).
 * `use` names what needs the price ("--objective cost", "simulate (its $ ...)"), `where` the
 * cluster (its file or name). AH_OK when every node has a price. */
ah_status_t ah_cluster_require_prices(const ah_cluster_t *c, const char *use, const char *where,
                                      ah_error_t *err);
/* The unpriced nodes among those with used[i] true (used NULL: every node): their count, and
 * their names ("h20-0, h20-1", summarised) into names (cap bytes; may be NULL). */
int ah_cluster_unpriced(const ah_cluster_t *c, const bool *used, char *names, size_t cap);

/* The built-in example cluster used by the README's first command and tests:
 * "mixed-32": 2 nodes x 8 A100-80G (zone a), 1 x 8 H800 (zone a), 1 x 8 H20 (zone b);
 * "cpu-hetero": emulated devices for the CPU trainer (fast-0: 2 x cpu-fast, slow-0/1: 2 x
 * cpu-slow, 3x slower with more memory). */
ah_status_t ah_cluster_builtin(const char *name, ah_cluster_t *c, ah_error_t *err);
/* Loads a built-in name or a JSON path. */
ah_status_t ah_cluster_open(const char *name_or_path, ah_cluster_t *c, ah_error_t *err);

#endif
