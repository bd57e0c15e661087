# Training across three emulated hosts (tests/cluster/cluster.sh: network namespaces, a real sshd
# each, a private disk each at the same path, links shaped to 1 Gbit/s), Open MPI reaching them
# through plm_rsh_agent:
#  1. train-asym's plan (3 asymmetric pipelines, 6 ranks) with its pipelines crossing hosts
#     trains the same losses as one process (1e-4 relative, as the equivalence tests), and each
#     host's disk holds only the checkpoints of its own ranks' node; this machine's copy of the
#     disk path stays empty;
#  2. ranks are placed by `autohet plan --rankfile` (the sequential mapper: hosts, not cores):
#     every rank reports (rank-R.json) the host and GPU index the file gives it;
#  3. a rank on another host than the plan names refuses to start, naming both; with
#     --check-host, so does a rank on a host that is none of the plan's nodes.
# Needs root (namespaces) and openssh-server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
cluster_up 3 1000 || fail "cannot make the test cluster"
# mpirun on the head node, ranks on the hosts it is given; ranks outnumber the cores: no binding
CMPI=(mpirun --mca plm_rsh_agent "$CL_RSH" --mca btl_tcp_if_include "$CL_IFACE" --mca oob_tcp_if_include "$CL_IFACE"
      --map-by seq --bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS)
STEPS=12
mkdir -p "$WORK/run" "$WORK/run3"

# 1. train-asym on h0..h2, every pipeline of more than one stage crossing hosts
python3 - "$PLANS/train-asym.json" "$WORK/cross.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, n in enumerate(d["cluster"]["nodes"][:3]):
    n["name"] = "h%d" % i
d["cluster"]["nodes"] = d["cluster"]["nodes"][:3]
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
# and its placement file, cross.hosts
cluster_place "$WORK/cross.json" h0 "h1 h2" "h2 h0 h1" || fail "the plan's placement across 3 hosts"
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
    --metrics "$WORK/single.jsonl" 2>"$WORK/single.err" || { cat "$WORK/single.err" >&2; fail "single-rank run"; }
cluster_head timeout 180 "${CMPI[@]}" -np 6 --hostfile "$WORK/cross.hosts" "$AUTOHET" train --plan "$WORK/cross.json" \
    --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$WORK/cross.jsonl" --ckpt-every 5 --local-root "$CL_DISK" \
    --run-dir "$WORK/run" --check-host 2>"$WORK/cross.err" || { cat "$WORK/cross.err" >&2; fail "training across 3 hosts"; }
losses_as_one "$WORK/single.jsonl" "$WORK/cross.jsonl" $STEPS "across 3 hosts" 0.3 || fail "losses across hosts differ from one process"
for h in $CL_HOSTS; do
    [ "$(cluster_on "$h" ls "$CL_DISK")" = "$h" ] || fail "host $h's disk holds $(cluster_on "$h" ls "$CL_DISK"), not only $h/"
    cluster_on "$h" ls "$CL_DISK/$h" | grep -qx 'step-0*10' || fail "host $h's disk has no step 10: $(cluster_on "$h" ls "$CL_DISK/$h")"
    cluster_on "$h" "$AUTOHET" ckpt verify --local-root "$CL_DISK/$h" >/dev/null || fail "host $h's checkpoints do not verify"
done
[ -z "$(ls -A "$CL_DISK")" ] || fail "this machine's $CL_DISK is not empty: $(ls -A "$CL_DISK")"
echo "checkpoints: each host holds its own node's steps only"

# 2. the planner's rankfile places ranks on hosts; each rank opens the GPU index it names
python3 - "$PLANS/train-single.json" "$WORK/c3.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cluster"]
n = c["nodes"][0]
n["count"] = 2
c["nodes"] = [dict(n, name="h%d" % i) for i in range(3)]
json.dump(c, open(sys.argv[2], "w"))
PY
"$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/c3.json" --global-batch 8 --seq-len 32 --micro-batch 1 \
    -o "$WORK/p3.json" --rankfile "$WORK/p3.ranks" >/dev/null 2>"$WORK/p3.err" || { cat "$WORK/p3.err" >&2; fail "autohet plan"; }
n=$(plan_ranks "$WORK/p3.json")
cluster_head timeout 180 "${CMPI[@]}" -np "$n" --hostfile "$WORK/p3.ranks" "$AUTOHET" train --plan "$WORK/p3.json" \
    --data "$WORK/text.bin" --steps 2 --quiet --run-dir "$WORK/run3" --check-host 2>"$WORK/p3.err" ||
    { cat "$WORK/p3.err" >&2; fail "the planner's plan on its rankfile"; }
python3 - "$WORK/p3.ranks" "$WORK/run3" "$n" <<'PY' || fail "ranks are not where the rankfile puts them"
import json, re, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if not l.startswith("#") or l.startswith("# rank ")]
n = int(sys.argv[3])
hosts = set()
for r in range(n):
    gpu = int(re.fullmatch(r"# rank %d: gpu=(\d+)" % r, lines[2 * r]).group(1))
    host = lines[2 * r + 1]
    got = json.load(open(f"{sys.argv[2]}/rank-{r}.json"))
    assert (got["host"], got["node"], got["index"]) == (host, host, gpu), (r, got, host, gpu)
    hosts.add(host)
print(f"rankfile: {n} ranks on hosts {sorted(hosts)}, each on the host and GPU index the file names")
PY

# 3. misplaced ranks are refused, naming both hosts
python3 - "$WORK/cross.hosts" "$WORK/swap.hosts" <<'PY'
import sys
h = open(sys.argv[1]).read().split()
h[0], h[1] = h[1], h[0]  # rank 0 (plan: h0) on h1, rank 1 (plan: h1) on h0
open(sys.argv[2], "w").write("\n".join(h) + "\n")
PY
! cluster_head timeout 120 "${CMPI[@]}" -np 6 --hostfile "$WORK/swap.hosts" "$AUTOHET" train --plan "$WORK/cross.json" \
    --data "$WORK/text.bin" --steps 2 --quiet >"$WORK/swap.out" 2>&1 || fail "ranks on the wrong hosts trained"
grep -q "the plan puts rank 0 on host h0 (GPU 0), but it runs on host h1" "$WORK/swap.out" ||
    { cat "$WORK/swap.out" >&2; fail "the refusal does not name both hosts"; }
python3 - "$PLANS/train-single.json" "$WORK/single-h0.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
old = d["pipelines"][0]["stages"][0]["devices"][0]["node"]
for n in d["cluster"]["nodes"]:
    if n["name"] == old:
        n["name"] = "h0"
d["pipelines"][0]["stages"][0]["devices"][0]["node"] = "h0"
json.dump(d, open(sys.argv[2], "w"))
PY
"$AUTOHET" train --plan "$WORK/single-h0.json" --data "$WORK/text.bin" --steps 1 --quiet >/dev/null 2>&1 ||
    fail "without --check-host, a host outside the plan (an emulated cluster) must train"
! timeout 60 "$AUTOHET" train --plan "$WORK/single-h0.json" --data "$WORK/text.bin" --steps 1 --check-host \
    >"$WORK/strict.out" 2>&1 || fail "--check-host on a host outside the plan trained"
grep -q -- "--check-host: the plan puts rank 0 on host h0 (GPU 0), but it runs on host $(hostname)" "$WORK/strict.out" ||
    { cat "$WORK/strict.out" >&2; fail "--check-host's refusal"; }
echo "misplaced ranks refused"
echo PASS
