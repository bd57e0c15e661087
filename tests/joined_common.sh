# Set-up shared by the trainer-level tests of joined mpirun jobs (test_train_inplace.sh,
# test_train_join.sh), sourced after train_common.sh: an ompi-server whose URI is $WORK/uri (stopped,
# and $WORK removed, at exit), and train PLAN OUT [flags], the trainer's command line for
# $WORK/PLAN.json with its metrics in $WORK/OUT.jsonl ($STEPS steps).
command -v ompi-server >/dev/null || { echo "no ompi-server: skipped"; exit 77; }
ompi-server --no-daemonize -r "$WORK/uri" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 100); do [ -s "$WORK/uri" ] && break; sleep 0.1; done
[ -s "$WORK/uri" ] || fail "ompi-server wrote no $WORK/uri"
train() { # PLAN OUT [flags]: the trainer's command line, metrics in $WORK/OUT.jsonl
    local plan=$1 out=$2
    shift 2
    echo "$AUTOHET" train --plan "$WORK/$plan.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
        --metrics "$WORK/$out.jsonl" "$@"
}
