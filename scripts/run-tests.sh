#!/usr/bin/env bash
# Runs each test command given (a googletest binary, maybe under qemu), shows its output,
# and ends with one total line "N passed, N failed" summed from each run's own line.
# Exits non-zero if any run failed or printed no count.
set -u
total_pass=0 total_fail=0 status=0
for cmd in "$@"; do
  echo "==> $cmd"
  log=$(mktemp)
  # shellcheck disable=SC2086  # the command is a word list on purpose (qemu prefixes)
  $cmd 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^gemmkit-tests: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  rm -f "$log"
  if [ -z "$line" ]; then
    echo "run-tests: '$cmd' exited $rc without a count"
    total_fail=$((total_fail + 1)); status=1; continue
  fi
  pass=$(echo "$line" | sed -E 's/^gemmkit-tests: ([0-9]+) passed.*/\1/')
  fail=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail))
  [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] || status=1
done
echo "$total_pass passed, $total_fail failed"
exit $status
