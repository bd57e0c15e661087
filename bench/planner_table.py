#!/usr/bin/env python3
"""The paper-like clusters table of docs/planner.md: `autohet plan --json` for each cluster and model
at global batch 128 x 2048 tokens, bf16, micro-batch auto, with --schedule auto (the default) and
with --schedule 1f1b; one markdown row each: the iteration with the DP sync overlapped (what the
planner compares: iteration_overlap_s), the 1F1B-only plan's and the ratio, the speedup over every
baseline (megatron-best: the best symmetric plan, interleaved 1F1B with its best virtual-stage count
where faster, Megatron-Core's --overlap-grad-reduce), the schedules chosen, the lower bound over any
schedule and the gap of the plan to it.

Usage: bench/planner_table.py [BUILD_DIR]   (default build; run from the repository root)
"""
import json
import subprocess
import sys

AH = (sys.argv[1] if len(sys.argv) > 1 else "build") + "/autohet"
CLUSTERS = ["paper-24", "mixed-32", "paper-64"]
MODELS = ["llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b"]
BASELINES = ["uniform", "batch-balanced", "megatron-best"]


def plan(model, path, *extra):
    r = subprocess.run([AH, "plan", "--model", model, "--cluster", path, "--global-batch", "128",
                        "--seq-len", "2048", "--json", *extra], capture_output=True, text=True)
    return (json.loads(r.stdout), None) if r.returncode == 0 else (None, r.stderr.strip())


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
