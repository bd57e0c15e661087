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
plan_ranks() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len({(x["node"], x["index"]) for p in d["pipelines"] for s in p["stages"] for x in s["devices"]}))' "$1"; }
TEXT=/usr/share/common-licenses/GPL-3
[ -r "$TEXT" ] || TEXT=$SRC/docs/DESIGN.md
[ -r "$TEXT" ] || TEXT=$SRC/README.md
"$AUTOHET" tokenize "$TEXT" -o "$WORK/text.bin" >/dev/null || fail "tokenize $TEXT"

# dp2_plan OUT [SLOWDOWN]: train-dp4 cut to two one-device replicas on nodes n0 and n1, four
# micro-batches each (the resume and preemption tests' two-node job). SLOWDOWN sets the emulation.
dp2_plan() {
    python3 - "$PLANS/train-dp4.json" "$1" "${2:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"] = d["pipelines"][:2]
for p, node in zip(d["pipelines"], ["n0", "n1"]):
    p["micro_batches"] = 4
    p["stages"][0]["devices"] = [{"node": node, "index": 0}]
if sys.argv[3]:
    d["cluster"]["gpu_types"]["cpu"]["emulate"]["slowdown"] = float(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
}

# plan_train NAME SECONDS OUT [flags...]: autohet train on $WORK/NAME.json (its ranks: plan_ranks),
# $STEPS steps, within SECONDS, metrics in $WORK/OUT.jsonl, stdout and stderr in $WORK/OUT.out and
# OUT.err; its exit status (the caller checks: some runs are meant to fail).
plan_train() {
    local plan=$WORK/$1.json seconds=$2 out=$3
    shift 3
    timeout "$seconds" $MPIRUN -np "$(plan_ranks "$plan")" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" \
        --steps "$STEPS" --quiet --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
}

# dp2_train OUT [flags...]: plan_train of $WORK/dp2.json (dp2_plan), 2 ranks, within 120 s.
dp2_train() { plan_train dp2 120 "$@"; }

# same_losses REF GOT [FROM]: $WORK/GOT.jsonl trained steps FROM (default 0) .. STEPS-1 with
# $WORK/REF.jsonl's losses to the bit; from FROM > 0, after one recover event (found) at FROM.
same_losses() {
    python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "${3:-0}" "$STEPS" <<'PY' || fail "$2's losses differ from $1's"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
lines = [json.loads(l) for l in open(sys.argv[2])]
start, steps = int(sys.argv[3]), int(sys.argv[4])
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(start, steps)), [o["step"] for o in got]
for o in got:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
if start:
    rec = [o for o in lines if o.get("event") == "recover"]
    assert len(rec) == 1 and rec[0]["found"] and rec[0]["step"] == start, rec
print(f"  {sys.argv[2].split('/')[-1]}: steps {start}..{steps - 1} bit-identical")
PY
}
# resumed_exactly REF OUT STEP EXPECT: the run $WORK/OUT.jsonl resumed from STEP (one recover event,
# found, at STEP) and trained steps STEP..STEPS-1 with $WORK/REF.jsonl's losses to the bit; EXPECT,
# a Python expression over r (the recover event; a key it lacks counts as false), holds. Prints
# the event's bytes, files, seconds by tier and fallbacks.
resumed_exactly() {
    python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$STEPS" "$4" <<'PY' || fail "$2: the resume from step $3"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
lines = [json.loads(l) for l in open(sys.argv[2])]
n, steps = int(sys.argv[3]), int(sys.argv[4])
r = [o for o in lines if o.get("event") == "recover"]
assert len(r) == 1 and r[0]["found"] and r[0]["step"] == n, (r, n)
r = r[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(n, steps)), [o["step"] for o in got]
for o in got:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
try:
    good = eval(sys.argv[5])
except KeyError:
    good = False
assert good, f"recover event {r} fails: {sys.argv[5]}"
print(f"  {sys.argv[2].split('/')[-1]}: resumed at step {n}, bit-exact; bytes {r['bytes']}, files {r['files']}, "
      f"seconds {r.get('tier_seconds')}, fallbacks {r.get('fallbacks')}")
PY
}

