# dp_plans.py DP4_PLAN OUT_DIR NAME=NODE,NODE,...:MB,MB,... ...: from DP4_PLAN (examples/plans/train-dp4.json)
# writes OUT_DIR/NAME.json for each argument: one one-device replica a node, the given micro-batches each
# (used by tests/test_train_inplace.sh and bench/bench_inplace.sh).
import json, sys
d = json.load(open(sys.argv[1]))
for arg in sys.argv[3:]:
    name, spec = arg.split("=")
    nodes, mbs = spec.split(":")
    nodes, mbs = nodes.split(","), [int(m) for m in mbs.split(",")]
    e = json.loads(json.dumps(d))
    e["pipelines"] = e["pipelines"][:len(nodes)]
    for p, node, mb in zip(e["pipelines"], nodes, mbs):
        p["micro_batches"], p["stages"][0]["devices"] = mb, [{"node": node, "index": 0}]
    json.dump(e, open(f"{sys.argv[2]}/{name}.json", "w"))
