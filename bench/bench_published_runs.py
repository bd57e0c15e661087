#!/usr/bin/env python3
"""Published Megatron-LM / Megatron-DeepSpeed runs vs `autohet evaluate` (issue #18's table).

For each row of bench/published_runs.json: the run's own plan (Megatron's rank order: TP fastest,
then DP, then PP; t GPUs of one node per stage; even layers; equal batch), scored by
`autohet evaluate --json` on a homogeneous cluster of 8-GPU nodes with the row's per-GPU
inter-node bandwidth. Predicted TFLOP/s per GPU = the source's model FLOPs per iteration (as the
source counts them, e.g. Megatron's Eq. 3 with recomputation) / (predicted iteration s x GPUs).
Prints both, and the ratio predicted / published. A row with "excluded" is printed with its
reason and left out of the worst error. Without --check it never fails on a ratio (a bench); with
--check TOL (tests/test_published_runs.sh) it exits 1 when a row that is not excluded is off by
more than TOL (e.g. 0.10), or when evaluate fails on any row, naming the rows.
Usage: bench/bench_published_runs.py AUTOHET [ROWS_JSON] [--check TOL]
"""
import json, os, subprocess, sys, tempfile


def model_flops(r):
    """FLOPs per iteration as the source counts them."""
    B, s, l, h, V = r["batch"], r["seq"], r["layers"], r["hidden"], r["vocab"]
    if r["flops"] != "megatron-eq3":
        raise SystemExit(f"{r['name']}: unknown FLOP convention {r['flops']}")
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def stage_bounds(layers, p):
    """Even layers (Megatron-LM); where p does not divide them, Megatron-DeepSpeed's partition
    with the embedding and the head counted as one layer each (BLOOM: 70 + 2 over 12 = 6 each)."""
    if layers % p == 0:
        return [s * layers // p for s in range(p + 1)]
    units = layers + 2
    cut = [round(s * units / p) for s in range(p + 1)]
    return [0] + [c - 1 for c in cut[1:-1]] + [layers]


def plan_for(r):
    """The run's plan. A row with "virtual_stages" v ran Megatron's interleaved 1F1B: p v stages of
    even layers, device group g on stages g, g + p, ... (--num-layers-per-virtual-pipeline-stage)."""
    t, p, n, v = r["t"], r["p"], r["gpus"], r.get("virtual_stages", 1)
    d = n // (t * p)
    assert d * t * p == n and r["batch"] % (d * r["micro_batch"]) == 0, r["name"]
    assert v == 1 or r["layers"] % (p * v) == 0, r["name"]
    bounds = stage_bounds(r["layers"], p * v)
    pipelines = []
    for dp in range(d):
        stages = []
        for s in range(p * v):
            devs = []
            for k in range(t):
                rank = (s % p * d + dp) * t + k  # TP fastest, then DP, then PP
                devs.append({"node": f"n{rank // 8}", "index": rank % 8})
            stages.append({"layers": [bounds[s], bounds[s + 1]], "gpu": r["gpu"],
                           "recompute": r["recompute"], "devices": devs})
        pipelines.append({"micro_batches": r["batch"] // (d * r["micro_batch"]), "stages": stages})
        if v > 1:
            pipelines[-1]["schedule"] = "interleaved"
    model = {"name": r["name"], "arch": "gpt2", "n_layer": r["layers"], "d_model": r["hidden"],
             "n_head": r["heads"], "n_kv_head": r["heads"], "d_ff": 4 * r["hidden"], "vocab": r["vocab"],
             "max_pos": r["seq"], "tied": True, "norm_eps": 1e-5}
    nodes = [{"name": f"n{i}", "gpu": r["gpu"], "count": 8} for i in range((n + 7) // 8)]
    return {"version": 1, "model": model,
            "train": {"global_batch": r["batch"], "seq_len": r["seq"], "micro_batch": r["micro_batch"],
                      "precision": "bf16"},
            "tp": t, "pipelines": pipelines,
            "cluster": {"gpu_types": {r["gpu"]: {"attention": r.get("attention", "fused")}},
                        "nodes": nodes, "network": {"inter_node_gb_s": r["inter_node_gb_s"]}}}


def bottleneck(ev):
    b = ev.get("bottleneck") or {}
    return f"stage {b.get('stage')} {1e3 * b.get('stage_s', 0):.0f} ms/mb, TP {b.get('tp_comm_share', 0):.0%}"


def main():
    args, tol = sys.argv[1:], None
    if "--check" in args:
        i = args.index("--check")
        if i + 1 >= len(args):
            raise SystemExit("--check needs a tolerance, e.g. --check 0.10")
        tol = float(args[i + 1])
        del args[i:i + 2]
    if not args:
        raise SystemExit(__doc__)
    ah = args[0]
    rows = json.load(open(args[1] if len(args) > 1 else
                          os.path.join(os.path.dirname(__file__), "published_runs.json")))
    bad = []
    print(f"{'run':18} {'GPUs':>5} {'t':>2} {'p':>3} {'v':>2} {'B':>5} {'b':>2} | {'published':>9} {'predicted':>9} {'pred/pub':>8} | bottleneck")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows["runs"]:
            path = os.path.join(tmp, r["name"] + ".plan.json")
            json.dump(plan_for(r), open(path, "w"))
            out = subprocess.run([ah, "evaluate", "--plan", path, "--json"], capture_output=True, text=True)
            try:
                ev = json.loads(out.stdout)
            except ValueError:
                print(f"{r['name']:18} evaluate failed: {out.stderr.strip()[:200]}")
                bad.append(f"{r['name']} (evaluate failed)")
                continue
            pred = model_flops(r) / (ev["iteration_s"] * r["gpus"]) / 1e12
            ratio = pred / r["tflops_per_gpu"]
            note = "" if ev.get("feasible", True) else " (does not fit)"
            if "excluded" in r:
                note += " (excluded: see the row's reason)"
            else:
                worst = max(worst, abs(ratio - 1))
                if tol is not None and abs(ratio - 1) > tol:
                    bad.append(f"{r['name']} (predicted/published {ratio:.3f})")
            print(f"{r['name']:18} {r['gpus']:5} {r['t']:2} {r['p']:3} {r.get('virtual_stages', 1):2} {r['batch']:5} {r['micro_batch']:2} | "
                  f"{r['tflops_per_gpu']:9.0f} {pred:9.1f} {ratio:8.2f} | {bottleneck(ev)}{note}")
    print(f"worst |predicted/published - 1| (rows not excluded): {worst:.1%}")
    if tol is not None and bad:
        print(f"off by more than {tol:.0%}: " + ", ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
