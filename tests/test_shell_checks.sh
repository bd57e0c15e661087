# The shell tests' own checks can fail: no line reads $? after a command substitution on the same
# line. In `check "message $(cmd)" $?` the arguments expand left to right, so $? is the status of
# the substitution inside the message, not of the command the check is about: such a check
# always passes (18 did, until session 6). Read the status first: `st=$?; check "... $(cmd)" $st`.
# Usage: bash tests/test_shell_checks.sh BUILD_DIR SOURCE_DIR
SRC=${2:?usage: $0 BUILD_DIR SOURCE_DIR}
cd "$SRC" || exit 1
bad=$(grep -nE '\$\(.*\$\?|`[^`]*`.*\$\?' tests/*.sh tests/*/*.sh scripts/*.sh bench/*.sh .ci/run | grep -vE '^[^:]+:[0-9]+:\s*#')
if [ -n "$bad" ]; then
    echo "FAIL: \$? read after a command substitution on the same line (it is the substitution's status):"
    echo "$bad"
    exit 1
fi
# The pattern is caught where it is written (a fixture, not a file of the suite).
fixture='check "plan runs: $''(cat "$TMP/err")" $''?' # (split, so this line is not a case)
echo "$fixture" | grep -qE '\$\(.*\$\?' || { echo "FAIL: the pattern misses: $fixture"; exit 1; }
echo "PASS ($(ls tests/*.sh tests/*/*.sh scripts/*.sh bench/*.sh | wc -l) scripts)"
