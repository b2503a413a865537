#!/usr/bin/env bash
# Median time from a burst landing in the queue database to the first new
# worker being active, with the default 5 s poll, measured against the real
# daemon in the systemd sandbox. Run as root from the repository root.
#   bench/burst-latency.sh [RUNS]   (default 9)
set -euo pipefail
go=$(scripts/ensure-go.sh)
"$go" test -count=1 -run '^$' -bench BurstToFirstWorker -benchtime "${1:-9}x" ./test/e2e/
