#!/usr/bin/env bash
# The module layering of docs/architecture.md: a module under src/ includes only itself and the
# modules before it in the order below (so kernels/ includes nothing from runtime/, cost/ and plan/
# never include each other both ways, and the plan never includes the planner that searches for
# one). cuda_emu/ (the CPU emulation of CUDA, cuBLAS and NCCL that -DAH_CUDA_EMU=ON builds the
# CUDA backend on) is the floor: it includes none of the product. Fails naming each include that
# goes upward.
set -euo pipefail
SRC=${2:-$(cd "$(dirname "$0")/.." && pwd)}
python3 - "$SRC/src" <<'PY'
import glob, os, re, sys
order = ['cuda_emu', 'core', 'spec', 'cost', 'kernels', 'comm', 'backend', 'plan', 'planner', 'ckpt', 'runtime', 'elastic', 'sim', 'cli']
rank = {m: i for i, m in enumerate(order)}
root = sys.argv[1]
found = set(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
if found != set(order):
    sys.exit(f"FAIL: src/ has modules {sorted(found)}; the layering lists {sorted(order)} (update both)")
bad, files = [], 0
for f in sorted(glob.glob(os.path.join(root, '**', '*'), recursive=True)):
    if not re.search(r'\.(c|h|cu|cuh|cpp)$', f):
        continue
    files += 1
    m = os.path.relpath(f, root).split(os.sep)[0]
    for n, line in enumerate(open(f, encoding='utf-8'), 1):
        inc = re.match(r'\s*#\s*include\s+"(\w+)/', line)
        if inc and inc.group(1) in rank and rank[inc.group(1)] > rank[m]:
            bad.append(f"{os.path.relpath(f, root)}:{n}: {m}/ includes {inc.group(1)}/")
for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
print(f"PASS: {files} files, every include goes down the layering {' < '.join(order)}")
PY
