#!/usr/bin/env python3
"""One published row's iteration, term by term, as 1F1B and as interleaved 1F1B, and what
Megatron-LM 2021's blocking pipeline exchanges would add (docs/cost-model.md, "Published runs").

For row NAME of bench/published_runs.json (its plan as bench_published_runs.py builds it) prints,
for v = 1 and v = V (--v, default the row's "virtual_stages"), `autohet evaluate`'s breakdown
(compute, bubble, p2p, TP, DP sync, optimizer), the predicted TFLOP/s per GPU, predicted /
published, and the rate of the compute term alone (the FLOPs over compute_s x GPUs).

Then the p2p of Megatron-LM at the commit its SC21 scripts name (6985e58,
megatron/p2p_communication.py `_communicate`: batch_isend_irecv, req.wait(), then
torch.cuda.synchronize()): every exchange blocks its device until each tensor it sends has been
received and each it receives has arrived; with the scatter/gather optimisation each of the t TP
ranks sends 1/t of the N x C activation on its own NIC and the receiver all-gathers it over
NVLink. The interleaved order (schedules.py forward_backward_pipelining_with_interleaving:
warm-up forwards each followed by send_forward_recv_forward, then per step a forward, a backward
and one send_forward_backward_recv_forward_backward, then backwards each followed by
send_backward_recv_backward) is replayed on uniform chunks (the row's stage 1 times) with
exchanges of zero cost and of sends x (N C elt / t) / NIC + receives x ((t - 1) / t N C elt) /
NVLink seconds; the difference is what the blocking exchanges cost that order, printed against
the p2p the model charges (which prices autohet's runtime: non-blocking sends, scatter/gather too).
--b B prices the row at micro-batch B instead of its own (e.g. the SC21 script's);
--nvlink-gb-s is the GPU type's NVLink rate each way (the catalog's A100: 300).
Usage: bench/published_row_terms.py AUTOHET NAME [--v V] [--b B] [--nvlink-gb-s 300]
"""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_published_runs as bpr  # noqa: E402

TERMS = ("compute_s", "bubble_s", "p2p_s", "tp_comm_s", "dp_sync_s", "optimizer_s")


def chunk_of(k, P, v, forward):
    c = k % (P * v) // P
    return c if forward else v - 1 - c


def device_ops(d, P, v, n):
    """Device d's ops in Megatron's interleaved order: ("F"|"B",) or ("x", sends, recv_prev, recv_next)
    with sends a tuple of "next"/"prev" (recv flags as schedules.py sets them)."""
    N, ops = n * v, []
    warm = N if n == P else min(2 * (P - d - 1) + (v - 1) * P, N)
    if d: ops.append(("x", (), True, False))
    for k in range(warm):
        ops.append(("F",))
        send = ("next",) if not (d == P - 1 and chunk_of(k, P, v, True) == v - 1) else ()
        recv_prev = not (d == 0 and chunk_of(k + 1, P, v, True) == 0) and k != N - 1
        recv_next = k == warm - 1 and n != P and d != P - 1
        ops.append(("x", send, recv_prev, recv_next))
    for k in range(N - warm):
        f = k + warm
        ops += [("F",), ("B",)]
        send = (("next",) if not (d == P - 1 and chunk_of(f, P, v, True) == v - 1) else ()) + \
               (("prev",) if not (d == 0 and chunk_of(k, P, v, False) == 0) else ())
        recv_prev = k != N - warm - 1 and not (d == 0 and chunk_of(f - (P - 1), P, v, True) == v - 1)
        recv_next = not (d == P - 1 and chunk_of(k - (P - 1), P, v, False) == 0)
        ops.append(("x", send, recv_prev, recv_next))
    if n == P and d != P - 1: ops.append(("x", (), False, True))
    for k in range(N - warm, N):
        ops.append(("B",))
        send = ("prev",) if not (d == 0 and chunk_of(k, P, v, False) == 0) else ()
        recv_next = k != N - 1 and not (d == P - 1 and chunk_of(k + 1, P, v, False) == v - 1)
        ops.append(("x", send, False, recv_next))
    return ops


