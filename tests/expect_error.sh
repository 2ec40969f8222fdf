# Sourced by the bad-input scripts in tests/cli. Defines
#   case_ NAME EXPECTED_SUBSTRING -- command...
# which passes when the command exits non-zero (not by a signal) with exactly
# one line of error output containing the substring and no sanitizer report.
# Test names are "$CASE_PREFIX$NAME".
case_() {
    local name=$CASE_PREFIX$1 want=$2; shift 3
    local err rc lines
    err=$("$@" 2>&1 >/dev/null); rc=$?
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ $rc -eq 0 ]; then echo "FAIL $name: exit status 0"; return; fi
    if [ $rc -ge 128 ]; then echo "FAIL $name: killed by signal (status $rc)"; return; fi
    if printf '%s' "$err" | grep -q -E 'AddressSanitizer|runtime error|LeakSanitizer'; then
        echo "FAIL $name: sanitizer report: $(printf '%s' "$err" | head -3)"; return; fi
    if ! printf '%s' "$err" | grep -q -- "$want"; then
        echo "FAIL $name: message lacks '$want': $err"; return; fi
    if [ "$lines" -ne 1 ]; then echo "FAIL $name: $lines lines of error output: $err"; return; fi
    echo "PASS $name"
}
