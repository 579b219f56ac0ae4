#!/usr/bin/env bash
# Run every test of the workspace (expects env.sh sourced; `bash bootstrap.sh test` does both).
# Each test directory runs in its own pytest process (packages keep test helpers with the same
# names, and each gets a fresh ROS context). Extra arguments go to every pytest run, e.g.
#   tools/run_tests.sh -k interfaces -x          M3_TEST_DIRS="test bag_tests" tools/run_tests.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# A domain of our own keeps concurrent test runs on one machine from seeing each other.
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$((RANDOM % 100 + 1))}
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
ruff check --quiet . || exit 1

passed=0 failed=0 skipped=0 status=0
r_tests=0 r_tried=0 r_crashes=0 r_lost=0  # the reliability suite's line of each directory (conftest.py), summed
log=$(mktemp)
for dir in ${M3_TEST_DIRS:-test src/m3_runtime/test src/m3_perception/test src/m3_memory/test src/m3_control/test bag_tests}; do
  echo "=== $dir"
  # --durations: CI's log says which tests its minutes go to (the slowest 15 of each directory)
  python -m pytest "$dir" --durations=15 "$@" 2>&1 | tee "$log"
  code=${PIPESTATUS[0]}
  # exit 5 = nothing collected (e.g. a -k filter that selects nothing here): not a failure
  [ "$code" -eq 0 ] || [ "$code" -eq 5 ] || status=1
  # pytest's closing "=== N passed, ... in Ts ===" line: not simply the last line, which can be a
  # warning Python prints at exit (an unawaited coroutine collected after the summary)
  summary=$(grep -E "^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s" "$log" | tail -n 1)
  for kind in passed failed skipped; do
    n=$(grep -oE "[0-9]+ $kind" <<<"$summary" | grep -oE "[0-9]+" || echo 0)
    eval "$kind=\$(( $kind + ${n:-0} ))"
  done
  errors=$(grep -oE "[0-9]+ errors?" <<<"$summary" | grep -oE "[0-9]+" || echo 0)
  failed=$((failed + ${errors:-0}))
  if line=$(grep -E "^reliability suite: " "$log" | tail -n 1); then
    read -r t i c l <<<"$(grep -oE "[0-9]+" <<<"$line" | tr '\n' ' ')"
    r_tests=$((r_tests + t)) r_tried=$((r_tried + i)) r_crashes=$((r_crashes + c)) r_lost=$((r_lost + l))
  fi
done
rm -f "$log"
echo "tests: $passed passed, $failed failed, $skipped skipped"
echo "reliability suite: $r_tests tests, $r_tried inputs tried, $r_crashes crashes, $r_lost lost"
[ "$passed" -gt 0 ] || { echo "no test ran" >&2; exit 1; }
exit "$status"
