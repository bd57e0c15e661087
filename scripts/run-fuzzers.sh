#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -DAH_FUZZ=ON: ASan + UBSan + coverage) and runs each
# for a bounded time from its seed corpus tests/corpus/NAME/ (copied to a temporary directory,
# so nothing is written into the repository).
#   scripts/run-fuzzers.sh [NAME...]     (default: every fuzz/fuzz_NAME.c)
#   AH_FUZZ_BUILD_DIR  build directory (default: build-fuzz)
#   AH_FUZZ_RUNS       inputs per fuzzer (default: 20000)
#   AH_FUZZ_SECONDS    time cap per fuzzer (default: 20, what CI gives each; longer to hunt)
#   AH_FUZZ_SEED       libFuzzer seed (default: 1, so a CI run can be repeated; 0 = random)
#   AH_FUZZ_KEEP       directory to copy each fuzzer's grown corpus and crashes into (default: none)
# A crash, leak, UB report, timeout or broken property fails the fuzzer; its input is printed
# (hex) and kept. Turn it into a regression seed: copy it into tests/corpus/NAME/.
# Ends with "fuzzers: N passed, N failed"; exits non-zero when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${AH_FUZZ_BUILD_DIR:-build-fuzz}
runs=${AH_FUZZ_RUNS:-20000}
seconds=${AH_FUZZ_SECONDS:-20}
seed=${AH_FUZZ_SEED:-1}

if (($# > 0)); then
    names=("$@")
else
    names=()
    for f in fuzz/fuzz_*.c; do
        n=${f#fuzz/fuzz_}
        names+=("${n%.c}")
    done
fi

CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAH_FUZZ=ON >/dev/null
# Only the harnesses and the library: tests and benchmarks are not needed here.
cmake --build "$build" -j "${AH_JOBS:-2}" --target "${names[@]/#/fuzz_}"

export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
for n in "${names[@]}"; do
    bin="$build/fuzz_$n"
    corpus="$work/$n"
    mkdir -p "$corpus" "$work/$n-crash"
    if [[ -d tests/corpus/$n ]]; then cp tests/corpus/"$n"/* "$corpus"/; fi
    seeds=$(find "$corpus" -type f | wc -l)
    args=(-runs="$runs" -max_total_time="$seconds" -seed="$seed" -timeout=10 -rss_limit_mb=2048
          -max_len=16384 -print_final_stats=1 -artifact_prefix="$work/$n-crash/")
    if [[ -f tests/corpus/$n.dict ]]; then args+=(-dict=tests/corpus/"$n".dict); fi
    start=$SECONDS
    if "$bin" "${args[@]}" "$corpus" >"$work/$n.log" 2>&1; then
        done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$n.log" | tail -1)
        echo "fuzz_$n: passed (${done_runs:-?} inputs in $((SECONDS - start)) s," \
             "corpus $seeds -> $(find "$corpus" -type f | wc -l) files)"
        passed=$((passed + 1))
    else
        echo "fuzz_$n: FAILED after $((SECONDS - start)) s; the end of its log:"
        tail -n 60 "$work/$n.log" | sed 's/^/    /'
        # libFuzzer prints inputs of up to 256 bytes itself; show the start of longer ones.
        for a in "$work/$n-crash"/*; do
            [[ -f $a ]] && (($(stat -c %s "$a") > 256)) || continue
            echo "    input $(basename "$a") ($(stat -c %s "$a") bytes), first 2 KiB:"
            head -c 2048 "$a" | sed 's/^/      /'
            echo
        done
        failed=$((failed + 1))
    fi
    if [[ -n ${AH_FUZZ_KEEP:-} ]]; then
        mkdir -p "$AH_FUZZ_KEEP/$n"
        cp -r "$corpus" "$work/$n-crash" "$AH_FUZZ_KEEP/$n/"
    fi
done
echo "fuzzers: $passed passed, $failed failed"
((failed == 0))
