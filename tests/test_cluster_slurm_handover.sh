# The handover at a notice under a real Slurm (tests/cluster/slurm.sh; issue 36): test_cluster_handover.sh
# with --launcher slurm inside `salloc -N3 --no-kill`: the agent writes the next plan into every host's
# run directory through srun, the save hands h2's pieces to the hosts that read them next, and the
# relaunch reads every file from its own hosts' memory; losses equal to the uninterrupted run's. Under
# the sanitizer stage's short subset (AH_CLUSTER_SHORT=1) it is skipped: the ssh test runs the same code.
# Needs root, openssh-server, slurm-wlm and munge; skipped (77) without them.
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && { echo "SKIP: the short subset (test_cluster_handover covers the code)"; exit 77; }
HANDOVER_SLURM=1 exec bash "$(dirname "$0")/test_cluster_handover.sh" "$@"
