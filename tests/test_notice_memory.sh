# The save at a preemption notice with in-memory replicas, memory first (runtime/ckpt_notice.c;
# docs/checkpoints.md "The save at a notice, memory first"): snapshot into the host's memory,
# replicate the leaving node's pieces to its partner's memory (the staying node's stay in its own), the
# step committed there, then the disks. A two-node pipeline
# (stage 0 on n0, stage 1 on n1: each node's pieces are its own), a save every 4 steps (--ckpt-sync),
# replicas on, the notice (SIGTERM) to n1 after a few steps; n1 is then lost with its disk and memory.
#   A. n1 killed right after the step is committed in memory (test hook notice-memory), before any
#      disk holds it: the disks' newest step is older; the resume takes the notice's step N from the
#      hosts' memory alone (n0's own copy, n1's pieces from n0's memory), bit-exact.
#   B. n1 killed after its snapshot in its own memory, before the replication (notice-snapshot):
#      step N is not committed anywhere n1's pieces survive; the last committed step (the periodic P)
#      is intact: n0's pieces from its disk, n1's from n0's memory (the older replica kept; the tied
#      embedding n1's last stage also keeps comes from n0's disk, a peer), bit-exact.
#   C. no kill: exit 75, the notice's checkpoint event says memory first and committed, with the
#      seconds to the memory commit (what the grace period must cover) below the whole save's; the
#      disks hold step N, the own-memory copies are freed, n0 holds n1's step N and n1 none of n0's
#      (a staying node's pieces are not sent at a notice: the checkpoint event's memory bytes are
#      n1's alone, fewer than the disks').
#      With a cloud (an S3 server on loopback) at 200 KB/s, n1's upload is still pending at the
#      notice: n0's memory holds n1's pieces, so n1 drops it instead of holding the exit for it, and
#      the preempt event says so ("uploads_cancelled": n1, held in memory).
. "$(dirname "$0")/train_common.sh"
STEPS=40
# pp2.json; pp2-ref.json, the same at the emulation's own pace (the slowdown changes no loss): the uninterrupted
# run, the oracle, needs no slowing
python3 - "$PLANS/train-pp2-recompute.json" "$WORK/pp2.json" "$WORK/pp2-ref.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"][0]["stages"][1]["devices"] = [{"node": "n1", "index": 0}]
d["cluster"]["network"]["cloud_gb_s"] = 2e-4  # uploads (C) still pending at the notice
json.dump(d, open(sys.argv[3], "w"))
d["cluster"]["gpu_types"]["cpu"]["emulate"]["slowdown"] = 10.0  # the notice lands mid-run
json.dump(d, open(sys.argv[2], "w"))
PY
train() { plan_train pp2 300 "$@"; } # out [flags...]
plan_train pp2-ref 300 full || { cat "$WORK/full.err" >&2; fail "the uninterrupted run"; }
# notice NAME [hook [flags...]]: the run with replicas, SIGTERM to n1's rank after 6 steps; sets RC
notice() {
    local name=$1 hook=${2:-}
    shift $(($# < 2 ? $# : 2))
    mkdir -p "$WORK/$name.run"
    AH_TEST_HOOK=$hook train "$name" --ckpt-every 4 --ckpt-sync --local-root "$WORK/$name.ck" --run-dir "$WORK/$name.run" \
        --replica-memory-gb 1 --replica-root "$WORK/$name.mem" --grace-s 60 "$@" &
    local job=$!
    for _ in $(seq 600); do
        [ -r "$WORK/$name.jsonl" ] && [ "$(grep -c '"loss"' "$WORK/$name.jsonl")" -ge 6 ] && break
        sleep 0.1
    done
    local pid
    pid=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["node"]=="n1", d; print(d["pid"])' \
        "$WORK/$name.run/rank-1.json") || fail "$name: rank-1.json"
    local t0
    t0=$(date +%s.%N)
    kill -TERM "$pid"
    RC=0
    timeout 120 tail --pid=$job -f /dev/null || { kill $job; fail "$name: the job did not stop"; }
    wait $job || RC=$?
    STOP_S=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }')
}
# notice_hooked NAME HOOK [flags...]: notice with a test hook (may be "") in the notice's memory-first
# save. The rule may answer a notice without that save (redoing the one step since a periodic save
# judged cheaper than the replication on a loaded machine; or the notice at the step just saved):
# then the hook is never reached, legitimately; the run is tried again, 3 times at most.
notice_hooked() {
    for try in 1 2 3; do
        rm -rf "$WORK/$1".*
        notice "$@"
        [ "$RC" = 75 ] && ! grep -q '"memory_first"' "$WORK/$1.jsonl" || return 0
        echo "  $1: the notice at step $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' \
            "$WORK/$1.run/preempted.json" 2>/dev/null) was answered without a memory-first save (try $try)"
    done
}
committed() { # ROOT: its committed steps, space-separated
    (cd "$1" 2>/dev/null && for m in step-*/manifest.json; do [ -e "$m" ] && echo "$((10#${m:5:8}))"; done | tr '\n' ' ')
}
# resume NAME EXPECT_STEP EXPECT: n1 lost (disk and memory), resumed on n0 + a new n1, bit-exact
resume() {
    local name=$1 step=$2 expect=$3
    rm -rf "$WORK/$name.ck/n1" "$WORK/$name.mem/n1"
    train "$name-resume" --ckpt-every 4 --ckpt-sync --local-root "$WORK/$name.ck" --resume --replica-memory-gb 1 \
        --replica-root "$WORK/$name.mem" || { cat "$WORK/$name-resume.err" >&2; fail "$name: the resume"; }
    resumed_exactly full "$name-resume" "$step" "$expect"
}

# A. killed once the step is committed in memory
notice_hooked mem "phase=notice-memory,step=any,node=n1,action=kill"
[ "$RC" != 0 ] && [ "$RC" != 75 ] || fail "A: exit status $RC: n1 was not killed at the memory commit"
# the newest of n1's steps in n0's memory (the older one is kept until the disks hold the notice's: at a
# notice the staying n0 sends nothing, so its older replica on n1 is its only one in another host)
HELD=$(committed "$WORK/mem.mem/n0/from-n1")
N=$(echo $HELD | tr ' ' '\n' | sort -n | tail -1)
[ -n "$N" ] || fail "A: n0's memory holds none of n1's steps"
case " $(committed "$WORK/mem.mem/n1/from-n0")" in *" $N "*) fail "A: n0's step $N sent to the leaving n1" ;; esac
[ "$(committed "$WORK/mem.mem/n0/from-n0")" = "$N " ] || fail "A: n0's own copy: $(committed "$WORK/mem.mem/n0/from-n0")"
for nd in n0 n1; do
    case " $(committed "$WORK/mem.ck/$nd")" in *" $N "*) fail "A: step $N committed on $nd's disk before its memory commit was killed" ;; esac
