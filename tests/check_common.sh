# The preamble of a shell test made of counted checks, sourced with the test's BUILD_DIR and
# SOURCE_DIR as $1 and $2: BUILD and SRC (absolute), AH (the binary), PY (the Python with the
# reference packages), TMP (removed at exit, kept and named when KEEP is set), and
#   check NAME STATUS   counts a check (STATUS 0: passed), naming it when it fails;
#   checks_done [LABEL] prints "LABEL: N passed, N failed" and returns 0 only if none failed.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
AH="$BUILD/autohet"
PY=/usr/bin/python3
TMP=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "TMP=$TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
fails=0
pass=0
check() { # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fails=$((fails + 1)); echo "FAIL: $1"; fi
}
checks_done() {
    echo "${1:+$1: }$pass passed, $fails failed"
    [ "$fails" -eq 0 ]
}
