#!/usr/bin/env python3
"""Where autohet's tokens go against the availability bound, from `autohet simulate --bound --json F`.

The bound (docs/simulator.md "What bounds autohet's share of on-demand's tokens on paper-288") trains
every availability set at autohet's plan of it, the whole time it lasts. Every second autohet spends
otherwise costs the bound's rate at that moment, R(t). This splits bound - autohet into:
  - each recovery phase (the step in progress, the save at the notice, re-plan, restart, transfer,
    the first step; a recovery another event cut short): the integral of R over it;
  - the plan lagging the set: while training, R - the running plan's rate (joined nodes waiting
    until their restart pays, docs/simulator.md rule 6: until session 19 for the next checkpoint; a
    plan made before a removal that did not hit it);
  - the periodic checkpoints' holds (at the running plan's rate) and the tokens rolled back;
less the tokens the recoveries keep (the step in progress and the first step count). The remainder
(printed) is what this accounting does not follow (a hold inside a phase, rounding).
Also printed: the policy's median recovery after a preemption (notice to the first finished step, over
those no other event cut short), and the recoveries in place (joins; with ranks parked: docs/simulator.md
rule 11) and the notices that saved but relaunched. Usage: sim_bound_gap.py out.json [policy]   (policy: autohet by default)
"""
import bisect
import json
import sys


def gap_terms(doc, name="autohet"):
    """[(what, tokens)] of bound - policy `name`, the last one what the accounting does not follow."""
    pol = {p["policy"]: p for p in doc["policies"]}
    p, b = pol[name], doc["bound"]
    H = doc["horizon_s"]
    starts = [s["start_s"] for s in b["timeline"]]
    rates = [s["tokens_per_s"] for s in b["timeline"]]

    def bound_tokens(t0, t1):  # the integral of R over [t0, t1)
        t0, t1 = max(0.0, t0), min(H, t1)
        tot, i = 0.0, max(0, bisect.bisect_right(starts, t0) - 1)
        while t0 < t1 and i < len(starts):
            end = min(t1, starts[i + 1] if i + 1 < len(starts) else H)
            tot += rates[i] * max(0.0, end - t0)
            t0, i = end, i + 1
        return tot

    phases = ("wait_s", "save_s", "replan_s", "startup_s", "transfer_s", "first_step_s")
    terms = dict.fromkeys(phases + ("interrupted",), 0.0)
    recs = p["recoveries"]
    for k, r in enumerate(recs):
        if r["interrupted"]:
            terms["interrupted"] += bound_tokens(r["t_s"], recs[k + 1]["t_s"] if k + 1 < len(recs) else H)
            continue
        t = r["t_s"]
        for key in phases:
            terms[key] += bound_tokens(t, t + r["breakdown"][key])
            t += r["breakdown"][key]
    lag, seg_tokens = 0.0, 0.0
    for s in p["timeline"]:
        d = s["end_s"] - s["start_s"]
        if s["phase"] == "train":
            lag += bound_tokens(s["start_s"], s["end_s"]) - s["tokens_per_s"] * d
            seg_tokens += s["tokens_per_s"] * d
        elif s["phase"] == "stalled":
            lag += bound_tokens(s["start_s"], s["end_s"])
    hold = p["checkpoint_hours"] * p["breakdown"]["train_tokens_per_s"] * 3600  # at the mean training rate
    kept = p["tokens"] + p["tokens_lost"] + hold - seg_tokens  # trained outside the training segments
    out = [("the step in progress at a notice", terms["wait_s"]), ("the save at the notice", terms["save_s"]),
           ("re-plan", terms["replan_s"]), ("restart", terms["startup_s"]), ("transfer", terms["transfer_s"]),
           ("the first step", terms["first_step_s"]), ("recoveries cut short by another event", terms["interrupted"]),
           ("the plan lagging the set (joins waiting, stalls)", lag),
           ("the periodic checkpoints' holds", hold), ("rolled back", p["tokens_lost"]),
           ("less: kept from the step in progress and the first step", -kept)]
    out.append(("not followed by this accounting", b["tokens"] - p["tokens"] - sum(v for _, v in out)))
    return out


def main():
    doc = json.load(open(sys.argv[1]))
    name = sys.argv[2] if len(sys.argv) > 2 else "autohet"
    pol = {p["policy"]: p for p in doc["policies"]}
    p, od, b = pol[name], pol.get("on-demand"), doc["bound"]
    gap, B = b["tokens"] - p["tokens"], 1e9
    print(f"bound {b['tokens'] / B:.3f} B, {name} {p['tokens'] / B:.3f} B: gap {gap / B:.3f} B"
          + (f" ({100 * gap / od['tokens']:.1f} % of on-demand's {od['tokens'] / B:.3f} B)" if od else ""))
    for what, v in gap_terms(doc, name):
        print(f"  {what:58s} {v / B:7.3f} B" + (f"  {100 * v / od['tokens']:5.1f} %" if od else ""))
    rec = sorted(r["seconds"] for r in p["recoveries"] if r["event"].startswith("preempt") and not r["interrupted"])
    med = (rec[(len(rec) - 1) // 2] + rec[len(rec) // 2]) / 2 if rec else 0
    print(f"  ({name} trained {p['breakdown']['train_h']:.2f} h of {doc['horizon_s'] / 3600:.2f}; median recovery "
          f"after a preemption {med:.1f} s over {len(rec)} not cut short)")
    recs = p["recoveries"]
    inp = [r for r in recs if r.get("in_place")]
    joins = sum(1 for r in inp if r["event"].startswith("join"))
    parked = [r for r in inp if r.get("parked")]
    saved_relaunch = sum(1 for r in recs[1:] if r["event"].startswith("preempt") and r["saved"] and not r.get("in_place"))
    print(f"  (recoveries {len(recs)}: in place {len(inp)} ({joins} joins, {len(parked)} with "
          f"{sum(r['parked'] for r in parked)} ranks parked); notices that saved and relaunched {saved_relaunch})")


if __name__ == "__main__":
    main()