done
echo "  A: notice step $N committed in memory only (disks: n0 $(committed "$WORK/mem.ck/n0"))"
resume mem "$N" 'r["files"]["local"] == 0 and r["files"]["peer"] == 0 and r["files"]["cloud"] == 0 and r["files"]["memory"] > 0'

# B. killed after the snapshot in n1's own memory, before the replication
notice_hooked snap "phase=notice-snapshot,step=any,node=n1,action=kill"
[ "$RC" != 0 ] && [ "$RC" != 75 ] || fail "B: exit status $RC: n1 was not killed at its snapshot"
N=$(committed "$WORK/snap.mem/n1/from-n1")
N=${N% }
P=$(committed "$WORK/snap.mem/n0/from-n1")
P=${P% }
[ -n "$N" ] && [ -n "$P" ] && [ "$P" -lt "$N" ] || fail "B: n1's snapshot '$N', n0's replica of n1 '$P'"
resume snap "$P" 'r["files"]["local"] > 0 and r["files"]["memory"] > 0 and r["files"]["cloud"] == 0'
echo "  B: the snapshot of step $N lost with n1; step $P, committed before, resumed"

# C. the whole save at the notice, with a cloud
start_moto
# tried again as A and B when the rule answers the notice without a memory-first save (seen at load 14:
# the notice at step 9, just after step 8's save, answered by redoing that step)
notice_hooked save "" --cloud s3://ckpt/run --s3-endpoint "$EP"
[ "$RC" = 75 ] || { cat "$WORK/save.err" >&2; fail "C: exit status $RC, expected 75"; }
echo "  C: the notice to the job's exit: $STOP_S s"
N=$(python3 - "$WORK/save.run/preempted.json" "$WORK/save.jsonl" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["saved"] is True and p["nodes"] == ["n1"], p
ev = [o for o in map(json.loads, open(sys.argv[2])) if o.get("event") == "checkpoint"]
e = ev[-1]
assert e["step"] == p["step"] and e["ok"] and e["memory_first"] and e["memory_committed"], e
assert 0 < e["memory_snapshot_seconds"] <= e["memory_commit_seconds"] < e["seconds"], e
pre = [o for o in map(json.loads, open(sys.argv[2])) if o.get("event") == "preempt"][-1]
assert [(u["node"], u["held_in"]) for u in pre.get("uploads_cancelled", [])] == [("n1", "memory")], pre
assert 0 < e["bytes"]["memory"] < e["bytes"]["local"] and e["memory_left_files"] == 0, e
print(e["step"])
print(f"  C: notice step {e['step']}: committed in memory after {e['memory_commit_seconds']:.3f} s "
      f"(snapshot {e['memory_snapshot_seconds']:.3f} s), on the disks after {e['seconds']:.3f} s; "
      f"{e['bytes']['memory']} bytes", file=sys.stderr)
PY
) || fail "C: preempted.json / the checkpoint event"
for nd in n0 n1; do
    case " $(committed "$WORK/save.ck/$nd")" in *" $N "*) ;; *) fail "C: step $N not on $nd's disk" ;; esac
    [ -z "$(committed "$WORK/save.mem/$nd/from-$nd")" ] || fail "C: $nd's own copy not freed"
done
[ "$(committed "$WORK/save.mem/n0/from-n1")" = "$N " ] && [ -z "$(committed "$WORK/save.mem/n1/from-n0")" ] ||
    fail "C: the hosts' memory: $(cd "$WORK/save.mem" && echo */*/step-*)"
echo PASS