def megatron21_makespan(P, v, n, F, B, send_s, recv_s):
    """Makespan of the order above, an exchange ending when its partners' matching exchanges
    have started (the j-th send to a neighbour meets that neighbour's j-th receive from it)."""
    ops = [device_ops(d, P, v, n) for d in range(P)]
    partner = {}
    for d in range(P):
        for way, nb, recv_at in (("next", (d + 1) % P, 2), ("prev", (d - 1) % P, 3)):
            sends = [i for i, o in enumerate(ops[d]) if o[0] == "x" and way in o[1]]
            recvs = [i for i, o in enumerate(ops[nb]) if o[0] == "x" and o[recv_at]]
            assert len(sends) == len(recvs), (d, way)
            for a, b in zip(sends, recvs):
                partner.setdefault((d, a), []).append((nb, b))
                partner.setdefault((nb, b), []).append((d, a))
    start, end = [[0.0] * len(o) for o in ops], [0.0] * P
    changed = True
    while changed:  # starts only grow, and no cycle of waits exists in the order: this settles
        changed = False
        for d in range(P):
            t = 0.0
            for i, o in enumerate(ops[d]):
                if start[d][i] != t:
                    start[d][i], changed = t, True
                if o[0] == "x":
                    t = max([t] + [start[e][j] for e, j in partner.get((d, i), [])])
                    t += len(o[1]) * send_s + (o[2] + o[3]) * recv_s
                else:
                    t += F if o[0] == "F" else B
            end[d] = t
    return max(end)


def evaluate(ah, r, v, tmp):
    r = dict(r, virtual_stages=v) if v > 1 else {k: x for k, x in r.items() if k != "virtual_stages"}
    path = os.path.join(tmp, f"{r['name']}-v{v}.plan.json")
    json.dump(bpr.plan_for(r), open(path, "w"))
    out = subprocess.run([ah, "evaluate", "--plan", path, "--json"], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{r['name']} v {v}: evaluate failed: {out.stderr.strip()[:300]}")
    return json.loads(out.stdout)


def main():
    args = sys.argv[1:]
    opt = {"--v": None, "--b": None, "--nvlink-gb-s": "300"}
    for k in opt:
        if k in args:
            i = args.index(k)
            opt[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    ah, name = args
    rows = {r["name"]: r for r in json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "published_runs.json")))["runs"]}
    if name not in rows:
        raise SystemExit(f"no row {name} in bench/published_runs.json")
    r = dict(rows[name], micro_batch=int(opt["--b"])) if opt["--b"] else rows[name]
    V = int(opt["--v"] or r.get("virtual_stages", 1))
    flops = bpr.model_flops(r)
    print(f"{name}: {r['gpus']} GPUs, t {r['t']}, p {r['p']}, B {r['batch']}, b {r['micro_batch']}, published {r['tflops_per_gpu']} TFLOP/s per GPU")
    print(f"{'v':>2} {'iteration':>9} " + " ".join(f"{k[:-2]:>9}" for k in TERMS) + f" {'TFLOP/s':>8} {'pred/pub':>8} {'compute TFLOP/s':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for v in sorted({1, V}):
            ev = evaluate(ah, r, v, tmp)
            it, b = ev["iteration_s"], ev["breakdown"]
            print(f"{v:2} {it:9.3f} " + " ".join(f"{b[k]:9.3f}" for k in TERMS) +
                  f" {flops / (it * r['gpus']) / 1e12:8.1f} {flops / (it * r['gpus']) / 1e12 / r['tflops_per_gpu']:8.3f}"
                  f" {flops / (b['compute_s'] * r['gpus']) / 1e12:15.1f}")
    if V == 1:
        return
    st = ev["pipelines"][0]["stages"][1]  # a chunk without the embedding or the head
    t, n = r["t"], r["batch"] // (r["gpus"] // (r["t"] * r["p"]) * r["micro_batch"])
    X = r["micro_batch"] * r["seq"] * r["hidden"] * 2  # N x C, 16-bit
    send_s = X / t / (r["inter_node_gb_s"] * 1e9)
    recv_s = (t - 1) / t * X / (float(opt["--nvlink-gb-s"]) * 1e9)
    free = megatron21_makespan(r["p"], V, n, st["fwd_s"], st["bwd_s"], 0, 0)
    blocking = megatron21_makespan(r["p"], V, n, st["fwd_s"], st["bwd_s"], send_s, recv_s) - free
    it = ev["iteration_s"] - b["p2p_s"] + blocking
    print(f"Megatron-LM 2021 interleaved order, uniform chunks (F {1e3 * st['fwd_s']:.1f} ms, B {1e3 * st['bwd_s']:.1f} ms), "
          f"n {n}: bubble {(free - n * V * (st['fwd_s'] + st['bwd_s'])) / (st['fwd_s'] + st['bwd_s']):.2f} chunk steps (p - 1 = {r['p'] - 1})")
    print(f"blocking scatter/gather exchanges ({1e3 * send_s:.3f} ms a send on the NIC, {1e3 * recv_s:.3f} ms a receive's all-gather): "
          f"{blocking:.3f} s where the model charges p2p {b['p2p_s']:.3f} s; so priced: {it:.3f} s, "
          f"{flops / (it * r['gpus']) / 1e12:.1f} TFLOP/s, pred/pub {flops / (it * r['gpus']) / 1e12 / r['tflops_per_gpu']:.3f}")


if __name__ == "__main__":
    main()
