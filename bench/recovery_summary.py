#!/usr/bin/env python3
"""The recovery benchmarks' summaries, and the line stamper that times detection.

  recovery_summary.py notice WORK CAP   bench/bench_recovery.sh's (one machine, a preemption notice)
  recovery_summary.py lost WORK CAP     bench/bench_hosts_recovery.sh's (emulated hosts, a host lost
                                        without notice)
  recovery_summary.py tiers WORK CAP   bench_hosts_recovery.sh's SET=tiers (a notice and a host lost
                                        without notice, with and without in-memory replicas and the
                                        handover at a notice)
  recovery_summary.py inplace WORK      bench_recovery.sh's SET=inplace (a notice: the relaunch against
                                        autohet run --in-place, the survivors keeping their processes)
  recovery_summary.py readmit WORK      its SET=readmit: the second recovery (a join re-admitting a parked rank)
  recovery_summary.py inplace-base WORK its BASE=B0 run: in place with B0's autohet against this build's
  recovery_summary.py readmit-base WORK the same for SET=readmit BASE=B0: the join that re-admits
  recovery_summary.py stamp FILE OUT    appends each complete line of FILE (the agent's merged
                                        metrics) to OUT as "UNIX_TIME<TAB>LINE" when it appears
                                        (polls every 20 ms; waits for FILE; runs until killed)

WORK holds one directory per policy, local-first/ and cloud-only/ (and for `notice` memory/, the
local-first run with in-memory replicas, when there), each with the agent's merged
metrics.jsonl; CAP is the cluster's network.cloud_gb_s. For `lost`, WORK/NAME.kill holds the
Unix time of the kill (date +%s.%N) and WORK/NAME.stamps the stamper's output for that run.
"""
import json
import os
import sys
import time

POLICIES = ("local-first", "cloud-only")


def events(w, name):
    return [json.loads(l) for l in open(f"{w}/{name}/metrics.jsonl")]


def rec(w, name, k=0):
    """The run's k-th recovery (its recover event, and its preempt event's "saved")."""
    ev = events(w, name)
    r = [e for e in ev if e.get("event") == "recover"][k]
    r["saved"] = [e for e in ev if e.get("event") == "preempt"][k]["saved"]
    return r


def cloud_rate(r):
    """MB/s seen from the cloud (its bytes over its tier's seconds), 0 when none came from it."""
    ts = r["tier_seconds"]
    return r["bytes"]["cloud"] / ts["cloud"] / 1e6 if ts["cloud"] > 0 else 0


def tier_mb(r):
    return (f"{r['bytes']['local'] / 1e6:6.1f} / {r['bytes']['peer'] / 1e6:5.1f} / {r['bytes']['cloud'] / 1e6:6.1f} MB"
            + (f" (memory {r['bytes']['memory'] / 1e6:.1f})" if r["bytes"].get("memory") else ""))


def redo_lines(rows):
    for n, r in rows.items():
        print(f"{n}: stopped after step {r['stopped_at']}, resumed from step {r['step']}: "
              f"{r['stopped_at'] - r['step']} step(s) to redo (not in the times above)")


def notice_save(w, name):
    """The checkpoint event of the save at the notice (the one at the preempt event's step)."""
    ev = events(w, name)
    pre = next(e for e in ev if e.get("event") == "preempt")
    return next((e for e in ev if e.get("event") == "checkpoint" and e.get("step") == pre["step"]), None)


def memory_lines(w, rows):
    """With the memory run: its notice save by phase (memory first) against local-first's disk save."""
    m, d = notice_save(w, "memory"), notice_save(w, "local-first")
    if not m or not m.get("memory_first"):
        print("memory: the notice brought no memory-first save (see its log)")
        return
    snap, commit, total = m["memory_snapshot_seconds"], m["memory_commit_seconds"], m["seconds"]
    b = m["bytes"]["memory"]
    print(f"memory run, save at the notice: snapshot into host memory {snap:.2f} s "
          f"({m['bytes']['local'] / snap / 1e9 if snap > 0 else 0:.2f} GB/s), replication {commit - snap:.2f} s "
          f"({b / 1e6:.0f} MB, {b / (commit - snap) / 1e9 if commit > snap else 0:.2f} GB/s): committed in memory after "
          f"{commit:.2f} s (memory_committed {m['memory_committed']}); then the disks: the whole save {total:.2f} s")
    if d:
        print(f"what the grace period must cover, local-first (disk) / memory (snapshot + replication): "
              f"{d['seconds'] / commit:.2f}x ({d['seconds']:.2f} s / {commit:.2f} s)")
    lf, mm = rows["local-first"], rows["memory"]
    print(f"notice to the first finished step, memory / local-first: {mm['seconds'] / lf['seconds']:.2f}x "
          f"({mm['seconds']:.2f} s / {lf['seconds']:.2f} s; the job still writes the disks before it exits)")


