#!/usr/bin/env bash
# CPU kernels vs PyTorch: tests/torch/gpt2_ref.py writes inputs and torch's outputs and gradients
# (a GPT-2 block, a 2-layer model with tied head + cross-entropy, LLaMA's ops in a chain, AdamW for
# 3 steps) to a temp dir; test_kernels --torch recomputes them with the kernels and compares
# (relative 1e-5).
# Usage: bash tests/test_kernels_torch.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR SOURCE_DIR}
src=${2:?usage: $0 BUILD_DIR SOURCE_DIR}
py=/usr/bin/python3 # Debian's python3-torch; the python3 on PATH may not have torch

# A missing torch is a failure, not a skip: CI installs python3-torch for this test.
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "FAIL: $py cannot import torch; install it with: apt-get install python3-torch" >&2
    exit 1
fi
if [ ! -x "$build/test_kernels" ]; then
    echo "FAIL: $build/test_kernels not built; build the project first" >&2
    exit 1
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$src/tests/torch/gpt2_ref.py" "$dir"
OPENBLAS_NUM_THREADS=1 "$build/test_kernels" --torch "$dir"
