# The preamble of a bench on emulated hosts (tests/cluster/cluster.sh; root): bench_hosts.sh and
# bench_hier_sync.sh. Sourced with the bench's arguments ($1: BUILD_DIR, default the source tree's
# build) and HOSTS set (how many hosts); sets SRC and BUILD (absolute), AUTOHET (the binary), WORK
# (removed at exit), the MPI environment, fail MSG (says MSG after the bench's name on stderr and
# exits 1), WORK/text.bin (the GPL-3 tokenized), brings up HOSTS hosts h0.. unshaped (cluster_up),
# and sets
#   CMPI         mpirun across them from the head node, ranks placed in the hostfile's order;
#   AUTOHET_MPI  what autohet run --launcher ssh adds (keep equal to mpirun_argv in
#                src/elastic/launch_ssh.c): the ring all-reduce the model counts and messages up to
#                4 MiB sent eagerly.
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
AUTOHET=$BUILD/autohet
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
. "$SRC/tests/cluster/cluster.sh"
fail() { echo "$(basename "$0" .sh): $*" >&2; exit 1; }
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null || fail "tokenize"
cluster_up "$HOSTS" 0 || fail "cannot make the test cluster"
CMPI=(mpirun --mca plm_rsh_agent "$CL_RSH" --mca btl_tcp_if_include "$CL_IFACE" --mca oob_tcp_if_include "$CL_IFACE"
      --map-by seq --bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1)
AUTOHET_MPI=(--mca coll_libnbc_iallreduce_algorithm 1 --mca btl_tcp_eager_limit 4194304
             --mca btl_tcp_rndv_eager_limit 4194304 --mca btl_tcp_max_send_size 4194304)
