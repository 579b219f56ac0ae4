#!/usr/bin/env bash
# Run every test of the workspace (expects env.sh sourced; `bash bootstrap.sh test` does both).
# Extra arguments go to pytest, e.g.  tools/run_tests.sh -k interfaces -x
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# A domain of our own keeps concurrent test runs on one machine from seeing each other.
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$((RANDOM % 100 + 1))}
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
ruff check --quiet .
exec python -m pytest test src/m3_perception/test src/m3_memory/test src/m3_control/test bag_tests "$@"