def notice(w, cap):
    names = POLICIES + (("memory",) if os.path.exists(f"{w}/memory/metrics.jsonl") else ())
    rows = {n: rec(w, n) for n in names}
    state = sum(rows["local-first"]["bytes"].values())
    print(f"state restored (weights + AdamW m, v of the whole model, on the one rank left): {state / 1e6:.0f} MB; "
          f"cloud link capped at {cap * 1e3:.0f} MB/s per node (cluster cloud_gb_s = {cap:g})")
    print(f"{'':12s} {'total':>7s} {'stop':>6s} {'replan':>7s} {'startup':>8s} {'transfer':>9s} {'first':>6s}"
          f"   saved   stopped/resumed   bytes local / peer / cloud       cloud rate")
    for n, r in rows.items():
        b = r["breakdown"]
        rate = cloud_rate(r)
        print(f"{n:12s} {r['seconds']:6.2f}s {b['stop_s']:5.2f}s {b['replan_s']:6.3f}s {b['startup_s']:7.2f}s "
              f"{b['transfer_s']:8.2f}s {b['first_step_s']:5.2f}s   {'yes' if r['saved'] else 'no':5s}   {r['stopped_at']:>7d}/{r['step']:<7d}   "
              f"{tier_mb(r)}   "
              + (f"{rate:6.1f} MB/s" if rate else "-"))
    lf, co = rows["local-first"], rows["cloud-only"]
    def relaunch(r): return r["seconds"] - r["breakdown"]["stop_s"]
    def resumed(r): return r["seconds"] - r["breakdown"]["first_step_s"]
    # The headline follows the breakdown (detect, re-plan, relaunch, transfer by tier, first
    # step): it starts when the old job is gone (detect is ~0 here: the agent injects the event). The
    # stop before it (the step in progress, the save at the notice) happens inside the grace period,
    # while the node is still there; it is printed apart, as is the work each policy must redo.
    print(f"recovery time (old job gone -> first finished step: re-plan + relaunch + transfer + first step), "
          f"cloud-only / local-first: {relaunch(co) / relaunch(lf):.2f}x ({relaunch(co):.2f} s / {relaunch(lf):.2f} s)")
    print(f"notice to the first finished step (the grace-period stop included):                  "
          f"{co['seconds'] / lf['seconds']:.2f}x")
    print(f"notice to training resumed (stop included, first step not):                          "
          f"{resumed(co) / resumed(lf):.2f}x")
    print(f"state restore alone (the trainer's resume: manifests, transfer, verification, load):  "
          f"{co['breakdown']['transfer_s'] / lf['breakdown']['transfer_s']:.2f}x")
    if "memory" in rows:
        memory_lines(w, rows)
    redo_lines(rows)


def lost_row(w, name):
    """The recovery of run NAME from a host killed without notice, by phase, on the agent's clock.

    The agent's clock (t_s in its metrics: seconds since it started) is mapped to Unix time by the
    stamps: every trainer step line carries the t_s at which the agent wrote it, and appears in
    the file no earlier, so offset = min(arrival - t_s) over those lines (within the 20 ms poll).
    detect: the kill to the agent seeing mpirun's exit (the preempt event's t_s: the agent's notice
    time for a lost host); confirm: from there to the preempt line (the metrics and the report
    read from rank 0's host, every host of the plan asked to answer, the silent one named lost);
    drop: from there to the replan line, less the planning (disks dropped: the lost host's, which
    fails at once, or with cloud-only every survivor's too; then every host asked again before
    planning); launch: the rest of the agent's start-up (the hosts' run directories, mpirun, MPI,
    the trainer up to its resume). The agent's recover event counts from mpirun's exit and its
    start-up is what is left of it after re-plan, transfer and first step: confirm + drop + launch."""
    r = rec(w, name)
    ev = events(w, name)
    pre = next(e for e in ev if e.get("event") == "preempt")
    stamps = []
    for l in open(f"{w}/{name}.stamps"):
        t, line = l.rstrip("\n").split("\t", 1)
        stamps.append((float(t), json.loads(line)))
    offset = min(t - e["t_s"] for t, e in stamps if "loss" in e and "t_s" in e)
    t_kill = float(open(f"{w}/{name}.kill").read()) - offset
    t_pre = next(t for t, e in stamps if e.get("event") == "preempt") - offset
    t_replan = next(t for t, e in stamps if e.get("event") == "replan" and not e.get("in_place")) - offset
    b = r["breakdown"]
    ph = {"detect": pre["t_s"] - t_kill, "confirm": max(0.0, t_pre - pre["t_s"]), "replan": b["replan_s"],
          "transfer": b["transfer_s"], "first": b["first_step_s"]}
    ph["drop"] = max(0.0, t_replan - t_pre - b["replan_s"])
    ph["launch"] = max(0.0, b["startup_s"] - ph["confirm"] - ph["drop"])
    ph["total"] = ph["detect"] + r["seconds"]
    plans = [e for e in ev if e.get("event") in ("plan", "replan")]
    return r, pre, ph, plans


