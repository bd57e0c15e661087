#!/usr/bin/env python3
"""The planner tables of the docs, from `autohet plan --json`.

Default: the paper-like clusters table of docs/planner.md: each cluster and model at global batch
128 x 2048 tokens, bf16, micro-batch auto, with --schedule auto (the default) and with --schedule
1f1b; one markdown row each: the iteration with the DP sync overlapped (what the planner compares:
iteration_overlap_s), the 1F1B-only plan's and the ratio, the speedup over every baseline
(megatron-best: the best symmetric plan, interleaved 1F1B with its best virtual-stage count where
faster, Megatron-Core's --overlap-grad-reduce), the schedules chosen, the lower bound over any
schedule and the gap of the plan to it.

--long-context: the long-sequence table of docs/long-context.md (issue 38): LLaMA-3.1 8B and 70B at
8k, 32k and 128k tokens (2^20 tokens an iteration: global batch 128, 32, 8) on the paper-like
clusters and h100-l40s-a10g-32; one row each: the plan with context parallelism (--cp auto, the
default) and its per-pipeline CP degrees, the plan without (--cp 1) or, where none fits, the device
and bytes the planner names, megatron-best (with CP, one degree for all; and without, from the
--cp 1 run) and the planning times.
Where nothing fits with the default flags, the row is planned again with --shard-optimizer auto
(marked "(sharded)"), which under --cp auto also tries CP with the optimizer sharded over the CP
ranks.

--regions: the across-regions table of docs/multi-host.md (issue 39): examples/clusters/two-region.json
and three-region.json (H100 in us-east-1, A100 / L40S in eu-west-1 and ap-northeast-1), LLaMA-2-13B
and 70B at 512 sequences of 4096 tokens; one row each: the planner's plan, the best plan confined
to one region (the planner on that region's nodes alone, the fastest of the regions), and the
region-blind plan (the planner on the cluster with every node in one zone and no links, then
evaluated on the real cluster): tokens/s and $ per million tokens with egress (both at the
predicted iteration, as `plan` prints them), and the bytes across regions per iteration.

Usage: bench/planner_table.py [BUILD_DIR] [--long-context | --regions]   (default build; from the repository root)
"""
import json
import re
import subprocess
import sys

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
AH = (ARGS[0] if ARGS else "build") + "/autohet"
CLUSTERS = ["paper-24", "mixed-32", "paper-64"]
MODELS = ["llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b"]
BASELINES = ["uniform", "batch-balanced", "megatron-best"]


def plan(model, path, *extra, batch=128, seq=2048):
    r = subprocess.run([AH, "plan", "--model", model, "--cluster", path, "--global-batch", str(batch),
                        "--seq-len", str(seq), "--json", *extra], capture_output=True, text=True)
    return (json.loads(r.stdout), None) if r.returncode == 0 else (None, r.stderr.strip())


def paper_table():
    print("| cluster | model | iteration s | 1F1B only s | x | " + " | ".join("vs " + b for b in BASELINES) +
          " | schedules | megatron-best | lower bound s | gap | search | planning s |")
    print("|---" * (11 + len(BASELINES)) + "|")
    for c in CLUSTERS:
        path = "examples/clusters/%s.json" % c
        for m in MODELS:
            d, err = plan(m, path)
            if d is None:
                print("| %s | %s | no plan: %s |" % (c, m, err.split(". Closest")[0][:90]))
                continue
            only, _ = plan(m, path, "--schedule", "1f1b")
            p = d["plan"]
            kinds = {}
            for pl in p["pipelines"]:
                devs = len({(st["devices"][0]["node"], st["devices"][0]["index"]) for st in pl["stages"]})
                k = pl.get("schedule", "1f1b")
                if k == "interleaved":
                    k += " v%d" % (len(pl["stages"]) // devs)
                kinds[k] = kinds.get(k, 0) + 1
            sched = ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items()))
            mb = d["baselines"]["megatron-best"]
            sp = ["%.2fx" % d["baselines"][b]["speedup"] if d["baselines"][b].get("speedup") else "n/a"
                  for b in BASELINES]
            it, lb = d["iteration_overlap_s"], d["lower_bound_s"]
            it1 = only["iteration_overlap_s"] if only else float("nan")
            print("| %s | %s | %.3f | %.3f | %.3f | %s | %s | %s | %.3f | %.1f%% | %s | %.2f |" % (
                c, m, it, it1, it1 / it, " | ".join(sp), sched,
                "%.3f s" % mb["iteration_overlap_s"] if mb.get("iteration_overlap_s") else "n/a", lb,
                100 * (it / lb - 1), "exact" if d["exact"] else "template", d["planning_s"]))