# resumed_within REF GOT FROM TOL: the run $WORK/GOT.jsonl resumed at step FROM (one recover event,
# found, its data position FROM x 8, the example plans' global batch) and its steps FROM..STEPS-1
# match $WORK/REF.jsonl's: every loss bit-identical (TOL 0), within TOL relative, or (TOL < 0) step
# FROM's bit-identical and the rest within -TOL. Prints the worst and the bytes read.
resumed_within() {
    python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$4" "$STEPS" <<'PY' || fail "$2 does not continue $1"
import json, sys
ref_p, got_p, start, tol, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
ref = {o["step"]: o for o in map(json.loads, open(ref_p)) if "event" not in o}
lines = [json.loads(l) for l in open(got_p)]
rec = [o for o in lines if o.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["found"] and rec[0]["step"] == start, rec
B = 8  # global batch of the example plans
assert rec[0]["data_position"] == start * B, rec[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(start, steps)), [o["step"] for o in got]
worst = 0.0
for o in got:
    a, b = ref[o["step"]]["loss"], o["loss"]
    rel = abs(a - b) / abs(a)
    worst = max(worst, rel)
    if tol == 0 or (tol < 0 and o["step"] == start):
        assert a == b, f"step {o['step']}: {b!r} vs {a!r}: not bit-identical"
    else:
        assert rel <= abs(tol), f"step {o['step']}: {b} vs {a} (rel {rel:.2e})"
r = rec[0]
print(f"  {got_p.split('/')[-1]}: from step {start} (tp {r['tp_from']} -> {r['tp_to']}), {len(got)} losses "
      f"within {worst:.1e}; local {r['bytes']['local']} B in {r['files']['local']} files")
PY
}
# flip_byte FILE: one byte in the middle of FILE inverted (a corrupt checkpoint file).
flip_byte() {
    python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' "$1"
}

# check_memory PLAN: trains PLAN one step and checks each rank's allocator high-water mark
# (metrics "memory_high_bytes") against autohet evaluate's per-device prediction, minus the type's
# reserved constant that the runtime does not allocate, to the byte. Leaves the marks, one per
# rank, in $WORK/memory_high. CHECK_MEMORY_FLAGS: more trainer flags (--no-overlap-grad-sync).
check_memory() {
    local plan=$1 n
    n=$(plan_ranks "$plan")
    "$AUTOHET" evaluate --json --plan "$plan" >"$WORK/eval.json" || fail "evaluate $plan"
    timeout 60 $MPIRUN -np "$n" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps 1 \
        --quiet --metrics "$WORK/m.jsonl" ${CHECK_MEMORY_FLAGS:-} 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "train $plan"; }
    python3 - "$plan" "$WORK/eval.json" "$WORK/m.jsonl" "$WORK/memory_high" <<'PY' || fail "memory of $plan"
import json, sys
plan, ev = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got = json.loads(open(sys.argv[3]).readline())["memory_high_bytes"]
# per rank (pipeline, device group by its first stage, TP rank): an interleaved device's stages once
groups = [[s for i, s in enumerate(p["stages"]) if s["devices"][0] not in [t["devices"][0] for t in p["stages"][:i]]]
          for p in plan["pipelines"]]
gpus = [s["gpu"] for g in groups for s in g for _ in s["devices"]]
assert len(got) == len(ev["devices"]) == len(gpus), (len(got), len(ev["devices"]))
for r, (dev, high, gpu) in enumerate(zip(ev["devices"], got, gpus)):
    reserved = int(round(plan["cluster"]["gpu_types"][gpu]["reserved_gib"] * 2**30))
    want = dev["memory_bytes"] - reserved
    assert high == want, f"rank {r}: runtime high-water mark {high} vs predicted {want} ({high - want:+d} bytes)"
open(sys.argv[4], "w").write(" ".join(map(str, got)))
print(f"{sys.argv[1].split('/')[-1]}: {len(got)} ranks, equal to the byte")
PY
}

# with_schedule PLAN SPEC OUT: PLAN with "schedule" set, into OUT. SPEC is SCHEDULE (every pipeline
# of more than one stage) or SCHEDULE/I,J (pipelines I and J only), e.g. zero-bubble/1.
with_schedule() {
    python3 - "$1" "$2" "$3" <<'PY' || fail "with_schedule $1 $2"
import json, sys
d, spec = json.load(open(sys.argv[1])), sys.argv[2]
sched, _, which = spec.partition("/")
pick = [int(i) for i in which.split(",")] if which else [i for i, p in enumerate(d["pipelines"]) if len(p["stages"]) > 1]
for i in pick:
    d["pipelines"][i]["schedule"] = sched
json.dump(d, open(sys.argv[3], "w"), indent=1)
PY
}

# with_warmup PLAN X.Y.Z OUT: PLAN with each pipeline of more than one stage's stages 0, 1, 2 ...
# given "warmup_extra" X, Y, Z ... (the rest 0; plan/replay.h "Extra warm-up"), into OUT.
with_warmup() {
    python3 - "$1" "$2" "$3" <<'PY' || fail "with_warmup $1 $2"
import json, sys
d, x = json.load(open(sys.argv[1])), [int(v) for v in sys.argv[2].split(".")]
for p in d["pipelines"]:
    for s, st in enumerate(p["stages"] if len(p["stages"]) > 1 else []):
        if s < len(x) and x[s]:
            st["warmup_extra"] = x[s]
json.dump(d, open(sys.argv[3], "w"), indent=1)
PY
}

