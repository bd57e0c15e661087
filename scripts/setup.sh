#!/usr/bin/env bash
# Installs the Debian packages autohet needs to build and test, when they are missing.
# Idempotent and silent when everything is there; prints what it installs. Needs root (or sudo)
# only when something is missing.
set -euo pipefail

# build: compiler, CMake, pkg-config; clang + its runtime for the libFuzzer/sanitizer builds.
# libraries: Jansson (JSON), OpenBLAS (CPU kernels), Open MPI (runtime), libcurl (cloud tier),
# GLPK (optional integer-program cross-check in the planner benchmark).
# tests: python3-torch + numpy are the PyTorch oracle (run with /usr/bin/python3, not a pyenv
# python); git for the fresh-clone checks; iproute2 (ip netns, tc) and openssh-server (an sshd
# per emulated host) for the many-hosts test cluster (tests/cluster/); slurm-wlm and munge for
# its Slurm cluster (tests/cluster/slurm.sh: the daemons it starts are its own, on its own ports);
# wireguard-go and wireguard-tools for a tunnel between two emulated regions
# (tests/test_wan_wireguard.sh: userspace WireGuard, as this kernel has no WireGuard module).
packages=(
    build-essential cmake pkg-config git
    clang libclang-rt-14-dev
    libjansson-dev libopenblas-dev openmpi-bin libopenmpi-dev libcurl4-openssl-dev
    libglpk-dev glpk-utils
    python3 python3-numpy python3-torch
    iproute2 openssh-server slurm-wlm munge wireguard-go wireguard-tools
)

missing=()
for p in "${packages[@]}"; do
    # dpkg -s also succeeds for a package that was removed but left its config ("deinstall"),
    # so look at the status line itself.
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

sudo=()
if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
        echo "setup.sh: missing packages: ${missing[*]}; run this script as root to install them" >&2
        exit 1
    fi
    sudo=(sudo)
fi

echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup.sh: installed ${missing[*]}"