def lost(w, cap):
    rows = {n: lost_row(w, n) for n in POLICIES}
    r0, pre0, _, plans = rows["local-first"]
    state = sum(r0["bytes"].values())
    print(f"host {' '.join(pre0['nodes'])} killed without notice (cause: {pre0['cause']}); plan before: "
          f"{plans[0]['devices']} devices, {plans[0]['plan']}; after: {plans[-1]['devices']} devices on "
          f"{' '.join(plans[-1]['nodes_up'])}, {plans[-1]['plan']}")
    print(f"state restored by the survivors: {state / 1e6:.0f} MB; cloud link capped at {cap * 1e3:.0f} MB/s per node "
          f"(cluster cloud_gb_s = {cap:g})")
    print(f"{'':12s} {'total':>7s} {'detect':>7s} {'confirm':>8s} {'drop':>6s} {'replan':>7s} {'launch':>7s}"
          f" {'transfer':>9s} {'(local':>7s} {'peer':>6s} {'cloud)':>7s} {'first':>6s}   stopped/resumed"
          f"   bytes local / peer / cloud       cloud rate (all nodes / per node)")
    for n, (r, _, ph, pl) in rows.items():
        ts = r["tier_seconds"]
        rate, k = cloud_rate(r), len(pl[-1]["nodes_up"])
        print(f"{n:12s} {ph['total']:6.2f}s {ph['detect']:6.2f}s {ph['confirm']:7.2f}s {ph['drop']:5.2f}s "
              f"{ph['replan']:6.3f}s {ph['launch']:6.2f}s {ph['transfer']:8.2f}s {ts['local']:6.2f}s {ts['peer']:5.2f}s "
              f"{ts['cloud']:6.2f}s {ph['first']:5.2f}s   {r['stopped_at']:>7d}/{r['step']:<7d}   {tier_mb(r)}   "
              + (f"{rate:6.1f} / {rate / k:5.1f} MB/s" if rate else "-"))
    lf, co = rows["local-first"][2], rows["cloud-only"][2]
    rlf, rco = rows["local-first"][0], rows["cloud-only"][0]
    print("transfer: the trainer's resume (manifests, fetch, verification, load), its slowest rank; (local peer cloud):"
          " each tier's seconds on its slowest rank; cloud rate: the cloud's bytes over that, and over the nodes"
          " restoring")
    print(f"recovery time (kill -> first finished step: detect + confirm + drop + re-plan + launch + transfer + first step), "
          f"cloud-only / local-first: {co['total'] / lf['total']:.2f}x ({co['total']:.2f} s / {lf['total']:.2f} s)")
    print(f"the same without cloud-only's disk drop (its extra 'drop': emulating fresh machines):   "
          f"{(co['total'] - co['drop'] + lf['drop']) / lf['total']:.2f}x")
    print(f"from mpirun's exit (detection not counted; the agent's recover event):               "
          f"{rco['seconds'] / rlf['seconds']:.2f}x ({rco['seconds']:.2f} s / {rlf['seconds']:.2f} s)")
    print(f"kill to training resumed (first step not counted):                                   "
          f"{(co['total'] - co['first']) / (lf['total'] - lf['first']):.2f}x")
    print(f"state restore alone (the trainer's resume: manifests, transfer, verification, load):  "
          f"{co['transfer'] / lf['transfer']:.2f}x")
    redo_lines({n: v[0] for n, v in rows.items()})


TIER_RUNS = ("lost-disk", "lost-memory", "notice-disk", "notice-memory", "notice-handover")


