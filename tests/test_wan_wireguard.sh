#!/usr/bin/env bash
# Training across two regions over WireGuard (issue 39; docs/multi-host.md "Over WireGuard between
# regions"): two network namespaces stand for a host in us-east-1 and one in eu-west-1, joined by a
# veth (the "internet"); userspace WireGuard (wireguard-go, wireguard-tools: this kernel has no
# WireGuard module) runs a tunnel between them; mpirun starts one rank in each namespace through a
# plm_rsh_agent that runs the command in the namespace of the WireGuard address it is given, with
# MPI on the tunnel's addresses only. The plan (two tiny-gpt2 replicas, n0 and n1 in the two
# regions, the link marked "private") trains 3 steps with the losses of the same plan on this
# machine to the bit, and its DP sync went through the tunnel (wg's byte counters). Root.
# Usage: bash tests/test_wan_wireguard.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/train_common.sh"
for tool in ip wg wireguard-go; do
    command -v "$tool" >/dev/null || fail "$tool is missing: scripts/setup.sh installs iproute2, wireguard-tools and wireguard-go"
done
[ "$(id -u)" -eq 0 ] || fail "needs root (network namespaces)"
STEPS=3
NS_A=ahwg$$a NS_B=ahwg$$b IF_A=ahwg$$a IF_B=ahwg$$b # unique: wireguard-go's sockets are per name, machine-wide
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait "${PIDS[@]}" 2>/dev/null # gone (and their sockets) before the test ends
    ip netns del "$NS_A" 2>/dev/null
    ip netns del "$NS_B" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$NS_A" && ip netns add "$NS_B" || fail "ip netns add"
ip link add "v$NS_A" type veth peer name "v$NS_B" || fail "veth"
ip link set "v$NS_A" netns "$NS_A" && ip link set "v$NS_B" netns "$NS_B" || fail "veth into the namespaces"
ip -n "$NS_A" addr add 10.9.0.1/24 dev "v$NS_A" && ip -n "$NS_B" addr add 10.9.0.2/24 dev "v$NS_B" || fail "veth addresses"
for ns in "$NS_A" "$NS_B"; do
    ip -n "$ns" link set lo up && ip -n "$ns" link set "v$ns" up || fail "links up in $ns"
done
(umask 077 && wg genkey >"$WORK/a.key" && wg genkey >"$WORK/b.key") || fail "wg genkey"
wg pubkey <"$WORK/a.key" >"$WORK/a.pub" && wg pubkey <"$WORK/b.key" >"$WORK/b.pub" || fail "wg pubkey"
# one daemon per namespace, in the foreground (-f) so that its pid is ours to stop
ip netns exec "$NS_A" wireguard-go -f "$IF_A" >"$WORK/wg-a.log" 2>&1 &
PIDS+=($!)
ip netns exec "$NS_B" wireguard-go -f "$IF_B" >"$WORK/wg-b.log" 2>&1 &
PIDS+=($!)
for i in $(seq 50); do # the TUN devices appear when the daemons are up
    ip -n "$NS_A" link show "$IF_A" >/dev/null 2>&1 && ip -n "$NS_B" link show "$IF_B" >/dev/null 2>&1 && break
    sleep 0.1
done
wg set "$IF_A" private-key "$WORK/a.key" listen-port 51820 peer "$(cat "$WORK/b.pub")" allowed-ips 10.10.0.2/32 \
    endpoint 10.9.0.2:51820 || fail "wg set $IF_A: $(cat "$WORK/wg-a.log")"
wg set "$IF_B" private-key "$WORK/b.key" listen-port 51820 peer "$(cat "$WORK/a.pub")" allowed-ips 10.10.0.1/32 \
    endpoint 10.9.0.1:51820 || fail "wg set $IF_B: $(cat "$WORK/wg-b.log")"
ip -n "$NS_A" addr add 10.10.0.1/24 dev "$IF_A" && ip -n "$NS_A" link set "$IF_A" up || fail "$IF_A up"
ip -n "$NS_B" addr add 10.10.0.2/24 dev "$IF_B" && ip -n "$NS_B" link set "$IF_B" up || fail "$IF_B up"

# mpirun's "ssh" to a tunnel address: run the command in that address's namespace
cat >"$WORK/rsh" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in 10.10.0.1) ns=$NS_A ;; 10.10.0.2) ns=$NS_B ;; *) echo "no namespace for \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$WORK/rsh"
printf '10.10.0.1 slots=1\n10.10.0.2 slots=1\n' >"$WORK/hosts"

dp2_plan "$WORK/dp2.json"
python3 - "$WORK/dp2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for n in d["cluster"]["nodes"]:
    n["zone"], n["region"] = ("us-east-1a", "us-east-1") if n["name"] != "n1" else ("eu-west-1a", "eu-west-1")
d["cluster"].setdefault("network", {})["links"] = [{"between": ["us-east-1", "eu-west-1"], "private": True}]
json.dump(d, open(sys.argv[1], "w"))
PY
dp2_train local || fail "the plan on this machine: $(cat "$WORK/local.err")"
before=$(wg show "$IF_A" transfer | awk '{print $2 + $3}')
timeout 120 ip netns exec "$NS_A" mpirun --hostfile "$WORK/hosts" -np 2 --mca plm_rsh_agent "$WORK/rsh" \
    --mca oob_tcp_if_include 10.10.0.0/24 --mca btl_tcp_if_include 10.10.0.0/24 --mca btl tcp,self \
    -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" \
    --steps "$STEPS" --quiet --metrics "$WORK/wg.jsonl" >"$WORK/wg.out" 2>"$WORK/wg.err" ||
    fail "train over WireGuard: $(tail -20 "$WORK/wg.err")"
after=$(wg show "$IF_A" transfer | awk '{print $2 + $3}')
"$AUTOHET" evaluate --plan "$WORK/dp2.json" --json >"$WORK/eval.json" || fail "evaluate"
python3 - "$WORK/local.jsonl" "$WORK/wg.jsonl" "$WORK/eval.json" "$((after - before))" "$STEPS" <<'PY' || fail "the run over WireGuard"
import json, sys
a, b = ([o["loss"] for o in map(json.loads, open(p)) if "event" not in o] for p in sys.argv[1:3])
steps = int(sys.argv[5])
assert len(a) == steps and a == b, f"losses over the tunnel {b} vs on this machine {a}"
# the DP sync's bytes each step, both ways, crossed the tunnel (plus MPI's start-up and headers)
sync = json.load(open(sys.argv[3]))["region_crossings"][0]["bytes_per_iteration"]["DP sync"]
tunnel = int(sys.argv[4])
assert tunnel >= steps * sync, f"{tunnel} bytes through the tunnel, less than {steps} x {sync:.0f} of DP sync"
print(f"over WireGuard: {steps} steps, losses equal to the bit; {tunnel / 1e6:.2f} MB through the tunnel, "
      f"{steps * sync / 1e6:.2f} MB of it DP sync by the cost model")
PY