# shard_uneven PLAN: PLAN's optimizer_shards redrawn, in place, so that member k of a group of n
# owns a part in proportion to k + 1 (the group's element count kept: the last share's end).
shard_uneven() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d.get("optimizer_shards"), "no optimizer_shards to redraw"
for g in d["optimizer_shards"]:
    sh, total = g["shares"], g["shares"][-1]["elements"][1]
    n, at, acc = len(sh), 0, 0
    for k, s in enumerate(sh):
        acc += k + 1
        end = total if k == n - 1 else total * acc // (n * (n + 1) // 2)
        s["elements"] = [at, end]
        at = end
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
    [ $? = 0 ] || fail "shard_uneven $1: the plan's optimizer_shards could not be redrawn"
}

# losses_as_one REF GOT STEPS LABEL [MIN_DROP]: GOT's STEPS losses (its event lines left out) within
# 1e-4 relative of one process's (REF), said with LABEL; with MIN_DROP, REF's last loss at least
# that far below its first (something was trained).
losses_as_one() {
    python3 - "$@" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2]) if "event" not in json.loads(l)]
n, label = int(sys.argv[3]), sys.argv[4]
assert len(ref) == len(got) == n, (len(ref), len(got))
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(ref, got))
assert worst <= 1e-4, worst
if len(sys.argv) > 5:
    assert ref[-1]["loss"] < ref[0]["loss"] - float(sys.argv[5]), "nothing was trained"
print(f"{label}: {n} losses within {worst:.2e} of one process")
PY
}

# two_regions PLAN OUT: PLAN over two regions with the hierarchical DP sync ("dp_sync":
# "hierarchical"): pipeline p's devices, in order, on a node of its own, p{p}, in region east (p
# even) or west (p odd), so every DP group of two pipelines or more spans both regions, unevenly
# when the pipelines are odd in number; the link between them marked "private".
two_regions() {
    python3 - "$1" "$2" <<'PY' || fail "two_regions $1"
import json, sys
d = json.load(open(sys.argv[1]))
c, nodes = d["cluster"], []
for p, pl in enumerate(d["pipelines"]):
    region = "east" if p % 2 == 0 else "west"
    k = 0
    for st in pl["stages"]:
        for dev in st["devices"]:
            dev["node"], dev["index"] = f"p{p}", k
            k += 1
    nodes.append(dict(c["nodes"][0], name=f"p{p}", count=k, zone=f"{region}-a", region=region))
c["nodes"] = nodes
# the regions are emulated on this machine: their link is marked private (the rule for traffic
# across regions in the open, docs/multi-host.md "Across regions", needs no flag then)
c.setdefault("network", {})["links"] = [{"between": ["east", "west"], "private": True}]
d["dp_sync"] = "hierarchical"
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
}