LONG_CLUSTERS = ["paper-24", "mixed-32", "paper-64", "h100-l40s-a10g-32"]
LONG_MODELS = ["llama3.1-8b", "llama3.1-70b"]
LONG_SEQS = [8192, 32768, 131072]


def degrees(d):
    """The plan's per-pipeline CP degrees, as "2, 2, 1", a CP group across nodes as "4 (2 nodes)"
    (TP t and pipelines x stages beside)."""
    p = d["plan"]
    cps = [pl.get("cp", 1) for pl in p["pipelines"]]
    shape = "TP %d, %d pipeline%s" % (p["tp"], len(cps), "s" if len(cps) > 1 else "")

    def nodes(pl):  # the nodes of the first stage's CP ranks (TP rank 0 of each)
        dev = pl["stages"][0]["devices"]
        return len({dev[j * p["tp"]]["node"] for j in range(pl.get("cp", 1))})
    return ", ".join(str(c) + (" (%d nodes)" % nodes(pl) if nodes(pl) > 1 else "")
                     for c, pl in zip(cps, p["pipelines"])), shape


def short_of(err):
    """What the planner names for a plan that does not fit: the device, its type and the bytes."""
    m = re.search(r"on (\S+) \(([^)]+)\), needs (\d+) bytes of its (\d+)", err or "")
    if not m:
        return "no plan: " + (err or "").split(". Closest")[0].split(";")[0]
    need, have = int(m.group(3)), int(m.group(4))
    return "does not fit: %s (%s) needs %d bytes of its %d (%.1f of %.1f GiB)" % (
        m.group(1), m.group(2), need, have, need / 2**30, have / 2**30)


def plan_or_sharded(m, path, batch, seq, *extra):
    """The plan with the default flags or, where nothing fits, with --shard-optimizer auto (marked
    " (sharded)"): (json, error, mark)."""
    d, err = plan(m, path, *extra, batch=batch, seq=seq)
    if d is not None:
        return d, None, ""
    d, err2 = plan(m, path, "--shard-optimizer", "auto", *extra, batch=batch, seq=seq)
    return (d, None, " (sharded)") if d is not None else (None, err, "")


def long_context_table():
    print("| model | tokens | cluster | `--cp auto` s | CP per pipeline | plan | `--cp 1` s | CP gain | "
          "megatron-best s (CP) / at `--cp 1` | vs megatron-best | planning s auto / cp 1 |")
    print("|---" * 11 + "|")
    for m in LONG_MODELS:
        for seq in LONG_SEQS:
            for c in LONG_CLUSTERS:
                path = "examples/clusters/%s.json" % c
                batch = 2**20 // seq
                d, err, sharded = plan_or_sharded(m, path, batch, seq)
                one, err1, sharded1 = plan_or_sharded(m, path, batch, seq, "--cp", "1")
                t1 = "%.3f%s" % (one["iteration_overlap_s"], sharded1) if one else short_of(err1)
                p1 = "%.2f" % one["planning_s"] if one else "-"
                if d is None:
                    print("| %s | %d | %s | %s | - | - | %s | - | - | - | - / %s |" % (m, seq, c, short_of(err), t1, p1))
                    continue
                t = d["iteration_overlap_s"]
                cps, shape = degrees(d)
                gain = "%.3fx" % (one["iteration_overlap_s"] / t) if one else "only with CP"
                mb = d["baselines"]["megatron-best"]
                mbs = ("%.3f (CP %d)" % (mb["iteration_overlap_s"], mb.get("cp", 1)) if mb.get("iteration_overlap_s")
                       else short_of(mb.get("error")))
                mb1 = one["baselines"]["megatron-best"] if one else {}
                mbs += " / " + ("%.3f" % mb1["iteration_overlap_s"] if mb1.get("iteration_overlap_s") else "none")
                sp = "%.2fx" % mb["speedup"] if mb.get("speedup") else "n/a"
                print("| %s | %d | %s | %.3f%s | %s | %s | %s | %s | %s | %s | %.2f / %s |" % (
                    m, seq, c, t, sharded, cps, shape, t1, gain, mbs, sp, d["planning_s"], p1))


