# The hierarchical DP sync across emulated regions (issue 39): four hosts (tests/cluster/cluster.sh:
# network namespaces, a real sshd each), h0 h1 in region east and h2 h3 in west, each host's
# egress shaped with tc htb to 400 Mbit/s inside its region and 40 Mbit/s to the other (this
# kernel has no netem: no WAN delay). train-asym's plan (3 asymmetric pipelines, 6 ranks, a
# recomputing stage, the tied embedding's group) placed so that every DP group and two pipelines
# cross the regions, "dp_sync": "hierarchical", its east-west link marked private: it trains the
# same losses as one process (1e-4 relative), and rank 0 says 6 of its 7 DP groups summed
# hierarchically (the seventh, a segment whose three holders are all in east, keeps the ring).
# Needs root (namespaces) and openssh-server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
cluster_up 4 0 || fail "cannot make the test cluster"
cluster_regions 400 40 "h0 h1" "h2 h3" || fail "tc htb between the regions"
CMPI=(mpirun --mca plm_rsh_agent "$CL_RSH" --mca btl_tcp_if_include "$CL_IFACE" --mca oob_tcp_if_include "$CL_IFACE"
      --map-by seq --bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS)
STEPS=10
python3 - "$PLANS/train-asym.json" "$WORK/hier.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
proto = d["cluster"]["nodes"][0]
d["cluster"]["nodes"] = [dict(proto, name=f"h{i}", count=2, zone=r + "-a", region=r)
                         for i, r in enumerate(["east", "east", "west", "west"])]
d["cluster"]["network"] = {"inter_node_gb_s": 0.05, "inter_region_gb_s": 0.005,
                           "links": [{"between": ["east", "west"], "private": True}]}
d["dp_sync"] = "hierarchical"
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
[ $? = 0 ] || fail "the plan across two regions"
# pipelines 1 and 2 cross the regions too
cluster_place "$WORK/hier.json" h0 "h2 h1" "h3 h0 h2" || fail "the plan's placement across two regions"
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
    --metrics "$WORK/single.jsonl" 2>"$WORK/single.err" || { cat "$WORK/single.err" >&2; fail "single-rank run"; }
cluster_head timeout 300 "${CMPI[@]}" -np 6 --hostfile "$WORK/hier.hosts" "$AUTOHET" train --plan "$WORK/hier.json" \
    --data "$WORK/text.bin" --steps $STEPS --metrics "$WORK/hier.jsonl" >"$WORK/hier.out" 2>"$WORK/hier.err" ||
    { cat "$WORK/hier.err" >&2; fail "training across two regions"; }
grep -q "DP sync: hierarchical in 6 of this rank.s 7 DP groups, across up to 2 regions" "$WORK/hier.out" ||
    fail "rank 0's DP groups did not sum hierarchically: $(head -5 "$WORK/hier.out")"
grep "DP sync:" "$WORK/hier.out"
losses_as_one "$WORK/single.jsonl" "$WORK/hier.jsonl" $STEPS "across two regions, hierarchical DP sync" 0.3 || fail "losses across two regions differ from one process"
echo PASS