def tiers_row(w, name):
    """Run NAME's recovery by phase: a lost host's from the kill (detect as in lost_row), a notice's
    from the notice (the recover event's seconds; detect 0)."""
    if name.startswith("lost"):
        r, _, ph, _ = lost_row(w, name)
        detect, total = ph["detect"], ph["total"]
    else:
        r = rec(w, name)
        detect, total = 0.0, r["seconds"]
    b = r["breakdown"]
    ck = notice_save(w, name) if name.startswith("notice") else None
    return {"r": r, "total": total, "detect": detect, "stop": b["stop_s"], "replan": b["replan_s"],
            "startup": b["startup_s"], "transfer": b["transfer_s"], "first": b["first_step_s"],
            "redo": r["stopped_at"] - r["step"], "save": ck["seconds"] if ck else 0.0,
            "commit": ck.get("memory_commit_seconds", ck["seconds"]) if ck else 0.0,
            "handover": bool(ck and ck.get("handover"))}


def tiers(w, cap):
    rows = {n: tiers_row(w, n) for n in TIER_RUNS}
    state = sum(rows["lost-disk"]["r"]["bytes"].values())
    print(f"state restored by the survivors: {state / 1e6:.0f} MB; cloud link capped at {cap * 1e3:.0f} MB/s per node")
    print(f"{'':16s} {'total':>7s} {'detect':>7s} {'stop':>6s} {'(save':>6s} {'commit)':>8s} {'replan':>7s} {'start-up':>8s}"
          f" {'transfer':>9s} {'(local':>7s} {'memory':>7s} {'peer':>6s} {'cloud)':>7s} {'first':>6s}   stopped/resumed"
          f"   MB local / memory / peer / cloud")
    for n, x in rows.items():
        r, ts, by = x["r"], x["r"]["tier_seconds"], x["r"]["bytes"]
        print(f"{n:16s} {x['total']:6.2f}s {x['detect']:6.2f}s {x['stop']:5.2f}s {x['save']:5.2f}s {x['commit']:7.2f}s "
              f"{x['replan']:6.3f}s {x['startup']:7.2f}s {x['transfer']:8.2f}s {ts['local']:6.2f}s "
              f"{ts.get('memory', 0):6.2f}s {ts['peer']:5.2f}s {ts['cloud']:6.2f}s {x['first']:5.2f}s   "
              f"{r['stopped_at']:>7d}/{r['step']:<7d}   {by['local'] / 1e6:.0f} / {by.get('memory', 0) / 1e6:.0f} / "
              f"{by['peer'] / 1e6:.0f} / {by['cloud'] / 1e6:.0f}" + ("   (handover)" if x["handover"] else ""))
    print("total: the kill (lost) or the notice -> the first finished step; stop: the notice -> the old job's exit,"
          " with the save at the notice (its whole seconds, and when it committed: in memory for a memory-first save)")

    def ratio(a, b, key):
        x, y = rows[a][key], rows[b][key]
        return f"{x / y:.2f}x ({x:.2f} s / {y:.2f} s)" if y > 0 else f"- ({x:.2f} s / {y:.2f} s)"
    for a, b in (("lost-memory", "lost-disk"), ("notice-memory", "notice-disk"), ("notice-handover", "notice-disk"),
                 ("notice-handover", "notice-memory"), ("notice-handover", "lost-memory")):
        print(f"{a} / {b}: total {ratio(a, b, 'total')}; stop {ratio(a, b, 'stop')}; "
              f"transfer {ratio(a, b, 'transfer')}")
    for n, x in rows.items():
        print(f"{n}: stopped after step {x['r']['stopped_at']}, resumed from step {x['r']['step']}: {x['redo']} step(s) "
              f"to redo (not in the times above)")


