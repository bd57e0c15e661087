#!/usr/bin/env bash
# Replays every seed and regression input in tests/corpus/NAME/ through fuzz/fuzz_NAME.c, built
# with fuzz/replay.c as its main (CMakeLists.txt), once each. In the sanitizer build this runs
# them under ASan + UBSan + LeakSanitizer. Fails when a harness is missing, a corpus is empty, a
# harness has no corpus, or any input crashes, leaks, hits UB or breaks a property the harness
# checks.
# Usage: bash tests/test_fuzz_seeds.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2

status=0
for f in "$src"/fuzz/fuzz_*.c; do
    name=$(basename "$f" .c)
    name=${name#fuzz_}
    if [[ ! -d $src/tests/corpus/$name ]]; then
        echo "FAIL: fuzz/fuzz_$name.c has no seed corpus tests/corpus/$name/"
        status=1
    fi
done
for dir in "$src"/tests/corpus/*/; do
    name=$(basename "$dir")
    bin="$build/fuzz_$name"
    if [[ ! -x $bin ]]; then
        echo "FAIL: $bin is missing (fuzz/fuzz_$name.c not built?)"
        status=1
        continue
    fi
    n=$(find "$dir" -maxdepth 1 -type f | wc -l)
    if ((n == 0)); then
        echo "FAIL: $dir has no inputs"
        status=1
        continue
    fi
    # One process per input, so a failure names its input.
    for f in "$dir"*; do
        [[ -f $f ]] || continue
        if ! out=$("$bin" "$f" 2>&1); then
            echo "FAIL: fuzz_$name on ${f#"$src"/}:"
            printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
            status=1
        fi
    done
    echo "fuzz_$name: replayed $n inputs"
done
exit $status