# spec_plan SPEC: the plan a test's SPEC names, NAME[+SCHEDULE[/I,J]][@hier][:even|:uneven]:
# examples/plans/train-NAME.json; with ~X.Y.Z (after any +SCHEDULE), its stages' extra warm-up
# (with_warmup, written to $WORK/NAME.warm.json; the name suffixed -warmXYZ); with +SCHEDULE, under that schedule (with_schedule, written to
# $WORK/NAME.sched.json; the name becomes NAME-SCHEDULE[-I-J]); with @hier, over two regions with
# the hierarchical DP sync (two_regions, the name suffixed -hier); with :even or :uneven, with its
# optimizer sharded over every data-parallel group (autohet evaluate --shard-optimizer even; uneven:
# shard_uneven), written to $WORK/<name so far>.plan.json, the name suffixed -even / -uneven.
# Sets SPEC_PLAN (the file), SPEC_NAME and SPEC_BASE (NAME).
spec_plan() {
    local name=${1%%:*} shard= sched= hier= warm=
    [ "$1" = "$name" ] || shard=${1#*:}
    [ "${name#*~}" = "$name" ] || warm=${name#*~} name=${name%%~*}
    [ "${name%@hier}" = "$name" ] || hier=1 name=${name%@hier}
    [ "${name#*+}" = "$name" ] || sched=${name#*+} name=${name%%+*}
    SPEC_BASE=$name SPEC_PLAN=$PLANS/train-$name.json
    [ -r "$SPEC_PLAN" ] || fail "no plan $SPEC_PLAN"
    if [ -n "$sched" ]; then
        with_schedule "$SPEC_PLAN" "$sched" "$WORK/$name.sched.json"
        SPEC_PLAN=$WORK/$name.sched.json
        name=$name-${sched//[\/,]/-}
    fi
    if [ -n "$warm" ]; then
        with_warmup "$SPEC_PLAN" "$warm" "$WORK/$name.warm.json"
        SPEC_PLAN=$WORK/$name.warm.json
        name=$name-warm${warm//./}
    fi
    if [ -n "$hier" ]; then
        two_regions "$SPEC_PLAN" "$WORK/$name.hier.json"
        SPEC_PLAN=$WORK/$name.hier.json
        name=$name-hier
    fi
    SPEC_NAME=$name
    [ -n "$shard" ] || return 0
    "$AUTOHET" evaluate --plan "$SPEC_PLAN" --shard-optimizer even -o "$WORK/$name.plan.json" >/dev/null ||
        fail "$name: autohet evaluate --shard-optimizer even"
    [ "$shard" = even ] || shard_uneven "$WORK/$name.plan.json"
    SPEC_PLAN=$WORK/$name.plan.json SPEC_NAME=$name-$shard
}

# emulated_cluster PLAN K OUT: PLAN's cluster with every GPU type emulating a K x slower device
# (for --cluster OUT): emulation must change the time, never the math.
emulated_cluster() {
    python3 - "$1" "$2" "$3" <<'PY' || fail "emulated_cluster $1"
import json, sys
c = json.load(open(sys.argv[1]))["cluster"]
for t in c["gpu_types"].values():
    t.setdefault("emulate", {})["slowdown"] = float(sys.argv[2])
json.dump(c, open(sys.argv[3], "w"))
PY
}

# start_moto: an S3 server on a free loopback port (stopped at exit), a bucket "ckpt", the AWS
# variables the trainer reads; sets EP.
start_moto() {
    command -v moto_server >/dev/null || fail "moto_server not on PATH (pip install 'moto[server]')"
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    moto_server -H 127.0.0.1 -p "$port" >"$WORK/moto.log" 2>&1 &
    MOTO=$!
    trap 'kill $MOTO 2>/dev/null; wait $MOTO 2>/dev/null; rm -rf "$WORK"' EXIT
    EP=http://127.0.0.1:$port
    for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
    export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
    curl -sf -X PUT "$EP/ckpt" >/dev/null || fail "cannot create the bucket on $EP"
}

# llama_config OUT PRESET TIED [ROPE_SCALING]: a Hugging Face config.json (model_type llama) of a
# LLaMA preset's shape (autohet model --model PRESET --json), tie_word_embeddings TIED
# (true/false), rope_scaling the JSON object ROPE_SCALING (default null).
llama_config() {
    "$AUTOHET" model --model "$2" --json >"$WORK/preset.json" || fail "autohet model --model $2"
    python3 - "$WORK/preset.json" "$1" "$3" ${4:+"$4"} <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert m["arch"] == "llama", m
json.dump({"model_type": "llama", "hidden_size": m["d_model"], "intermediate_size": m["d_ff"],
           "num_attention_heads": m["n_head"], "num_key_value_heads": m["n_kv_head"],
           "num_hidden_layers": m["n_layer"], "vocab_size": m["vocab"],
           "max_position_embeddings": m["max_pos"], "rms_norm_eps": m["norm_eps"],
           "rope_theta": m["rope_theta"], "tie_word_embeddings": sys.argv[3] == "true",
           "rope_scaling": json.loads(sys.argv[4]) if len(sys.argv) > 4 else None},
          open(sys.argv[2], "w"), indent=1)
PY
}
# plan_with_config PLAN CONFIG NAME OUT: PLAN with its model replaced by CONFIG's (a config.json
# as autohet model reads it), named NAME.
plan_with_config() {
    "$AUTOHET" model --model "$2" --json >"$WORK/config-model.json" || fail "autohet model --model $2"
    python3 - "$1" "$WORK/config-model.json" "$3" "$4" <<'PY'
import json, sys
d, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["model"]
m["name"] = sys.argv[3]
d["model"] = m
json.dump(d, open(sys.argv[4], "w"), indent=1)
PY
}
# plan_model_json PLAN OUT: `autohet model --json` of the plan's model (a preset name or an object).
plan_model_json() {
    local m
    m=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; print(m if isinstance(m, str) else "")' "$1")
    if [ -n "$m" ]; then
        "$AUTOHET" model --model "$m" --json >"$2" || fail "autohet model --model $m"
    else
        python3 -c 'import json,sys; json.dump({"model": json.load(open(sys.argv[1]))["model"]}, open(sys.argv[2], "w"))' "$1" "$2"
    fi
}
