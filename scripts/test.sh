#!/usr/bin/env bash
# The project's test command: installs what is missing (scripts/setup.sh), builds, runs every
# test with CTest. Arguments go to ctest (e.g. `scripts/test.sh -R model`).
#   AH_BUILD_DIR    build directory (default: build)
#   AH_CMAKE_ARGS   extra CMake options (e.g. "-DAH_SANITIZE=ON"; .ci/run uses it)
#   AH_JOBS         parallel compile jobs (default: 2, this machine's cores)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# What the MPI tests need as root on a small machine (DESIGN.md "Environment notes").
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# A pyenv python3 is a shim that runs `pyenv exec` at every call (~0.1 s of CPU), and the tests call
# python3 hundreds of times: its version's bin directory goes first, as pyenv exec puts it (the same
# interpreter and the same moto_server, found once).
if [[ $(command -v python3) == */.pyenv/shims/python3 ]]; then
    PATH=$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH
fi

build=${AH_BUILD_DIR:-build}
read -r -a extra <<<"${AH_CMAKE_ARGS:-}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]}" >/dev/null
cmake --build "$build" -j "${AH_JOBS:-2}"
cd "$build"
# A hung test (an MPI rank waiting forever) fails after 10 minutes instead of holding CI.
ctest --output-on-failure --timeout 600 "$@"
