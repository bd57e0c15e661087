# A host vanishing without notice at a moment the trainer names (AH_TEST_HOOK, src/ckpt/test_hook.h:
# the rank stops there and creates a marker file on its host's disk; the test kills the host once
# the marker is there, no sleeps), across three emulated hosts under autohet run --launcher ssh:
#   (b) mid-step: h2's rank has run step 6's forward and backward, not its gradient sync (saves
#       with --ckpt-sync: an asynchronous step 4 commits at the first step boundary after every
#       writer is done, collectively, and a slow disk can leave that past step 6, which h2 never
#       ends: then there is no step 4 to upload);
#   (c) mid-checkpoint: h2's shard files of checkpoint step 8 are written, its manifest not
#       committed (h0's and h1's step 8 may be committed on their own disks: not a whole step);
#   (u) mid-upload: h2's uploader has put its shard objects of step 8 (or of a later step, hook
#       step=8+: a slow cloud can keep h2's step-4 upload running until step 12's replaces the
#       waiting step 8, which is then never uploaded) in the cloud, not its manifest (training
#       goes on meanwhile: step 12 may be committed everywhere, h2's copy of it never uploaded).
#       The objects without a manifest must not count: step 4 again.
# The cluster's devices hold 3 MiB each, so the plan is one pipeline h1 > h2 > h0 and block 1 is
# on h2 alone: after h2 is lost, that shard comes from the cloud (moto on the head node; the test
# waits for h2's upload of step 4 to land before the kill), the rest from the survivors' disks. In
# each case every logged loss equals the uninterrupted run's, no sample is lost or repeated, the
# recovery resumes from step 4 (the last step committed on every host) with bytes from the
# survivors' disks and from the cloud. Needs root, openssh-server and moto_server; skipped (77)
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

# a malformed hook stops the rank, naming the variable and what is wrong
AH_TEST_HOOK="phase=bogus,step=0,file=$WORK/marker" run_agent "$WORK/bad" &&
    fail "a malformed AH_TEST_HOOK was accepted"
grep -q 'AH_TEST_HOOK="phase=bogus,step=0,file=.*": unknown phase' "$WORK/bad.log" ||
    { cat "$WORK/bad.log"; fail "the malformed AH_TEST_HOOK is not named"; }
cluster_with_cloud AH_TEST_HOOK

# lost_at CASE PHASE STEP [FLAGS...]: a run (autohet run FLAGS) where h2 stops at PHASE of STEP
# and is killed there. Resumes from step 4 with bytes from the cloud and (but for (u), where the
# survivors may have removed step 4 from their disks once 8 and 12 were committed: they keep 2)
# from the survivors' disks.
lost_at() {
    case=$1
    local marker=$CL_DIR/disks/h2/hook-$1
    AH_TEST_HOOK="phase=$2,step=$3,node=h2,file=$CL_DISK/hook-$1" ssh_agent "$1" "${@:4}"
    wait_for "hook marker on h2" test -e "$marker"
    read -r phase step node _ <"$marker"
    # STEP N+: N or a later checkpoint step
    [ "$phase $node" = "$2 h2" ] && { [ "$step" = "$3" ] || { [ "${3%+}+" = "$3" ] && [ "$step" -ge "${3%+}" ] &&
        [ $((step % CKPT_EVERY)) = 0 ]; }; } || fail "$1: the marker says '$phase $step $node'"
    # h2's disk is the only one with block 1: its step 4 must be in the cloud before h2 goes
    wait_for "h2's step 4 in the cloud" cloud_has "$1" 4 manifest-h2.json
    # mid-upload: h2's objects of the step it stopped in are there, its manifest is not (checked now:
    # once the relaunch commits newer steps, --keep's retention removes that step from the cloud)
    if [ "$1" = u ]; then
        cloud_has u "$step" block-001.tp1-0.safetensors && ! cloud_has u "$step" manifest-h2.json ||
            fail "u: h2's step $step should be in the cloud without its manifest"
    fi
    cluster_kill_host h2
    wait $agent || { cat "$agent_log"; fail "$1: autohet run after h2 vanished"; }
    out=$(check_metrics "$WD" "$WORK/ref") || { cat "$agent_log"; fail "$1: metrics"; }
    echo "$1 (h2 lost at $2 of step $step): $out"
    grep -q "host lost without notice: host h2" "$agent_log" || { cat "$agent_log"; fail "$1: h2's loss not reported"; }
    local from=yes
    [ "$1" = u ] && from=only
    h2_lost_and_recovered "$WD/metrics.jsonl" step=4 cloud=$from | sed "s/^/$1: /"
    [ "${PIPESTATUS[0]}" = 0 ] || { cat "$agent_log"; fail "$1: the recovery after h2 vanished"; }
}

if cluster_short; then
    lost_at c ckpt-write 8
    echo PASS
    exit 0
fi
lost_at b step 6 --ckpt-sync
cluster_revive_host h2 || fail "cannot bring h2 back"
lost_at c ckpt-write 8
cluster_revive_host h2 || fail "cannot bring h2 back"
lost_at u upload 8+
echo PASS