def write_cluster(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def one_region(doc, region, tmp):
    """doc's nodes in `region`, its links between what is left."""
    c = json.loads(json.dumps(doc))
    c["nodes"] = [n for n in c["nodes"] if n["region"] == region]
    names = {n["region"] for n in c["nodes"]} | {n["zone"] for n in c["nodes"]}
    c["network"]["links"] = [l for l in c["network"].get("links", []) if set(l["between"]) <= names]
    return write_cluster(c, "%s/region-%s.json" % (tmp, region))


def region_blind(doc, tmp):
    """doc with every node in one zone of one region and no per-pair links."""
    c = json.loads(json.dumps(doc))
    for n in c["nodes"]:
        n["zone"] = "one-zone"
        n.pop("region", None)
    for k in ("links", "inter_region_gb_s", "inter_region_latency_us"):
        c["network"].pop(k, None)
    return write_cluster(c, tmp + "/blind.json")


def across(d):
    return "%.1f" % (d["bytes_per_iteration"].get("inter-region", 0) / 1e9)


def regions_table():
    import tempfile
    tmp = tempfile.mkdtemp(prefix="region-table-")
    batch, seq = 512, 4096
    print("| cluster | model | planner tokens/s | $/M tokens | GB across regions | one region: best | tokens/s | "
          "$/M tokens | region-blind on the real WAN: tokens/s | $/M tokens | GB across regions | planner vs one "
          "region | planner vs blind |")
    print("|---" * 13 + "|")
    for c in ["two-region", "three-region"]:
        path = "examples/clusters/%s.json" % c
        doc = json.load(open(path))
        regions = sorted({n["region"] for n in doc["nodes"]})
        for m in ["llama2-13b", "llama2-70b"]:
            d, err = plan(m, path, batch=batch, seq=seq)
            if d is None:
                print("| %s | %s | no plan: %s |" % (c, m, err[:90]))
                continue
            best, where = None, "none fits"
            for r in regions:
                o, _ = plan(m, one_region(doc, r, tmp), batch=batch, seq=seq)
                if o is not None and (best is None or o["tokens_per_s"] > best["tokens_per_s"]):
                    best, where = o, r
            b, err = plan(m, region_blind(doc, tmp), "-o", tmp + "/blind-plan.json", batch=batch, seq=seq)
            real = None
            if b is not None:
                e = subprocess.run([AH, "evaluate", "--plan", tmp + "/blind-plan.json", "--cluster", path, "--json"],
                                   capture_output=True, text=True)
                real = json.loads(e.stdout) if e.returncode == 0 else None
            one = ("%s | %.0f | %.4f" % (where, best["tokens_per_s"], best["usd_per_mtoken"]) if best
                   else "none fits | - | -")
            blind = ("%.0f | %.4f | %s" % (real["tokens_per_s"], real["usd_per_mtoken"], across(real)) if real
                     else "- | - | -")
            print("| %s | %s | %.0f | %.4f | %s | %s | %s | %s | %s |" % (
                c, m, d["tokens_per_s"], d["usd_per_mtoken"], across(d), one, blind,
                "%.2fx" % (d["tokens_per_s"] / best["tokens_per_s"]) if best else "-",
                "%.2fx" % (d["tokens_per_s"] / real["tokens_per_s"]) if real else "-"))


if "--regions" in sys.argv[1:]:
    regions_table()
elif "--long-context" in sys.argv[1:]:
    long_context_table()
else:
    paper_table()