def inplace(w, k=0):
    """SET=inplace: relaunch/ and in-place/, each one notice; the recovery by phase and the ratios. SET=readmit
    (k 1): the second recovery, the join that re-admits the parked rank in place."""
    rows = {n: rec(w, n, k) for n in ("relaunch", "in-place")}
    print(f"{'':9s} {'total':>7s} {'stop':>6s} {'replan':>7s} {'startup':>8s} {'transfer':>9s} {'first':>6s}"
          f"   in place   saved   stopped/resumed   bytes local / peer / cloud")
    for n, r in rows.items():
        b = r["breakdown"]
        print(f"{n:9s} {r['seconds']:6.2f}s {b['stop_s']:5.2f}s {b['replan_s']:6.3f}s {b['startup_s']:7.2f}s "
              f"{b['transfer_s']:8.2f}s {b['first_step_s']:5.2f}s   {'yes' if r.get('in_place') else 'no':8s}   "
              f"{'yes' if r['saved'] else 'no':5s}   {r['stopped_at']:>7d}/{r['step']:<7d}   {tier_mb(r)}")
    ip, rl = rows["in-place"], rows["relaunch"]
    if not ip.get("in_place"):
        print("in-place: the change was not made in place (see its log): no ratio")
        return
    ph = ip["phases"]
    print("in place, the trainer's phases (slowest rank): " + ", ".join(f"{k} {v:.3f} s" for k, v in ph.items()))
    rc = [e for e in events(w, "in-place") if e.get("event") == "reconfigure"][k:]
    if rc and "state" in rc[0]:  # the trainer's own event: the move rank to rank (docs/elastic.md)
        r0 = rc[0]
        if k:
            print(f"in place, the change: {r0['ranks_from']} -> {r0['ranks_to']} ranks, join {r0.get('join', 0)}, "
                  f"readmit {r0.get('readmit', 0)}")
        print(f"in place, the state {r0['state']}: move {r0['seconds'].get('move', 0):.3f} s, "
              f"{r0['moved_bytes']} bytes sent, {r0['kept_bytes']} kept"
              + (f" (not moved: {r0['not_moved']})" if r0.get("not_moved") else ""))
    def after_stop(r): return r["seconds"] - r["breakdown"]["stop_s"]
    print(f"notice to the first finished step, relaunch / in place: {rl['seconds'] / ip['seconds']:.2f}x "
          f"({rl['seconds']:.2f} s / {ip['seconds']:.2f} s)")
    print(f"after the stop (relaunch: the old job gone; in place: the change's save done) to the first finished step: "
          f"{after_stop(rl) / after_stop(ip):.2f}x ({after_stop(rl):.2f} s / {after_stop(ip):.2f} s)")
    redo_lines(rows)


def inplace_base(w, k=0):
    """SET=inplace BASE=B0: in-place-base/ (B0's autohet) against in-place/ (this build), notice to the first step;
    SET=readmit (k 1): the second recovery and change, the join that re-admits the parked rank."""
    print(f"{'':14s} {'total':>7s} {'stop':>6s} {'transfer':>9s} {'first':>6s}   change's save")
    rows = {}
    for n in ("in-place-base", "in-place"):
        r = rec(w, n, k)
        rc = ([e for e in events(w, n) if e.get("event") == "reconfigure"] + [{}] * 2)[k]
        b = r["breakdown"]
        rows[n] = (r, rc)
        print(f"{n:14s} {r['seconds']:6.2f}s {b['stop_s']:5.2f}s {b['transfer_s']:8.2f}s {b['first_step_s']:5.2f}s   "
              f"{rc.get('seconds', {}).get('save', float('nan')):.3f} s {rc.get('save', 'sync')}")
    (b, bc), (a, ac) = rows["in-place-base"], rows["in-place"]
    print(f"notice to the first finished step, base / this build: {b['seconds'] / a['seconds']:.2f}x "
          f"({b['seconds']:.2f} s / {a['seconds']:.2f} s); the stop {b['breakdown']['stop_s'] / a['breakdown']['stop_s']:.2f}x "
          f"({b['breakdown']['stop_s']:.2f} s / {a['breakdown']['stop_s']:.2f} s)")


def stamp(path, out):
    buf, pos = b"", 0
    with open(out, "a") as o:
        while True:
            try:
                with open(path, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            if data:
                now = time.time()
                pos += len(data)
                buf += data
                *lines, buf = buf.split(b"\n")
                for l in lines:
                    o.write(f"{now:.6f}\t{l.decode()}\n")
                o.flush()
            time.sleep(0.02)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "notice":
        notice(sys.argv[2], float(sys.argv[3]))
    elif mode == "lost":
        lost(sys.argv[2], float(sys.argv[3]))
    elif mode == "tiers":
        tiers(sys.argv[2], float(sys.argv[3]))
    elif mode == "inplace":
        inplace(sys.argv[2])
    elif mode == "readmit":
        inplace(sys.argv[2], 1)
    elif mode == "inplace-base":
        inplace_base(sys.argv[2])
    elif mode == "readmit-base":
        inplace_base(sys.argv[2], 1)
    elif mode == "stamp":
        stamp(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"recovery_summary.py: unknown mode {mode!r} (notice, lost, tiers, inplace, readmit, inplace-base, readmit-base or stamp)")
