#!/usr/bin/env python3
"""The paper-like clusters table of docs/planner.md: `autohet plan --json` for each cluster and model
at global batch 128 x 2048 tokens, bf16, micro-batch auto; one markdown row each, with the speedup
over every baseline and the gap to the lower bound (of the search's closed form, which the bound
bounds; the iteration is the replayed schedule).

Usage: bench/planner_table.py [BUILD_DIR]   (default build; run from the repository root)
"""
import json
import subprocess
import sys

AH = (sys.argv[1] if len(sys.argv) > 1 else "build") + "/autohet"
CLUSTERS = ["paper-24", "mixed-32", "paper-64"]
MODELS = ["llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b"]
BASELINES = ["uniform", "batch-balanced", "megatron-best"]

print("| cluster | model | iteration s | closed form s | " + " | ".join("vs " + b for b in BASELINES) +
      " | plan | lower bound s | gap | search | planning s |")
print("|---" * (9 + len(BASELINES)) + "|")
for c in CLUSTERS:
    path = "examples/clusters/%s.json" % c
    for m in MODELS:
        r = subprocess.run([AH, "plan", "--model", m, "--cluster", path, "--global-batch", "128",
                            "--seq-len", "2048", "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            print("| %s | %s | no plan: %s |" % (c, m, r.stderr.strip().split(". Closest")[0][:90]))
            continue
        d = json.loads(r.stdout)
        p = d["plan"]
        stages = [len(pl["stages"]) for pl in p["pipelines"]]
        types = sorted({st["gpu"] for pl in p["pipelines"] for st in pl["stages"]})
        shape = "tp %d, mb %d, %d pipelines (%s stages), %s" % (
            p["tp"], p["train"]["micro_batch"], len(stages), ",".join(map(str, stages[:6])) +
            (",..." if len(stages) > 6 else ""), "+".join(types))
        if d.get("from_baseline"):
            shape += " (= %s)" % d["from_baseline"]
        sp = []
        for b in BASELINES:
            v = d["baselines"][b]
            sp.append("%.2fx" % v["speedup"] if v.get("speedup") else "n/a")
        it, est, lb = d["iteration_s"], d["search_value_s"], d["lower_bound_s"]
        print("| %s | %s | %.3f | %.3f | %s | %s | %.3f | %.1f%% | %s | %.2f |" % (
            c, m, it, est, " | ".join(sp), shape, lb, 100 * (est / lb - 1),
            "exact" if d["exact"] else "template", d["planning_s"]))
