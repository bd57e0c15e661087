# A host lost without notice, restored from a peer's memory (in-memory peer replicas,
# --replica-memory-gb; docs/checkpoints.md), across three emulated hosts (tests/cluster/cluster.sh:
# each host its own disk and its own tmpfs on /dev/shm, its RAM) under autohet run --launcher ssh.
# The cluster's devices hold 3 MiB each, so the plan is one pipeline h1 > h2 > h0 and block 1 is on
# h2 alone (h2_alone_cluster): without replicas its recovery takes block 1 from the cloud
# (test_cluster_hook.sh). With them, h2's pieces of each committed step are in h0's memory (h2's
# partner: the next node of the plan, cyclically). The run saves every 4 steps (--ckpt-sync: each
# save, its replication included, is done when its event is logged); h2 stops mid-step 6 (test hook)
# and is killed there, its processes, disk and memory with it. The agent re-plans on h0 + h1 and
# resumes from step 4: every logged loss equals the uninterrupted run's, and the recover event's
# bytes by tier show h2's pieces from memory, nothing from the cloud.
# Checked on the way: h0's /dev/shm holds h2's step 4 and h1's does not see it (a tmpfs per host);
# this machine's /dev/shm has none of it. Needs root, openssh-server and moto_server; skipped (77)
# without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v moto_server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and moto_server"; exit 77; }
STEPS=16
CKPT_EVERY=4
h2_alone_cluster
cluster_reference "$WORK/ref"
cluster_with_cloud AH_TEST_HOOK
AH_TEST_HOOK="phase=step,step=6,node=h2,file=$CL_DISK/hook" ssh_agent run --ckpt-sync --replica-memory-gb 0.5
wait_for "hook marker on h2" test -e "$CL_DIR/disks/h2/hook"
# h2's step 4 is in h0's memory, on h0 alone
held=$(cluster_on h0 sh -c 'echo /dev/shm/autohet/*/h0/from-h2/step-00000004/block-001.tp1-0.safetensors')
cluster_on h0 test -s "$held" || { cat "$agent_log"; fail "h0's memory lacks h2's step 4 ($held)"; }
cluster_on h1 sh -c 'ls -d /dev/shm/autohet/*/h0 2>/dev/null' | grep -q . && fail "h1 sees h0's memory"
# this run's replica base on this machine (ckpt/replica.h: FNV-1a 64 of the --local-root): other
# runs on the machine (a local-launcher test beside this one) may hold an h0/from-h2 of their own
key=$(python3 -c 'import sys
h = 1469598103934665603  # AH_FNV1A64_OFFSET (core/hash.h)
for b in sys.argv[1].encode(): h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)' "$CL_DISK/ck-run")
cluster_on h0 test -d "/dev/shm/autohet/$key/h0/from-h2" || fail "h0's replicas not under the key of its --local-root ($key)"
[ -e "/dev/shm/autohet/$key" ] && fail "this machine's /dev/shm holds h0's replicas (/dev/shm/autohet/$key)"
cluster_kill_host h2
wait $agent || { cat "$agent_log"; fail "autohet run after h2 vanished"; }
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$agent_log"; fail "metrics"; }
echo "h2 lost mid-step 6: $out"
grep -q "host lost without notice: host h2" "$agent_log" || { cat "$agent_log"; fail "h2's loss not reported"; }
python3 - "$WD/metrics.jsonl" <<'PY' || { cat "$agent_log"; fail "the recovery from memory"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ck = [x for x in ev if x.get("event") == "checkpoint" and x["step"] == 4]
assert ck and ck[0]["bytes"]["memory"] > 0 and ck[0]["memory_left_files"] == 0, ck
rec = [x for x in ev if x.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["step"] == 4, rec
b, f = rec[0]["bytes"], rec[0]["files"]
# block 1 was on h2 alone: from h0's memory, not from the cloud (nor from any disk: none holds it)
assert b["memory"] > 0 and b["cloud"] == 0 and f["cloud"] == 0, rec[0]
print(f"recovery from step 4: bytes {b}, files {f}, seconds {rec[0]['tier_seconds']}")
PY
echo PASS
