# The failure policy across emulated hosts (issue 36): every process of host h2 dies at once — its
# ranks and Open MPI's daemon, as an OOM kill or a container restart would leave it — while the
# host itself stays reachable (its sshd answers), and its disk comes back empty. autohet run
# --launcher ssh finds every host answering, so the failure is none it can explain: it restarts the
# job on the same hosts from the newest checkpoint every piece of which some tier holds. h2's disk
# is verified, not trusted: block 1, which only h2 held, comes from the cloud, the rest from the
# survivors' disks. Every logged loss equals the uninterrupted run's, every step is trained once.
# (Before, the run stopped with "communication error ... rerun the same command".) Needs root,
# openssh-server and moto_server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v moto_server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and moto_server"; exit 77; }
STEPS=80
CKPT_EVERY=4
h2_alone_cluster
cluster_reference "$WORK/ref"
cluster_with_cloud
ssh_agent r
h2_dies_and_restarts "$WD" "sshd|unshare"
echo PASS
