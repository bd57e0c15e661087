# Shared by tests/test_train_*.sh (sourced): paths, mpirun flags that work as root on a 2-core
# machine without ssh, and a byte-tokenized real text.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
AUTOHET=$BUILD/autohet
PLANS=$SRC/examples/plans
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# Ranks outnumber cores: no binding, and idle ranks yield the core instead of spinning.
# Open MPI's own start-up allocations are never freed (its components are unloaded before the leak
# check, so they cannot be suppressed by name): no leak check for these runs under ASan; the C
# tests keep it.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Ranks a plan needs: devices in all stages.
plan_ranks() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len(s["devices"]) for p in d["pipelines"] for s in p["stages"]))' "$1"; }
TEXT=/usr/share/common-licenses/GPL-3
[ -r "$TEXT" ] || TEXT=$SRC/docs/DESIGN.md
[ -r "$TEXT" ] || TEXT=$SRC/README.md
"$AUTOHET" tokenize "$TEXT" -o "$WORK/text.bin" >/dev/null || fail "tokenize $TEXT"
